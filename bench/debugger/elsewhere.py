"""A function the benchmark's fib never calls, in a file of its own: the
"unrelated breakpoint" case puts its breakpoint here (pdb traces every
frame of a file that holds a breakpoint, so the same file would not be
unrelated for it)."""


def never_called():
    return 0  # UNCALLED_LINE

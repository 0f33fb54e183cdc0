"""Straight-line code vs the same work in a loop.

`straight` is ~200 sequential big-int additions with no calls and no
backward jumps, so the interpreter never reaches an eval-breaker check inside
it: a profiler that only samples at safepoints cannot see it. `looped` does
the same additions in a for loop. Additions, not multiplies: big-int multiply
calls PyErr_CheckSignals and would hide the bias.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _truth import Truth, run

N_ADDS = 200
B = 3 ** 120_000

_src = "def straight(a, b):\n" + "    a = a + b\n" * N_ADDS + "    return a\n"
exec(compile(_src, os.path.abspath(__file__) + " (generated straight)", "exec"), globals())


def looped(a, b):
    for _ in range(N_ADDS):
        a = a + b
    return a


def body(truth: Truth) -> None:
    for _ in truth.rounds_iter():
        truth.call(straight, 1, B)  # noqa: F821 - defined by exec above
        truth.call(looped, 1, B)


if __name__ == "__main__":
    truth = Truth("straight_line", "200 straight-line big-int additions vs the same in a loop")
    truth.declare("straight", "looped")
    run(truth, body)

"""A CPU-bound pure-Python program of fixed work (OVERHEAD_SCALE units):
calls, loops, dict and string operations, a moderately deep call chain."""
import os


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def word_counts(words):
    counts = {}
    for w in words:
        counts[w] = counts.get(w, 0) + 1
    return counts


def layered(depth, n):
    if depth:
        return layered(depth - 1, n)
    return sum(i * i for i in range(n))


def unit():
    fib(18)
    word_counts(("alpha beta gamma delta " * 500).split())
    layered(30, 5_000)


def main():
    for _ in range(int(os.environ.get("OVERHEAD_SCALE", "1"))):
        unit()


if __name__ == "__main__":
    main()

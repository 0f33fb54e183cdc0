"""Deep recursion (600 frames) vs the same work at depth 1.

Profilers that cap stack depth keep only part of the stack; the samples must
still land in `deep`.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _truth import Truth, run

DEPTH = 600
WORK = 150_000


def deep(depth, n):
    if depth:
        return deep(depth - 1, n)
    total = 0
    for i in range(n):
        total += i * i
    return total


def shallow(n):
    total = 0
    for i in range(n):
        total += i * i
    return total


def body(truth: Truth) -> None:
    for _ in truth.rounds_iter():
        truth.call(deep, DEPTH, WORK)
        truth.call(shallow, WORK)


if __name__ == "__main__":
    sys.setrecursionlimit(10_000)
    truth = Truth("recursion", "work at the bottom of a 600-deep recursion vs the same work at depth 1")
    truth.declare("deep", "shallow")
    run(truth, body)

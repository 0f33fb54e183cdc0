"""A long C call that holds the GIL (sorted() of a big list) vs Python code.

A safepoint sampler thread cannot take the GIL during the sort, so the sort
is invisible to it; a signal-handler walk sees the calling line.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import random

from _truth import Truth, run

random.seed(7)
DATA = [random.random() for _ in range(200_000)]


def sort_big(data):
    return sorted(data)


def python_loop(n):
    total = 0
    for i in range(n):
        total += i * i
    return total


def body(truth: Truth) -> None:
    for _ in truth.rounds_iter():
        truth.call(sort_big, DATA)
        truth.call(python_loop, 400_000)


if __name__ == "__main__":
    truth = Truth("gil_c_call", "sorted() of 200k floats (holds the GIL) vs a Python loop")
    truth.declare("sort_big", "python_loop")
    run(truth, body)

"""Sleeping vs computing: wall mode must split ~50/50, CPU mode must give the
sleeper (almost) nothing."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import time

from _truth import Truth, run


def sleeper(seconds):
    time.sleep(seconds)


def computer(n):
    total = 0
    for i in range(n):
        total += i * i
    return total


def body(truth: Truth) -> None:
    for _ in truth.rounds_iter():
        truth.call(sleeper, 0.02)
        truth.call(computer, 200_000)


if __name__ == "__main__":
    truth = Truth("sleep_compute", "time.sleep(20 ms) vs ~20 ms of Python computation")
    truth.declare("sleeper", "computer")
    run(truth, body)

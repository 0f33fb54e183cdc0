"""A small program for the quick start: three functions with clearly different costs.

    truestack record -o demo.html examples/demo.py

In CPU mode `crunch_numbers` should take about half the samples,
`parse_records` about a third, `format_report` the rest; the sleep shows up
only in wall mode (`--mode wall --include-idle`).
"""
from __future__ import annotations

import sys
import time


def crunch_numbers(seconds: float) -> int:
    """Pure-Python arithmetic: the hot spot."""
    total = 0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for i in range(2000):
            total += i * i % 7
    return total


def parse_records(seconds: float) -> int:
    """String splitting and int parsing: medium cost."""
    line = ",".join(str(i) for i in range(50))
    count = 0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        count += sum(int(x) for x in line.split(","))
    return count


def format_report(seconds: float) -> int:
    """String formatting: the smallest share."""
    out = 0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        out += len("".join(f"{i:>8}|{i * 3.5:10.2f}\n" for i in range(100)))
    return out


def main(scale: float = 1.0) -> None:
    crunch_numbers(1.2 * scale)
    parse_records(0.8 * scale)
    format_report(0.4 * scale)
    time.sleep(0.3 * scale)  # idle: visible in wall mode only
    print("demo done")


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 1.0)

"""A generator doing 3 units of work per item, consumed by a loop doing 1.

Time inside generator frames belongs to `produce` (it is the leaf-most
target on those stacks); `consume` is scored exclusive of it.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import time

from _truth import Truth, run

UNIT = 2_000
ITEMS = 200


def produce(items):
    for k in range(items):
        total = 0
        for i in range(3 * UNIT):
            total += i * i
        yield total + k


def consume(truth, items):
    cpu, wall = time.thread_time_ns, time.perf_counter_ns
    gen = produce(items)
    gen_cpu = gen_wall = 0
    acc = 0
    while True:
        c0 = cpu()
        w0 = wall()
        try:
            value = next(gen)
        except StopIteration:
            gen_wall += wall() - w0
            gen_cpu += cpu() - c0
            break
        gen_wall += wall() - w0  # wall innermost, see _truth.Truth.call
        gen_cpu += cpu() - c0
        for i in range(UNIT):
            acc += i * value
    return acc, gen_cpu, gen_wall


def body(truth: Truth) -> None:
    cpu, wall = time.thread_time_ns, time.perf_counter_ns
    for _ in truth.rounds_iter():
        c0 = cpu()
        w0 = wall()
        _acc, gen_cpu, gen_wall = consume(truth, ITEMS)
        total_wall = wall() - w0
        total_cpu = cpu() - c0
        truth.add("produce", gen_cpu, gen_wall)
        truth.add("consume", total_cpu - gen_cpu, total_wall - gen_wall)


if __name__ == "__main__":
    truth = Truth("generators", "generator with 3 work units per item vs its consumer with 1")
    truth.declare("produce", "consume")
    run(truth, body)

"""Three asyncio tasks doing CPU work in ratio 1:2:3, yielding between chunks.

Each task measures its own running time between awaits.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import asyncio
import time

from _truth import Truth, run

UNIT = 3_000
STEPS = 60

_cpu, _wall = time.thread_time_ns, time.perf_counter_ns


async def task_a(truth):
    await _work(truth, "task_a", 1)


async def task_b(truth):
    await _work(truth, "task_b", 2)


async def task_c(truth):
    await _work(truth, "task_c", 3)


def _chunk(n):
    total = 0
    for i in range(n):
        total += i * i
    return total


async def _work(truth, name, weight):
    # Awaited from the task coroutine, so task_X stays on the stack.
    for _ in range(STEPS):
        c0 = _cpu()
        w0 = _wall()
        _chunk(UNIT * weight)
        w1 = _wall()  # wall innermost, see _truth.Truth.call
        truth.add(name, _cpu() - c0, w1 - w0)
        await asyncio.sleep(0)


async def main(truth):
    await asyncio.gather(task_a(truth), task_b(truth), task_c(truth))


def body(truth: Truth) -> None:
    for _ in truth.rounds_iter():
        asyncio.run(main(truth))


if __name__ == "__main__":
    truth = Truth("asyncio_tasks", "3 asyncio tasks with CPU work 1:2:3, sleep(0) between chunks")
    truth.declare("task_a", "task_b", "task_c")
    run(truth, body)

"""10,000 short asyncio tasks (1,000 pending at a time), each ~0.1 ms of work and one await.

Prints the wall and CPU seconds of the task part as JSON, so start-up is left out."""

import asyncio
import json
import sys
import time

TASKS = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
BATCH = 1_000


def work() -> int:
    return sum(range(2_000))


async def short() -> int:
    x = work()
    await asyncio.sleep(0)
    return x + work()


async def main() -> None:
    for _ in range(TASKS // BATCH):
        await asyncio.gather(*(short() for _ in range(BATCH)))


t0, c0 = time.perf_counter(), time.process_time()
asyncio.run(main())
print(json.dumps({"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0}))

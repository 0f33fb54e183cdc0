"""Steady-state slowdown, measured against the machine's drift: sampling switched on and off in
one process, in chunks of a few milliseconds, in ABBA order.

Why: on these shared VMs the same work takes up to 2x longer from one second to the next, and the
vCPU's CPU time drifts with it, so two runs of a program (run.py) differ by more than a 2-6 %
effect: run.py's A/A control has read 0.90 and 1.25. Two chunks a few milliseconds apart share
the machine's phase (A/A pairs of 2-ms chunks: IQR 3 %, against 9 % for 50-ms chunks).

One `ProfileSession` runs through a whole configuration, so every piece of the steady state is in
it: the kernel's signal delivery, the handler (with --native, its unwinding), wall mode's ticks,
and the collector's drain into the profile (resolution, native symbolization, --async's task
labels, aggregation), which holds the GIL. Sampling is switched with the test builds'
`_native._test_change_period`: 0 pauses the timers and wall mode's ticks, the rate resumes them;
a perf event keeps the time left to its next signal across the pause and the ticks keep their
schedule, so chunks shorter than the period still see the rate asked. With --async, the task
registry's hook is switched with them. The collector's own timed drains are turned off and the
bench drains instead, once per block (a drain interval of sampled time), inside the last sampled
chunk of the block. Only sampled chunks drain: a drain is sampling's cost, and one on the paused
side would get the samples taken during the sampled side's drain (a few at 1 kHz) and do the
drain's work per batch there (--async's task sweeps and walks: half of it then hid in the
denominator). Switching is outside the timing.

A block is whole ABBA quads holding one drain interval of sampled chunks; its ratio is the sampled
chunks' time over the paused chunks'. Printed per configuration: the median block ratio with its
interquartile range, the rate achieved in the sampled chunks (a check that switching works: it must
be the rate asked), the handler's CPU per signal (its own counter) and the collector's CPU per
sample. The A/A row switches nothing (both sides paused): this run's noise floor. One-time costs
(module symbol tables, first resolutions) are paid in a 0.5-s warm-up before the blocks.

    python bench/overhead/steady_abba.py [--rates 100 1000] [--seconds 12] [--chunk-ms 3]
                                         [--mode cpu|wall] [--async]
                                         [--workload cpu_bound|mixed|short_tasks|pending_tasks]
"""
from __future__ import annotations

import argparse
import asyncio
import math
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from native_handler import work  # beside this file: a 30-deep recursion into sorted() and zlib.crc32

from truestack import _native
from truestack.sampler import drain_interval_for
from truestack.session import _ASYNC_DRAIN_S as ASYNC_DRAIN_S
from truestack.session import ProfileSession


@dataclass
class Result:
    label: str
    ratios: list[float]
    sampled_s: float
    samples: int
    collector_ns: int
    handler_ns: int
    signals: int


def _mixed() -> None:
    work(30)


def _task_work() -> int:
    return sum(range(2_000))


async def _short() -> int:  # bench/async/short_tasks.py's task
    x = _task_work()
    await asyncio.sleep(0)
    return x + _task_work()


async def _gather_short(n: int) -> None:
    await asyncio.gather(*(_short() for _ in range(n)))


_loop: asyncio.AbstractEventLoop | None = None


def _short_tasks() -> None:
    """20 short tasks created, gathered and finished (~1 ms): each chunk's tasks end in it."""
    global _loop
    if _loop is None:
        _loop = asyncio.new_event_loop()
    _loop.run_until_complete(_gather_short(20))


PENDING = 10_000  # pending_tasks: the service's connections
_inbox: list[asyncio.Future[asyncio.Future[None]]] = []  # each connection's next request
_connections: list[asyncio.Task[None]] = []
_next = 0


async def _connection(slot: int) -> None:
    assert _loop is not None
    while True:
        _inbox[slot] = _loop.create_future()
        reply = await _inbox[slot]
        _task_work()
        _task_work()
        reply.set_result(None)


async def _serve(slots: range) -> None:
    assert _loop is not None
    replies = [_loop.create_future() for _ in slots]
    for slot, reply in zip(slots, replies):
        _inbox[slot].set_result(reply)
    await asyncio.gather(*replies)


def _pending_tasks() -> None:
    """A service: 10,000 tasks pending for the whole run, 20 of them served in turn (~1 ms)."""
    global _loop, _next
    if _loop is None:
        _loop = asyncio.new_event_loop()
        _inbox.extend(_loop.create_future() for _ in range(PENDING))
        _connections.extend(_loop.create_task(_connection(slot)) for slot in range(PENDING))
        _loop.run_until_complete(asyncio.sleep(0))  # each connection waits for its first request
    _loop.run_until_complete(_serve(range(_next, _next + 20)))
    _next = (_next + 20) % PENDING


def _close_loop() -> None:
    """Ends what the asyncio workloads left pending (asyncio complains of tasks destroyed pending)."""
    async def cancelled(tasks: set[asyncio.Task[None]]) -> None:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)  # (on the running loop: 3.10's gather asks)

    if _loop is not None:
        _loop.run_until_complete(cancelled(asyncio.all_tasks(_loop)))
        _loop.close()


sys.path.insert(0, str(Path(__file__).resolve().parent / "programs"))
from cpu_bound import unit

WORKLOADS: dict[str, Callable[[], None]] = {"cpu_bound": unit, "mixed": _mixed, "short_tasks": _short_tasks,
                                            "pending_tasks": _pending_tasks}
_unit: Callable[[], None] = unit


def chunk(iterations: int) -> None:
    for _ in range(iterations):
        _unit()


def calibrate(chunk_ms: float) -> int:
    """Iterations of `work` for about chunk_ms of unprofiled time (the fastest of a few tries)."""
    n = 1
    while True:
        best = min(_timed(n) for _ in range(3))
        if best >= chunk_ms / 1e3 / 4:
            return max(1, round(n * chunk_ms / 1e3 / best))
        n *= 2


def _timed(n: int, drain: ProfileSession | None = None) -> float:
    return _timed_both(n, drain)[0]


def _timed_both(n: int, drain: ProfileSession | None = None) -> tuple[float, float]:
    """(wall, this thread's CPU) seconds of n iterations, and of a drain if asked."""
    start, cpu = time.perf_counter(), time.thread_time()
    chunk(n)
    if drain is not None:
        drain.sampler.collect_now()
    return time.perf_counter() - start, time.thread_time() - cpu


@dataclass(frozen=True)
class Config:
    label: str
    mode: str
    rate: int
    native: str = "off"
    tasks: bool = False  # --async
    switch: bool = True  # False: the A/A control


def _task_hook_switch(session: ProfileSession) -> Callable[[bool], None]:
    """--async's cost per task is its registry hook (tasks/hook.py: an `add` in the task set's own
    dict); it is switched with the timers, by that attribute alone, so that tasks registered and
    not yet drained are kept (the hook's uninstall() would drop them)."""
    tracker = session._tasks
    if tracker is None:
        return lambda on: None
    hook = tracker.hook
    if not hook.installed:
        raise SystemExit("steady_abba: --async could not hook this Python's task registry")
    task_set, add = hook._set, hook._add

    def switch(on: bool) -> None:
        if on:
            task_set.add = add
        else:
            vars(task_set).pop("add", None)

    return switch


def measure(config: Config, iterations: int, chunk_s: float, seconds: float) -> Result:
    session = ProfileSession(mode=config.mode, rate=config.rate, native=config.native, async_tasks=config.tasks,
                             drain_interval=3600.0)
    interval_ns = round(1e9 / config.rate)
    # Each side of a block gets about one drain interval of chunks (--async drains more often).
    drain_s = ASYNC_DRAIN_S if config.tasks else drain_interval_for(config.rate)
    quads = max(1, math.ceil(drain_s / (2 * chunk_s)))
    session.start()
    try:
        # The hook's pause outlives a session (wall mode's ticks stay paused): the warm-up samples.
        _native._test_change_period(interval_ns)
        hook = _task_hook_switch(session)
        warm_until = time.perf_counter() + 0.5
        while time.perf_counter() < warm_until:  # one-time costs out of the way
            chunk(iterations)
        session.sampler.collect_now()

        def period(on: bool) -> None:
            on = on and config.switch
            _native._test_change_period(interval_ns if on else 0)  # 0: paused
            hook(on)

        ratios: list[float] = []
        sampled_s = 0.0  # wall-clock time of the sampled chunks (cpu mode: CPU time), for the rate achieved
        before = session.sampler.stats()
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            on_s = off_s = 0.0
            for q in range(quads):
                last = q == quads - 1
                for on, drains in ((False, False), (True, False), (True, last), (False, False)):
                    period(on)
                    took, cpu = _timed_both(iterations, session if drains else None)
                    if on:
                        on_s += took
                        sampled_s += cpu if config.mode == "cpu" else took
                    else:
                        off_s += took
            period(False)
            ratios.append(on_s / off_s)
        after = session.sampler.stats()
    finally:
        session.stop()
    samples = after.samples - before.samples

    def grew(key: str) -> int:
        return int(after.extra.get(key, 0)) - int(before.extra.get(key, 0))

    return Result(config.label, ratios, sampled_s, samples, grew("collector_ns"), grew("handler_ns"),
                  grew("signals"))


def configs(mode: str, rates: list[int], tasks: bool) -> list[Config]:
    """The A/A control, then each rate plain and with the option measured (--async, else --native)."""
    def at(rate: int) -> str:
        return f"@{rate // 1000}k" if rate >= 1000 else f"@{rate}"

    top = max(rates)
    if tasks:
        out = [Config("A/A (nothing switched)", mode, top, tasks=True, switch=False)]
        return out + [Config(f"{mode}{' --async' if t else ''} {at(r)}", mode, r, tasks=t)
                      for t in (False, True) for r in rates]
    natives = ["off", "on"] if _native.NATIVE_UNWIND else ["off"]
    out = [Config("A/A (nothing switched)", mode, top, native=natives[-1], switch=False)]
    return out + [Config(f"{mode}{' --native' if n == 'on' else ''} {at(r)}", mode, r, native=n)
                  for n in natives for r in rates]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", nargs="+", type=int, default=[100, 1000])
    parser.add_argument("--seconds", type=float, default=12.0, help="measured time per configuration")
    parser.add_argument("--chunk-ms", type=float, default=3.0)
    parser.add_argument("--mode", choices=["cpu", "wall"], default="cpu")
    parser.add_argument("--async", dest="tasks", action="store_true",
                        help="measure --async (on short_tasks unless --workload) instead of --native")
    parser.add_argument("--workload", choices=sorted(WORKLOADS),
                        help="cpu_bound (default): run.py's program; mixed: native_handler.py's, deep C stacks; "
                             "short_tasks (default with --async): 20 short asyncio tasks gathered; "
                             "pending_tasks: 20 of 10,000 pending tasks served in turn")
    args = parser.parse_args()
    if not hasattr(_native, "_test_change_period"):
        print("steady_abba needs a test build of truestack (TRUESTACK_TEST_BUILD=1 pip install .)")
        return 1
    workload = args.workload or ("short_tasks" if args.tasks else "cpu_bound")
    global _unit
    _unit = WORKLOADS[workload]
    iterations = calibrate(args.chunk_ms)
    chunk_s = min(_timed(iterations) for _ in range(5))
    results = [measure(c, iterations, chunk_s, args.seconds) for c in configs(args.mode, args.rates, args.tasks)]
    _close_loop()
    print(f"Steady-state slowdown, sampling switched on/off in ABBA chunks of {chunk_s * 1e3:.1f} ms "
          f"in one process; workload {workload}; Python {platform.python_version()}; "
          f"{args.seconds:g} s per configuration")
    print()
    print("| configuration | wall ratio, median of blocks [IQR] | blocks | rate achieved | handler µs/signal "
          "| collector µs/sample |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in results:
        q = statistics.quantiles(r.ratios, n=4) if len(r.ratios) > 1 else [r.ratios[0]] * 3
        counted = r.samples > len(r.ratios)  # A/A: a sample or two from the first pause's edge
        rate = f"{r.samples / r.sampled_s:.0f} Hz" if counted else "-"
        per = f"{r.collector_ns / r.samples / 1e3:.1f}" if counted else "-"
        handler = f"{r.handler_ns / r.signals / 1e3:.1f}" if counted and r.signals else "-"
        print(f"| {r.label} | {statistics.median(r.ratios):.3f} [{q[0]:.3f}-{q[2]:.3f}] | {len(r.ratios)} "
              f"| {rate} | {handler} | {per} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

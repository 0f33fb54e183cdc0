"""Four threads doing CPU work in ratio 1:2:3:4 while the main thread joins.

CPU truth is each worker's own thread CPU time; in wall mode the truth is each
thread's lifetime, and the main thread's wait in `wait_for_workers`.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import threading

from _truth import Truth, run

UNIT = 60_000


def burn(n):
    total = 0
    for i in range(n):
        total += i * i
    return total


def _make_worker(k):
    # Distinct functions per worker so every profiler can tell them apart.
    def work(n):
        return burn(n)

    work.__name__ = work.__qualname__ = f"worker_{k}"
    work.__code__ = work.__code__.replace(co_name=f"worker_{k}",
                                          **({"co_qualname": f"worker_{k}"} if sys.version_info >= (3, 11) else {}))
    return work


WORKERS = [_make_worker(k) for k in (1, 2, 3, 4)]


def wait_for_workers(threads):
    for t in threads:
        t.join()


def body(truth: Truth) -> None:
    for _ in truth.rounds_iter():
        threads = [threading.Thread(target=truth.call, args=(fn, UNIT * k), name=f"worker-{k}")
                   for k, fn in zip((1, 2, 3, 4), WORKERS)]
        for t in threads:
            t.start()
        truth.call(wait_for_workers, threads)


if __name__ == "__main__":
    truth = Truth("threads_1234", "4 threads with CPU work 1:2:3:4; main thread joins")
    truth.declare("worker_1", "worker_2", "worker_3", "worker_4", "wait_for_workers")
    run(truth, body)

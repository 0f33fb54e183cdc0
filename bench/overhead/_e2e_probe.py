"""Runs a workload as __main__, then records how much CPU each thread of this
process used (the end-to-end bench's per-sample cost split).

Run plain (`python _e2e_probe.py`) or under `truestack record _e2e_probe.py`;
the workload is E2E_TARGET, the JSON goes to E2E_PROBE_OUT. It is read while
the profiler still runs, so the collector thread is still there to be found
by name. Per-thread CPU comes from /proc/self/task/*/schedstat (nanoseconds;
/proc's stat has only clock ticks), and threads the interpreter does not know
(the native core's control thread) are reported as "other". Threads of the
workload that ended before it did are not counted: use a one-thread workload.
The parent's CPU over the same span is "parent_ns" (under `truestack record`:
the supervisor, which receives the streamed profile).
"""
from __future__ import annotations

import json
import os
import runpy
import sys
import threading


def thread_cpu_ns(pid: str = "self") -> dict[int, int]:
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                out[int(tid)] = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # the thread exited meanwhile
    return out


def main() -> None:
    target = os.environ["E2E_TARGET"]
    sys.argv = [target]
    # Deltas over the workload only: start-up (importing and starting the
    # profiler) and shutdown (writing the profile) are the fixed cost, not per sample.
    # `truestack record` runs the program in a child and streams the profile
    # to its own process (the supervisor, our parent): its CPU counts too.
    parent = str(os.getppid())
    parent_before = sum(thread_cpu_ns(parent).values())
    before = thread_cpu_ns()
    runpy.run_path(target, run_name="__main__")
    after = thread_cpu_ns()
    parent_ns = sum(thread_cpu_ns(parent).values()) - parent_before
    by_tid = {tid: ns - before.get(tid, 0) for tid, ns in after.items()}
    # This thread's own id: under `record` the program's process is forked, and threading's record of
    # the main thread's native id can still name the process it was forked from.
    main_tid = threading.get_native_id()
    collector = {t.native_id for t in threading.enumerate() if t.name.startswith("truestack-")}
    result = {"main_ns": by_tid.pop(main_tid, 0),
              "collector_ns": sum(by_tid.pop(t, 0) for t in collector if t is not None),
              "other_ns": sum(by_tid.values()), "parent_ns": parent_ns}
    with open(os.environ["E2E_PROBE_OUT"], "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()

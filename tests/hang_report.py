"""Run a test's subprocess; if it outlives its timeout, say where it hung before it is killed.

A hang seen once in CI and never again locally can only be diagnosed from
what was captured while it hung: `subprocess.run(timeout=...)` kills the
process and keeps nothing. Here the process and its descendants (a forked
child stuck in a lock is the usual suspect) are each stopped by gdb for a
backtrace of every thread, and the test fails with those backtraces and the
tail of the process's stderr.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time

import pytest

_MAX_PROCESSES = 6  # backtraces taken at most: the process and its first descendants
_GDB_BUDGET_S = 45.0  # all of them together; pytest-timeout (300 s) must not fire meanwhile
_KEEP_CHARS = 20000  # of each process's backtraces, after folding repeats: its end
_MAX_PERIOD = 4  # lines: the longest repeated block folded (py-bt prints 2 lines per Python frame)


def run_reporting_hangs(args: list[str], timeout: float, **popen) -> subprocess.CompletedProcess:
    """subprocess.run(args, capture_output=True, text=True, timeout=timeout, **popen), but a
    process still running at the timeout fails the test with backtraces of its process tree."""
    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            tree = [proc.pid, *descendants(proc.pid)]
            report = backtraces(tree[:_MAX_PROCESSES])
            for pid in tree:
                _kill(pid)
            out, err = proc.communicate()
            pytest.fail(
                f"{' '.join(map(str, args))[:300]}\nstill running after {timeout} s; killed.\n"
                f"--- its stderr (end) ---\n{err[-3000:]}\n--- backtraces ---\n{report}",
                pytrace=False,
            )
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def descendants(pid: int) -> list[int]:
    """The pids under `pid`, parents before their children, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:  # ended meanwhile
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])  # the command name may hold spaces and ')'
        children.setdefault(ppid, []).append(int(entry))
    found, queue = [], list(children.get(pid, []))
    while queue:
        child = queue.pop(0)
        found.append(child)
        queue.extend(children.get(child, []))
    return found


def backtraces(pids: list[int]) -> str:
    """gdb's backtrace of every thread of each process, or why there is none."""
    gdb = shutil.which("gdb")
    if gdb is None:
        return "(no gdb on this machine: no backtraces)"
    deadline = time.monotonic() + _GDB_BUDGET_S
    parts = []
    for pid in pids:
        left = deadline - time.monotonic()
        if left < 5:
            parts.append(f"== pid {pid}: not taken (the time for backtraces ran out)")
            continue
        # python-gdb.py, where the interpreter ships it, adds each thread's Python stack (py-bt).
        command = [gdb, "-p", str(pid), "-batch", "-nx", "-iex", "add-auto-load-safe-path /",
                   "-ex", "set pagination off", "-ex", "thread apply all bt 40", "-ex", "thread apply all py-bt"]
        try:
            env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}  # the sanitizer job's runtime
            done = subprocess.run(command, capture_output=True, text=True, timeout=min(left, 25), env=env)
            text = done.stdout or done.stderr
        except subprocess.TimeoutExpired:
            text = "(gdb did not finish)"
        parts.append(f"== pid {pid}\n{fold_repeats(text)[-_KEEP_CHARS:]}")
    return "\n".join(parts)


def fold_repeats(text: str) -> str:
    """`text` with each run of a block of lines repeated back to back kept once and counted: a
    2000-deep recursion otherwise fills the report with one frame and pushes the other threads out."""
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        for period in range(1, _MAX_PERIOD + 1):
            block = lines[i : i + period]
            times = 1
            while lines[i + times * period : i + (times + 1) * period] == block:
                times += 1
            if times >= 3:
                out.extend(block)
                out.append(f"    [the {period} line(s) above, {times} times in all]")
                i += times * period
                break
        else:
            out.append(lines[i])
            i += 1
    return "\n".join(out)


def _kill(pid: int) -> None:
    with contextlib.suppress(OSError):  # already gone
        os.kill(pid, signal.SIGKILL)

"""`truestack record --subprocesses`: every Python process of the program's tree is sampled and
each is its own group in one profile. Real programs, real child processes, real CPython."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import truestack_env

from truestack.model import load

pytestmark = pytest.mark.native  # the in-process sampler in every child is the native engine's

POOL = '''
import json, multiprocessing as mp, os, sys, time

def burn(n):
    t0 = time.process_time()
    x = 0
    for i in range(n):
        x += i * i % 7
    # The task's own CPU time, and the worker process's whole CPU time so far.
    return os.getpid(), time.process_time() - t0, time.process_time()

def parent_work(n):
    x = 0
    for i in range(n):
        x += i % 3
    return x

if __name__ == "__main__":
    mp.set_start_method(sys.argv[1])
    parent_work(4_000_000)
    with mp.Pool(4) as pool:
        results = pool.map(burn, [700_000] * 40, chunksize=1)
    workers = {}
    for pid, _task, total in results:
        workers[pid] = max(workers.get(pid, 0.0), total)
    print(json.dumps({"in_burn": sum(r[1] for r in results), "workers": workers,
                      "parent": time.process_time()}))
'''

LEVEL = '''
import os, subprocess, sys

def work_level(n):
    x = 0
    for i in range(n):
        x += i % 5
    return x

depth = int(sys.argv[1])
work_level(1_000_000)
with open(f"pid-{depth}.txt", "w") as fh:
    fh.write(str(os.getpid()))
print(f"level {depth} done", flush=True)
if depth < 3:
    child = subprocess.run([sys.executable, "level.py", str(depth + 1)])
    print(f"level {depth}: child exited {child.returncode}", flush=True)
sys.exit(10 + depth)
'''

KILLER = '''
import subprocess, sys, time

doomed = subprocess.Popen([sys.executable, "-c", "def doomed_spin():\\n    while True: pass\\ndoomed_spin()"])
time.sleep(1.0)
doomed.kill()
print("doomed child exited", doomed.wait(), flush=True)
orphan = subprocess.Popen([sys.executable, "-c",
                           "import os, time\\nopen('orphan.pid', 'w').write(str(os.getpid()))\\n"
                           "def orphan_spin():\\n    end = time.time() + 60\\n    while time.time() < end: pass\\n"
                           "orphan_spin()"])
time.sleep(0.7)
print("parent leaves its orphan running", flush=True)
'''


def record(tmp_path, script: str, *args: str, output: str = "out.tsp", subprocesses: bool = True,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    options = ["--subprocesses"] if subprocesses else []
    return subprocess.run(
        [sys.executable, "-m", "truestack", "record", *options, "-o", str(tmp_path / output), script, *args],
        cwd=tmp_path, env=env or truestack_env(), capture_output=True, text=True, timeout=180)


def running(pid: int) -> bool:
    """Alive and not a zombie waiting for whoever adopted it to reap it."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def process_seconds(profile, info, func: str | None = None) -> float:
    """The sampled time of a process's threads, or of its samples with `func` on the stack."""
    total = 0
    for tid in info.threads:
        thread = profile.threads[tid]
        for stack, weight in zip(thread.stack, thread.weight_ns):
            if func is None or any(profile.func_name(profile.frame_func(f)) == func
                                   for f in profile.stack_frames(stack)):
                total += weight
    return total / 1e9


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_pool_children_are_profiled_in_their_own_groups(tmp_path, method):
    (tmp_path / "pool.py").write_text(POOL)
    proc = record(tmp_path, "pool.py", method)
    assert proc.returncode == 0, proc.stderr
    measured = json.loads(proc.stdout)
    workers = {int(pid): cpu for pid, cpu in measured["workers"].items()}
    profile = load(tmp_path / "out.tsp")
    processes = {info.pid: info for info in profile.meta.processes}
    main = profile.meta.processes[0]
    assert main.how == "main"
    assert set(workers) <= set(processes), (workers, processes)
    for pid in workers:
        info = processes[pid]
        assert info.how == ("exec" if method == "spawn" else "fork"), info
        if method == "forkserver":  # forked by the fork server, which the program started
            server = processes[info.parent]
            assert server.how == "exec" and server.parent == main.pid, server
        else:
            assert info.parent == main.pid, info

    in_workers = sum(process_seconds(profile, processes[pid]) for pid in workers)
    burn = sum(process_seconds(profile, processes[pid], "burn") for pid in workers)
    # The children's measured CPU time in the function is found there, in the workers' groups...
    assert 0.90 <= burn / measured["in_burn"] <= 1.10, (burn, measured)
    assert burn / in_workers >= 0.90, (burn, in_workers)
    # ... and nowhere else: not in the program's group, which has its own work.
    assert process_seconds(profile, main, "burn") == 0
    assert process_seconds(profile, main, "parent_work") > 0
    assert all(process_seconds(profile, processes[pid], "parent_work") == 0 for pid in workers)

    # The parent/children split, measured by the program (its own CPU, each worker's whole CPU),
    # against the profile's (the program's group, every child's).
    measured_share = measured["parent"] / (measured["parent"] + sum(workers.values()))
    everyone = sum(process_seconds(profile, info) for info in profile.meta.processes)
    profiled_share = process_seconds(profile, main) / everyone
    print(f"{method}: burn {burn:.3f} s of {measured['in_burn']:.3f} s measured ({burn / measured['in_burn']:.1%}), "
          f"{burn / in_workers:.1%} of the workers' samples; parent share measured {measured_share:.1%}, "
          f"profiled {profiled_share:.1%}")
    assert abs(profiled_share - measured_share) <= 0.03, (profiled_share, measured_share, measured)

    summary = proc.stderr
    assert f"processes: {len(profile.meta.processes)}" in summary, summary
    for pid in workers:
        assert f"process {pid} " in summary, summary


def test_subprocess_run_three_levels_deep(tmp_path):
    (tmp_path / "level.py").write_text(LEVEL)
    plain = subprocess.run([sys.executable, "level.py", "1"], cwd=tmp_path, capture_output=True, text=True,
                           timeout=60)
    proc = record(tmp_path, "level.py", "1", output="out.collapsed")
    # What the program and its children print and return is what they do without truestack.
    assert proc.returncode == plain.returncode == 11, proc.stderr
    assert proc.stdout == plain.stdout
    pids = [int((tmp_path / f"pid-{depth}.txt").read_text()) for depth in (1, 2, 3)]
    lines = (tmp_path / "out.collapsed").read_text().splitlines()
    roots = {line.split(";")[0] for line in lines}
    assert all(root.startswith("process ") for root in roots), roots
    for pid, depth in zip(pids, (1, 2, 3)):
        mine = [line for line in lines if line.startswith(f"process {pid} ")]
        assert mine, (pid, roots)
        assert f"level.py {depth}" in mine[0].split(";")[0]
        assert any(";work_level (" in line for line in mine), mine


def test_killed_child_contributes_orphan_is_collected_nothing_left_behind(tmp_path):
    (tmp_path / "killer.py").write_text(KILLER)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = truestack_env(TMPDIR=str(scratch))  # where the recorder's private directory goes
    started = time.monotonic()
    proc = record(tmp_path, "killer.py", env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"doomed child exited {-signal.SIGKILL}\nparent leaves its orphan running\n"
    assert time.monotonic() - started < 30  # the orphan (60 s of spinning) was stopped
    assert list(scratch.iterdir()) == []  # socket, bootstrap and directory are gone
    orphan_pid = int((tmp_path / "orphan.pid").read_text())
    gone_by = time.monotonic() + 5  # its pipes close a moment before the kernel calls it gone
    while running(orphan_pid) and time.monotonic() < gone_by:
        time.sleep(0.05)
    assert not running(orphan_pid)

    profile = load(tmp_path / "out.tsp")
    by_function = {}
    for info in profile.meta.processes[1:]:
        for func in ("doomed_spin", "orphan_spin"):
            if process_seconds(profile, info, func):
                by_function[func] = info
    doomed, orphan = by_function["doomed_spin"], by_function["orphan_spin"]
    assert process_seconds(profile, doomed, "doomed_spin") > 0.1  # it spun for most of 1 s before SIGKILL
    assert not doomed.complete  # its stream was cut by the kill: what arrived is kept
    assert orphan.pid == orphan_pid and orphan.complete  # stopped with SIGINT, it finished its stream
    notes = " ".join(profile.meta.sampler_stats.notes)
    assert f"process {orphan_pid} was still running when the program ended: stopped with SIGINT" in notes


def test_without_subprocesses_no_process_groups(tmp_path):
    (tmp_path / "level.py").write_text(LEVEL)
    proc = record(tmp_path, "level.py", "1", output="out.collapsed", subprocesses=False)
    assert proc.returncode == 11, proc.stderr
    lines = (tmp_path / "out.collapsed").read_text().splitlines()
    assert lines and not any(line.startswith("process ") for line in lines), lines
    assert "processes:" not in proc.stderr
    assert "record follows children only with --subprocesses" in proc.stderr  # the hint, when it is off


CHILD_VIEW = '''
import json, os, subprocess, sys
code = ("import json, os, sys; m = sys.modules.get('sitecustomize'); "
        "print(json.dumps([getattr(m, 'MARK', None), getattr(m, '__file__', None), sys.path]))")
child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
print(child.stdout, end="")
print(child.stderr, end="", file=sys.stderr)
sys.exit(child.returncode + 3)
'''


def test_children_keep_their_own_sitecustomize_and_sys_path(tmp_path):
    (tmp_path / "view.py").write_text(CHILD_VIEW)
    site = tmp_path / "usersite"
    site.mkdir()
    (site / "sitecustomize.py").write_text("MARK = 'yes'\n")
    env = truestack_env()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    plain = subprocess.run([sys.executable, "view.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=60)
    proc = record(tmp_path, "view.py", env=env)
    assert plain.returncode == proc.returncode == 3, proc.stderr
    ran, module_file, path = json.loads(proc.stdout)
    assert ran == "yes" and module_file == str(site / "sitecustomize.py")  # the hidden one ran, as itself
    assert proc.stdout == plain.stdout  # sys.path as a plain run gives it: the bootstrap took itself off
    profile = load(tmp_path / "out.tsp")
    assert len(profile.meta.processes) == 2  # and the child was followed


EXECUTOR = '''
import concurrent.futures as cf, multiprocessing as mp, os, sys

def executor_work(n):
    x = 0
    for i in range(n):
        x += i % 7
    return os.getpid()

if __name__ == "__main__":
    with cf.ProcessPoolExecutor(2, mp_context=mp.get_context(sys.argv[1])) as ex:
        pids = set(ex.map(executor_work, [300_000] * 8))
    print(" ".join(map(str, sorted(pids))))
'''


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_process_pool_executor_workers_are_followed(tmp_path, method):
    (tmp_path / "ex.py").write_text(EXECUTOR)
    proc = record(tmp_path, "ex.py", method)
    assert proc.returncode == 0, proc.stderr
    profile = load(tmp_path / "out.tsp")
    processes = {info.pid: info for info in profile.meta.processes}
    for pid in map(int, proc.stdout.split()):
        assert process_seconds(profile, processes[pid], "executor_work") > 0, processes[pid]


FORKS = '''
import multiprocessing as mp, os, sys

def fork_work(n):
    x = 0
    for i in range(n):
        x += i % 7

if __name__ == "__main__":
    mp.set_start_method("fork")
    p = mp.Process(target=fork_work, args=(600_000,))
    p.start(); p.join()  # the worker leaves by os._exit, without atexit
    pid = os.fork()
    if pid == 0:
        fork_work(600_000)
        os._exit(7)
    _, status = os.waitpid(pid, 0)
    print(p.exitcode, os.waitstatus_to_exitcode(status), p.pid, pid)
'''


def test_forks_that_leave_by_os_exit_finish_their_stream_and_keep_their_status(tmp_path):
    (tmp_path / "forks.py").write_text(FORKS)
    proc = record(tmp_path, "forks.py")
    assert proc.returncode == 0, proc.stderr
    mp_status, fork_status, mp_pid, fork_pid = map(int, proc.stdout.split())
    assert (mp_status, fork_status) == (0, 7)
    profile = load(tmp_path / "out.tsp")
    processes = {info.pid: info for info in profile.meta.processes}
    for pid in (mp_pid, fork_pid):
        info = processes[pid]
        assert info.how == "fork" and info.complete, info  # os._exit ended its stream first
        assert process_seconds(profile, info, "fork_work") > 0.02

"""`truestack record` behaviour: running the program as Python would, early ends, losses, bad input."""
# Target programs spin for CPU time, not wall time: on a busy shared machine a
# wall-clock spin can go by with (almost) no CPU and so no samples.
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import run_truestack, truestack_env

from truestack.model import load

SPIN = '''
import time
def spin(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        sum(range(300))
'''


def record(*args: str, cwd) -> subprocess.CompletedProcess:
    return run_truestack("record", "--engine", "safepoint", "--rate", "200", *args, cwd=cwd)


def test_argv_main_path_and_exit_code_pass_through(tmp_path, tmp_script):
    script = tmp_script("prog.py", SPIN + '''
import json, os, sys
spin(0.1)
print(json.dumps({"argv": sys.argv, "name": __name__, "path0": sys.path[0], "file": __file__}))
sys.exit(7)
''')
    out = tmp_path / "p.tsp"
    proc = record("-o", str(out), str(script), "a", "--flag", "-o", "x", cwd=tmp_path)
    assert proc.returncode == 7, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["argv"] == [str(script), "a", "--flag", "-o", "x"]
    assert seen["name"] == "__main__"
    assert seen["path0"] == str(tmp_path)
    assert seen["file"] == str(script)
    profile = load(out)
    assert profile.meta.command == [str(script), "a", "--flag", "-o", "x"]
    assert profile.meta.interrupted is None
    # the program's <module> is the root of its stacks, not truestack's launcher
    roots = {profile.func_name(profile.frame_func(profile.stack_frames(row.stack)[0]))
             for row in profile.iter_samples() if row.stack >= 0}
    assert roots == {"<module>"}


def test_double_dash_separator(tmp_path, tmp_script):
    script = tmp_script("dd.py", "import sys; print(sys.argv[1:])")
    proc = record("-o", str(tmp_path / "o.tsp"), "--", str(script), "--x", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['--x']"


def test_module_target(tmp_path):
    pkg = tmp_path / "pkgx"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "tool.py").write_text(SPIN + '''
import sys
spin(0.2)
print(__name__, sys.argv[0].endswith("tool.py"), sys.argv[1:])
raise SystemExit(3)
''')
    out = tmp_path / "m.collapsed"
    proc = record("-o", str(out), "-m", "pkgx.tool", "one", "-q", cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout.strip() == "__main__ True ['one', '-q']"
    assert "spin" in out.read_text()


def test_exception_in_target_still_writes(tmp_path, tmp_script):
    script = tmp_script("boom.py", SPIN + '''
def explode():
    spin(0.3)
    raise ValueError("boom happened")
explode()
''')
    out = tmp_path / "boom.tsp"
    proc = record("-o", str(out), str(script), cwd=tmp_path)
    assert proc.returncode == 1
    assert "Traceback (most recent call last)" in proc.stderr
    assert "ValueError: boom happened" in proc.stderr
    tb = proc.stderr.split("Traceback", 1)[1].split("ValueError", 1)[0]
    assert "truestack" not in tb  # the user's traceback, not ours
    assert "INTERRUPTED" in proc.stderr
    profile = load(out)
    assert "ValueError" in profile.meta.interrupted
    assert any(m.name.startswith("interrupted") for m in profile.markers)
    assert "explode" in {profile.func_name(f.func) for f in profile.frames}


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as for a background job of a non-interactive shell


def _start_long_run(tmp_path, script_text: str, *args: str, background: bool = False) -> subprocess.Popen:
    script = tmp_path / "long.py"
    script.write_text(script_text)
    return subprocess.Popen(
        [sys.executable, "-m", "truestack", "record", "--engine", "safepoint", "--rate", "200", *args,
         str(script)], cwd=tmp_path, env=truestack_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, preexec_fn=_ignore_sigint if background else None)


LONG = SPIN + '''
import sys
print("ready", flush=True)
try:
    spin(60)
finally:
    print("cleanup ran", flush=True)
'''


@pytest.mark.parametrize("sig,status,reason", [(signal.SIGINT, 130, "KeyboardInterrupt"),
                                               (signal.SIGTERM, 143, "SIGTERM")])
def test_signal_mid_run_leaves_readable_profile(tmp_path, sig, status, reason):
    out = tmp_path / "cut.tsp"
    proc = _start_long_run(tmp_path, LONG, "-o", str(out))
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.5)
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == status, stderr
    assert "cleanup ran" in stdout
    assert "INTERRUPTED" in stderr and reason in stderr
    profile = load(out)
    assert profile.sample_count > 0
    assert reason in profile.meta.interrupted
    assert any(m.name.startswith("interrupted") for m in profile.markers)


@pytest.mark.parametrize("background", [False, True])
def test_duration_stops_sampling_then_the_program(tmp_path, background):
    out = tmp_path / "dur.tsp"
    started = time.monotonic()
    proc = _start_long_run(tmp_path, LONG, "--duration", "0.8", "-o", str(out), background=background)
    stdout, stderr = proc.communicate(timeout=60)
    assert time.monotonic() - started < 50  # the 60 s spin was cut short
    assert proc.returncode == 124, stderr  # stopped by --duration, as `timeout` says it
    assert "cleanup ran" in stdout  # stopped gently: finally blocks run
    profile = load(out)
    assert profile.sample_count > 0
    assert profile.meta.interrupted is None
    assert any("--duration" in m.name for m in profile.markers)


NON_DAEMON = SPIN + '''
import atexit, threading, time
atexit.register(lambda: print("atexit ran", flush=True))
def forever():
    while True:
        spin(0.02)
        time.sleep(0.01)
threading.Thread(target=forever, name="worker").start()
if MAIN_WAITS:
    time.sleep(600)
print("main returned", flush=True)
'''


@pytest.mark.parametrize("main_waits", [False, True])
def test_duration_stops_a_program_whose_threads_never_end(tmp_path, tmp_script, main_waits):
    script = tmp_script("threads.py", f"MAIN_WAITS = {main_waits}\n" + NON_DAEMON)
    out = tmp_path / "t.tsp"
    started = time.monotonic()
    proc = record("--duration", "1", "-o", str(out), str(script), cwd=tmp_path)
    assert time.monotonic() - started < 60
    assert proc.returncode == 124, proc.stderr
    assert "atexit ran" in proc.stdout
    profile = load(out)
    assert profile.sample_count > 0 and profile.meta.interrupted is None
    assert any("--duration" in m.name for m in profile.markers)


def test_duration_longer_than_program(tmp_path, tmp_script):
    script = tmp_script("short.py", SPIN + "spin(0.2)\nprint('finished')\n")
    out = tmp_path / "s.tsp"
    proc = record("--duration", "30", "-o", str(out), str(script), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "finished"
    assert load(out).sample_count > 0


IDLE = SPIN + '''
import time
def sleeper_fn():
    time.sleep(0.6)
spin(0.2)
sleeper_fn()
'''


def test_wall_mode_idle_left_out_unless_asked(tmp_path, tmp_script):
    script = tmp_script("idle.py", IDLE)
    default = tmp_path / "default.collapsed"
    kept = tmp_path / "kept.collapsed"
    p1 = record("--mode", "wall", "-o", str(default), str(script), cwd=tmp_path)
    p2 = record("--mode", "wall", "--include-idle", "-o", str(kept), str(script), cwd=tmp_path)
    assert p1.returncode == 0 and p2.returncode == 0, p1.stderr + p2.stderr

    def sleeper_count(path) -> int:
        return sum(int(line.rsplit(" ", 1)[1]) for line in path.read_text().splitlines() if "sleeper_fn" in line)

    assert sleeper_count(kept) > 20  # ~0.6 s at 200 Hz
    assert sleeper_count(default) < sleeper_count(kept) / 4
    assert "idle samples left out" in p1.stderr
    assert "spin" in kept.read_text()


def test_function_level_merges_lines(tmp_path, tmp_script):
    script = tmp_script("fl.py", SPIN + "spin(0.4)\n")
    lines_out = tmp_path / "lines.collapsed"
    funcs_out = tmp_path / "funcs.collapsed"
    assert record("-o", str(lines_out), str(script), cwd=tmp_path).returncode == 0
    assert record("--function-level", "-o", str(funcs_out), str(script), cwd=tmp_path).returncode == 0
    assert f"spin ({script}:" in lines_out.read_text()
    text = funcs_out.read_text()
    assert f"spin ({script})" in text and f"spin ({script}:" not in text


def test_markers_from_recorded_program(tmp_path, tmp_script):
    script = tmp_script("mk.py", SPIN + '''
import truestack
truestack.mark("checkpoint", step=1)
with truestack.span("busy part"):
    spin(0.2)
''')
    out = tmp_path / "mk.tsp"
    proc = record("-o", str(out), str(script), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    markers = {m.name: m for m in load(out).markers}
    assert markers["checkpoint"].data == {"step": 1}
    assert markers["busy part"].end_ns > markers["busy part"].start_ns


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full to simulate a full disk")
def test_full_disk_says_what_was_lost_and_rescues(tmp_path, tmp_script):
    script = tmp_script("w.py", SPIN + "spin(0.2)\n")
    rescue_dir = tmp_path / "tmp"
    rescue_dir.mkdir()
    proc = run_truestack("record", "--engine", "safepoint", "-f", "collapsed", "-o", "/dev/full", str(script),
                         cwd=tmp_path, env=truestack_env(TMPDIR=str(rescue_dir)))
    assert proc.returncode == 1
    assert "No space left on device" in proc.stderr
    assert "output is lost" in proc.stderr
    rescued = list(rescue_dir.glob("truestack-rescued-*.tsp"))
    assert len(rescued) == 1
    assert str(rescued[0]) in proc.stderr
    assert load(rescued[0]).sample_count > 0


BAD_INPUTS = {
    "missing script": (["no_such_script.py"], "no such script"),
    "missing module": (["-m", "no_such_module_xyz"], "no_such_module_xyz"),
    "no target": ([], "no target"),
    "unknown format": (["-f", "bogus", "{script}"], "unknown format"),
    "bad rate": (["--rate", "fast", "{script}"], "invalid rate"),
    "zero rate": (["--rate", "0", "{script}"], "invalid rate"),
    "output dir missing": (["-o", "{tmp}/no/such/dir/out.html", "{script}"], "does not exist"),
    "output is a directory": (["-o", "{tmp}", "{script}"], "is a directory"),
    "output under a file": (["-o", "{script}/out.html", "{script}"], "cannot write"),
    "bad mode": (["--mode", "gpu", "{script}"], "invalid choice"),
    "bad max depth": (["--max-depth", "0", "{script}"], "max-depth"),
    "bad duration": (["--duration", "-1", "{script}"], "duration"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_is_one_line_exit_2(tmp_path, tmp_script, case):
    ran = tmp_path / "ran"
    script = tmp_script("target.py", f"open({str(ran)!r}, 'w').close()\n")
    args, expected = BAD_INPUTS[case]
    args = [a.format(script=script, tmp=tmp_path) for a in args]
    proc = run_truestack("record", *args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert lines[0].startswith("truestack: error:")
    assert expected in lines[0]
    assert not ran.exists(), "the target must not start when the input is bad"


def test_relative_output_survives_chdir_in_program(tmp_path, tmp_script):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    script = tmp_script("cd.py", SPIN + f"import os\nos.chdir({str(elsewhere)!r})\nspin(0.2)\n")
    proc = record("-o", "rel.collapsed", str(script), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "rel.collapsed").exists()
    assert not (elsewhere / "rel.collapsed").exists()
    assert f"output: {tmp_path / 'rel.collapsed'} (collapsed)" in proc.stderr


def test_output_file_mode_follows_umask(tmp_path, tmp_script):
    script = tmp_script("m.py", SPIN + "spin(0.1)\n")
    out = tmp_path / "m.collapsed"
    proc = record("-q", "-o", str(out), str(script), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask


NO_PROTOBUF = '''
import sys
class _NoProtobuf:
    def find_spec(self, name, path=None, target=None):
        if name == "google" or name.startswith("google."):
            raise ImportError(f"No module named {name!r} (test shim)")
        return None
sys.meta_path.insert(0, _NoProtobuf())
'''


@pytest.mark.parametrize("how", [["-f", "pprof"], ["-o", "out.pb.gz"]])
def test_missing_output_dependency_is_reported_before_the_program_runs(tmp_path, tmp_script, how):
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(NO_PROTOBUF)
    ran = tmp_path / "ran"
    script = tmp_script("target.py", f"open({str(ran)!r}, 'w').close()\n")
    env = truestack_env()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(shim), env.get("PYTHONPATH")]))
    proc = run_truestack("record", "--engine", "safepoint", *how, str(script), cwd=tmp_path, env=env)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("truestack: error:") and "protobuf" in lines[0], proc.stderr
    assert not ran.exists(), "the program must not run when its profile could not be written"


@pytest.mark.parametrize("name,expected", [("p.json", "speedscope"), ("p.svg", "svg"), ("p.folded", "collapsed"),
                                           ("p.prof", "pstats"), ("p.tsp", "truestack")])
def test_output_format_follows_the_extension(tmp_path, name, expected):
    script = tmp_path / "prog.py"
    script.write_text("sum(range(1000))\n")
    proc = record("-o", str(tmp_path / name), str(script), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"({expected})" in proc.stderr.splitlines()[-1], proc.stderr


@pytest.mark.parametrize("name", ["p.pb", "p.out", "profile"])
def test_an_extension_that_names_no_format_is_a_one_line_error_before_the_run(tmp_path, name):
    script = tmp_path / "prog.py"
    script.write_text("open('ran', 'w').close()\n")
    proc = record("-o", str(tmp_path / name), str(script), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "cannot tell the format" in proc.stderr, proc.stderr
    assert ".json" in proc.stderr and ".pb.gz" in proc.stderr  # names what it accepts
    assert not (tmp_path / "ran").exists()

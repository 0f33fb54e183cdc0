"""`truestack record` keeps the profile whatever happens to the program: it runs
in a child process that streams its samples to the recorder."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pexpect
import pytest
from conftest import truestack_env

from truestack.model import load

SPIN = '''
import time
def spin(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        sum(range(300))
'''


def start(tmp_path, source: str, *options: str, engine: str = "safepoint", **popen) -> subprocess.Popen:
    script = tmp_path / "prog.py"
    script.write_text(SPIN + source)
    return subprocess.Popen(
        [sys.executable, "-m", "truestack", "record", "--engine", engine, "--rate", "200", "-o",
         str(tmp_path / "out.tsp"), *options, str(script)],
        cwd=tmp_path, env=truestack_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


@pytest.mark.parametrize("engine", ["safepoint", "auto"])
def test_segfaulting_program_still_leaves_its_profile(tmp_path, engine):
    proc = start(tmp_path, "spin(0.6)\nimport ctypes\nctypes.string_at(0)\n", engine=engine)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGSEGV, err  # the recorder dies of the program's signal, as a plain run would
    profile = load(tmp_path / "out.tsp")
    assert profile.sample_count > 0
    assert "spin" in {profile.func_name(f.func) for f in profile.frames}
    assert "killed by SIGSEGV" in profile.meta.interrupted
    assert profile.meta.sampler_stats is not None and profile.meta.sampler_stats.samples > 0
    assert "killed by SIGSEGV" in err  # the summary says how the program ended


def test_os_exit_keeps_profile_and_exit_status(tmp_path):
    proc = start(tmp_path, "spin(0.4)\nimport os\nos._exit(7)\n")
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 7, err
    profile = load(tmp_path / "out.tsp")
    assert profile.sample_count > 0
    assert "status 7" in profile.meta.interrupted


def test_sigkill_of_the_program_keeps_what_was_streamed(tmp_path):
    proc = start(tmp_path, "import os, sys\nprint(os.getpid(), flush=True)\nspin(60)\n")
    child_pid = int(proc.stdout.readline())
    assert child_pid != proc.pid  # the program runs in its own process
    time.sleep(0.8)
    os.kill(child_pid, signal.SIGKILL)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, err
    profile = load(tmp_path / "out.tsp")
    assert profile.sample_count > 0
    assert "killed by SIGKILL" in profile.meta.interrupted


def test_stdin_and_exit_status_pass_through(tmp_path):
    proc = start(tmp_path, "import sys\nline = sys.stdin.readline()\nprint('got', line.strip())\nsys.exit(5)\n",
                 stdin=subprocess.PIPE)
    out, err = proc.communicate("hello\n", timeout=60)
    assert proc.returncode == 5, err
    assert out.strip() == "got hello"
    assert load(tmp_path / "out.tsp").meta.interrupted is None


def test_program_environment_carries_no_recorder_variables(tmp_path):
    proc = start(tmp_path, "import os, sys\nprint(sorted(k for k in os.environ if 'TRUESTACK' in k))\n"
                           "print(sys.path[0])\n")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    keys, path0 = out.strip().splitlines()
    assert keys == str(sorted(k for k in truestack_env() if "TRUESTACK" in k))  # what we were given, no more
    assert path0 == str(tmp_path)  # the script's directory, as `python prog.py` gives


def test_terminal_ctrl_c_reaches_the_program_once(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(SPIN + '''
import signal, sys, time
hits = []
signal.signal(signal.SIGINT, lambda *a: hits.append(1))
print("ready", flush=True)
end = time.monotonic() + 30
while not hits and time.monotonic() < end:
    spin(0.05)
spin(0.5)  # a second delivery would arrive here
print("sigint count", len(hits), flush=True)
''')
    child = pexpect.spawn(sys.executable, ["-m", "truestack", "record", "-q", "--engine", "safepoint", "-o",
                                           str(tmp_path / "out.tsp"), str(script)],
                          cwd=str(tmp_path), env=truestack_env(), encoding="utf-8", timeout=60)
    child.expect("ready")
    time.sleep(0.3)
    child.sendintr()  # the terminal sends SIGINT to the whole foreground process group
    child.expect(r"sigint count (\d+)")
    count = int(child.match.group(1))
    child.expect(pexpect.EOF)
    child.close()
    assert count == 1
    assert child.exitstatus == 0
    assert load(tmp_path / "out.tsp").sample_count > 0


def test_sigint_ends_the_recording_within_a_second_even_if_the_program_goes_on(tmp_path):
    proc = start(tmp_path, "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                           "print('ready', flush=True)\nspin(120)\n")
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(0.5)
    asked = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out = tmp_path / "out.tsp"
    while not out.exists() and time.monotonic() - asked < 20:
        time.sleep(0.05)
    assert out.exists(), "no profile after SIGINT"
    written_after = time.monotonic() - asked
    assert proc.poll() is None  # the program goes on; it ignores SIGINT
    proc.send_signal(signal.SIGINT)  # asked twice: the program is stopped
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, err
    profile = load(out)
    assert profile.sample_count > 0
    assert "did not stop within 1 s" in profile.meta.interrupted
    assert written_after < 5, written_after  # 1 s grace plus a loaded machine's scheduling


def test_module_in_the_current_directory_runs_with_the_sys_path_python_gives(tmp_path):
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "tool.py").write_text("import json, sys\nprint(json.dumps(sys.path))\n")
    plain = subprocess.run([sys.executable, "-m", "mypkg.tool"], cwd=tmp_path, capture_output=True, text=True,
                           env=truestack_env())
    proc = subprocess.run([sys.executable, "-m", "truestack", "record", "-q", "--engine", "safepoint", "-o",
                           str(tmp_path / "out.tsp"), "-m", "mypkg.tool"], cwd=tmp_path, capture_output=True,
                          text=True, env=truestack_env())
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == json.loads(plain.stdout)


def test_script_sees_the_sys_path_python_gives(tmp_path):
    script = tmp_path / "show.py"
    script.write_text("import json, sys\nprint(json.dumps(sys.path))\n")
    plain = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                           env=truestack_env())
    proc = subprocess.run([sys.executable, "-m", "truestack", "record", "-q", "--engine", "safepoint", "-o",
                           str(tmp_path / "out.tsp"), str(script)], cwd=tmp_path, capture_output=True, text=True,
                          env=truestack_env())
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == json.loads(plain.stdout)


@pytest.mark.parametrize("mode", ["cpu", "wall"])
def test_the_maximum_rate_finishes_saves_and_says_it_was_lowered(tmp_path, mode):
    # --rate 100000 used to spin at 100 % CPU forever, deaf to SIGINT.
    proc = start(tmp_path, "spin(1.0)\n", "--rate", "100000", "--mode", mode, engine="native")
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "rate lowered" in err, err  # the summary
    stats = load(tmp_path / "out.tsp").meta.sampler_stats
    assert stats.samples > 1000, stats
    assert any("rate lowered" in note for note in stats.notes), stats.notes  # the metadata


def test_sigint_at_the_maximum_rate_ends_the_recording_within_a_second(tmp_path):
    proc = start(tmp_path, "print('ready', flush=True)\nspin(120)\n", "--rate", "100000", engine="native")
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(1.5)  # the budget settles and a few drains stream samples, even on a loaded machine
    asked = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=30)
    ended_after = time.monotonic() - asked
    assert proc.returncode == 130, err
    profile = load(tmp_path / "out.tsp")
    assert profile.sample_count > 0
    assert "rate lowered" in " ".join(profile.meta.sampler_stats.notes), profile.meta.sampler_stats.notes
    assert ended_after < 3, ended_after  # 1 s plus a loaded machine's scheduling


@pytest.mark.parametrize("how", [
    "subprocess.run([sys.executable, '-c', 'pass'])",
    "multiprocessing.Process(target=print).start()",
])
def test_python_children_are_named_as_not_followed(tmp_path, how):
    proc = start(tmp_path, f"import multiprocessing, subprocess, sys\nif __name__ == '__main__':\n    {how}\n")
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "started 1 Python child process" in err, err
    assert "record follows children only with --subprocesses" in err, err
    notes = load(tmp_path / "out.tsp").meta.sampler_stats.notes
    assert any("only with --subprocesses" in n for n in notes), notes


def test_no_child_hint_for_other_programs(tmp_path):
    proc = start(tmp_path, "import subprocess\nsubprocess.run(['true'])\n")
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "child process" not in err, err

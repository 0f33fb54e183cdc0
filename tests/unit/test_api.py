"""The programmatic API: profile() as context manager and decorator, start/stop, markers."""
from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest
from conftest import truestack_env

import truestack
from truestack import api
from truestack.exporters import UnknownFormat
from truestack.model import Profile, load

META_KEYS = {"command", "python_version", "truestack_version", "start_time_unix_ns", "start_monotonic_ns",
             "engine", "mode", "rate_hz", "sampler_stats", "function_level", "interrupted"}


def spin_api_test(seconds: float) -> int:
    """Burn `seconds` of this thread's CPU time (not wall time: the test machine is shared)."""
    total = 0
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        total += sum(range(500))
    return total


def func_names(profile: Profile) -> set[str]:
    return {profile.func_name(row.func) for row in profile.frames}


def test_context_manager_collects_and_fills_meta(tmp_path):
    with truestack.profile(mode="cpu", rate=250, engine="safepoint") as p:
        spin_api_test(0.4)
    profile = p.profile
    assert isinstance(profile, Profile)
    assert profile.sample_count > 0
    assert "spin_api_test" in func_names(profile)
    assert set(profile.meta.to_dict()) >= META_KEYS
    assert profile.meta.mode == "cpu"
    assert profile.meta.rate_hz == 250
    assert profile.meta.engine == "safepoint"
    assert profile.meta.sampler_stats.samples >= profile.sample_count
    assert profile.meta.interrupted is None
    assert not p.running
    # no sample of the sampler starting or stopping itself
    assert not any("sampler.py" in profile.func_file(f.func) for f in profile.frames)


def test_save_follows_extension(tmp_path):
    with truestack.profile(rate=250, engine="safepoint") as p:
        spin_api_test(0.3)
    assert p.save(tmp_path / "run.tsp") == "truestack"
    assert load(tmp_path / "run.tsp").sample_count == p.profile.sample_count
    # One rule with `record -o`: a name whose extension says no format is an error, not a guess.
    with pytest.raises(UnknownFormat, match=r"cannot tell the format of .*noext"):
        p.save(tmp_path / "noext")
    assert p.save(tmp_path / "noext", format="truestack") == "truestack"
    assert load(tmp_path / "noext").sample_count == p.profile.sample_count
    assert p.save(tmp_path / "run.json") == "speedscope"
    with pytest.raises(UnknownFormat):
        truestack.profile(output=tmp_path / "run.pb")  # before the block runs
    assert p.save(tmp_path / "run.collapsed") == "collapsed"
    assert "spin_api_test" in (tmp_path / "run.collapsed").read_text()


def test_context_manager_output_argument(tmp_path):
    out = tmp_path / "block.tsp"
    with truestack.profile(rate=250, engine="safepoint", output=out):
        spin_api_test(0.2)
    assert load(out).sample_count > 0


def test_ctrl_c_inside_block_marks_profile_interrupted():
    with pytest.raises(KeyboardInterrupt):
        with truestack.profile(rate=250, engine="safepoint") as p:
            spin_api_test(0.1)
            raise KeyboardInterrupt
    assert "KeyboardInterrupt" in p.profile.meta.interrupted
    assert any(m.name.startswith("interrupted") for m in p.profile.markers)


def test_decorator_accumulates_calls_and_writes_output(tmp_path):
    out = tmp_path / "deco.tsp"

    @truestack.profile(rate=250, engine="safepoint", output=out)
    def work(seconds: float) -> int:
        return spin_api_test(seconds)

    assert work(0.2) > 0
    first = load(out).sample_count
    assert first > 0
    work(0.2)
    second = load(out)
    assert second.sample_count > first  # rewritten with both calls
    assert work.profile.sample_count == second.sample_count
    assert work.__name__ == "work"


def test_decorator_nested_calls_share_one_session(tmp_path):
    @truestack.profile(rate=250, engine="safepoint", output=tmp_path / "nested.tsp")
    def recurse(n: int) -> int:
        return spin_api_test(0.05) if n == 0 else recurse(n - 1)

    recurse(3)
    assert recurse.session.running is False
    assert recurse.profile.sample_count > 0
    assert recurse.session._starts == 1  # the recursive calls did not restart sampling
    assert load(tmp_path / "nested.tsp").sample_count == recurse.profile.sample_count


def test_bare_decorator_prints_summary_at_exit(tmp_path):
    script = tmp_path / "bare.py"
    script.write_text(
        "import time, truestack\n"
        "@truestack.profile\n"
        "def busy_bare():\n"
        "    end = time.perf_counter() + 0.4\n"
        "    while time.perf_counter() < end: sum(range(300))\n"
        "busy_bare()\n"
        "print('calls done', busy_bare.profile.sample_count > 0)\n")
    proc = subprocess.run([sys.executable, str(script)], env=truestack_env(), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "calls done True" in proc.stdout
    assert "profile of every call of busy_bare" in proc.stderr
    assert "busy_bare" in proc.stderr.split("profile of every call", 1)[1]


def test_start_stop():
    session = truestack.start(rate=250, engine="safepoint")
    try:
        with pytest.raises(RuntimeError):
            truestack.start()
        spin_api_test(0.3)
    finally:
        profile = truestack.stop()
    assert profile is session.profile
    assert profile.sample_count > 0
    with pytest.raises(RuntimeError):
        truestack.stop()


def test_mark_and_span_record_thread_and_time():
    with truestack.profile(rate=100, engine="safepoint") as p:
        before = time.monotonic_ns()
        truestack.mark("loaded", rows=3)
        with truestack.span("phase 1"):
            time.sleep(0.01)
        after = time.monotonic_ns()

        other: dict[str, int] = {}

        def worker() -> None:
            other["tid"] = threading.get_native_id()
            truestack.mark("from worker")

        t = threading.Thread(target=worker)
        t.start()
        t.join()
    markers = {m.name: m for m in p.profile.markers}
    me = threading.get_native_id()
    assert markers["loaded"].thread_id == me
    assert markers["loaded"].end_ns is None
    assert markers["loaded"].data == {"rows": 3}
    assert before <= markers["loaded"].start_ns <= after
    phase = markers["phase 1"]
    assert phase.thread_id == me
    assert before <= phase.start_ns < phase.end_ns <= after
    assert phase.end_ns - phase.start_ns >= 10_000_000
    assert markers["from worker"].thread_id == other["tid"] != me


def test_markers_without_active_profile_are_noops():
    assert not api.active_sessions()
    truestack.mark("nobody listens")
    with truestack.span("nor here"):
        pass
    with truestack.profile(rate=100, engine="safepoint") as p:
        pass
    assert p.profile.markers == []


def test_markers_go_to_every_active_profile():
    with truestack.profile(rate=100, engine="safepoint") as outer:
        with truestack.profile(rate=100, engine="safepoint") as inner:
            truestack.mark("both")
        truestack.mark("outer only")
    assert [m.name for m in inner.profile.markers] == ["both"]
    assert [m.name for m in outer.profile.markers] == ["both", "outer only"]


def test_lazy_exports():
    from truestack.sampler import Sampler

    assert truestack.Sampler is Sampler
    assert truestack.load is load
    assert {"profile", "start", "stop", "mark", "span", "load", "Sampler"} <= set(dir(truestack))
    with pytest.raises(AttributeError):
        truestack.no_such_thing  # noqa: B018

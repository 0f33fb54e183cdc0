"""Shared test helpers: run truestack and target programs in real subprocesses."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hang_report import run_reporting_hangs

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "src"

# A suite started with `&` from a script inherits SIGINT ignored, and so would every program the
# tests start: the Ctrl-C tests would then hang. A handled signal is reset to the default on exec.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def truestack_env(**extra: str) -> dict[str, str]:
    """Environment for a child interpreter that can import truestack.

    When the package is installed, the installed copy is used; otherwise the
    source tree is put on PYTHONPATH.
    """
    env = dict(os.environ)
    env.pop("PYTHONBREAKPOINT", None)
    try:
        import truestack

        installed_from_src = Path(truestack.__file__).resolve().is_relative_to(SRC)
    except ImportError:
        installed_from_src = True
    if installed_from_src:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
    if GDB_CANNOT_CALL is not None:
        env.setdefault("TRUESTACK_INJECTOR", "ptrace")
    env.update(extra)
    return env


def run_truestack(*args: str, cwd: str | os.PathLike | None = None, timeout: float = 240,
                  env: dict[str, str] | None = None, input: str | None = None) -> subprocess.CompletedProcess:
    """Run `python -m truestack ARGS` and capture its output as text."""
    command = [sys.executable, "-m", "truestack", *args]
    if input is not None:  # communicate() writes it: not the hang report's case
        return subprocess.run(command, cwd=cwd, env=env or truestack_env(), capture_output=True, text=True,
                              timeout=timeout, input=input)
    return run_reporting_hangs(command, timeout, cwd=cwd, env=env or truestack_env())


def _gdb_cannot_call() -> str | None:
    if shutil.which("gdb") is None:
        return None
    from truestack.remote.gdb_calls import calls_break_the_target

    return calls_break_the_target()


# Where gdb cannot call a function in another process without breaking it (gdb 13 on a CPU with AMX),
# attach's gdb route refuses before touching the target (test_attach's refusal test checks it). The
# attach tests then inject as a user there would, through truestack's own ptrace route (truestack_env
# sets TRUESTACK_INJECTOR); only the tests of the gdb route itself cannot run.
GDB_CANNOT_CALL = _gdb_cannot_call()
needs_gdb_calls = pytest.mark.skipif(
    GDB_CANNOT_CALL is not None, reason=f"gdb cannot call into another process on this machine: {GDB_CANNOT_CALL}"
)


def native_available() -> bool:
    try:
        from truestack import _native  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture
def tmp_script(tmp_path):
    """Write a script file and return its path: tmp_script("name.py", source)."""

    def write(name: str, source: str) -> Path:
        path = tmp_path / name
        path.write_text(source)
        return path

    return write



# -- markers (registered in pyproject.toml) -----------------------------------
# `native`: needs the compiled extensions; `slow`: left out of the quick run
# (`pytest -m "not slow"`, < 60 s on a 2-core machine); `browser`: Chromium.
# Markers only select: the matrix runs everything, nothing is skipped by them.

# Tests outside tests/native that need the extensions (node-id prefixes).
NEEDS_NATIVE = (
    "integration/test_validate.py::",
    "integration/test_cpython_suite.py::",
    "integration/test_dump.py::",
    "integration/test_native_frames.py::",
    "integration/test_bench_smoke.py::test_accuracy_runner_quick",  # its columns must come from the native engine
    "integration/test_bench_smoke.py::test_overhead_runner_quick",
)

# The slowest tests (measured with --durations on 3.12), each area keeping a
# quick test: stress is covered quickly by validate's [threads] program,
# accuracy by the thread and sleep tests, formats by their cpu-mode cases,
# crash safety by the supervisor tests.
SLOW = (
    "native/test_native_stress.py::test_stress",
    "native/test_native_accuracy.py::test_long_c_call_attributed_to_calling_line",
    "native/test_native_accuracy.py::test_straight_line_code_vs_loop",
    "native/test_native_accuracy.py::test_threads_cpu_shares[timer_create]",
    "native/test_native_accuracy.py::test_threads_cpu_shares[auto]",
    "native/test_native_accuracy.py::test_sleeping_thread_cpu_mode[timer_create]",
    "native/test_extension_shape.py::test_users_build_has_no_oracle_in_the_sampler_and_no_test_hooks",
    "integration/test_cpython_suite.py::",
    "integration/test_bench_smoke.py::test_accuracy_runner_quick",
    "integration/test_bench_smoke.py::test_overhead_runner_quick",
    "integration/test_flamegraph_browser.py::test_100k_node_tree_renders_fast_enough",
    "integration/test_validate.py::test_stress_program_error_rate_is_low[asyncio]",
    "integration/test_validate.py::test_stress_program_error_rate_is_low[recursion]",
    "integration/test_validate.py::test_stress_program_error_rate_is_low[exceptions]",
    "integration/test_validate.py::test_stress_program_error_rate_is_low[churn]",
    "integration/test_validate.py::test_stress_program_error_rate_is_low[generators]",
    "integration/test_validate.py::test_broken_walker_is_caught[swap-reordered]",
    "integration/test_record_cli.py::test_duration_stops_sampling_then_the_program[True]",
    "integration/test_record_supervisor.py::test_sigint_ends_the_recording_within_a_second",
    "integration/test_record_supervisor.py::test_segfaulting_program_still_leaves_its_profile[auto]",
    "unit/test_storage_fuzz.py::test_mutated_profiles_load_or_fail_with_one_line_error",
    "integration/test_record_formats.py::test_every_format_both_modes[",  # only the -wall cases, below
)

# Tests that measure memory (RSS) or time: ASan's shadow memory, quarantine
# and slower code make their numbers meaningless, so a sanitized run
# (TRUESTACK_SANITIZED=1, scripts/sanitizer-check) deselects them.
NOT_UNDER_SANITIZER = (
    "unit/test_storage_fuzz.py::test_mutated_profiles_load_or_fail_with_one_line_error",  # RSS growth, time per load
    "native/test_native_accuracy.py::",  # CPU-time shares
    "integration/test_async.py::test_cpu_mode_running_shares",  # CPU and wall-time shares per task
    "integration/test_async.py::test_wall_mode_running_and_awaiting_shares",
    "integration/test_bench_smoke.py::test_accuracy_runner_quick",
    "integration/test_bench_smoke.py::test_overhead_runner_quick",
    "integration/test_bench_smoke.py::test_signal_floor_bench_measures_each_source",
    "integration/test_flamegraph_browser.py::test_100k_node_tree_renders_fast_enough",
    "integration/test_record_supervisor.py::test_sigint_ends_the_recording_within_a_second",
    "native/test_hardening.py::test_the_ring_is_sized_to_the_rate_and_resident_only_where_written",  # RSS
    "native/test_hardening.py::test_an_extreme_rate_is_lowered_to_the_cpu_budget",  # work per CPU second
)

TESTS_DIR = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    sanitized = os.environ.get("TRUESTACK_SANITIZED") == "1"
    deselected = []
    for item in items:
        path = Path(str(item.path)).resolve()
        try:
            rel = path.relative_to(TESTS_DIR).as_posix()
        except ValueError:
            continue
        node = rel + "::" + item.nodeid.split("::", 1)[1] if "::" in item.nodeid else rel
        if rel.startswith("native/") or node.startswith(NEEDS_NATIVE):
            item.add_marker(pytest.mark.native)
        if rel == "integration/test_flamegraph_browser.py":
            item.add_marker(pytest.mark.browser)
        if node.startswith(SLOW) and not (
            node.startswith("integration/test_record_formats.py::") and not node.endswith("-wall]")
        ):
            item.add_marker(pytest.mark.slow)
        if sanitized and node.startswith(NOT_UNDER_SANITIZER):
            deselected.append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if item not in deselected]

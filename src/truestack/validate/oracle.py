"""Drives the C oracle (truestack/_csrc/validate_*.c) around a target run.

Event hooks keep the shadow stacks: `sys.monitoring` on 3.12+, on 3.10/3.11
a C profile function installed per thread (threading.setprofile bootstraps
it in new threads). A collector thread gathers example stacks while the
target runs, so code objects they name are released promptly.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import types
from dataclasses import dataclass
from typing import Any

FAULT_ENV = "TRUESTACK_TEST_WALKER_FAULT"  # "drop" or "swap", optionally ":N" (every Nth walk)
VALIDATION_SIGNAL_OFFSET = 6  # SIGRTMIN + 6: not SIGPROF, which the sampler owns
_TOOL_NAME = "truestack-validate"


class OracleUnavailable(RuntimeError):
    pass


def load_oracle() -> types.ModuleType:
    """The oracle extension (it imports the sampler's walker from truestack._native)."""
    try:
        from .. import _oracle
    except ImportError as exc:
        raise OracleUnavailable(f"the oracle extension is not built ({exc})") from None
    return _oracle


def parse_fault(spec: str | None) -> tuple[str, int]:
    """ "drop", "swap:10" -> (kind, every); "" -> ("", 0). ValueError if malformed."""
    if not spec:
        return "", 0
    kind, _, every = spec.partition(":")
    if kind not in ("drop", "swap"):
        raise ValueError(f"unknown walker fault {spec!r} (expected drop or swap, optionally :N)")
    n = int(every) if every else 20
    if n < 1:
        raise ValueError(f"walker fault interval must be >= 1, got {n}")
    return kind, n


@dataclass
class OracleSettings:
    sync_every: int = 25
    rate_hz: float = 2000.0
    seed: int = 0
    fault: str = ""
    fault_every: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "sync_every": self.sync_every,
            "async_rate_hz": self.rate_hz,
            "seed": self.seed,
            "walker_fault": f"{self.fault}:{self.fault_every}" if self.fault else None,
        }


class _MonitoringHooks:
    """3.12+: one sys.monitoring tool id for the shadow stacks."""

    def __init__(self, oracle: types.ModuleType) -> None:
        self.oracle = oracle
        mon = sys.monitoring  # type: ignore[attr-defined]
        for tool in (mon.PROFILER_ID, 3, 4):
            if mon.get_tool(tool) is None:
                break
        else:
            raise OracleUnavailable("no free sys.monitoring tool id")
        self.tool = tool

    def install(self) -> None:
        mon = sys.monitoring  # type: ignore[attr-defined]
        E = mon.events
        mon.use_tool_id(self.tool, _TOOL_NAME)
        callbacks = {
            E.PY_START: self.oracle.ev_start,
            E.PY_RESUME: self.oracle.ev_resume,
            E.PY_THROW: self.oracle.ev_throw,
            E.PY_RETURN: self.oracle.ev_exit,
            E.PY_YIELD: self.oracle.ev_exit,
            E.PY_UNWIND: self.oracle.ev_exit,
        }
        for event, func in callbacks.items():
            mon.register_callback(self.tool, event, func)
        self.events = tuple(callbacks)
        mask = 0
        for event in callbacks:
            mask |= event
        mon.set_events(self.tool, mask)

    def remove(self) -> None:
        mon = sys.monitoring  # type: ignore[attr-defined]
        mon.set_events(self.tool, 0)
        for event in self.events:
            mon.register_callback(self.tool, event, None)
        mon.free_tool_id(self.tool)


class _ProfileHooks:
    """3.10/3.11: the oracle's C profile function on every threading thread."""

    def __init__(self, oracle: types.ModuleType) -> None:
        self.oracle = oracle

    def install(self) -> None:
        install = self.oracle.install_profile

        def bootstrap(frame: Any, event: str, arg: Any) -> None:
            install()  # replaces this Python hook on the new thread

        threading.setprofile(bootstrap)
        install()

    def remove(self) -> None:
        threading.setprofile(None)  # type: ignore[arg-type, unused-ignore]  # typeshed: 3.10 wants a callable
        sys.setprofile(None)
        # Other threads keep the C function until they end; it returns at
        # once while the oracle is disabled.


class Oracle:
    """Start/stop the layered checks; gather counters and examples."""

    def __init__(self, settings: OracleSettings) -> None:
        self.settings = settings
        self.oracle = load_oracle()
        if settings.fault and not hasattr(self.oracle, "inject_walker_fault"):
            raise OracleUnavailable(
                "walker fault injection needs a test build of truestack (TRUESTACK_TEST_BUILD=1 pip install .)"
            )
        self.hooks = _MonitoringHooks(self.oracle) if sys.version_info >= (3, 12) else _ProfileHooks(self.oracle)
        self.examples: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._collector: threading.Thread | None = None
        self._raw: dict[str, Any] = {}

    def start(self) -> None:
        s = self.settings
        self.oracle.configure(sync_every=s.sync_every)
        if s.fault:
            self.oracle.inject_walker_fault(s.fault, max(s.fault_every, 1))
        self.oracle.enable(True)
        self.hooks.install()
        if s.rate_hz > 0:
            self.oracle.async_start(s.rate_hz, s.seed, int(signal.SIGRTMIN) + VALIDATION_SIGNAL_OFFSET)
        self._collector = threading.Thread(target=self._collect_loop, name="truestack-validate-collector", daemon=True)
        self._collector.start()

    def stop(self) -> dict[str, Any]:
        self.oracle.async_stop()
        self._stop.set()
        if self._collector is not None:
            self._collector.join()
        self.oracle.enable(False)
        self.hooks.remove()
        self._collect()
        return self._raw

    def _collect(self) -> None:
        raw = self.oracle.collect()
        # The C side hands each example over once it has rendered it;
        # synchronous examples are repeated every time, keep the first.
        seen = {(e["layer"], e["kind"]) for e in self.examples}
        for ex in raw.pop("examples"):
            key = (ex["layer"], ex["kind"])
            if key not in seen:
                seen.add(key)
                self.examples.append(ex)
        self._raw = raw

    def _collect_loop(self) -> None:
        while not self._stop.wait(0.05):
            self._collect()


def settings_from(sync_every: int, rate_hz: float, seed: int | None, fault_spec: str | None) -> OracleSettings:
    fault, every = parse_fault(fault_spec if fault_spec is not None else os.environ.get(FAULT_ENV))
    if seed is None:
        seed = int.from_bytes(os.urandom(4), "little") or 1
    return OracleSettings(sync_every=sync_every, rate_hz=rate_hz, seed=seed, fault=fault, fault_every=every)

"""ProfileMeta: how and when a profile was taken, as explicit typed fields.

Every producer (the API session, `record`, a saved file) fills the same
fields and every reader (exporters, the summary) reads them by name. The
saved form is a versioned dict (`to_dict`/`from_dict`); keys this version
does not know are kept in `extra` and written back unchanged, so a file
written by a newer truestack survives a round trip through an older one.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from ..records import Record
from ..samples import SamplerStats
from .processes import ProcessInfo, processes_from_list

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

# 1: the free-form dict of truestack 0.1 (same key names, no "meta_version").
# 2: the same keys, written from ProfileMeta, tagged with "meta_version".
META_VERSION = 2


class ProfileMeta(Record):
    __slots__ = (
        "command",
        "engine",
        "extra",
        "function_level",
        "idle_excluded",
        "include_idle",
        "interrupted",
        "mode",
        "pid",
        "processes",
        "python_version",
        "rate_hz",
        "sampler_stats",
        "start_monotonic_ns",
        "start_time_unix_ns",
        "truestack_version",
    )

    def __init__(
        self,
        command: list[str] | None = None,
        python_version: str = "",
        truestack_version: str = "",
        pid: int = 0,
        mode: str = "cpu",
        rate_hz: float | None = None,
        engine: str = "",
        start_time_unix_ns: int | None = None,
        start_monotonic_ns: int | None = None,
        sampler_stats: SamplerStats | None = None,
        function_level: bool = False,
        include_idle: bool = False,
        idle_excluded: int = 0,
        interrupted: str | None = None,
        extra: dict[str, Any] | None = None,
        processes: list[ProcessInfo] | None = None,
    ) -> None:
        self.command: list[str] = [] if command is None else command  # ["script.py", args…] or ["-m", "mod", args…]
        self.python_version = python_version
        self.truestack_version = truestack_version
        self.pid = pid
        self.mode = mode  # "cpu" | "wall"
        self.rate_hz = rate_hz  # requested sampling rate
        self.engine = engine  # the engine actually used, once sampling started
        self.start_time_unix_ns = time.time_ns() if start_time_unix_ns is None else start_time_unix_ns  # wall clock
        self.start_monotonic_ns = (  # origin of sample times
            time.monotonic_ns() if start_monotonic_ns is None else start_monotonic_ns
        )
        self.sampler_stats = sampler_stats  # what the sampler did; None until it stopped
        self.function_level = function_level  # lines merged: one node per function
        self.include_idle = include_idle  # viewers keep wall-mode idle samples by default
        self.idle_excluded = idle_excluded  # idle samples this view left out
        self.interrupted = interrupted  # why the run ended early, if it did
        self.extra: dict[str, Any] = {} if extra is None else extra  # keys from files this version does not know
        # record --subprocesses: each followed process and its threads; empty: one process, no groups
        self.processes: list[ProcessInfo] = [] if processes is None else processes

    # -- facts read through the stats, with the request as the fallback ------------
    @property
    def engine_used(self) -> str:
        return self.engine or (self.sampler_stats.engine if self.sampler_stats else "") or "?"

    @property
    def mode_used(self) -> str:
        return self.mode or (self.sampler_stats.mode if self.sampler_stats else "") or "?"

    @property
    def requested_rate_hz(self) -> float | None:
        if self.rate_hz is not None:
            return self.rate_hz
        return self.sampler_stats.requested_rate_hz if self.sampler_stats else None

    @property
    def biased(self) -> bool:
        return bool(self.sampler_stats and self.sampler_stats.biased)

    @property
    def partial_counts(self) -> dict[str, int]:
        """Partial (incomplete or suspect) samples by reason; reasons never seen are left out."""
        if self.sampler_stats is None:
            return {}
        return {k: v for k, v in self.sampler_stats.partial.items() if v}

    def copy(self) -> ProfileMeta:
        return ProfileMeta.from_dict(self.to_dict())

    # -- saved form -------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.extra)
        for name in self.__slots__:
            if name == "extra":
                continue
            value = getattr(self, name)
            if name == "sampler_stats":
                value = value.as_dict() if value is not None else None
            elif name == "processes":
                if not value:
                    continue  # saved only when there are groups: other profiles stay byte for byte as before
                value = [info.as_dict() for info in value]
            elif name == "command":
                value = list(value)
            out[name] = value
        out["meta_version"] = META_VERSION
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProfileMeta:
        """Read a saved meta dict (version 1 or 2); raise ValueError when a field has the wrong type."""
        if not isinstance(data, Mapping):
            raise ValueError("profile metadata is not an object")
        known = set(cls.__slots__) - {"extra"}
        meta = cls(extra={k: v for k, v in data.items() if k not in known and k != "meta_version"})
        for name in known & set(data):
            value = data[name]
            if name == "sampler_stats":
                meta.sampler_stats = None if value is None else stats_from_dict(value)
            elif name == "processes":
                meta.processes = processes_from_list(value)
            else:
                setattr(meta, name, _checked(name, value, getattr(meta, name)))
        return meta


_OPTIONAL = {"rate_hz", "interrupted"}


def _checked(name: str, value: Any, default: Any) -> Any:
    """`value` converted to the type of the field's default; ValueError if it cannot be."""
    if value is None and name in _OPTIONAL:
        return None
    if name == "rate_hz":
        return _number(name, value)
    if name == "interrupted":
        return str(value)
    if name == "command":
        if not isinstance(value, list):
            raise ValueError(f"meta.{name} is not a list")
        return [str(v) for v in value]
    if isinstance(default, bool):
        return bool(value)
    if isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"meta.{name} is not a number")
        return int(value)
    if isinstance(default, str):
        return str(value)
    return value


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"meta.{name} is not a number")
    return float(value)


def stats_from_dict(data: Any) -> SamplerStats:
    """The inverse of SamplerStats.as_dict(), tolerant of missing keys."""
    if not isinstance(data, Mapping):
        raise ValueError("meta.sampler_stats is not an object")
    partial = data.get("partial") or {}
    if not isinstance(partial, Mapping):
        partial = {"unknown": partial}
    notes = data.get("notes") or []
    extra = data.get("extra") or {}
    if not isinstance(notes, list) or not isinstance(extra, Mapping):
        raise ValueError("meta.sampler_stats has malformed notes or extra")
    return SamplerStats(
        engine=str(data.get("engine") or ""),
        mode=str(data.get("mode") or ""),
        requested_rate_hz=_number("sampler_stats.requested_rate_hz", data.get("requested_rate_hz") or 0),
        achieved_rate_hz=_number("sampler_stats.achieved_rate_hz", data.get("achieved_rate_hz") or 0),
        samples=int(_number("sampler_stats.samples", data.get("samples") or 0)),
        dropped=int(_number("sampler_stats.dropped", data.get("dropped") or 0)),
        partial={str(k): int(_number("sampler_stats.partial", v)) for k, v in partial.items()},
        duration_s=_number("sampler_stats.duration_s", data.get("duration_s") or 0),
        biased=bool(data.get("biased")),
        timer=str(data.get("timer") or ""),
        notes=[str(n) for n in notes],
        extra=dict(extra),
    )

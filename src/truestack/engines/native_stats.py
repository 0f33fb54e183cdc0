"""What the native core's counters mean for the user: the counters a profile
keeps (`SamplerStats.extra`) and the notes every profile and summary carries
when sampling did not go as asked."""

from __future__ import annotations

import signal
from collections.abc import Callable, Mapping

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Any


def _rate(interval_ns: int) -> str:
    hz = 1e9 / interval_ns if interval_ns > 0 else 0.0
    return f"{hz / 1000:g} kHz" if hz >= 1000 else f"{hz:g} Hz"


_DELTAS = {  # extra key -> core counter, counted since the engine started
    "signals": "signals",
    "late_signals": "late_signals",
    "foreign_signals": "foreign_signals",
    "overruns": "overruns",
    "wall_ticks": "ticks",
    "wall_wakeups": "wakeups",
    "faults_absorbed": "faults_absorbed",
    "abandoned_slots": "abandoned_slots",
    "handler_ns": "handler_ns",
    "handler_reinstalls": "handler_reinstalls",
    "remote_samples": "remote_samples",
    "remote_discarded": "remote_discarded",
    "stale_signals": "stale",  # wall: delivered after a remote walk had taken their time (dropped)
    "rate_lowered": "rate_lowered",
    "timer_fallbacks": "timer_fallbacks",
    "timer_fds_lost": "timer_fds_lost",
    "timer_fds_rearmed": "timer_fds_rearmed",
    "collector_ns": "collector_ns",
    "control_ns": "control_ns",  # the control thread's CPU time: wall ticks, remote walks, budget, ring pages
    "ring_pages_mapped": "ring_pages_mapped",  # mapped by the control thread ahead of the handlers
    "code_deaths": "settle_calls",  # code objects destroyed (the destroy hook ran)
    "code_death_folds": "settle_folds",  # ... whose death folded the ring: a pending sample held the code
}


def core_counters(raw: Mapping[str, Any], delta: Callable[[str], int], names: Mapping[int, str]) -> dict[str, Any]:
    """The core's counters for the profile's `SamplerStats.extra`."""
    return {
        "ring_capacity": raw["ring_capacity"],
        "ring_used": raw["ring_used"],
        **{key: delta(counter) for key, counter in _DELTAS.items()},
        "signal_delivery_ns": raw["delivery_ns"],
        "requested_interval_ns": raw["requested_interval_ns"],
        "effective_interval_ns": raw["interval_ns"],
        "max_interval_ns": raw["max_interval_ns"],
        "unsampled_threads": [names.get(t, f"thread-{t}") for t in raw["unsampled_tids"]],
    }


def sampler_notes(raw: Mapping[str, Any], delta: Callable[[str], int], names: Mapping[int, str]) -> list[str]:
    """Notes on the rate the CPU budget imposed, threads never sampled and samples lost."""
    notes = []
    if delta("rate_lowered"):
        notes.append(
            f"rate lowered to {_rate(raw['max_interval_ns'])} at times to keep sampling under 25 % of the CPU "
            f"({_rate(raw['requested_interval_ns'])} requested; {_rate(raw['interval_ns'])} at the end)"
        )
    unsampled = raw["unsampled_tids"]
    if unsampled:
        shown = _listed([names.get(t, f"thread-{t}") for t in unsampled])
        notes.append(f"{len(unsampled)} threads never sampled (no CPU timer could be armed): {shown}")
    if delta("timer_fallbacks"):
        notes.append(
            f"{delta('timer_fallbacks')} threads sampled by POSIX CPU timers (file descriptors kept in reserve)"
        )
    if delta("timer_fds_lost"):
        notes.append(
            f"the program closed the file descriptors of {delta('timer_fds_lost')} CPU timer(s) (os.closerange?): "
            f"{delta('timer_fds_rearmed')} armed again within 1 s, the CPU time in between is missing"
        )
    if delta("abandoned_slots"):
        notes.append(f"{delta('abandoned_slots')} samples lost: their handler was stalled for over 2 ms")
    return notes


def sigprof_blockers(names: Mapping[int, str]) -> list[str]:
    """The threads of this process, among `names`, that block SIGPROF now (signal.pthread_sigmask):
    their handler never runs, so cpu mode has no sample of them and wall mode only the remote walks
    of their waits. Read from /proc once, when the run has ended (a thread that unblocked it, or
    ended, is not seen)."""
    bit = 1 << (int(signal.SIGPROF) - 1)
    found = []
    for tid, name in names.items():
        try:
            with open(f"/proc/self/task/{tid}/status", "rb") as f:
                blocked = next((line for line in f if line.startswith(b"SigBlk:")), b"SigBlk: 0")
        except OSError:
            continue  # ended
        if int(blocked.split()[1], 16) & bit:
            found.append(name)
    return found


def blocker_note(blockers: list[str]) -> list[str]:
    if not blockers:
        return []
    why = "(signal.pthread_sigmask), so their running time is not sampled"
    return [f"{len(blockers)} thread(s) block SIGPROF {why}: {_listed(blockers)}"]


def _listed(names: list[str], most: int = 10) -> str:
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")

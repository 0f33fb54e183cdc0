"""`--async`: the per-task table (running, awaiting, and what a task awaits most)."""

from __future__ import annotations

from ..light_typing import NamedTuple
from ..samples import is_task_thread
from .profile import STATES, Profile

_AWAITING = STATES.index("awaiting")


class TaskRow(NamedTuple):
    name: str  # the task's thread name: `task:<name> (<coroutine>)`
    running_ns: int
    awaiting_ns: int
    awaiting_on: str  # the awaited thing most of its awaiting time went to ("" if none)


def task_rows(profile: Profile) -> list[TaskRow]:
    """One row per task of the profile, the longest-lived (running + awaiting) first."""
    rows = []
    for thread in profile.threads.values():
        if not is_task_thread(thread.tid):
            continue
        running = awaiting = 0
        on: dict[int, int] = {}
        for stack, weight, state in zip(thread.stack, thread.weight_ns, thread.state, strict=True):
            if state == _AWAITING:
                awaiting += weight
                on[stack] = on.get(stack, 0) + weight
            else:
                running += weight
        rows.append(
            TaskRow(thread.name, running, awaiting, _awaited(profile, max(on, key=on.__getitem__)) if on else "")
        )
    rows.sort(key=lambda r: (-(r.running_ns + r.awaiting_ns), r.name))
    return rows


def _awaited(profile: Profile, stack: int) -> str:
    """`Queue.get → await Future`: the innermost function of an awaiting stack and what it awaits."""
    frames = profile.stack_frames(stack)
    names = [profile.func_name(profile.frame_func(f)) for f in frames[-2:]]
    return " → ".join(names)

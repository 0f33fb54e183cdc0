"""Registers every asyncio task as it is created, at the cost of one call per task.

Every Task, C or Python, announces itself with `asyncio.tasks._register_task`,
which ends in a method call `add(task)` on one WeakSet (`_all_tasks` up to
3.11, `_scheduled_tasks` from 3.12; the C module holds the same object). The
hook is an `add` in that instance's own dict: a method lookup finds it before
the class's. It keeps each new task and its coroutine (strong references, so
neither address can be reused before the collector has seen them) until the
collector takes them; no other behaviour of asyncio changes. Tasks created
eagerly (3.12 `eager_task_factory`) that finish inside `create_task` never
reach that set and are not registered.
"""

from __future__ import annotations

import asyncio
import os
import time
import weakref
from collections.abc import Callable
from typing import Any

NewTask = tuple[Any, Any, int]  # (task, its coroutine, monotonic ns when created)


def _task_set() -> Any:
    for name in ("_scheduled_tasks", "_all_tasks"):
        found = getattr(asyncio.tasks, name, None)
        if found is not None and hasattr(found, "__dict__"):
            return found
    return None


class TaskHook:
    """The tasks created since the last `take()`."""

    def __init__(self) -> None:
        self._new: list[NewTask] = []
        self._set: Any = None
        self._add: Callable[[Any], None] | None = None

    @property
    def installed(self) -> bool:
        return self._add is not None

    def install(self) -> bool:
        """Hook task creation; the tasks alive now are registered too. False where it cannot."""
        if self._add is not None:
            return True
        task_set = _task_set()
        if task_set is None or "add" in vars(task_set):
            return False  # not a set we know, or somebody else's hook: leave it alone
        original = task_set.add
        now = time.monotonic_ns
        append = self._new.append

        def add(task: Any) -> None:
            original(task)
            append((task, task.get_coro(), now()))

        self._set, self._add = task_set, add
        for task in list(task_set):
            self._new.append((task, task.get_coro(), now()))
        task_set.add = add
        _installed.add(self)
        return True

    def uninstall(self) -> None:
        if self._add is not None and vars(self._set).get("add") is self._add:
            del self._set.add
        self._set = self._add = None
        self._new.clear()
        _installed.discard(self)

    def take(self) -> list[NewTask]:
        # Slice-then-delete: each step is atomic under the GIL, so a task
        # appended by the program meanwhile stays for the next take().
        n = len(self._new)
        taken = self._new[:n]
        del self._new[:n]
        return taken


_installed: weakref.WeakSet[TaskHook] = weakref.WeakSet()


def _uninstall_in_forked_child() -> None:
    """A forked child's sampler is inert (sampler.py): nobody would take what the hook keeps."""
    for hook in list(_installed):
        hook.uninstall()


os.register_at_fork(after_in_child=_uninstall_in_forked_child)

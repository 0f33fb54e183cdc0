"""A tracked task as the profile shows it (`TaskInfo`), and the stack prefix of each task's samples
(`Prefixes`): its `task:<name>` root, under the await chain of the task waiting for it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ..samples import Frame, FrameKind

_MAX_NESTING = 64  # parents above a task shown at most (a cycle of waits cannot nest forever)
_SYNTHETIC = FrameKind.TRUNCATED.value  # read once: an enum member's value is a slow property
_NO_ROOT = Frame("", "", 0, 0, _SYNTHETIC)


class TaskInfo:
    __slots__ = (
        "chain",
        "children",
        "code",
        "coro",
        "done",
        "last_ns",
        "last_run_ns",
        "name",
        "owed_ns",
        "ran_ns",
        "root",
        "task",
        "tid",
        "walked_ns",
    )

    def __init__(self, task: Any, coro: Any, created_ns: int) -> None:
        self.tid = 0  # set with its labels, when it first has a sample (most short tasks never do)
        self.task = task
        self.coro = coro
        self.last_ns = created_ns  # its time is accounted for up to here
        self.ran_ns = 0  # running weight since last_ns (wall mode)
        self.last_run_ns = 0  # time of its latest running sample (wall mode)
        self.owed_ns = 0  # awaiting time accounted for but not yet recorded (its chain was empty)
        self.walked_ns = 0  # when its await chain was last walked (0: never)
        self.done = False
        self.name = ""
        self.root = _NO_ROOT
        self.code: tuple[str, int] | None = None
        self.chain: tuple[Frame, ...] = ()
        self.children: tuple[Any, ...] = ()

    def label(self, tids: Iterator[int]) -> TaskInfo:
        """Name it (thread id, thread name, root frame) if not yet done; returns itself."""
        if self.tid:
            return self
        self.tid = next(tids)
        name, coro = self.task.get_name(), self.coro
        code = getattr(coro, "cr_code", None) or getattr(coro, "gi_code", None)
        if code is not None:  # to find its frame in a sample's stack (named as code_frame names it)
            self.code = (getattr(code, "co_qualname", code.co_name), code.co_firstlineno)
        self.name = f"task:{name} ({getattr(coro, '__qualname__', type(coro).__name__)})"
        self.root = tuple.__new__(Frame, (f"task:{name}", "", 0, 0, _SYNTHETIC))  # (a namedtuple's __new__ is slow)
        return self


class Prefixes:
    """Each task's stack prefix: its root frame, under its parent's chain when a parent waits
    for it (computed for the tasks that have samples in this batch only)."""

    def __init__(
        self,
        tids: Iterator[int],
        parents: dict[int, TaskInfo],
        waiter: Callable[[TaskInfo], TaskInfo | None] | None = None,
    ) -> None:
        self._tids = tids
        self._parents = parents  # id of a task -> the task waiting for it (TaskTracker._parents)
        self._waiter = waiter  # else, where no walk linked it: the task waiting for it, or None
        self._known: dict[int, tuple[Frame, ...]] = {}

    def __call__(self, info: TaskInfo, depth: int = 0) -> tuple[Frame, ...]:
        # A parent seen done at this drain still counts: the batch's samples were taken while it
        # waited (it is freed, and its links with it, at the next drain).
        known = self._known.get(id(info))
        if known is not None:
            return known
        up = self._parents.get(id(info.task))
        if up is None and self._waiter is not None:
            up = self._waiter(info)
        own: tuple[Frame, ...] = (info.label(self._tids).root,)
        if up is not None and depth < _MAX_NESTING:
            own = self(up, depth + 1) + up.chain + own
        self._known[id(info)] = own
        return own

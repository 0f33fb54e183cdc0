"""Turns each drained batch into per-task samples (`--async`).

Each task is shown as a thread of its own (a pseudo thread id from
TASK_TID_BASE up, named `task:<name> (<coroutine>)`), so every view that
splits by thread splits by task, and every stack of a task starts with a
synthetic `task:<name>` frame, under its parent's await chain when the
parent waits for it (an awaited Task, `gather`, a `TaskGroup`).

- running: a sample whose outermost coroutine is a registered task's moves
  to that task, its event-loop frames (`run_forever`, `_run_once`,
  `Handle._run`) cut off below the coroutine's frame;
- awaiting (wall mode): at each drain every pending task gets one sample
  with its await chain as the stack, weighing the wall time since the
  previous drain (or its creation) minus what its running samples of that
  interval already weigh, so running + awaiting is the task's lifetime.

A task is kept one drain after it is seen done, so samples of a task that
finished between two drains still find it, and its coroutine's address
cannot be reused meanwhile (the registry holds it).
"""

from __future__ import annotations

import time
from typing import Any

from ..samples import STATE_AWAITING, TASK_TID_BASE, Frame, FrameKind, Sample
from .chain import await_chain, code_frame
from .hook import TaskHook


class _Task:
    __slots__ = (
        "chain",
        "children",
        "code",
        "coro",
        "created_ns",
        "done",
        "last_ns",
        "name",
        "ran_ns",
        "root",
        "task",
        "tid",
    )

    def __init__(self, tid: int, task: Any, coro: Any, created_ns: int) -> None:
        self.tid = tid
        self.task = task
        self.coro = coro
        self.created_ns = self.last_ns = created_ns
        self.ran_ns = 0  # running weight since the last drain
        self.done = 0  # drains since it was seen done
        name = task.get_name()
        code = getattr(coro, "cr_code", None) or getattr(coro, "gi_code", None)
        found = code_frame(code, 0) if code is not None else None
        self.code = (found.name, found.first_line) if found is not None else None  # to find its frame
        qual = getattr(coro, "__qualname__", type(coro).__name__)
        self.name = f"task:{name} ({qual})"
        self.root = Frame(f"task:{name}", "", 0, 0, FrameKind.TRUNCATED.value)
        self.chain: tuple[Frame, ...] = ()
        self.children: tuple[Any, ...] = ()


class TaskTracker:
    """The registry of tasks and the per-batch relabelling; only the collector calls `process`."""

    def __init__(self, wall: bool) -> None:
        self.wall = wall
        self.hook = TaskHook()
        self._by_coro: dict[int, _Task] = {}
        self._next_tid = TASK_TID_BASE
        self.tasks_seen = 0
        self._installed = False

    def start(self) -> bool:
        self._installed = self.hook.install()
        return self._installed

    def stop(self) -> None:
        self.hook.uninstall()

    def notes(self, engine: str) -> list[str]:
        """What the user should know about this run's task labels."""
        notes = []
        if not self._installed:
            notes.append("--async: this Python's asyncio task registry is not the known one: tasks not tracked")
        elif not engine.startswith("native"):
            notes.append(f"--async: the {engine} engine cannot tell which task ran: only awaiting time is per task")
        return notes

    def process(self, batch: list[Sample], now_ns: int | None = None) -> list[Sample]:
        now = time.monotonic_ns() if now_ns is None else now_ns
        self._register()
        pending = self._snapshot()
        prefixes = self._prefixes(pending)
        out: list[Sample] = []
        for sample in batch:
            info = self._by_coro.get(sample.coro) if sample.coro else None
            if info is None:
                out.append(sample)
                continue
            info.ran_ns += sample.weight_ns
            sample.thread_id, sample.thread_name = info.tid, info.name
            sample.frames = prefixes.get(info.tid, (info.root,)) + self._from_coroutine(info, sample.frames)
            out.append(sample)
        if self.wall:
            out.extend(self._awaiting(pending, prefixes, now))
        for info in pending:
            info.ran_ns = 0
        self._forget_done()
        return out

    # -- steps ----------------------------------------------------------
    def _register(self) -> None:
        for task, coro, created in self.hook.take():
            if coro is None or id(coro) in self._by_coro:
                continue
            info = _Task(self._next_tid, task, coro, created)
            self._next_tid += 1
            self.tasks_seen += 1
            self._by_coro[id(coro)] = info

    def _snapshot(self) -> list[_Task]:
        """The tasks still pending, their await chains walked now (the GIL is held)."""
        pending = []
        for info in self._by_coro.values():
            if info.done:
                continue
            if info.task.done():
                info.done = 1
                continue
            chain = await_chain(info.coro)
            # Caught mid-step (the collector took the GIL at a switch interval):
            # what it awaited before this step is what its waiting time was spent on.
            if not (chain.running and info.chain):
                info.chain = chain.frames
            info.children = chain.children
            pending.append(info)
        return pending

    def _prefixes(self, pending: list[_Task]) -> dict[int, tuple[Frame, ...]]:
        """Each task's stack prefix: its root frame under its parent's chain, if a parent waits for it."""
        by_task = {id(info.task): info for info in self._by_coro.values()}
        parent: dict[int, _Task] = {}
        for info in pending:
            for child in info.children:
                found = by_task.get(id(child))
                if found is not None and found is not info:
                    parent.setdefault(found.tid, info)
        prefixes: dict[int, tuple[Frame, ...]] = {}

        def prefix(info: _Task, depth: int = 0) -> tuple[Frame, ...]:
            known = prefixes.get(info.tid)
            if known is not None:
                return known
            up = parent.get(info.tid)
            own: tuple[Frame, ...] = (info.root,)
            if up is not None and depth < 64:
                own = prefix(up, depth + 1) + up.chain + own
            prefixes[info.tid] = own
            return own

        for info in self._by_coro.values():
            prefix(info)
        return prefixes

    @staticmethod
    def _from_coroutine(info: _Task, frames: tuple[Frame, ...]) -> tuple[Frame, ...]:
        """The stack from the task's coroutine up (the event loop's frames below it cut off)."""
        if info.code is not None:
            name, first = info.code
            for i, frame in enumerate(frames):
                if frame.first_line == first and frame.name == name:
                    return frames[i:]
        return frames

    def _awaiting(self, pending: list[_Task], prefixes: dict[int, tuple[Frame, ...]], now: int) -> list[Sample]:
        out = []
        for info in pending:
            weight = now - info.last_ns - info.ran_ns
            info.last_ns = now
            if weight <= 0:
                continue
            out.append(
                Sample(
                    thread_id=info.tid,
                    thread_name=info.name,
                    time_ns=now,
                    weight_ns=weight,
                    frames=prefixes.get(info.tid, (info.root,)) + info.chain,
                    state=STATE_AWAITING,
                    depth=len(info.chain),
                )
            )
        return out

    def _forget_done(self) -> None:
        # Seen done at an earlier drain: every sample of it has been drained since.
        gone = [key for key, info in self._by_coro.items() if info.done > 1]
        for key in gone:
            del self._by_coro[key]
        for info in self._by_coro.values():
            if info.done:
                info.done += 1

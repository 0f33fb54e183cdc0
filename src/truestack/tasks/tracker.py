"""Turns each drained batch into per-task samples (`--async`).

Each task is shown as a thread of its own (a pseudo thread id from
TASK_TID_BASE up, named `task:<name> (<coroutine>)`), so every view that
splits by thread splits by task, and every stack of a task starts with a
synthetic `task:<name>` frame, under its parent's await chain when the
parent waits for it (an awaited Task, `gather`, a `TaskGroup`). Wall mode
finds parents by walking their await chains; cpu mode, which has no other
use for walks, from the done-callbacks of the tasks sampled (`waiters.py`).

- running: a sample whose outermost coroutine is a registered task's moves
  to that task, its event-loop frames (`run_forever`, `_run_once`,
  `Handle._run`) cut off below the coroutine's frame, its state `running`
  (a task blocking the loop in a sync call is what an asyncio user looks for:
  it must not go with the idle samples);
- awaiting (wall mode): each time a pending task's await chain is walked
  (at a drain, within the walk budget) it gets one sample with that chain
  as the stack, weighing the wall time since it was last settled (its
  previous walk, or its creation) minus what its running samples of that
  time already weigh, so running + awaiting is the task's lifetime; a task
  seen done gets the same up to its latest running sample (it ended in a
  running step, within one interval of it).

A task with samples is kept one drain after it is seen done, so its samples
that reach the next drain still find it, and its coroutine's address cannot
be reused meanwhile (the registry holds it). One without (most short tasks)
is let go by the drain that sees it done, with no bookkeeping for it; a late
sample then finds no task, or one created after it, and stays unlabelled
(`_sampled_fresh`). Tasks pending for long are seen done late (`aging.py`).
"""

from __future__ import annotations

import itertools
import os
import time
from typing import Any

from ..samples import STATE_AWAITING, STATE_RUNNING, TASK_TID_BASE, Frame, Sample
from .aging import AgedIndex, drop_known
from .chain import await_chain
from .hook import NewTask, TaskHook
from .labels import Prefixes, TaskInfo
from .waiters import is_task, waiter_of

_WALK_BUDGET_S = 0.0005  # await-chain walks per drain stop after this long (GIL held) ...
_WALKS_MIN = 32  # ... once this many tasks are walked


_WALK_CANDIDATES = 256  # of each kind, looked at per drain for walks at most (the budget ends sooner)


class TaskTracker:
    """The registry of tasks and the per-batch relabelling; only the collector calls `process`."""

    def __init__(self, wall: bool) -> None:
        self.wall = wall
        self.hook = TaskHook()
        # Both by coroutine id. A task is kept as the hook gave it (`_fresh`) until it has a
        # sample or is walked; most short tasks never are. Then it becomes a TaskInfo. Those
        # seen done leave `_fresh` at once; this drain's samples still find them (get_swept).
        self._fresh: AgedIndex[NewTask] = AgedIndex()
        self._by_coro: dict[int, TaskInfo] = {}
        self._pending: AgedIndex[tuple[Any, TaskInfo]] = AgedIndex()  # (task, its TaskInfo) not seen done: checks
        # Wall mode: the pending TaskInfos never walked, then the others, walked longest ago first.
        self._unwalked: dict[int, TaskInfo] = {}
        self._walk_order: dict[int, TaskInfo] = {}
        # id of a task -> the task waiting for it (awaited, gather, TaskGroup), from _set_children. An
        # entry lives only while its parent's `children` holds that task: the id cannot be reused meanwhile.
        self._parents: dict[int, TaskInfo] = {}
        # Unique across the processes of one profile (record --subprocesses merges them by id).
        self._tids = itertools.count(TASK_TID_BASE + (os.getpid() << 24))
        self._waiters: dict[int, tuple[Any, Any]] = {}  # cpu mode, this drain: waiter_of's memo
        self._waiting_tasks: dict[int, TaskInfo] = {}  # cpu mode: the tasks _waiter found, by coroutine id
        self._done: list[int] = []  # coroutine ids of the tasks seen done at this drain ...
        self._done_before: list[int] = []  # ... and at the previous one: forgotten after this one
        self.tasks_seen = 0
        self.cpu_ns = 0  # the collector's CPU time in process(): what --async costs, GIL held ...
        self.free_ns = 0  # ... of which freeing finished tasks, which the program would otherwise do itself
        self._installed = False
        self._drain_ns = 0

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
        if self._installed:
            notes.append(
                f"--async: {self.tasks_seen:,} tasks tracked; the collector spent {self.cpu_ns / 1e6:.1f} ms "
                f"CPU on them (GIL held), {self.free_ns / 1e6:.1f} ms of it freeing finished tasks "
                "(their deallocation, moved from the program)"
            )
        return notes

    def process(self, batch: list[Sample], now_ns: int | None = None) -> list[Sample]:
        started = time.thread_time_ns()
        try:
            return self._process(batch, now_ns)
        finally:
            self.cpu_ns += time.thread_time_ns() - started

    def _process(self, batch: list[Sample], now_ns: int | None) -> list[Sample]:
        now = time.monotonic_ns() if now_ns is None else now_ns
        self._drain_ns = now
        self._register()
        walked = self._snapshot()
        prefix = Prefixes(self._tids, self._parents, None if self.wall else self._waiter)
        out: list[Sample] = []
        by_coro = self._by_coro
        # The engine gives the samples of one stack the same tuple: its cut is found once per
        # drain. (The entry holds the tuple, so its id is not reused meanwhile.)
        cuts: dict[tuple[int, tuple[str, int] | None], tuple[tuple[Frame, ...], tuple[Frame, ...]]] = {}
        for sample in batch:
            info = (by_coro.get(sample.coro) or self._sampled_fresh(sample)) if sample.coro else None
            if info is None:
                out.append(sample)
                continue
            if self.wall:
                info.ran_ns += sample.weight_ns
                if sample.time_ns > info.last_run_ns:
                    info.last_run_ns = sample.time_ns
            frames = prefix(info)  # labels it
            sample.thread_id, sample.thread_name = info.tid, info.name
            # Holding the loop is running from the task's side, even blocked in a sync call
            # (time.sleep, blocking I/O): exactly what must not be left out with the idle samples.
            sample.state = STATE_RUNNING
            cut = cuts.get((id(sample.frames), info.code))
            if cut is None:
                cut = cuts[id(sample.frames), info.code] = (sample.frames, self._from_coroutine(info, sample.frames))
            sample.frames = frames + cut[1]
            sample.parts = (frames, cut[1])
            out.append(sample)
        if self.wall:
            out.extend(self._awaiting(walked, prefix, now))
            out.extend(self._last_awaits(prefix))
        # Seen done at the previous drain: every sample of it has been drained since.
        # Dropping the last reference frees the task and its coroutine here: the
        # program's own cost, moved to the collector, counted apart (free_ns).
        freeing = time.thread_time_ns()
        for key in self._done_before:
            info = by_coro.pop(key)
            for kept in (self._waiting_tasks, self._unwalked, self._walk_order):
                kept.pop(key, None)
            if info.children:
                self._set_children(info, ())
        self._fresh.forget_swept()
        self._waiters.clear()
        self.free_ns += time.thread_time_ns() - freeing
        self._done_before, self._done = self._done, []
        return out

    # -- steps ----------------------------------------------------------
    def _register(self) -> None:
        # Thousands per second in a busy service: dict and set operations, not a loop per task.
        # A task registered twice (its coroutine already known) keeps its first entry.
        taken = self.hook.take()
        new = {id(entry[1]): entry for entry in taken}
        if len(new) < len(taken) or id(None) in new:  # a task registered twice, or without a coroutine
            new = {}
            for entry in taken:
                if entry[1] is not None:
                    new.setdefault(id(entry[1]), entry)
        self._fresh.drop_known(new)
        drop_known(new, self._by_coro)
        self._fresh.add(new)
        self.tasks_seen += len(new)

    def _materialise(self, key: int, new: NewTask, done: bool = False) -> TaskInfo:
        info = self._by_coro[key] = TaskInfo(*new)
        if done:
            self._mark_done(key, info)
        else:
            self._pending.add_one(key, (info.task, info))
            if self.wall:
                self._unwalked[key] = info
        return info

    def _sampled_fresh(self, sample: Sample) -> TaskInfo | None:
        """The task a sample's coroutine id names, if it is known but not yet a TaskInfo.

        A task that ended unsampled is let go at the drain that sees it done, not one drain
        later as a TaskInfo is. A sample of it that only reaches the next drain (taken before the
        task ended, its slot published after this drain read the ring: rare, it needs another
        thread's handler to be mid-sample) finds no task, or a newer one at the same address,
        created after the sample was taken: it is then left unlabelled, never mislabelled."""
        key = sample.coro
        new = self._fresh.get(key)
        done = False
        if new is None:
            new = self._fresh.get_swept(key)
            if new is None:
                return None
            done = True
        if new[2] > sample.time_ns:  # created after the sample: that was a task let go before
            return None
        if not done:
            self._fresh.pop(key)
        return self._materialise(key, new, done)

    def _snapshot(self) -> list[TaskInfo]:
        """Sees which tasks are done; in wall mode, walks the await chains of pending tasks, within
        the budget: those never walked and those walked longest ago in turn. Returns the tasks walked.

        A walk costs ~10 µs per task with the GIL held: with thousands of tasks
        pending, walking all at every drain would stall the program. A task's
        time is settled when it is walked (`_awaiting`): one not walked this
        time records it at its next walk."""
        self._fresh.sweep(returns_done=False)
        for key, (_, info) in self._pending.sweep():
            if not info.done and self._by_coro.get(key) is info:
                self._mark_done(key, info)
        if not self.wall:  # no awaiting time: only the tasks known to wait for others are walked
            return self._walk_parents()
        # Turn about: one never walked (the fresh, oldest first), one walked longest ago. A service
        # creates new tasks at every drain; they must not take every walk from its long-lived ones.
        # Taken from the front of each (a drain walks a few dozen of thousands).
        infos = itertools.chain(self._unwalked.values(), self._walk_order.values())
        fresh = itertools.islice(self._fresh, _WALK_CANDIDATES)
        turns = itertools.zip_longest(list(fresh), list(itertools.islice(infos, _WALK_CANDIDATES)))
        deadline = time.perf_counter() + _WALK_BUDGET_S
        walked = []
        for i, candidate in enumerate(c for pair in turns for c in pair if c is not None):
            if i >= _WALKS_MIN and (i & 15) == 0 and time.perf_counter() > deadline:
                break
            walkable = self._walkable(candidate)
            if walkable is not None:
                walked.append(walkable)
                self._walk(walkable)
        return walked

    def _mark_done(self, key: int, info: TaskInfo) -> None:
        info.done = True
        self._done.append(key)  # forgotten at the next drain (`_done_before`)

    def _is_done(self, key: int, info: TaskInfo) -> bool:
        """Is the task done now? (`info.done` may not say it yet: `_pending` checks old tasks seldom.)"""
        if not info.done and info.task.done():
            self._mark_done(key, info)
            self._pending.pop(key)  # (its check would let it go only up to 64 drains later)
        return info.done

    def _walkable(self, candidate: int | TaskInfo) -> TaskInfo | None:
        """The candidate's TaskInfo, moved to the end of the walk order; None if it is done
        (a generation not checked at this drain may hold done tasks: a done coroutine has no chain)."""
        if isinstance(candidate, TaskInfo):
            info, key = candidate, id(candidate.coro)
            if self._is_done(key, info):
                self._unwalked.pop(key, None)
                self._walk_order.pop(key, None)
                return None
            if self._unwalked.pop(key, None) is None:
                self._walk_order.pop(key, None)
        else:
            new = self._fresh.get(candidate)
            if new is None or new[0].done():
                return None
            self._fresh.pop(candidate)
            key, info = candidate, self._materialise(candidate, new)
            del self._unwalked[key]
        self._walk_order[key] = info
        return info

    def _walk(self, info: TaskInfo) -> None:
        chain = await_chain(info.coro)
        # Caught mid-step (the collector took the GIL at a switch interval):
        # what it awaited before this step is what its waiting time was spent on.
        if not (chain.running and info.chain):
            info.chain = chain.frames
        info.walked_ns = self._drain_ns
        if chain.children != info.children:
            dropped = self._set_children(info, chain.children)
            freeing = time.thread_time_ns()
            # Often the tasks of a gather that is over, whose last reference this was: their
            # deallocation, moved from the program, as at the end of `process`.
            del dropped
            self.free_ns += time.thread_time_ns() - freeing

    def _walk_parents(self) -> list[TaskInfo]:
        """Cpu mode: walks the tasks found waiting for a sampled task (`_waiter`) again, at every
        drain while they are pending, to link the children they wait for now: a child sampled
        and finished before a drain has no callbacks left to name its parent."""
        walked = []
        for key, up in list(self._waiting_tasks.items()):
            if self._is_done(key, up):
                del self._waiting_tasks[key]
            else:
                self._walk(up)
                walked.append(up)
        return walked

    def _waiter(self, info: TaskInfo) -> TaskInfo | None:
        """Cpu mode, for a task no walk linked: the task waiting for it, from its done-callbacks
        (`waiters.py`), walked at this drain for the await chain its children show under."""
        task = waiter_of(info.task, self._waiters)
        if task is None or task.done():
            return None
        key = id(task.get_coro())
        up = self._by_coro.get(key)
        if up is None:
            new = self._fresh.get(key)
            if new is None or new[0] is not task:  # not registered (created before the hook, eagerly)
                return None
            self._fresh.pop(key)
            up = self._materialise(key, new)
        if up.walked_ns != self._drain_ns:
            self._walk(up)
        self._waiting_tasks[key] = up
        return up

    def _set_children(self, parent: TaskInfo, children: tuple[Any, ...]) -> tuple[Any, ...]:
        """`children` (walked just now) show under `parent` from now on, instead of those it had
        (`Prefixes` reads the relation), which it returns. A gather has thousands, most never made
        _Tasks: the relation is kept by task, whatever has become of each, the new ones in one dict update."""
        parents, before = self._parents, parent.children
        if before:
            keys = list(map(id, before))
            for key in [key for key, up in zip(keys, map(parents.get, keys), strict=True) if up is parent]:
                del parents[key]
        parent.children = children
        # Tasks only (a gather may hold plain futures), and never the parent itself.
        if all(map(is_task, set(map(type, children)))):
            linked = dict.fromkeys(map(id, children), parent)
        else:
            linked = dict.fromkeys((id(child) for child in children if is_task(child)), parent)
        linked.pop(id(parent.task), None)
        parents.update(linked)
        return before

    @staticmethod
    def _from_coroutine(info: TaskInfo, frames: tuple[Frame, ...]) -> tuple[Frame, ...]:
        """The stack from the task's coroutine up (the event loop's frames below it cut off)."""
        if info.code is not None:
            name, first = info.code
            for i, frame in enumerate(frames):
                if frame.first_line == first and frame.name == name:
                    return frames[i:]
        return frames

    def _awaiting(self, walked: list[TaskInfo], prefix: Prefixes, now: int) -> list[Sample]:
        """The tasks walked at this drain: their awaiting time since they were last settled.

        Only a walk can say what a task awaited, so a task's time is settled when it is
        walked (or seen done), not at every drain: with thousands pending, a drain touches
        only the few it walks."""
        out = []
        for info in walked:
            info.owed_ns = max(info.owed_ns + now - info.last_ns - info.ran_ns, 0)
            info.last_ns, info.ran_ns = now, 0
            if info.owed_ns and info.chain:
                out.append(self._awaiting_sample(info, prefix, now))
        return out

    def _last_awaits(self, prefix: Prefixes) -> list[Sample]:
        """The tasks seen done at this drain: their awaiting time after the previous drain.

        A task ends in a running step, so its latest running sample is within one sampling
        interval of its end: its time from the previous drain up to that sample, less what it
        ran, was spent awaiting what its chain last showed. (A task whose final step was too
        short to be sampled keeps only the awaiting time up to its previous running sample.)"""
        out = []
        for key in self._done:
            info = self._by_coro[key]
            if info.last_run_ns <= info.last_ns or not info.chain:
                continue
            info.owed_ns = max(info.owed_ns + info.last_run_ns - info.last_ns - info.ran_ns, 0)
            info.last_ns = info.last_run_ns
            if info.owed_ns:
                out.append(self._awaiting_sample(info, prefix, info.last_run_ns))
        return out

    @staticmethod
    def _awaiting_sample(info: TaskInfo, prefix: Prefixes, at_ns: int) -> Sample:
        weight, info.owed_ns = info.owed_ns, 0
        frames = prefix(info) + info.chain  # labels it: before its thread id is read
        return Sample(
            thread_id=info.tid,
            thread_name=info.name,
            time_ns=at_ns,
            weight_ns=weight,
            frames=frames,
            state=STATE_AWAITING,
            depth=len(info.chain),
        )

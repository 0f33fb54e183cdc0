"""Which task waits for a given task, read from the task's done-callbacks (cpu mode's parent links).

Each way for one task to wait for another leaves its mark in the awaited one's
done-callbacks, the same from 3.10 to 3.13, for C and Python tasks alike:
- `await task`: the waiting task's `task_wakeup` (bound to that task);
- `gather(...)` (and `shield`, `wait`): a closure over the future that the
  waiting task awaits, whose callbacks hold that task's `task_wakeup` in turn;
- `TaskGroup.create_task`: the group's `_on_task_done`; the group knows its `_parent_task`.

Wall mode walks every pending task's await chain anyway (its awaiting time) and
links children from the parent's side. Cpu mode records no awaiting time: its
walks only found parents, and in a program of short tasks they were most of
the tracker's time. Reading the callbacks of the tasks that have samples finds
their parents without walking any other task.
"""

from __future__ import annotations

from typing import Any

_MAX_HOPS = 8  # futures between a task and the task waiting for it (a gather in a shield, ...)


def is_task(obj: Any) -> bool:
    return hasattr(obj, "get_coro")


def waiter_of(future: Any, memo: dict[int, tuple[Any, Any]], hops: int = 0) -> Any | None:
    """The task waiting for `future` (a task or another future), or None.

    `memo` (id of a future -> (that future, its waiter)) spares the children of one gather
    looking up the same waiter each; it holds the future, so its id is not reused meanwhile."""
    found = memo.get(id(future))
    if found is not None:
        return found[1]
    waiter = _from_callbacks(future, memo, hops)
    memo[id(future)] = (future, waiter)
    return waiter


def _from_callbacks(future: Any, memo: dict[int, tuple[Any, Any]], hops: int) -> Any | None:
    try:
        callbacks = future._callbacks  # a copy, from a C future: safe to iterate under the GIL
    except AttributeError:
        return None
    for callback, _context in callbacks or ():
        owner = getattr(callback, "__self__", None)
        if owner is not None:
            if is_task(owner):
                return owner
            parent = getattr(owner, "_parent_task", None)  # a TaskGroup's
            if parent is not None and is_task(parent):
                return parent
            continue
        if hops >= _MAX_HOPS:
            continue
        for cell in getattr(callback, "__closure__", None) or ():
            try:
                value = cell.cell_contents
            except ValueError:  # a cell not yet filled
                continue
            if value is not future and hasattr(value, "_callbacks") and hasattr(value, "add_done_callback"):
                waiter = waiter_of(value, memo, hops + 1)
                if waiter is not None:
                    return waiter
    return None

"""`--async`: asyncio tasks as the unit of a profile.

Running time: the signal handler records the outermost coroutine of every
sample's stack (the coroutine of the task being stepped); `hook` registers
every task as it is created so the collector maps that coroutine to its
task. Waiting time: at each drain the collector walks every pending task's
await chain (`chain`) and records it as an `awaiting` sample. `tracker`
does both to each batch of samples; `labels` names the tasks and builds the
stack prefix that nests a task under the task waiting for it (`waiters`
finds that one from callbacks in cpu mode).
"""

from __future__ import annotations

from .chain import AwaitChain, await_chain
from .tracker import TaskTracker

__all__ = ["AwaitChain", "TaskTracker", "await_chain"]

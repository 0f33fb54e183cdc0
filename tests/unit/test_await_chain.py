"""The await-chain walker of `--async` (truestack.tasks.chain) on real suspended tasks."""
from __future__ import annotations

import asyncio
import sys

import pytest

from truestack.tasks import await_chain
from truestack.tasks.hook import TaskHook


def names(chain) -> list[str]:
    return [f.name for f in chain.frames]


def run_and_inspect(main, inspect):
    """Run `main()` until every task it starts is suspended, then call inspect(tasks) and cancel them."""

    async def driver():
        tasks = main()
        for _ in range(5):
            await asyncio.sleep(0)
        try:
            return inspect(tasks)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    return asyncio.run(driver())


def test_queue_get_chain_ends_at_the_future_it_waits_on():
    async def consumer(q):
        await q.get()

    def main():
        return [asyncio.ensure_future(consumer(asyncio.Queue()))]

    chain = run_and_inspect(main, lambda ts: await_chain(ts[0].get_coro()))
    assert names(chain) == ["test_queue_get_chain_ends_at_the_future_it_waits_on.<locals>.consumer"
                            if sys.version_info >= (3, 11) else "consumer", "Queue.get"
                            if sys.version_info >= (3, 11) else "get", "await Future"]
    assert isinstance(chain.awaited, asyncio.Future) and not chain.running
    assert chain.frames[0].line > 0 and chain.frames[-1].kind == "truncated"


def test_awaited_task_is_a_child_and_named():
    async def leaf():
        await asyncio.sleep(10)

    async def parent():
        await asyncio.create_task(leaf(), name="the-leaf")

    def main():
        return [asyncio.ensure_future(parent())]

    def inspect(ts):
        chain = await_chain(ts[0].get_coro())
        assert chain.frames[-1].name == "await task:the-leaf"
        [child] = chain.children
        assert child.get_name() == "the-leaf"
        inner = await_chain(child.get_coro())
        assert names(inner)[-2:] == ["sleep", "await Future"]

    run_and_inspect(main, inspect)


def test_gather_children_are_found():
    async def child():
        await asyncio.sleep(10)

    async def parent():
        await asyncio.gather(child(), child())

    def main():
        return [asyncio.ensure_future(parent())]

    def inspect(ts):
        chain = await_chain(ts[0].get_coro())
        assert chain.frames[-1].name == "await gather"
        assert len(chain.children) == 2 and all(hasattr(c, "get_coro") for c in chain.children)

    run_and_inspect(main, inspect)


def test_a_shielded_task_is_a_child():
    async def child():
        await asyncio.sleep(10)

    async def parent(inner):
        await asyncio.shield(inner)

    def main():
        inner = asyncio.ensure_future(child())
        return [asyncio.ensure_future(parent(inner)), inner]

    def inspect(ts):
        chain = await_chain(ts[0].get_coro())
        assert chain.frames[-1].name == "await shield"
        assert chain.children == (ts[1],)

    run_and_inspect(main, inspect)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="asyncio.TaskGroup is new in 3.11")
def test_task_group_children_are_found():
    async def child():
        await asyncio.sleep(10)

    async def parent():
        async with asyncio.TaskGroup() as tg:
            tg.create_task(child())
            tg.create_task(child())

    def main():
        return [asyncio.ensure_future(parent())]

    def inspect(ts):
        chain = await_chain(ts[0].get_coro())
        assert len(chain.children) == 2, names(chain)

    run_and_inspect(main, inspect)


def test_a_task_after_sleep_zero_is_ready_to_run():
    async def yielder():
        while True:
            await asyncio.sleep(0)

    def main():
        return [asyncio.ensure_future(yielder())]

    chain = run_and_inspect(main, lambda ts: await_chain(ts[0].get_coro()))
    assert chain.frames[-1].name == "await (ready to run)"


def test_the_running_task_says_so():
    async def me():
        return await_chain(asyncio.current_task().get_coro())

    chain = asyncio.run(me())
    assert chain.running and chain.frames[-1].name == "await (running)"


def test_hook_sees_every_task_and_uninstalls_cleanly():
    import time

    hook = TaskHook()
    assert hook.install()

    async def noop():
        pass

    async def main():
        await asyncio.gather(*(asyncio.create_task(noop()) for _ in range(20)))

    try:
        before = time.monotonic_ns()
        asyncio.run(main())
        after = time.monotonic_ns()
        taken = hook.take()
    finally:
        hook.uninstall()
    assert len(taken) >= 21  # the 20 and main's own task
    assert all(coro is task.get_coro() or task.get_coro() is None for task, coro, _ in taken)
    ours = [(task, created) for task, coro, created in taken if "uninstalls_cleanly" in coro.__qualname__]
    assert len(ours) == 21 and len({id(task) for task, _ in ours}) == 21
    assert all(before <= created <= after for _, created in ours)  # time.monotonic_ns's clock
    assert hook.take() == []
    asyncio.run(main())
    assert hook.take() == []  # uninstalled: nothing more recorded


def test_hook_is_gone_in_a_forked_child():
    import os

    from truestack.tasks.hook import _task_set

    hook = TaskHook()
    assert hook.install()
    try:
        pid = os.fork()
        if pid == 0:  # the child: nobody drains the hook there, so it must not keep tasks
            os._exit(0 if "add" not in vars(_task_set()) and not hook.installed else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert "add" in vars(_task_set())  # still hooked in the parent
    finally:
        hook.uninstall()
    assert "add" not in vars(_task_set())


def _finished_tasks(tracker, n: int):
    """Run n tasks to completion under the tracker's hook; weak references to them and their coroutines."""
    import weakref

    async def noop():
        pass

    async def main():
        await asyncio.gather(*(asyncio.create_task(noop()) for _ in range(n)))

    asyncio.run(main())
    return [(weakref.ref(task), coro) for task, coro, _ in tracker.hook._new if "_finished_tasks" in coro.__qualname__]


def _running_sample(coro_id: int, time_ns: int):
    from truestack.samples import Frame, Sample

    return Sample(1, "MainThread", time_ns, 1_000_000, (Frame("noop", "x.py", 2, 1),), coro=coro_id)


def test_tracker_lets_go_of_unsampled_finished_tasks_at_once_and_counts_freeing_apart():
    # A task that ended without a sample is let go by the drain that sees it done:
    # that drain pays its deallocation, which the program would pay without
    # --async, counted apart (free_ns) and said in the note.
    from truestack.tasks import TaskTracker

    tracker = TaskTracker(wall=True)
    assert tracker.start()
    try:
        tasks = _finished_tasks(tracker, 200)
        refs = [ref for ref, _ in tasks]
        del tasks
        assert len(refs) == 201  # and main's own task
        tracker.process([])  # registers them, sees them done, lets go of them
        assert tracker.tasks_seen >= 201
    finally:
        tracker.stop()
    assert all(ref() is None for ref in refs)
    assert 0 < tracker.free_ns <= tracker.cpu_ns
    note = next(n for n in tracker.notes("native-wall") if "tasks tracked" in n)
    assert "freeing finished tasks" in note and f"{tracker.free_ns / 1e6:.1f} ms of it" in note


def test_tracker_keeps_a_sampled_finished_task_one_drain_for_its_late_samples():
    import time

    from truestack.tasks import TaskTracker

    tracker = TaskTracker(wall=False)
    assert tracker.start()
    try:
        tasks = _finished_tasks(tracker, 3)
        (ref, coro), others = tasks[0], tasks[1:]
        key = id(coro)
        del tasks, coro
        now = time.monotonic_ns()
        first = tracker.process([_running_sample(key, now)])  # seen done, and sampled
        late = tracker.process([_running_sample(key, now)])  # a sample published after that drain read
        assert first[0].thread_name.startswith("task:") and late[0].thread_name == first[0].thread_name
        assert ref() is None  # ... and let go once that drain is over
        assert all(other() is None for other, _ in others)  # unsampled: let go by the first drain
    finally:
        tracker.stop()


def test_tracker_never_labels_a_sample_with_a_task_created_after_it():
    # A coroutine address can be reused once an unsampled task is let go: a late
    # sample of the old task must not take the name of the new one.
    import time

    from truestack.tasks import TaskTracker

    tracker = TaskTracker(wall=False)
    assert tracker.start()
    try:
        before = time.monotonic_ns()
        tasks = _finished_tasks(tracker, 1)
        key = id(tasks[0][1])
        out = tracker.process([_running_sample(key, before)])
        assert out[0].thread_name == "MainThread"  # older than the task registered at that address
    finally:
        tracker.stop()


def test_a_long_lived_task_is_still_walked_while_new_tasks_keep_coming(monkeypatch):
    # A service: a connection handler pending for the whole run, and more new tasks at every
    # drain than the walk budget covers. The new ones must not take every walk: the long-lived
    # task's chain (and so its awaiting time) is walked again and again, not only at its first drain.
    from truestack.tasks import TaskTracker
    from truestack.tasks import tracker as tracker_module

    monkeypatch.setattr(tracker_module, "_WALK_BUDGET_S", 0.0)  # _WALKS_MIN walks per drain, no more
    tracker = TaskTracker(wall=True)
    assert tracker.start()
    walks = []

    async def main():
        stop = asyncio.Event()

        async def waiter():
            await stop.wait()

        handler = asyncio.create_task(waiter(), name="handler")
        await asyncio.sleep(0)
        tracker.process([])
        key = id(handler.get_coro())
        more = []
        for _ in range(6):
            more += [asyncio.create_task(waiter()) for _ in range(3 * tracker_module._WALKS_MIN)]
            await asyncio.sleep(0)
            tracker.process([])
            walks.append(tracker._by_coro[key].walked_ns)
        stop.set()
        await asyncio.gather(handler, *more)

    try:
        asyncio.run(main())
    finally:
        tracker.stop()
    assert len(set(walks)) >= 3, walks  # walked at several of the six drains


@pytest.mark.parametrize("wall", [True, False], ids=["wall", "cpu"])
def test_children_of_every_gather_show_under_their_parent(monkeypatch, wall):
    # One parent gathers batch after batch of children, more per batch than a drain walks: each
    # batch's children must come under the parent, not only the first batch's. (The drains run
    # in another task here, as the collector's run in another thread: the parent is suspended.)
    # Wall mode links them by walking the parent; cpu mode from the sampled child's callbacks.
    import time

    from truestack.samples import Frame, Sample
    from truestack.tasks import TaskTracker
    from truestack.tasks import tracker as tracker_module

    monkeypatch.setattr(tracker_module, "_WALK_BUDGET_S", 0.0)
    tracker = TaskTracker(wall=wall)
    assert tracker.start()
    batches: asyncio.Queue = None  # type: ignore[assignment]
    roots = []

    async def child(release):
        await release.wait()

    async def parent():
        for _ in range(3):
            release = asyncio.Event()
            batch = [asyncio.create_task(child(release)) for _ in range(3 * tracker_module._WALKS_MIN)]
            await batches.put((batch, release))
            await asyncio.gather(*batch)

    async def main():
        nonlocal batches
        batches = asyncio.Queue()
        gatherer = asyncio.create_task(parent(), name="parent")
        for _ in range(3):
            batch, release = await batches.get()
            await asyncio.sleep(0)
            for _ in range(4):
                tracker.process([])
            last = batch[-1]  # never walked: the batch is larger than four drains' walks
            sample = Sample(1, "MainThread", time.monotonic_ns(), 1, (Frame("child", "x.py", 1, 1),),
                            coro=id(last.get_coro()))
            roots.append(tracker.process([sample])[0].frames[0].name)
            # Only the current batch is under the parent: the links of the last one went with it.
            assert set(tracker._parents) <= {id(task) for task in batch}
            release.set()
        await gatherer
        for _ in range(3):
            tracker.process([])
        assert not tracker._parents  # the parent, done and let go, took its links with it

    try:
        asyncio.run(main())
    finally:
        tracker.stop()
    assert roots == ["task:parent"] * 3, roots

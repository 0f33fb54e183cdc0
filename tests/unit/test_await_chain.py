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
    hook = TaskHook()
    assert hook.install()

    async def noop():
        pass

    async def main():
        await asyncio.gather(*(asyncio.create_task(noop()) for _ in range(20)))

    try:
        asyncio.run(main())
        taken = hook.take()
    finally:
        hook.uninstall()
    assert len(taken) >= 21  # the 20 and main's own task
    assert all(coro is task.get_coro() or task.get_coro() is None for task, coro, _ in taken)
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


def test_tracker_counts_freeing_finished_tasks_apart():
    # The tracker holds each task until one drain after it is seen done; the
    # drain that lets go of it pays its deallocation, which the program would
    # pay without --async: counted apart (free_ns) and said in the note.
    import weakref

    from truestack.tasks import TaskTracker

    tracker = TaskTracker(wall=True)
    assert tracker.start()

    async def noop():
        pass

    async def main():
        await asyncio.gather(*(asyncio.create_task(noop()) for _ in range(200)))

    try:
        asyncio.run(main())
        tasks = [weakref.ref(task) for task, coro, _ in tracker.hook._new if "counts_freeing" in coro.__qualname__]
        assert len(tasks) == 201
        tracker.process([])  # registers them, sees them done
        assert tracker.tasks_seen >= 201
        assert any(ref() is not None for ref in tasks)  # kept one drain after done
        tracker.process([])  # lets go of them: freed here
        tracker.process([])
    finally:
        tracker.stop()
    assert all(ref() is None for ref in tasks)
    assert 0 < tracker.free_ns <= tracker.cpu_ns
    note = next(n for n in tracker.notes("native-wall") if "tasks tracked" in n)
    assert "freeing finished tasks" in note and f"{tracker.free_ns / 1e6:.1f} ms of it" in note

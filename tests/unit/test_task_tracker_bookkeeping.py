"""The `--async` tracker's bulk bookkeeping: each shortcut taken for speed keeps the result exact."""
from __future__ import annotations

import asyncio
import time

import pytest

from truestack.samples import Frame, Sample
from truestack.tasks import TaskTracker
from truestack.tasks.chain import code_frame


def _in_a_loop(body):
    async def main():
        return await body()

    return asyncio.run(main())


def test_a_task_registered_twice_keeps_its_first_entry_and_counts_once():
    tracker = TaskTracker(wall=False)

    async def body():
        async def idle():
            await asyncio.sleep(0)

        task = asyncio.ensure_future(idle())
        coro = task.get_coro()
        new = tracker.hook._new
        new += [(task, None, 0), (task, coro, 1)]  # one without a coroutine
        tracker._register()
        new += [(task, coro, 2), (task, coro, 3)]  # again, twice in one batch
        tracker._register()
        await task
        return coro

    coro = _in_a_loop(body)
    assert tracker.tasks_seen == 1
    assert list(tracker._fresh) == [id(coro)] and tracker._fresh.get(id(coro))[2] == 1


def test_code_frames_are_never_those_of_an_earlier_code_at_the_same_address():
    # Interned by the code's id: the cache must keep each code alive, or a new code object
    # made at a freed one's address would be given the old frame.
    names = []
    for i in range(300):
        namespace: dict = {}
        exec(compile(f"def f{i}():\n    pass\n", f"gen{i}.py", "exec"), namespace)
        code = namespace[f"f{i}"].__code__
        names.append(code_frame(code, 2).name)
        del namespace, code
    assert names == [f"f{i}" for i in range(300)]


def test_only_tasks_other_than_the_parent_are_linked_as_its_children():
    tracker = TaskTracker(wall=False)

    async def body():
        release = asyncio.Event()

        async def child():
            await release.wait()

        me = asyncio.current_task()
        parent = tracker._materialise(id(me.get_coro()), (me, me.get_coro(), 0))
        tasks = [asyncio.ensure_future(child()) for _ in range(3)]
        plain = asyncio.get_running_loop().create_future()
        tracker._set_children(parent, (*tasks, plain, me))  # a gather may hold a plain future
        linked = dict(tracker._parents)
        tracker._set_children(parent, tuple(tasks[:1]))  # the others no longer
        after = dict(tracker._parents)
        release.set()
        plain.cancel()
        await asyncio.gather(*tasks)
        return parent, tasks, linked, after

    parent, tasks, linked, after = _in_a_loop(body)
    assert linked == {id(task): parent for task in tasks}
    assert after == {id(tasks[0]): parent}


def test_samples_sharing_one_stack_are_each_cut_at_their_own_coroutine():
    # One stack tuple, two tasks with different coroutines in it: each sample keeps the
    # frames from its own task's coroutine up, though the cut is found once per stack.
    tracker = TaskTracker(wall=False)
    assert tracker.start()

    async def outer():
        await asyncio.sleep(0)

    async def inner():
        await asyncio.sleep(0)

    async def body():
        a, b = asyncio.ensure_future(outer()), asyncio.ensure_future(inner())
        at = time.monotonic_ns()
        stack = (
            Frame("run_forever", "base_events.py", 1, 1),
            code_frame(outer.__code__, outer.__code__.co_firstlineno + 1),
            code_frame(inner.__code__, inner.__code__.co_firstlineno + 1),
            Frame("leaf", "x.py", 1, 1),
        )
        samples = [Sample(1, "MainThread", at, 1, stack, coro=id(t.get_coro())) for t in (a, b, a)]
        out = tracker.process(samples)
        await asyncio.gather(a, b)
        return [[f.name for f in s.frames] for s in out]

    try:
        stacks = _in_a_loop(body)
    finally:
        tracker.stop()
    outer_name, inner_name = code_frame(outer.__code__, 0).name, code_frame(inner.__code__, 0).name
    assert stacks[0][1:] == [outer_name, inner_name, "leaf"] == stacks[2][1:]
    assert stacks[1][1:] == [inner_name, "leaf"]
    assert stacks[0][0].startswith("task:") and stacks[1][0].startswith("task:")


@pytest.mark.parametrize("wall", [False, True], ids=["cpu", "wall"])
def test_long_pending_tasks_are_asked_done_seldom_and_let_go_once_done(monkeypatch, wall):
    # A service keeps thousands of tasks pending (one per connection). Asking each `done()` at
    # every drain cost it 10 % of its CPU (10,000 tasks, 20 drains a second). Over 64 drains, N
    # pending tasks, half of them sampled, must be asked far fewer than the 2 x 64 N times of
    # one check per drain (fresh and sampled alike); and once they are done every one is let go
    # within the oldest generation's period.
    from truestack.tasks import aging
    from truestack.tasks import tracker as tracker_module

    monkeypatch.setattr(tracker_module, "_WALK_BUDGET_S", 0.0)  # wall mode: _WALKS_MIN walks per drain
    n, drains = 2000, 1 << (aging.GENERATIONS - 1)
    asked = 0

    class CountingTask(asyncio.Task):  # type: ignore[type-arg]
        def done(self) -> bool:
            nonlocal asked
            asked += 1
            return super().done()

    tracker = TaskTracker(wall=wall)
    main_coro = 0

    async def body():
        nonlocal asked, main_coro
        main_coro = id(asyncio.current_task().get_coro())
        asyncio.get_running_loop().set_task_factory(lambda loop, coro, **kw: CountingTask(coro, loop=loop, **kw))
        assert tracker.start()
        stop = asyncio.Event()

        async def connection():
            await stop.wait()

        tasks = [asyncio.create_task(connection()) for _ in range(n)]
        await asyncio.sleep(0)
        at = time.monotonic_ns()
        samples = [Sample(1, "MainThread", at, 1, (Frame("leaf", "x.py", 1, 1),), coro=id(t.get_coro()))
                   for t in tasks[::2]]
        asked = 0
        assert all(s.thread_name.startswith("task:") for s in tracker.process(samples))
        for _ in range(drains - 1):
            tracker.process([])
        checks = asked
        stop.set()
        await asyncio.gather(*tasks)
        for _ in range(drains + 1):
            tracker.process([])
        return checks

    try:
        checks = _in_a_loop(body)
    finally:
        tracker.stop()
    # About one check per generation for each task, fresh and then sampled; a few per walk.
    walks = drains * (tracker_module._WALKS_MIN + 1) if wall else 0
    assert checks <= aging.GENERATIONS * (n + n // 2) + 4 * walks, (checks, 2 * drains * n)
    # Nothing left but this test's own task, still running (wall mode has walked it).
    assert set(tracker._fresh) | set(tracker._by_coro) == {main_coro}
    assert len(tracker._fresh) + len(tracker._pending) == 1

"""Cpu mode's parent links: the task waiting for a task, read from its done-callbacks."""
import asyncio
import sys
import time

import pytest

from truestack.samples import Frame, Sample
from truestack.tasks import TaskTracker
from truestack.tasks.waiters import waiter_of


async def _leaf(release: asyncio.Event) -> None:
    await release.wait()


def _waiters_seen(make_parent) -> tuple[object, object, object]:
    """(the parent task, the child task, what waiter_of says of the child) with both suspended."""

    async def main():
        release = asyncio.Event()
        children = []
        parent = asyncio.create_task(make_parent(release, children), name="parent")
        for _ in range(3):
            await asyncio.sleep(0)
        found = waiter_of(children[0], {})
        release.set()
        await parent
        return parent, children[0], found

    return asyncio.run(main())


async def _awaits(release, children):
    children.append(asyncio.create_task(_leaf(release)))
    await children[0]


async def _gathers(release, children):
    children.extend(asyncio.create_task(_leaf(release)) for _ in range(2))
    await asyncio.gather(*children)


async def _gathers_in_a_gather(release, children):
    children.append(asyncio.create_task(_leaf(release)))
    await asyncio.gather(asyncio.gather(children[0]), asyncio.sleep(0.01))


async def _shields(release, children):
    children.append(asyncio.create_task(_leaf(release)))
    await asyncio.shield(children[0])


async def _waits(release, children):
    children.append(asyncio.create_task(_leaf(release)))
    await asyncio.wait(children)


async def _task_group(release, children):
    async with asyncio.TaskGroup() as group:
        children.append(group.create_task(_leaf(release)))


WAYS = [_awaits, _gathers, _gathers_in_a_gather, _shields, _waits]
if sys.version_info >= (3, 11):
    WAYS.append(_task_group)


@pytest.mark.parametrize("way", WAYS, ids=lambda way: way.__name__.strip("_"))
def test_the_waiting_task_is_found_from_the_childs_callbacks(way):
    parent, child, found = _waiters_seen(way)
    assert found is parent, (found, child)


def test_a_task_nobody_waits_for_has_no_waiter():
    async def main():
        release = asyncio.Event()
        alone = asyncio.create_task(_leaf(release))
        await asyncio.sleep(0)
        found = waiter_of(alone, {})
        release.set()
        await alone
        return found

    assert asyncio.run(main()) is None


def _run_tracked(tracker: TaskTracker, main) -> None:
    try:
        asyncio.run(main())
    finally:
        tracker.stop()


def test_cpu_mode_nests_a_sampled_child_under_its_parents_chain_without_walking_others():
    tracker = TaskTracker(wall=False)
    assert tracker.start()
    stacks = []

    async def parent(release, children):
        children.extend(asyncio.create_task(_leaf(release), name=f"child{i}") for i in range(50))
        await asyncio.gather(*children)

    async def main():
        release, children = asyncio.Event(), []
        task = asyncio.create_task(parent(release, children), name="parent")
        for _ in range(3):
            await asyncio.sleep(0)
        sample = Sample(1, "MainThread", time.monotonic_ns(), 1, (Frame("_leaf", "x.py", 1, 1),),
                        coro=id(children[7].get_coro()))
        stacks.append([f.name for f in tracker.process([sample])[0].frames])
        release.set()
        await task

    _run_tracked(tracker, main)
    names = stacks[0]
    assert names[0] == "task:parent" and names[-2:] == ["task:child7", "_leaf"], names
    assert any(name.startswith("await") and "gather" in name for name in names[1:-2]), names
    # Only the sampled child and its parent were made TaskInfos (walked or labelled): not the 49 others.
    assert len(tracker._by_coro) == 2, len(tracker._by_coro)


def test_cpu_mode_nests_a_child_that_finished_before_the_drain():
    # A done task has no callbacks left: its parent must be known from an earlier drain, which
    # found it through another child, and walked again since to link the children it waits for now.
    tracker = TaskTracker(wall=False)
    assert tracker.start()
    roots = {}
    made = {}

    async def quick():
        return 1

    def child(coro, name):
        made[name] = asyncio.create_task(coro, name=name)
        return made[name]

    async def parent(first_done, second_done):
        await asyncio.gather(child(_leaf(first_done), "first"))
        await asyncio.gather(child(quick(), "second"), child(_leaf(second_done), "blocker"))

    def root_of(task):
        sample = Sample(1, "MainThread", time.monotonic_ns(), 1, (Frame("f", "x.py", 1, 1),), coro=id(task.get_coro()))
        return tracker.process([sample])[0].frames[0].name

    async def main():
        first_done, second_done = asyncio.Event(), asyncio.Event()
        task = asyncio.create_task(parent(first_done, second_done), name="parent")
        for _ in range(3):
            await asyncio.sleep(0)
        roots["first"] = root_of(made["first"])  # pending: found from its callbacks
        first_done.set()
        for _ in range(4):
            await asyncio.sleep(0)
        assert made["second"].done() and not made["blocker"].done()
        roots["second"] = root_of(made["second"])  # created and done since the last drain
        second_done.set()
        await task

    _run_tracked(tracker, main)
    assert roots == {"first": "task:parent", "second": "task:parent"}, roots

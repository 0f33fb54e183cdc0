"""The walker's per-sample coroutine word (`--async`): the outermost coroutine on the stack."""
from __future__ import annotations

import asyncio

import pytest

_native = pytest.importorskip("truestack._native")


def test_outermost_coroutine_of_the_stack_is_the_tasks():
    async def inner():
        return _native.walk_current_coro()

    async def outer():
        return await inner()

    task_coros = []

    async def main():
        t = asyncio.create_task(outer())
        task_coros.append(t.get_coro())
        return await t

    assert asyncio.run(main()) == id(task_coros[0])


def test_no_coroutine_no_word():
    def gen():
        yield _native.walk_current_coro()  # a plain generator is not a task's coroutine

    assert _native.walk_current_coro() == 0
    assert next(gen()) == 0

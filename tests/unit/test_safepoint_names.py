"""Attach's safe point: the C functions that make a stopped thread no place to call dlopen in
(`remote/safepoint_names.py`, used by gdb_safepoint.py inside gdb), on names as gdb shows them."""
from __future__ import annotations

import pytest

from truestack.remote.safepoint_names import bare, holds


@pytest.mark.parametrize(
    "gdb_name,plain",
    [("__GI___libc_malloc", "malloc"), ("_int_malloc", "int_malloc"), ("__GI__dl_catch_exception", "dl_catch_exception"),
     ("__libc_start_call_main", "start_call_main"), ("PyObject_Malloc", "PyObject_Malloc")],
)  # fmt: skip
def test_names_are_compared_without_glibcs_aliases_and_underscores(gdb_name, plain):
    assert bare(gdb_name) == plain


def stack(*names: str) -> list[str]:
    return [bare(n) for n in names]


def test_inside_the_allocator_only_this_thread_is_unsafe():
    assert holds(stack("_int_malloc", "__GI___libc_malloc", "PyMem_RawMalloc", "_PyEval_EvalFrameDefault")) == (
        True, False)  # fmt: skip
    assert holds(stack("__lll_lock_wait_private", "_int_free", "free", "list_dealloc")) == (True, False)


def test_inside_the_loader_thread_creation_or_fork_every_thread_waits():
    assert holds(stack("__GI___clock_nanosleep", "sleep", "slow", "call_init", "_dl_init", "dlopen_doit")) == (
        False, True)  # fmt: skip
    assert holds(stack("__mmap", "allocate_stack", "__pthread_create_2_1", "thread_run")) == (False, True)
    assert holds(stack("_Fork", "__libc_fork", "os_fork_impl")) == (False, True)
    assert holds(stack("update_get_addr", "__tls_get_addr", "PyGILState_GetThisThreadState")) == (False, True)


def test_the_interpreter_at_work_or_waiting_is_a_safe_place():
    running = stack("__tls_get_addr", "_PyThreadState_GET", "PyObject_Vectorcall", "_PyEval_EvalFrameDefault")
    waiting = stack("__futex_abstimed_wait_common64", "___pthread_cond_timedwait64", "take_gil", "PyEval_RestoreThread")
    sleeping = stack("__GI___clock_nanosleep", "pysleep", "time_sleep", "_PyEval_EvalFrameDefault", "__libc_start_main")
    for names in (running, waiting, sleeping):
        assert holds(names) == (False, False), names

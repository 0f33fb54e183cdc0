"""Which C functions make a stopped thread an unsafe place to call `dlopen` (attach's safe point).

Imported by `gdb_safepoint.py` inside gdb's own Python (as a top-level module: gdb knows nothing
of truestack), so it imports nothing; kept apart so it can be tested without gdb.
"""

from __future__ import annotations

# Names are compared after stripping `__GI_`, leading underscores and `libc_`.
# A thread inside the allocator holds its arena's lock: dlopen must not run in *that* thread
# (it would wait on its own lock); in another thread it is fine, as the allocating thread
# finishes once gdb lets every thread run during the call.
ALLOCATOR_NAMES = frozenset(
    [
        "malloc",
        "free",
        "calloc",
        "realloc",
        "reallocarray",
        "memalign",
        "posix_memalign",
        "aligned_alloc",
        "valloc",
        "pvalloc",
        "cfree",
        "malloc_trim",
        "malloc_usable_size",
        "mallinfo",
        "mallinfo2",
        "mallopt",
    ]
)
ALLOCATOR_PREFIXES = (
    "int_malloc", "int_free", "int_realloc", "int_memalign", "sysmalloc", "systrim", "malloc_", "tcache",
    "arena_", "new_heap", "heap_trim", "unlink_chunk", "munmap_chunk", "mremap_chunk",
)  # fmt: skip
# A thread inside the dynamic loader, thread creation or fork holds a lock of the whole process
# that dlopen or the agent's pthread_create takes: no thread may call in until it is out (it may
# stay in for long: a library's constructor can block). `__tls_get_addr` itself is not: its fast
# path takes no lock, and its slow paths are the `_dl_*` and `*_tail` functions below it.
PROCESS_LOCK_PREFIXES = (
    "dl", "tls_get_addr_tail", "update_get_addr", "pthread_create", "allocate_stack", "reclaim_stacks", "fork", "Fork",
    "run_fork_handlers",
)  # fmt: skip


def bare(name: str) -> str:
    return name.removeprefix("__GI_").lstrip("_").removeprefix("libc_")


def holds(names: list[str]) -> tuple[bool, bool]:
    """(inside the allocator, inside something holding a process-wide lock)."""
    allocator = any(n in ALLOCATOR_NAMES or n.startswith(ALLOCATOR_PREFIXES) for n in names)
    return allocator, any(n.startswith(PROCESS_LOCK_PREFIXES) for n in names)

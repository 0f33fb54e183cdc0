"""Types of truestack._native, the C sampler (src/truestack/_csrc/module.c).

`_probe_guarded_load` and the `_test_*` hooks exist only in test builds
(TRUESTACK_TEST_BUILD=1).

tests/native/test_native_stubs.py checks that the names here and the
module's agree.
"""

from collections.abc import Callable
from types import CodeType
from typing import Any, Final, final

PARTIAL_REASONS: Final[tuple[str, ...]]  # reason codes of partial walks, in C enum order (from 1)
FRAME_KINDS: Final[tuple[str, ...]]  # frame kinds in C enum order; mirrors truestack.samples.FRAME_KINDS
WALK_LEAF_FIRST: Final[int]
MAX_THREADS: Final[int]  # threads registered at once
MAX_DEPTH: Final[int]  # largest max_depth
NATIVE_UNWIND: Final[int]  # 1 if built with libunwind (--native works)
MAX_NATIVE: Final[int]  # largest `native` of start()
NATIVE_REASONS: Final[tuple[str, ...]]  # why a sample's C frames are missing, in C enum order (from 1)
GUARDED_LOADS: Final[int]  # 1 where fault-tolerant loads exist (x86-64): the sampler refuses to start elsewhere
_core_api: Final[object]  # capsule of the walker API lent to truestack._oracle

@final
class RawSample(tuple[Any, ...]):
    """One sample as drained (a struct sequence)."""

    @property
    def tid(self) -> int: ...
    @property
    def time_ns(self) -> int: ...
    @property
    def weight_ns(self) -> int: ...
    @property
    def cpu_delta_ns(self) -> int: ...
    @property
    def state(self) -> str: ...
    @property
    def depth(self) -> int: ...
    @property
    def partial(self) -> str | None: ...
    @property
    def frames(self) -> tuple[Any, ...]:
        """Flat, leaf first: (code, byte offset, ...) or ((qualname, file, firstlineno), line, ...); drained
        with the resolvers (and no --native data): the resolved stack."""
    @property
    def coro(self) -> int:
        """id() of the outermost coroutine on the stack (the task being stepped), or 0."""
    @property
    def native(self) -> tuple[int, ...] | None:
        """--native: the C return addresses, leaf first (None without --native)."""
    @property
    def segments(self) -> tuple[int, ...] | None:
        """--native: frames recorded once each eval-loop C call ended, leaf first (None: unknown)."""
    @property
    def native_missing(self) -> str | None:
        """--native: a NATIVE_REASONS value when the C frames are missing or cut short."""

def start(
    mode: str, interval_ns: int, max_depth: int, ring_slots: int = 65536, timer: str = "auto", native: int = 0
) -> str:
    """Arm the timers (cpu) and start the control thread; returns the timer's name. `native`: C return
    addresses kept per sample (--native; 0 = none)."""

def stop() -> None: ...
def warm_cpu_timers() -> None:
    """Open and close one task-clock perf event, the GIL released: the kernel's one-off set-up
    of its perf scheduling hooks (6-12 ms on a perf-idle system) is paid now. OSError if refused."""

def drain(
    resolve_frame: Callable[[Any, int], Any] | None = None,
    finish: Callable[[tuple[Any, ...], str | None, int], tuple[Any, ...]] | None = None,
    shims: bool = False,
    /,
) -> list[RawSample]:
    """Every pending sample, oldest first. With the resolvers a sample's frames are finish(frames, partial,
    depth), frames root first from resolve_frame(code, offset) or, for a code that died before the drain,
    resolve_frame((qualname, file, firstlineno), line), None left out (kept with `shims`, as --native needs to
    place its C frames; without it, samples with --native data are not resolved). Both are made once per
    distinct frame and stack (the cache pins the code objects); later samples get the same objects."""

def stack_cache_clear() -> None:
    """Let go of every cached stack and frame, and the code objects the cache pins."""

def stack_cache_counts() -> tuple[int, int, int, int, int]:
    """(stacks cached, frames cached, samples answered from the cache, misses, samples never cacheable)."""

def call_in_main_after(fd: int, marker: bytes, call: Callable[[], object], /) -> bool:
    """Without the GIL, read `fd` until a read holds `marker` (or the peer closes, or the read fails), then have
    the main thread run `call()` at its next eval-breaker check (its exception dropped); False: not handed."""

def sync_threads(exclude: set[int] | frozenset[int], /) -> list[tuple[int, int]]:
    """Register the interpreter's live threads (not `exclude` idents), unregister gone ones: [(ident, tid)]."""

def register_current() -> int: ...
def unregister_current() -> None: ...
def walk_current(max_depth: int, /) -> list[tuple[CodeType, int, str]]: ...
def walk_current_info(max_depth: int, /) -> tuple[list[tuple[CodeType, int, str]], int, str | None]: ...
def walk_current_coro() -> int: ...
def code_line(code: CodeType, byte_offset: int, /) -> int: ...
def stats() -> dict[str, Any]: ...
def charge_collector(ns: int, /) -> None: ...
def codes_resolved_at_death() -> int: ...
def settle_counts() -> tuple[int, int]: ...
def native_unwinder(name: str, /) -> None: ...
def after_fork_child() -> None: ...
def _probe_native_fault() -> tuple[int, str | None, int]:
    """Test builds only: unwind a context whose stack is unmapped -> (frames, reason, faults absorbed)."""

def _cfi_check(on: bool, /) -> tuple[int, int, tuple[int, int, int, int, int]]:
    """Test builds only: while on, libunwind also unwinds each sample the CFI fast path did and differences
    are counted -> (checked, mismatched, (fast n, libunwind n, index, fast ip, libunwind ip) of the first)."""

def _probe_guarded_load() -> tuple[int, int]:
    """Test builds only (TRUESTACK_TEST_BUILD=1): a guarded load from an inaccessible page."""

def _test_register_stale(tid: int, /) -> None:
    """Test builds only: register a tid without checking it, as a thread that died would leave it."""

def _test_registry_lock_blocks_sigprof() -> bool:
    """Test builds: is SIGPROF blocked in this thread while it holds the thread registry's lock?"""

def _test_remote_pause(ns: int, /) -> None:
    """Test builds only: the control thread pauses ns between a remote walk and publishing its sample."""

def _test_change_period(ns: int, /) -> None:
    """Test builds only: every timer's period changed to ns, as the CPU budget does.
    0 pauses every timer and wall mode's ticks (a perf event keeps the time left to its next
    signal); the next call resumes them."""

def _test_stuck_slot(stuck: bool, /) -> bool | None:
    """Test builds only: True leaves a claimed ring slot unfinished; False commits it (-> kept?)."""

def stream_write(fd: int, data: bytes, dev: int, ino: int, /) -> int:
    """All of data written to the pipe fd, the GIL held, if fd still names the pipe (dev, ino) and it has
    room for all of it now: len(data); -1 if fd is not that pipe; 0 (nothing written) if no room."""

def watch_process_events(callback: Callable[[str, tuple[Any, ...]], object], /) -> None: ...

"""The debugger's breakpoint fast path (src/truestack/_csrc/debughook.c)."""

import types
from collections.abc import Callable, Iterable
from typing import Any

HAS_HOOK: int  # 1 where the PEP 523 frame-evaluation hook is used (3.10/3.11)

class BreakState:
    """Counts and condition of one breakpoint, read and updated by the C fast path."""

    enabled: bool
    temporary: bool
    hits: int
    ignore: int
    @property
    def op(self) -> int: ...
    @property
    def constant(self) -> object: ...
    @property
    def modulus(self) -> object: ...
    @property
    def cond_code(self) -> types.CodeType | None: ...
    def __init__(
        self,
        cond_code: types.CodeType | None = None,
        op: int = -1,
        constant: object = None,
        modulus: object = None,
        temporary: bool = False,
    ) -> None: ...

def configure(
    classify: Callable[[types.CodeType], dict[int, list[tuple[Any, ...]]] | None],
    stop: Callable[[types.FrameType, Any, bool], None],
    report: Callable[[Any, BaseException], None],
    disable: object = None,
) -> None: ...
def invalidate() -> None: ...
def check(frame: types.FrameType) -> tuple[Any, bool] | None: ...
def monitor_line(code: types.CodeType, line: int) -> object: ...
def install() -> bool: ...
def uninstall() -> None: ...
def hook_installed() -> bool: ...
def trace_threads(ids: Iterable[int]) -> None: ...
def thread_traced() -> bool: ...
def counters() -> dict[str, int]: ...  # simple, named_locals, f_locals, line_events

"""dump --locals keeps a stack only if its frames' local slots read the same after the second walk.

Two equal walks do not prove a frame held still: a call that returned and the
next call of the same function reuse one frame address and reach the same
instruction, and locals read in between are the half-built frame's (CI saw a
3.10 `rec(n)` frame reported consistent without its argument `n`).
"""
from __future__ import annotations

from truestack.remote.snapshot import Reader
from truestack.remote.values import CodeInfo

REC = CodeInfo("rec", "/x/churn.py", 1, b"", ("n",), b"\0")
WALK = [(0x1000, 0x2000, 10), (0x1100, 0x2000, 10)]  # two rec frames: (frame, code, offset)


class FakeRemote:
    def walk(self, tstate: int, max_depth: int):
        return list(WALK), len(WALK), None


class FakeMemory:
    """Each local_slots() call takes the next value of `n` (0 = not bound yet)."""

    def __init__(self, values: list[int]) -> None:
        self.values = iter(values)
        self.reads = 0

    def forget_codes(self) -> None: ...

    def code(self, code: int) -> CodeInfo:
        return REC

    def line(self, info: CodeInfo, offset: int) -> int:
        return 5

    def u64(self, addr: int) -> int:
        return 0  # no thread id: the reader does not look the thread up in /proc

    def local_slots(self, frame: int, info: CodeInfo) -> bytes:
        self.reads += 1
        return next(self.values).to_bytes(8, "little")

    def locals_(self, raw: bytes, info: CodeInfo) -> dict[str, str]:
        value = int.from_bytes(raw, "little")
        return {"n": str(value)} if value else {}


def reader(values: list[int]) -> Reader:
    r = Reader.__new__(Reader)
    r.t = type("T", (), {"pid": 1})()
    r.remote = FakeRemote()
    r.mem = FakeMemory(values)  # type: ignore[assignment]
    r.off = {"ts_thread_id": 0, "ts_native_thread_id": 8}
    return r


def test_a_frame_caught_half_built_is_read_again():
    # First attempt: the outer frame's n is read unbound, then bound on the re-read. Second: stable.
    t = reader([0, 7, 5, 7, 7, 7, 7, 7]).thread(0xAA, with_locals=True, max_depth=64)
    assert t.consistent and t.problem is None
    assert [f.locals for f in t.frames] == [{"n": "7"}, {"n": "7"}]


def test_locals_that_never_hold_still_are_flagged():
    t = reader(list(range(1, 100))).thread(0xAA, with_locals=True, max_depth=64)
    assert not t.consistent
    assert t.problem == "its local variables changed while they were read"


def test_without_locals_no_slot_is_read():
    r = reader([])
    t = r.thread(0xAA, with_locals=False, max_depth=64)
    assert t.consistent and [f.function for f in t.frames] == ["rec", "rec"]
    assert r.mem.reads == 0

"""`truestack validate`: measure how often the native walker's stacks are wrong.

A layered oracle, after "Validating Java Profiling APIs" (trace_validation):

- ground / shadow layer: a per-thread shadow stack kept by call, return,
  yield and unwind events. At every synchronous check it is itself compared
  with the interpreter's frame chain (and reseeded if it drifted), so the
  async layer stands on a checked base;
- synchronous layer: at function entries (every Nth), the walker runs on the
  current thread and must return exactly the `sys._getframe()` chain: every
  frame, in order, same code object, same line;
- asynchronous layer: a native thread signals random registered threads at
  random times; the handler runs the walker and compares it with the shadow
  stack at that instant. A difference confined to the one frame being
  entered or left is a *boundary* effect, counted apart from real errors.

The C side lives in `truestack/_csrc/validate_*.c`; this package drives it
(`oracle`), turns its counters into a result (`result`) and prints it
(`report`).
"""

from __future__ import annotations

from .result import ERROR_KINDS, LayerResult, ValidationResult

__all__ = ["ERROR_KINDS", "LayerResult", "ValidationResult"]

"""pstats: the marshalled stats dict `pstats.Stats(path)` loads (snakeviz, tuna, ...).

Shape, as cProfile writes it:
    {(file, first_line, name): (cc, nc, tt, ct, {caller_key: (nc, cc, tt, ct)})}

A sampler sees no calls, only stacks, so for each function
  cc  = samples with the function on the stack (once per sample: "primitive")
  nc  = its frames over all samples (recursion counts every level)
  tt  = self time: weight of samples where it is the leaf, in seconds
  ct  = cumulative time: weight of samples it is on the stack in, counted
        once per sample even when it recursed, so ct never exceeds the total
and each caller edge holds the same four figures for "callee called from
caller" (adjacent frames). Samples with an empty stack have no function and
are left out.
"""

from __future__ import annotations

import itertools
import marshal
from typing import TypeVar

from ..model import Profile
from ..model.aggregate import aggregate, nominal_interval_ns

NATIVE_FILE = "~"  # what cProfile uses for functions without a source file


def _func_key(profile: Profile, func: int) -> tuple[str, int, str]:
    row = profile.funcs[func]
    path = profile.strings[row.file] or NATIVE_FILE
    return (path, row.first_line, profile.strings[row.name])


_K = TypeVar("_K", int, tuple[int, int])  # a function, or a (caller, callee) edge
_Key = tuple[str, int, str]  # (file, first line, name), as cProfile keys functions
_Stats = dict[_Key, tuple[int, int, float, float, dict[_Key, tuple[int, int, float, float]]]]


def _count(table: dict[_K, list[int]], keys: list[_K], n: int, w: int) -> None:
    """Book one stack's n samples (weight w) to its functions or caller edges.

    Entries are [primitive calls, calls, own time, cumulative time]: calls
    count every occurrence, the primitive count and cumulative time count a
    key once per sample however often it recurs, own time goes to the leaf.
    """
    for key in keys:
        entry = table.get(key)
        if entry is None:
            entry = table[key] = [0, 0, 0, 0]
        entry[1] += n
    for key in set(keys):
        entry = table[key]
        entry[0] += n
        entry[3] += w
    if keys:
        table[keys[-1]][2] += w


def build_stats(profile: Profile) -> _Stats:
    totals = aggregate(profile).stack_totals
    if not any(w for _, w in totals.values()):
        # No weights recorded: charge each sample one nominal interval (1 ms if unknown).
        per = nominal_interval_ns(profile) or 1e6
        totals = {s: (n, int(n * per)) for s, (n, _w) in totals.items()}
    frames_func = [row.func for row in profile.frames]
    # Per func index: [cc, nc, tt_ns, ct_ns]; per (caller, callee): the same.
    funcs: dict[int, list[int]] = {}
    edges: dict[tuple[int, int], list[int]] = {}
    for stack, (n, w) in totals.items():
        if stack < 0:
            continue
        chain = [frames_func[f] for f in profile.stack_frames(stack)]
        _count(funcs, chain, n, w)
        _count(edges, list(itertools.pairwise(chain)), n, w)
    keys = {f: _func_key(profile, f) for f in funcs}
    callers: dict[int, dict[_Key, tuple[int, int, float, float]]] = {f: {} for f in funcs}
    for (caller, callee), (cc, nc, tt, ct) in edges.items():
        callers[callee][keys[caller]] = (nc, cc, tt / 1e9, ct / 1e9)
    return {keys[f]: (cc, nc, tt / 1e9, ct / 1e9, callers[f]) for f, (cc, nc, tt, ct) in funcs.items()}


def export(profile: Profile) -> bytes:
    return marshal.dumps(build_stats(profile))

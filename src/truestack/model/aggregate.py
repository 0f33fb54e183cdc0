"""Counting, done once: per-stack totals (all threads or one), per-function totals,
the call tree and stack labels that every exporter and the summary read.

Exporters only format what this module counts. `aggregate(profile)` caches
its result per profile (until samples are added), so a summary and an
output of the same profile count once.

Weighted sample counts: a sample counts `round(weight / interval)` times
(at least once), so a CPU-mode sample that stood for three timer intervals
counts three times in every output. Without a known rate every sample
counts once.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from functools import cached_property

from ..light_typing import NamedTuple
from .profile import Profile

EMPTY_STACK_LABEL = "(no frames)"


def nominal_interval_ns(profile: Profile) -> float | None:
    """The sampling interval the user asked for, or None when the rate is unknown."""
    rate = profile.meta.requested_rate_hz
    return 1e9 / rate if rate else None


def weighted_stack_counts(profile: Profile, threads: Iterable[int] | None = None) -> dict[int, int]:
    """stack -> weighted sample count over the chosen threads (all by default).

    Rounding is per sample so a burst of short samples is not rounded away.
    """
    interval = nominal_interval_ns(profile)
    chosen = profile.threads.values() if threads is None else [profile.threads[t] for t in threads]
    counts: dict[int, int] = {}
    get = counts.get
    for thread in chosen:
        if interval is None:
            for stack in thread.stack:
                counts[stack] = get(stack, 0) + 1
            continue
        inv = 1.0 / interval
        for stack, weight in zip(thread.stack, thread.weight_ns, strict=True):
            counts[stack] = get(stack, 0) + (int(weight * inv + 0.5) or 1)
    return counts


def stack_totals(profile: Profile, threads: Iterable[int] | None = None) -> dict[int, tuple[int, int]]:
    """stack -> (sample count, total weight ns) over the chosen threads, stacks in first-seen order."""
    totals: dict[int, list[int]] = {}
    chosen = profile.threads.values() if threads is None else [profile.threads[t] for t in threads]
    for thread in chosen:
        for stack, weight in zip(thread.stack, thread.weight_ns, strict=True):
            entry = totals.get(stack)
            if entry is None:
                totals[stack] = [1, weight]
            else:
                entry[0] += 1
                entry[1] += weight
    return {k: (v[0], v[1]) for k, v in totals.items()}


class FunctionTotals(NamedTuple):  # not a dataclass: `dataclasses` is the heaviest import of `record`'s exit
    """One function's weighted sample counts: on the stack (once per sample) and at the leaf."""

    total: int
    self: int


class CallTree(NamedTuple):
    """The stack prefix tree restricted to stacks some sample reached.

    `order` lists those stacks parents first; `node_of` maps a stack to its
    node (1-based; node 0 is the implicit root, stack -1).
    """

    order: list[int]
    node_of: dict[int, int]


FrameLabeller = Callable[[int], str]  # frame index -> its label


class Aggregate:
    """What a profile adds up to; each part computed on first use."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        # The aggregate is stale once either changes (samples added, the rate edited).
        self.sample_count = profile.sample_count
        self.interval_at_start = nominal_interval_ns(profile)
        self._per_thread_counts: dict[int, dict[int, int]] = {}
        self._per_thread_totals: dict[int, dict[int, tuple[int, int]]] = {}

    @cached_property
    def stack_counts(self) -> dict[int, int]:
        """stack -> weighted sample count, all threads."""
        return weighted_stack_counts(self.profile)

    def thread_stack_counts(self, tid: int) -> dict[int, int]:
        """stack -> weighted sample count of one thread."""
        if tid not in self._per_thread_counts:
            self._per_thread_counts[tid] = weighted_stack_counts(self.profile, [tid])
        return self._per_thread_counts[tid]

    @cached_property
    def stack_totals(self) -> dict[int, tuple[int, int]]:
        """stack -> (samples, weight ns), all threads."""
        return stack_totals(self.profile)

    def thread_stack_totals(self, tid: int) -> dict[int, tuple[int, int]]:
        """stack -> (samples, weight ns) of one thread, stacks in first-seen order."""
        if tid not in self._per_thread_totals:
            self._per_thread_totals[tid] = stack_totals(self.profile, [tid])
        return self._per_thread_totals[tid]

    @property
    def empty_stack_count(self) -> int:
        """Weighted count of samples with no frames."""
        return self.stack_counts.get(-1, 0)

    @cached_property
    def function_totals(self) -> dict[int, FunctionTotals]:
        """func -> weighted counts on the stack (once per sample, however deep it recursed) and at the leaf."""
        total_by_func: dict[int, int] = {}
        self_by_func: dict[int, int] = {}
        frames_func = [row.func for row in self.profile.frames]
        prefix, frame = self.profile.stacks.prefix, self.profile.stacks.frame
        for stack, count in self.stack_counts.items():
            if stack < 0:
                continue
            leaf = frames_func[frame[stack]]
            self_by_func[leaf] = self_by_func.get(leaf, 0) + count
            seen = set()
            s = stack
            while s >= 0:
                seen.add(frames_func[frame[s]])
                s = prefix[s]
            for func in seen:
                total_by_func[func] = total_by_func.get(func, 0) + count
        return {func: FunctionTotals(total, self_by_func.get(func, 0)) for func, total in total_by_func.items()}

    @cached_property
    def call_tree(self) -> CallTree:
        prefix = self.profile.stacks.prefix
        used: set[int] = set()
        for tid in self.profile.threads:
            for stack in self.thread_stack_totals(tid):
                while stack >= 0 and stack not in used:
                    used.add(stack)
                    stack = prefix[stack]
        # A stack's prefix has a smaller index, so ascending order lists parents first.
        order = sorted(used)
        node_of = {-1: 0}
        for i, stack in enumerate(order, 1):
            node_of[stack] = i
        return CallTree(order, node_of)

    def stack_labels(self, stacks: Iterable[int], frame_label: FrameLabeller) -> dict[int, str]:
        """stack -> `root;...;leaf`, sharing work between common prefixes; `frame_label` names one frame."""
        frame_labels: dict[int, str] = {}
        paths: dict[int, str] = {-1: ""}
        prefix, frame = self.profile.stacks.prefix, self.profile.stacks.frame

        def path_of(stack: int) -> str:
            # Walk up to the nearest stack already labelled, then fill in downwards.
            chain = []
            while stack not in paths:
                chain.append(stack)
                stack = prefix[stack]
            for s in reversed(chain):
                f = frame[s]
                label = frame_labels.get(f)
                if label is None:
                    label = frame_labels[f] = frame_label(f)
                parent = paths[prefix[s]]
                paths[s] = f"{parent};{label}" if parent else label
            return paths[chain[0]] if chain else paths[stack]

        return {stack: path_of(stack) if stack >= 0 else EMPTY_STACK_LABEL for stack in stacks}


_cache: weakref.WeakKeyDictionary[Profile, Aggregate] = weakref.WeakKeyDictionary()


def aggregate(profile: Profile) -> Aggregate:
    """The profile's aggregate, computed once (again when samples were added since)."""
    count = profile.sample_count
    agg = _cache.get(profile)
    if agg is None or agg.sample_count != count or agg.interval_at_start != nominal_interval_ns(profile):
        agg = _cache[profile] = Aggregate(profile)
    return agg

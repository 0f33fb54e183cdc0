"""One profile from many processes (`record --subprocesses`), and the view that roots each
process's stacks in a `process <pid> <cmdline>` frame.

Each followed process streams its own profile with its own table indexes;
`merge_processes` re-interns them into one Profile (sample times are all on
CLOCK_MONOTONIC, which every process shares) and lists the processes in
`meta.processes`. `with_process_roots` is what the tree-shaped outputs
(flame graph, collapsed, tree, speedscope, ...) are given: the same samples,
with one root frame per process on top.
"""

from __future__ import annotations

from .processes import ProcessInfo
from .profile import Marker, Profile
from .tables import KINDS, FrameRow, Func

ROOT_KIND = KINDS.index("truncated")  # a synthetic frame, not code


def merge_processes(parts: list[tuple[ProcessInfo, Profile]]) -> Profile:
    """The processes' profiles as one; the first part (the recorded program) gives the metadata."""
    first = parts[0][1]
    out = Profile(first.meta.copy())
    out.meta.processes = []
    for info, part in parts:
        _add_process(out, info, part)
    _combine_stats(out, parts)
    return out


def _add_process(out: Profile, info: ProcessInfo, part: Profile) -> None:
    strings = [out.strings.intern(s) for s in part.strings.strings]
    funcs = [out.funcs.intern(Func(strings[f.name], strings[f.file], f.first_line)) for f in part.funcs]
    frames = [out.frames.intern(FrameRow(funcs[r.func], r.line, r.kind)) for r in part.frames]
    stacks: list[int] = []
    for prefix, frame in zip(part.stacks.prefix, part.stacks.frame, strict=True):
        stacks.append(out.stacks.intern(stacks[prefix] if prefix >= 0 else -1, frames[frame]))
    keys: dict[int, int] = {}
    child = info.how != "main"
    for tid, thread in part.threads.items():
        key = tid
        while key in out.threads:  # a tid reused by another process: keep both threads apart
            key += 1 << 32
        keys[tid] = key
        # A child's threads say whose they are wherever threads are listed (per-thread views, the summary).
        copy = out.thread(key, f"{thread.name} (pid {info.pid})" if child else thread.name)
        copy.time_ns.extend(thread.time_ns)
        copy.stack.extend(stacks[s] if s >= 0 else -1 for s in thread.stack)
        copy.weight_ns.extend(thread.weight_ns)
        copy.cpu_delta_ns.extend(thread.cpu_delta_ns)
        copy.state.extend(thread.state)
    for m in part.markers:
        out.markers.append(Marker(m.name, m.start_ns, m.end_ns, keys.get(m.thread_id, m.thread_id), dict(m.data)))
    out.meta.processes.append(
        ProcessInfo(info.pid, list(info.command), info.parent, info.how, info.complete, list(keys.values()),
                    info.start_cpu_ns)
    )  # fmt: skip


def _combine_stats(out: Profile, parts: list[tuple[ProcessInfo, Profile]]) -> None:
    """The sampler's counts over every process; the children's notes once each."""
    stats = out.meta.sampler_stats
    if stats is None:
        return
    notes = list(stats.notes)
    for _info, part in parts[1:]:
        child = part.meta.sampler_stats
        if child is None:
            stats.samples += part.sample_count
            continue
        stats.samples += max(child.samples, part.sample_count)  # a stream cut short sent samples after its stats
        stats.dropped += child.dropped
        for reason, count in child.partial.items():
            stats.partial[reason] = stats.partial.get(reason, 0) + count
        for note in child.notes:
            text = f"in child processes: {note}"
            if note not in stats.notes and text not in notes:
                notes.append(text)
    children = len(parts) - 1
    cut = sum(1 for info, _ in parts[1:] if not info.complete)
    notes.append(
        f"followed {children} child process{'' if children == 1 else 'es'}"
        + (
            f"; {cut} ended without finishing their stream (killed, crashed or os._exit: each may miss"
            " its last 50 ms of samples, its last drain)"
            if cut
            else ""
        )
    )
    stats.notes = notes


def with_process_roots(profile: Profile) -> Profile:
    """A copy whose stacks start with their process's `process <pid> <cmdline>` frame; the
    profile itself when it has no process groups."""
    processes = profile.meta.processes
    if not processes:
        return profile
    out = Profile(profile.meta.copy())
    for s in profile.strings.strings:
        out.strings.intern(s)
    for f in profile.funcs:
        out.funcs.intern(f)
    for r in profile.frames:
        out.frames.intern(r)
    for prefix, frame in zip(profile.stacks.prefix, profile.stacks.frame, strict=True):
        out.stacks.intern(prefix, frame)
    owner = {tid: info for info in processes for tid in info.threads}
    remaps: dict[int, dict[int, int]] = {}
    for tid, thread in profile.threads.items():
        info = owner.get(tid)
        copy = out.thread(tid, thread.name)
        if info is None:
            copy.stack.extend(thread.stack)
        else:
            remap = remaps.get(id(info))
            if remap is None:
                root_func = out.funcs.intern(Func(out.strings.intern(info.label), out.strings.intern(""), 0))
                root = out.stacks.intern(-1, out.frames.intern(FrameRow(root_func, 0, ROOT_KIND)))
                remap = remaps[id(info)] = {-1: root}
            copy.stack.extend(_rooted(profile, out, remap, s) for s in thread.stack)
        copy.time_ns.extend(thread.time_ns)
        copy.weight_ns.extend(thread.weight_ns)
        copy.cpu_delta_ns.extend(thread.cpu_delta_ns)
        copy.state.extend(thread.state)
    out.markers = list(profile.markers)
    return out


def _rooted(profile: Profile, out: Profile, remap: dict[int, int], stack: int) -> int:
    """`stack` of `profile` under the process root whose stacks `remap` holds."""
    found = remap.get(stack)
    if found is not None:
        return found
    path = []
    while stack not in remap:
        path.append(stack)
        stack = profile.stacks.prefix[stack]
    idx = remap[stack]
    for s in reversed(path):
        idx = remap[s] = out.stacks.intern(idx, profile.stacks.frame[s])
    return idx

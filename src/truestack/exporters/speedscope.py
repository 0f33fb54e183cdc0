"""speedscope's file format (https://www.speedscope.app/file-format-schema.json).

One "sampled" profile per thread over one shared frame list. Samples are
aggregated per unique stack (in order of first appearance) with their summed
weight, which keeps a million-sample recording to a file speedscope can open;
the Left Heavy and Sandwich views are exact, Time Order shows each stack once.
Weights are nanoseconds (CPU time in cpu mode, wall time in wall mode); a
profile recorded without weights falls back to weighted sample counts.
"""

from __future__ import annotations

import json
from typing import Any

from ..model import Profile
from ..model.aggregate import EMPTY_STACK_LABEL, aggregate
from ..model.facts import facts_line

SCHEMA_URL = "https://www.speedscope.app/file-format-schema.json"


def _frame_entry(profile: Profile, frame: int) -> dict[str, Any]:
    row = profile.frames[frame]
    func = profile.funcs[row.func]
    entry: dict[str, Any] = {"name": profile.strings[func.name] or "<unknown>"}
    path = profile.strings[func.file]
    if path:
        entry["file"] = path
        line = row.line if row.line > 0 else func.first_line
        if line > 0:
            entry["line"] = line
    return entry


def _per_thread_totals(profile: Profile, tid: int) -> tuple[list[int], list[int], str]:
    """Unique stacks of a thread in first-seen order, their weights, and the unit."""
    agg = aggregate(profile)
    weights = {stack: weight for stack, (_n, weight) in agg.thread_stack_totals(tid).items()}
    if any(weights.values()):
        return list(weights), list(weights.values()), "nanoseconds"
    counts = agg.thread_stack_counts(tid)
    return list(counts), list(counts.values()), "none"


def export(profile: Profile) -> bytes:
    shared_index: dict[int, int] = {}  # profile frame -> speedscope frame
    frames: list[dict[str, Any]] = []
    empty_frame: int | None = None
    stack_json: dict[int, str] = {}  # profile stack -> JSON text of its frame list

    def encode_stack(stack: int) -> str:
        nonlocal empty_frame
        text = stack_json.get(stack)
        if text is not None:
            return text
        if stack < 0:
            if empty_frame is None:
                empty_frame = len(frames)
                frames.append({"name": EMPTY_STACK_LABEL})
            ids = [empty_frame]
        else:
            ids = []
            for f in profile.stack_frames(stack):
                idx = shared_index.get(f)
                if idx is None:
                    idx = shared_index[f] = len(frames)
                    frames.append(_frame_entry(profile, f))
                ids.append(idx)
        text = stack_json[stack] = "[" + ",".join(map(str, ids)) + "]"
        return text

    profiles_json: list[str] = []
    for tid, thread in profile.threads.items():
        if not len(thread):
            continue
        stacks, weights, unit = _per_thread_totals(profile, tid)
        header = {
            "type": "sampled",
            "name": f"{thread.name or 'thread'} (tid {tid})",
            "unit": unit,
            "startValue": 0,
            "endValue": sum(weights),
        }
        head = json.dumps(header, ensure_ascii=False)[:-1]
        samples = ",".join(encode_stack(s) for s in stacks)
        profiles_json.append(f'{head},"samples":[{samples}],"weights":{json.dumps(weights)}}}')
    name = " ".join(profile.meta.command)
    top = {
        "$schema": SCHEMA_URL,
        "name": f"{name or 'truestack profile'} ({facts_line(profile)})",
        "activeProfileIndex": 0,
        "exporter": f"truestack {profile.meta.truestack_version}".strip(),
        "shared": {"frames": frames},
    }
    head = json.dumps(top, ensure_ascii=False)[:-1]
    return f'{head},"profiles":[{",".join(profiles_json)}]}}'.encode()

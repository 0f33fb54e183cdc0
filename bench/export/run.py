"""Time exporting a synthetic profile to every format.

    python bench/export/run.py [--samples 1000000] [--stacks 5000] [--threads 4]

The profile is shaped like a real recording: several threads, a few thousand
unique stacks 20-40 frames deep that share long prefixes (call trees do), a
skewed stack popularity, CPU-mode weights that jitter around the interval,
and a few markers. Formats whose module is missing are skipped and named.
"""
from __future__ import annotations

import argparse
import importlib
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from truestack_path import make_importable

make_importable()

from truestack.exporters import FORMATS, export
from truestack.model import Marker, Profile
from truestack.model.aggregate import aggregate
from truestack.samples import Frame

RATE_HZ = 1000
INTERVAL_NS = 1_000_000


def synthetic_profile(n_samples: int, n_stacks: int, n_threads: int, seed: int = 1) -> Profile:
    rng = random.Random(seed)
    start = time.monotonic_ns()
    profile = Profile({"rate_hz": RATE_HZ, "mode": "cpu", "engine": "synthetic", "start_monotonic_ns": start,
                       "command": ["bench.py"], "python_version": sys.version.split()[0]})
    files = [f"/srv/app/pkg{i % 7}/module_{i}.py" for i in range(60)]
    funcs = [(f"Class{i % 40}.method_{i}", files[i % len(files)], 10 + (i * 37) % 900) for i in range(900)]

    def frame(func: tuple[str, str, int]) -> Frame:
        return Frame(func[0], func[1], func[2] + rng.randrange(1, 30), func[2])

    # Grow stacks from shared trunks, as real call trees do.
    trunks = [tuple(frame(rng.choice(funcs)) for _ in range(rng.randrange(8, 16))) for _ in range(40)]
    stacks: list[int] = []
    seen = set()
    while len(stacks) < n_stacks:
        depth = rng.randrange(20, 41)
        base = rng.choice(trunks)
        frames = base + tuple(frame(rng.choice(funcs)) for _ in range(depth - len(base)))
        if frames in seen:
            continue
        seen.add(frames)
        stacks.append(profile.intern_stack(frames))
    # Zipf-like popularity: a few hot stacks, a long tail.
    weights = [1.0 / (i + 1) ** 0.9 for i in range(len(stacks))]
    per_thread = n_samples // n_threads
    for t in range(n_threads):
        thread = profile.thread(1000 + t, "MainThread" if t == 0 else f"worker-{t}")
        chosen = rng.choices(stacks, weights, k=per_thread if t else n_samples - per_thread * (n_threads - 1))
        n = len(chosen)
        thread.stack.extend(chosen)
        thread.time_ns.extend(range(start + t * 1000, start + t * 1000 + n * INTERVAL_NS, INTERVAL_NS))
        jitter = [INTERVAL_NS + rng.randrange(-200_000, 200_000) for _ in range(1024)]
        thread.weight_ns.extend(jitter[i & 1023] for i in range(n))
        thread.cpu_delta_ns.extend(jitter[i & 1023] for i in range(n))
        thread.state.extend(bytes([1]) * n)
    for i in range(50):
        profile.add_marker(Marker(f"span {i}", start + i * 10_000_000, start + i * 10_000_000 + 5_000_000, 1000))
    return profile


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1_000_000)
    parser.add_argument("--stacks", type=int, default=5000)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--formats", default=",".join(FORMATS))
    args = parser.parse_args()

    t0 = time.perf_counter()
    profile = synthetic_profile(args.samples, args.stacks, args.threads)
    built = time.perf_counter() - t0
    print(f"profile: {profile.sample_count:,} samples, {len(profile.threads)} threads, "
          f"{args.stacks:,} unique stacks, {len(profile.stacks):,} stack-tree nodes, "
          f"{len(profile.frames):,} frames (built in {built:.2f} s)")
    t0 = time.perf_counter()
    aggregate(profile).stack_totals
    print(f"stack_totals over all samples: {time.perf_counter() - t0:.2f} s\n")

    # Wall time is what a user waits; CPU time is steadier on a shared machine.
    print(f"{'format':<12} {'wall s':>8} {'cpu s':>8} {'size':>12}")
    skipped = []
    for name in args.formats.split(","):
        try:
            importlib.import_module(f"truestack.exporters.{FORMATS[name].module}")
        except ModuleNotFoundError as exc:
            skipped.append(f"{name} ({exc})")
            continue
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            data = export(profile, name)
        except Exception as exc:
            print(f"{name:<12} {'error':>8} {type(exc).__name__}: {exc}")
            continue
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
        print(f"{name:<12} {elapsed:>8.2f} {cpu:>8.2f} {len(data) / 1e6:>9.1f} MB")
    for entry in skipped:
        print(f"skipped: {entry}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

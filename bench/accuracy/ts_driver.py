"""Profile a script with the truestack Python API and write collapsed stacks.

Used by the benches only while `python -m truestack record` is not available
(the CLI is built in parallel with the engines); the output format is the one
`record -f collapsed` writes: root-first `qualname (path:line)` frames joined
by `;`, a space, and the weighted sample count.

    python ts_driver.py --engine native --mode cpu --rate 1000 -o OUT script.py [args]
"""
from __future__ import annotations

import argparse
import runpy
import sys
from collections import Counter


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--engine", default="auto")
    parser.add_argument("--mode", default="cpu")
    parser.add_argument("--rate", default="1000")
    parser.add_argument("-o", "--output", required=True)
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    args = parser.parse_args()

    from truestack.sampler import Sampler

    counts: Counter[str] = Counter()
    unit_ns = 1e9 / float(Sampler(mode=args.mode, rate=args.rate).rate_hz)

    def sink(batch) -> None:
        for sample in batch:
            stack = ";".join(f"{f.name} ({f.file}:{f.line})" for f in sample.frames)
            # weighted count: one unit per sampling interval of CPU/wall time
            counts[stack] += sample.weight_ns / unit_ns if sample.weight_ns else 1.0

    sampler = Sampler(mode=args.mode, rate=args.rate, engine=args.engine, on_samples=sink)
    sys.argv = [args.script, *args.args]
    sampler.start()
    try:
        runpy.run_path(args.script, run_name="__main__")
    finally:
        sampler.stop()
        with open(args.output, "w") as fh:
            for stack, weight in counts.items():
                if round(weight) > 0:
                    fh.write(f"{stack} {round(weight)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

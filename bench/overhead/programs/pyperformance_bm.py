"""Runs one benchmark from the pyperformance package in-process, without
pyperf's runner (which forks workers a profiler would not follow).

OVERHEAD_BM names it (nbody, richards, json_dumps, float); OVERHEAD_SCALE is
the number of inner loops. Exits with status 3 when pyperformance is missing.
"""
import importlib.util
import os
import sys


def load(name):
    try:
        import pyperformance
    except ImportError:
        print("pyperformance is not installed", file=sys.stderr)
        sys.exit(3)
    path = os.path.join(os.path.dirname(pyperformance.__file__), "data-files", "benchmarks",
                        f"bm_{name}", "run_benchmark.py")
    spec = importlib.util.spec_from_file_location(f"bm_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    name = os.environ.get("OVERHEAD_BM", "nbody")
    scale = int(os.environ.get("OVERHEAD_SCALE", "1"))
    bm = load(name)
    if name == "nbody":
        bm.bench_nbody(scale, "sun", 2_000)
    elif name == "richards":
        bm.Richards().run(scale)
    elif name == "json_dumps":
        data = [(obj, range(count)) for obj, count in (bm.EMPTY, bm.SIMPLE, bm.NESTED, bm.HUGE)]
        for _ in range(scale):
            bm.bench_json_dumps(data)
    elif name == "float":
        for _ in range(scale):
            bm.benchmark(10_000)
    else:
        print(f"unknown benchmark {name}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()

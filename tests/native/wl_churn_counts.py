"""Code churn under the Sampler at 1 kHz, reporting counts rather than times.

The main thread execs, replaces and drops code objects at a high rate (as
bench/accuracy/workloads/code_churn.py does); the Sampler's collector thread
drains as in a real session. Printed: the destroy hook's runs and folds, the
frames it resolved, and the collector's wake-ups, drains and GIL hand-backs.

usage: wl_churn_counts.py MODE SECONDS
"""
import sys
import time

from wl_common import emit

from truestack import _native
from truestack.sampler import Sampler

mode, seconds = sys.argv[1], float(sys.argv[2])


def template(n):
    total = 0
    for i in range(n):
        total += i * i
    return total


def churn(serial):
    acc = 0
    for k in range(10):
        tag = serial * 10 + k
        ns = {}
        exec(f"def churned_{tag}(n):\n    total = {tag}\n    for i in range(n):\n        total += i * i\n"
             f"    return total\n", ns)
        acc += ns[f"churned_{tag}"](3000)
        replaced = template.__code__.replace(co_consts=(*template.__code__.co_consts, tag))
        acc += type(template)(replaced, {"range": range})(3000)
        acc += (lambda n, t=tag: sum(i * i for i in range(n)) + t)(3000)
    return acc


seen = {"churned": 0}


def on_samples(batch):
    seen["churned"] += sum(any(f.name.startswith("churned_") for f in s.frames) for s in batch)


resolved0 = _native.codes_resolved_at_death()
sampler = Sampler(mode=mode, rate=1000, engine="native", on_samples=on_samples)
sampler.start()
deadline = time.monotonic() + seconds
serial = 0
while time.monotonic() < deadline:
    serial += 1
    churn(serial)
elapsed = time.monotonic() - deadline + seconds
stats = sampler.stop()
extra = stats.extra
emit({
    "rounds": serial,
    "elapsed": elapsed,
    "samples": stats.samples,
    **seen,
    "code_deaths": extra["code_deaths"],
    "code_death_folds": extra["code_death_folds"],
    "resolved_at_death": _native.codes_resolved_at_death() - resolved0,
    "collector_wakeups": extra["collector_wakeups"],
    "collector_drains": extra["collector_drains"],
    "collector_gil_handbacks": extra["collector_gil_handbacks"],
    "collector_drain_blocks": extra["collector_drain_blocks"],
})

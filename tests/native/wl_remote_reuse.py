"""A blocked thread's code object freed and its address reused while the
control thread is between its remote walk and the sample it publishes.

Wall mode walks a thread that did not run from the control thread. The main
thread here sleeps inside code object k (aba_k: its own name, a fresh code
object per round), then wakes, drops it and makes code k+1, which the
allocator tends to place at k's freed address. The test hook
_test_remote_pause holds the control thread for PAUSE_MS after a walk has
read the frames, as a preempted control thread would be on a loaded
machine. A sample must still name the code that ran at its time: a sample
of aba_k resolved through the reused address would name aba_{k+1} at a time
before aba_{k+1} existed.

usage: wl_remote_reuse.py SECONDS PAUSE_MS
"""
import sys
import time
import types

from wl_common import emit

from truestack import _native
from truestack.sampler import Sampler

seconds, pause_ms = float(sys.argv[1]), float(sys.argv[2])
windows: dict[str, list[int]] = {}  # name -> [start_ns, end_ns]
samples: list = []


def base():
    time.sleep(0.002)  # blocked: the control thread walks this thread remotely
    return 0


sampler = Sampler(mode="wall", rate=1000, engine="native", on_samples=samples.extend)
_native._test_remote_pause(int(pause_ms * 1e6))
sampler.start()
deadline = time.monotonic() + seconds
rounds = 0
while time.monotonic() < deadline:
    name = f"aba_{rounds}"
    extra = {"co_qualname": name} if sys.version_info >= (3, 11) else {}
    fn = types.FunctionType(base.__code__.replace(co_name=name, **extra), globals())
    window = windows[name] = [time.monotonic_ns(), 0]
    fn()
    window[1] = time.monotonic_ns()
    del fn
    rounds += 1
stats = sampler.stop()
_native._test_remote_pause(0)

tagged = misattributed = 0
examples = []
for s in samples:
    for f in s.frames:
        if not f.name.startswith("aba_"):
            continue
        tagged += 1
        w = windows.get(f.name)
        if w is None or not w[0] <= s.time_ns <= w[1]:
            misattributed += 1
            if len(examples) < 5:
                examples.append([f.name, s.time_ns, w])
emit({
    "rounds": rounds,
    "samples": len(samples),
    "tagged": tagged,
    "misattributed": misattributed,
    "examples": examples,
    "remote_samples": stats.extra.get("remote_samples"),
    "codes_resolved_at_death": stats.extra.get("codes_resolved_at_death"),
})

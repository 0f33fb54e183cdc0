"""Wall mode's remote walks never name a freed and reused code object.

The control thread walks a blocked thread's frames without signalling it. A
CI run of the stress test (3.13, wall) once showed a churned code object's
name on a sample taken ~2 ms before that code object existed: the control
thread had read the frames, checked the thread had not run, and only then
claimed a ring slot. In between, the thread ran on, freed the code and made
a new one at the same address; the destroy hook saw no pending sample
holding the dying code, so the late sample was resolved to the new one.
The test hook widens that moment to a few milliseconds on every remote walk.

The number of rounds also guards the destroy hook's own bound: it waits only
for slots claimed before the code began dying. When it chased every slot
claimed while it waited, the control thread (held 1 ms per walk) kept one
`del` of a function busy for 68 ms (median) to 0.5 s, and the 3-second run
made 18-52 rounds instead of ~1,300.
"""
from __future__ import annotations

from _runner import run_workload


def test_a_code_object_freed_during_a_remote_walk_is_never_misnamed():
    r = run_workload("wl_remote_reuse.py", 3, 1)
    assert r["rounds"] >= 200, r  # the blocked code was churned (and its deaths did not wait on later walks)
    assert r["remote_samples"] >= 100 and r["tagged"] >= 50, r  # and walked remotely, inside it
    assert r["misattributed"] == 0, r["examples"]

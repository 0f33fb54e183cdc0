"""Profiles of several processes (`record --subprocesses`): merging the processes' profiles,
and how each output shows a process."""
from __future__ import annotations

import gzip
import io
import json

from profile_factory import make_profile

from truestack.exporters import export, pprof
from truestack.exporters.summary import render_summary
from truestack.model.merge import merge_processes, with_process_roots
from truestack.model.processes import ProcessInfo, command_text
from truestack.model.storage import dumps, read
from truestack.recording.output import output_view
from truestack.samples import Frame, Sample

CHILD_FRAME = Frame("child_work", "/app/child.py", 4, 3)


def child_profile(tid: int = 1):
    """A second process: its own tables (so its indexes differ from the program's), one thread."""
    profile = make_profile(interrupted=None)
    profile.threads.clear()
    for i in range(5):
        profile.add_sample(Sample(tid, "MainThread", 6_000_000_000 + i, 10_000_000, (CHILD_FRAME,)))
    return profile


def merged():
    program = ProcessInfo(100, ["python", "app.py", "--fast"], 1, "main")
    child = ProcessInfo(200, ["python", "-c", "import child\nchild.run()"], 100, "exec", complete=False)
    return merge_processes([(program, make_profile()), (child, child_profile())])


def stack_names(profile, stack):
    return [profile.func_name(profile.frame_func(f)) for f in profile.stack_frames(stack)]


def test_merge_keeps_every_process_samples_apart_and_tid_clashes_apart():
    program = make_profile()
    profile = merged()
    main, child = profile.meta.processes
    assert (main.pid, child.pid, child.parent, child.how, child.complete) == (100, 200, 100, "exec", False)
    assert main.threads == [1, 2]
    # The child's thread 1 clashes with the program's thread 1: kept apart under another key.
    assert len(child.threads) == 1 and child.threads[0] not in main.threads
    assert profile.sample_count == program.sample_count + 5
    child_thread = profile.threads[child.threads[0]]
    assert [stack_names(profile, s) for s in child_thread.stack] == [["child_work"]] * 5
    for tid in main.threads:  # the program's stacks read the same after re-interning
        assert [stack_names(profile, s) for s in profile.threads[tid].stack] == [
            stack_names(program, s) for s in program.threads[tid].stack
        ]
    stats = profile.meta.sampler_stats
    assert stats.samples == program.meta.sampler_stats.samples + 12  # the child's stats say 12 taken
    assert any("followed 1 child process; 1 ended without finishing" in n for n in stats.notes), stats.notes
    assert any("may miss its last 50 ms of samples" in n for n in stats.notes), stats.notes


def test_process_root_frames_in_tree_outputs_and_not_without_processes():
    profile = merged()
    rooted = with_process_roots(profile)
    main, child = profile.meta.processes
    for tid in main.threads:
        assert all(stack_names(rooted, s)[0] == "process 100 python app.py --fast" for s in rooted.threads[tid].stack)
    child_stacks = rooted.threads[child.threads[0]].stack
    assert {tuple(stack_names(rooted, s)) for s in child_stacks} == {
        ("process 200 python -c 'import child child.run()'", "child_work")
    }
    collapsed = export(output_view(profile, "collapsed", False, False), "collapsed").decode().splitlines()
    assert {line.rsplit(" ", 1)[0].split(";")[0] for line in collapsed} == {  # an empty stack: the root alone
        "process 100 python app.py --fast", "process 200 python -c 'import child child.run()'"
    }
    single = make_profile()
    assert with_process_roots(single) is single
    assert not any(line.startswith("process ") for line in export(single, "collapsed").decode().splitlines())


def test_firefox_gives_each_process_its_own_track():
    profile = merged()
    data = json.loads(export(profile, "firefox"))
    by_pid: dict[str, list[dict]] = {}
    for thread in data["threads"]:
        by_pid.setdefault(thread["pid"], []).append(thread)
    assert set(by_pid) == {"100", "200"}
    assert {t["processName"] for t in by_pid["200"]} == {"process 200 python -c 'import child child.run()'"}
    assert [t["isMainThread"] for t in by_pid["200"]] == [False]  # its thread 1 is not its pid
    assert sum(t["isMainThread"] for t in by_pid["100"]) == 1


def test_pprof_labels_each_sample_with_its_process():
    msg = pprof.message_classes()["Profile"]()
    msg.ParseFromString(gzip.decompress(export(merged(), "pprof")))
    s = msg.string_table
    pids = {lb.num for x in msg.sample for lb in x.label if s[lb.key] == "pid"}
    names = {s[lb.str] for x in msg.sample for lb in x.label if s[lb.key] == "process"}
    assert pids == {100, 200}
    assert names == {"process 100 python app.py --fast", "process 200 python -c 'import child child.run()'"}
    single = msg.__class__()
    single.ParseFromString(gzip.decompress(export(make_profile(), "pprof")))
    assert not any(single.string_table[lb.key] == "pid" for x in single.sample for lb in x.label)


def test_summary_counts_samples_per_process():
    text = render_summary(merged(), top=0)
    assert "  processes: 2" in text
    assert "process 200 python -c 'import child child.run()': 5 samples, 0.05 s CPU (started by 100, stream cut short" in text
    assert "processes:" not in render_summary(make_profile(), top=0)


def test_processes_survive_a_save_and_other_profiles_do_not_mention_them():
    profile = merged()
    again = read(io.BytesIO(dumps(profile)))
    assert again.meta.processes == profile.meta.processes
    assert "processes" not in make_profile().meta.to_dict()


def test_command_text_is_short_and_on_one_line():
    assert command_text(["/usr/bin/python3.12", "x y.py", ""]) == "python3.12 'x y.py' ''"
    long = command_text(["python", "-c", "x" * 500])
    assert len(long) == 100 and long.endswith("…")

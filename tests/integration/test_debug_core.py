"""Breakpoints, stepping and the shell, driven through the real CLI in a pty."""
from __future__ import annotations

import re
import sys

import pytest
from test_debug_support import FIB, DebugSession, line_of, write

pytestmark = pytest.mark.timeout(60)

# On 3.12+ run the core session with both backends; before 3.12 settrace is the only one.
BACKENDS = ["default", "settrace"] if sys.version_info >= (3, 12) else ["default"]


def _env(backend: str) -> dict[str, str]:
    from conftest import truestack_env

    extra = {"TRUESTACK_DEBUG_BACKEND": "settrace"} if backend == "settrace" else {}
    return truestack_env(**extra)


@pytest.mark.parametrize("backend", BACKENDS)
def test_line_breakpoint_locals_and_next(tmp_path, backend):
    prog = write(tmp_path, "prog.py", FIB)
    s = DebugSession(["prog.py", "4"], tmp_path, env=_env(backend))
    out = s.wait_prompt()
    assert "[entry]" in out and "prog.py:1 in <module>()" in out  # stops before the first line
    out = s.cmd(f"b prog.py:{line_of(prog, 'CALL2')}")
    assert f"Breakpoint 1 at {tmp_path / 'prog.py'}:{line_of(prog, 'CALL2')}" in out
    out = s.cmd("c")
    assert f"prog.py:{line_of(prog, 'CALL2')} in fib()  [breakpoint 1, hit 1]" in out
    assert "->B" in out  # current line marked, and it has a breakpoint
    assert s.cmd("p n").strip() == "2"
    assert s.cmd("f1").strip() == "1"
    assert s.cmd("n * 10 + f1").strip() == "21"  # locals, plain Python
    s.cmd("f1 = 100")  # assignment reaches the frame
    s.cmd("cl 1")
    out = s.cmd("n")
    assert f"prog.py:{line_of(prog, 'SUM')} in fib()  [next]" in out
    assert s.cmd("p f1, f2").strip() == "(100, 0)"
    out = s.last("c")
    assert "result 102" in out  # fib(2) became 100 + 0, so fib(4) = (100 + 1) + 1
    assert s.exitstatus() == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_function_and_conditional_breakpoints_step_and_step_out(tmp_path, backend):
    prog = write(tmp_path, "prog.py", FIB)
    s = DebugSession(["prog.py", "5"], tmp_path, env=_env(backend))
    s.wait_prompt()
    out = s.cmd("b fib if n == 2")  # fib is not defined yet: found in the file, like pdb
    assert f"Breakpoint 1 at {tmp_path / 'prog.py'}:{line_of(prog, 'FIRST')} in fib if n == 2" in out
    out = s.cmd("c")
    assert "[breakpoint 1, hit 1]" in out
    assert s.cmd("p n").strip() == "2"
    assert s.cmd("len(where.__doc__) > 0").strip() == "True"
    out = s.cmd("w")
    # the script's frames carry its absolute path, as under `python prog.py` (and pdb)
    assert re.search(r"#\d+ \S*/prog\.py:\d+ in <module>\(\)", out)
    assert f"> #0 {tmp_path / 'prog.py'}:" in out
    s.cmd("disable(1)")
    out = s.cmd("n")
    assert f":{line_of(prog, 'CALL1')} in fib()" in out
    out = s.cmd("s")  # step into the recursive call
    assert f":{line_of(prog, 'FIRST')} in fib()  [step]" in out
    assert s.cmd("p n").strip() == "1"
    out = s.cmd("r")  # step out: back in the caller, with the return value
    assert "fib() returned 1" in out
    assert f":{line_of(prog, 'CALL2')} in fib()  [return]" in out
    assert s.cmd("p f1, n").strip() == "(1, 2)"
    out = s.cmd("u")
    assert f":{line_of(prog, 'CALL1')} in fib()" in out
    assert s.cmd("p n").strip() == "3"
    s.cmd("d")
    out = s.cmd("breaks()")
    assert "Breakpoint 1 at" in out and "if n == 2 [disabled], hit 1 time" in out
    out = s.last("c")
    assert "result 5" in out
    assert s.exitstatus() == 0


def test_until_helpers_display_and_help(tmp_path):
    prog = write(tmp_path, "loop.py", """
        def count():
            total = 0
            for i in range(4):  # LOOP
                total += i  # BODY
            return total  # RET


        print("total", count())
    """)
    s = DebugSession(["--no-stop", "loop.py"], tmp_path)
    s.child.expect_exact("total 6")  # --no-stop with no breakpoints: just runs
    assert s.exitstatus() == 0

    s = DebugSession(["loop.py"], tmp_path)
    s.wait_prompt()
    out = s.cmd("break_at_func('__main__:count')")
    assert "Breakpoint 1 at" in out
    s.cmd("c")
    s.cmd("next()")
    out = s.cmd("display('total')")
    assert "display total: 0" in out
    out = s.cmd(f"until({line_of(prog, 'RET')})")
    assert f"loop.py:{line_of(prog, 'RET')} in count()  [until]" in out
    assert "display total: 6" in out  # watch expressions shown at each stop
    out = s.cmd("help(step_out)")
    assert "step_out()" in out and "returns" in out
    out = s.cmd("help()")
    assert "break_at_line(" in out and "skip_breaks(" in out
    out = s.cmd("context(1, 1)")
    assert f"->  {line_of(prog, 'RET')}" in out.replace("->B", "-> ") or f"-> {line_of(prog, 'RET')}" in out
    out = s.cmd("show_function()")
    assert "def count():" in out
    out = s.last("q")
    assert "total" not in out  # quit ends the program before it prints
    assert s.exitstatus() == 0


def test_bad_input(tmp_path):
    prog = write(tmp_path, "prog.py", FIB)
    s = DebugSession(["prog.py", "3"], tmp_path)
    s.wait_prompt()
    blank = line_of(prog, "BLANK")
    out = s.cmd(f"b prog.py:{blank}")
    assert f"line {blank} has no code; moved to line {line_of(prog, 'CALL2')}" in out
    out = s.cmd("b nosuchfile.py:3")
    assert "*** no such file: nosuchfile.py" in out
    out = s.cmd("b prog.py:9999")
    assert "*** no code at or after line 9999" in out
    out = s.cmd("b nosuchfunc")
    assert "*** no function named 'nosuchfunc'" in out
    out = s.cmd("break_at_func('json:nosuch')")
    assert "*** no function 'json:nosuch'" in out
    out = s.cmd("break_at_func('nosuchmodule_xyz:f')")
    assert "*** cannot import module 'nosuchmodule_xyz'" in out
    out = s.cmd("1 / 0")
    assert "ZeroDivisionError: division by zero" in out and "truestack" not in out
    out = s.cmd("def broken(:")
    assert "SyntaxError" in out
    out = s.cmd("remove_break(42)")
    assert "*** no breakpoint number 42" in out
    assert s.cmd("p 1 + 1").strip() == "2"  # the session goes on
    out = s.cmd("c")
    assert "[breakpoint 1, hit 1]" in out
    s.cmd("cl")
    out = s.last("c")
    assert "result 2" in out
    assert s.exitstatus() == 0


def test_post_mortem(tmp_path):
    write(tmp_path, "crash.py", """
        def divide(a, b):
            return a / b


        def outer():
            total = 10
            return divide(total, 0)


        outer()
    """)
    s = DebugSession(["crash.py"], tmp_path)
    s.wait_prompt()
    out = s.cmd("c")
    assert "ZeroDivisionError: division by zero" in out
    assert "post-mortem" in out and "crash.py:2 in divide()" in out
    assert "truestack" not in out.split("Traceback")[1].split("post-mortem")[0]  # user frames only
    assert s.cmd("p a, b").strip() == "(10, 0)"
    out = s.cmd("n")
    assert "post-mortem: the program has ended" in out
    s.cmd("u")
    assert s.cmd("total").strip() == "10"
    s.last("c")
    assert s.exitstatus() == 1


def test_no_post_mortem_and_usage_errors(tmp_path):
    write(tmp_path, "crash.py", "raise ValueError('boom')\n")
    s = DebugSession(["--no-stop", "--no-post-mortem", "crash.py"], tmp_path)
    out = s.child.read()
    assert "ValueError: boom" in out and "post-mortem" not in out
    assert s.exitstatus() == 1

    from conftest import run_truestack

    result = run_truestack("debug", "missing.py", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == "truestack: error: no such script: missing.py"


def test_breakpoint_builtin_module_mode_and_pythonbreakpoint(tmp_path):
    (tmp_path / "pkg").mkdir()
    write(tmp_path, "pkg/__init__.py", "")
    write(tmp_path, "pkg/tool.py", """
        import sys


        def main(args):
            value = len(args) * 7
            breakpoint()
            return value


        print("value", main(sys.argv[1:]))
    """)
    s = DebugSession(["--no-stop", "-m", "pkg.tool", "a", "--b"], tmp_path)
    out = s.wait_prompt()
    assert "tool.py:6 in main()  [breakpoint()]" in out
    assert s.cmd("p args, value").strip() == "(['a', '--b'], 14)"
    s.cmd("value = 1")
    out = s.last("c")
    assert "value 1" in out
    assert s.exitstatus() == 0

    # Plain python with PYTHONBREAKPOINT: no `truestack debug` involved.
    from conftest import truestack_env

    env = truestack_env(PYTHONBREAKPOINT="truestack.debug.breakpoint")
    s = DebugSession(["-m", "pkg.tool", "x"], tmp_path, env=env, argv0=[sys.executable])
    out = s.wait_prompt()
    assert "tool.py:6 in main()  [breakpoint()]" in out
    out = s.cmd("n")
    assert "tool.py:7 in main()  [next]" in out
    assert s.cmd("p value").strip() == "7"
    out = s.last("c")
    assert "value 7" in out
    assert s.exitstatus() == 0


def test_set_trace_api(tmp_path):
    write(tmp_path, "st.py", """
        import truestack.debug


        def f():
            secret = 42
            truestack.debug.set_trace()
            return secret


        print("got", f())
    """)
    s = DebugSession(["st.py"], tmp_path, argv0=[sys.executable])
    out = s.wait_prompt()
    assert "st.py:6 in f()  [breakpoint()]" in out
    s.cmd("secret += 1")
    # a breakpoint set now, in the frame that is already running, still hits
    s.cmd("b st.py:7")
    out = s.cmd("c")
    assert "st.py:7 in f()  [breakpoint 1, hit 1]" in out
    assert s.cmd("p secret").strip() == "43"
    out = s.last("c")
    assert "got 43" in out
    assert s.exitstatus() == 0


def test_context_is_highlighted_when_pygments_is_there(tmp_path):
    pygments = pytest.importorskip("pygments")
    assert pygments
    write(tmp_path, "prog.py", FIB)
    s = DebugSession(["prog.py"], tmp_path, color=True)
    out = s.wait_prompt()
    assert "\x1b[" in out  # ANSI colour codes from pygments
    out = s.cmd("context(0, 3)")
    assert "->" in out and "\x1b[" in out
    s.last("q")
    assert s.exitstatus() == 0

    s = DebugSession(["prog.py"], tmp_path)  # NO_COLOR: plain text
    out = s.wait_prompt()
    assert "\x1b[" not in out
    s.last("q")


def _plain_and_debugged(tmp_path, source: str, commands: str, *debug_options: str):
    """(pdb's run, truestack debug's run) of the same script with the same stdin."""
    import subprocess

    from conftest import run_truestack, truestack_env

    write(tmp_path, "prog.py", source)
    pdb = subprocess.run([sys.executable, "-m", "pdb", "prog.py"], cwd=tmp_path, input=commands,
                         capture_output=True, text=True, env=truestack_env(), timeout=30)
    ours = run_truestack("debug", *debug_options, "prog.py", cwd=tmp_path, input=commands, timeout=30)
    return pdb, ours


def test_eof_at_the_prompt_quits_like_pdb(tmp_path):
    # pdb's do_EOF quits: the program does not run on, and the status is 0.
    pdb, ours = _plain_and_debugged(tmp_path, "print('ran', 'to the end')\nraise SystemExit(3)\n", "")
    assert "ran to the end" not in pdb.stdout and pdb.returncode == 0  # the premise: pdb's behaviour
    assert "ran to the end" not in ours.stdout, ours.stdout
    assert ours.returncode == 0, ours.stderr


HELPER_NAMES = {"where", "cont", "break_at_line", "step_out", "display", "help", "locals", "dir", "vars"}


def test_locals_shows_the_programs_names_not_the_shells(tmp_path):
    source = "import sys\nx = 5\ndef f(a):\n    b = a + 1\n    return b  # STOP\nf(1)\n"
    commands = "n\nn\np sorted(locals())\np sorted(vars())\np dir()\nb 5\nc\np locals()\np sorted(globals())\n"
    pdb, ours = _plain_and_debugged(tmp_path, source, commands)
    lists = [eval(line.split(") ", 1)[1]) for line in ours.stdout.splitlines() if line.startswith("(ts) [")]
    assert len(lists) == 4, ours.stdout
    for names in lists:
        assert {"sys", "x", "__name__", "__builtins__"} <= set(names), ours.stdout
        assert not HELPER_NAMES & set(names), names
    # in a function: exactly the frame's locals, as pdb prints them
    assert "{'a': 1, 'b': 2}" in pdb.stdout  # the premise
    assert "{'a': 1, 'b': 2}" in ours.stdout, ours.stdout
    assert "f" in lists[3]  # globals() is the module's

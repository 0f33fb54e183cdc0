"""IPython as the debugger shell, and the error when it is asked for but missing."""
from __future__ import annotations

import os
import re

import pytest
from test_debug_support import FIB, DebugSession, line_of, write

pytestmark = pytest.mark.timeout(60)
IN_PROMPT = re.compile(r"In \[\d+\]: ")


def test_ipython_shell(tmp_path):
    prog = write(tmp_path, "prog.py", FIB)
    s = DebugSession(["--shell", "ipython", "prog.py", "4"], tmp_path)

    def cmd(line: str) -> str:
        s.child.sendline(line)
        s.child.expect(IN_PROMPT)
        s.transcript.append(s.child.before)
        return s.child.before

    s.child.expect(IN_PROMPT)
    assert "[entry]" in s.child.before
    out = cmd(f"b prog.py:{line_of(prog, 'CALL2')}")  # short commands work in IPython too
    assert "Breakpoint 1 at" in out
    out = cmd("c")
    assert "[breakpoint 1, hit 1]" in out
    assert "(2, 1)" in cmd("n, f1")
    assert "[3, 4]" in cmd("[n + i + f1 for i in range(2)]")  # comprehensions see the locals
    cmd("f1 = 50")
    cmd("cl")
    s.child.sendline("cont()")
    s.child.expect("result 52")  # fib(2) = 50 + 0, fib(4) = (50 + 1) + 1
    assert s.exitstatus() == 0


def test_ipython_missing_is_a_usage_error(tmp_path):
    # Hide IPython (installed with the test extras) behind a package that
    # fails to import, as it would on a machine without it.
    from conftest import run_truestack, truestack_env

    blocker = tmp_path / "hide" / "IPython"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('IPython hidden by the test')\n")
    write(tmp_path, "prog.py", "print(1)\n")
    env = truestack_env()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(blocker.parent), env.get("PYTHONPATH")]))
    result = run_truestack("debug", "--shell", "ipython", "prog.py", cwd=tmp_path, env=env)
    assert result.returncode == 2
    assert result.stderr.strip() == "truestack: error: --shell ipython: IPython is not installed"

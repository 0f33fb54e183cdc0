"""The same session typed at `truestack debug` and at `python -m pdb`: the
stops must agree, now that breakpoints run on the C fast path and stepping
switches to tracing and back.

pdb also stops at '--Call--' and '--Return--' events (a function's entry,
its return, a generator's yield) where truestack goes on to the next line;
the pdb side steps through those, so what is compared is where each command
lands on a line.
"""
from __future__ import annotations

import re
import sys

import pexpect
import pytest
from conftest import truestack_env
from test_debug_support import line_of, write

pytestmark = pytest.mark.timeout(120)

PROG = """
import threading


def helper(x):
    y = x * 2  # H1
    return y  # H2


def gen(n):
    for i in range(n):
        yield helper(i)  # G1


async def coro(n):
    total = 0
    for i in range(n):
        total += helper(i)  # C1
    return total


def main():
    total = 0  # M1
    for v in gen(4):
        total += v  # M2
    import asyncio
    total += asyncio.run(coro(2))  # M3
    t = threading.Thread(target=helper, args=(10,))
    t.start()
    t.join()
    print("total", total)  # M4


main()
"""

# (command, the marker or function the command may mention)
SESSION = [
    "b prog.py:{H1}",  # helper is not defined yet
    "c",
    "n",
    "n",  # leaves helper: back in gen, then main
    "s",
    "s",
    "c",  # hook path again: the breakpoint in helper
    "r",  # out of helper
    "tbreak prog.py:{H2}",
    "c",
    "ignore 1 1",
    "condition 1 x == 3",
    "c",
    "p x",
    "condition 1",  # unconditional again (the temporary one went at its stop)
    "c",  # the coroutine's first helper call
    "n",
    "b prog.py:{C1}",
    "cl 1",
    "c",  # in the coroutine, after an await-free loop turn
    "n",
    "cl 3",
    "b prog.py:{H2}",
    "c",  # in the thread
    "p x",
    "cl 4",
    "c",
]

TS_WHERE = re.compile(r"prog\.py:(\d+) in (\w+)\(\)")
PDB_WHERE = re.compile(r"prog\.py\((\d+)\)(\w+)\(\)")


class Driver:
    def __init__(self, command: list[str], prompt: str, where: re.Pattern[str], cwd, pdb: bool) -> None:
        env = truestack_env()
        env.update(PYTHONUNBUFFERED="1", NO_COLOR="1", TERM="dumb")
        self.child = pexpect.spawn(command[0], command[1:], cwd=str(cwd), env=env, encoding="utf-8", timeout=30,
                                   dimensions=(50, 200))
        self.prompt, self.where, self.pdb = prompt, where, pdb
        self.child.expect_exact(prompt)

    def send(self, line: str) -> str:
        self.child.sendline(line)
        index = self.child.expect_exact([self.prompt, pexpect.EOF])
        out = self.child.before
        if index == 1:
            return out + "<EOF>"
        return out.partition("\n")[2]

    def stop_after(self, line: str) -> tuple[str, ...]:
        """(function, line) where the command left the program, or its printed value."""
        out = self.send(line)
        if self.pdb:
            again = "s" if line == "s" else "n"
            for _ in range(6):  # step through pdb's call/return stops
                if "--Return--" not in out and "--Call--" not in out:
                    break
                out = self.send(again)
        if line.startswith("p "):
            return ("value", out.strip().splitlines()[-1].strip())
        found = self.where.findall(out)
        if "<EOF>" in out:
            return ("exit", "total 14" if "total 14" in out else out[-200:])
        if line.split()[0] in ("c", "n", "s", "r"):
            return (found[-1][1], found[-1][0]) if found else ("no stop", out[-300:])
        return ()


def run_session(tmp_path, pdb: bool) -> list[tuple[str, ...]]:
    prog = tmp_path / "prog.py"
    marks = {m: line_of(prog, m) for m in ("H1", "H2", "G1", "C1", "M1", "M2", "M3", "M4")}
    if pdb:
        driver = Driver([sys.executable, "-m", "pdb", "prog.py"], "(Pdb) ", PDB_WHERE, tmp_path, pdb=True)
    else:
        driver = Driver([sys.executable, "-m", "truestack", "debug", "prog.py"], "(ts) ", TS_WHERE, tmp_path,
                        pdb=False)
    stops = []
    for command in SESSION:
        stops.append((command, *driver.stop_after(command.format(**marks))))
    driver.child.close()
    return stops


def test_session_lands_where_pdb_does(tmp_path):
    write(tmp_path, "prog.py", PROG)
    ours = run_session(tmp_path, pdb=False)
    theirs = run_session(tmp_path, pdb=True)
    in_thread = SESSION.index("b prog.py:{H2}")
    assert ours[:in_thread] == theirs[:in_thread]
    # pdb traces only the thread it started in; truestack stops in the other thread too
    assert ours[in_thread:] == [("b prog.py:{H2}",), ("c", "helper", str(line_of(tmp_path / "prog.py", "H2"))),
                                ("p x", "value", "10"), ("cl 4",), ("c", "exit", "total 14")]
    assert theirs[in_thread + 1][1] == "no stop" and "total 14" in theirs[in_thread + 1][2]

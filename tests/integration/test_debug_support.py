"""Shared pieces for the debugger's pexpect sessions (no tests here).

Each session drives the real CLI (`python -m truestack debug ...`) in a
pseudo-terminal, the way a user would type at it.
"""
from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pexpect
from conftest import truestack_env

PROMPT = "(ts) "


class DebugSession:
    def __init__(self, args: list[str], cwd: Path, env: dict[str, str] | None = None,
                 timeout: float = 20, argv0: list[str] | None = None, color: bool = False) -> None:
        env = env or truestack_env()
        env.update(PYTHONUNBUFFERED="1")
        if color:
            env.pop("NO_COLOR", None)
            env["TERM"] = "xterm"
        else:
            env.update(NO_COLOR="1", TERM="dumb")
        command = argv0 or [sys.executable, "-m", "truestack", "debug"]
        self.child = pexpect.spawn(command[0], [*command[1:], *args], cwd=str(cwd), env=env,
                                   encoding="utf-8", timeout=timeout, dimensions=(50, 200))
        self.transcript: list[str] = []

    def wait_prompt(self) -> str:
        """Output up to the next prompt."""
        self.child.expect_exact(PROMPT)
        self.transcript.append(self.child.before + PROMPT)
        return self.child.before

    def cmd(self, line: str) -> str:
        """Type a line; return what was printed before the next prompt (echo removed)."""
        self.child.sendline(line)
        out = self.wait_prompt()
        echoed, _, rest = out.partition("\n")
        return rest if echoed.strip() == line.strip() else out

    def last(self, line: str) -> str:
        """Type a line that ends the session (or runs to program exit); return the rest."""
        self.child.sendline(line)
        self.child.expect(pexpect.EOF)
        self.transcript.append(self.child.before)
        return self.child.before

    def exitstatus(self) -> int:
        if self.child.isalive():
            self.child.expect(pexpect.EOF)
        self.child.close()
        return self.child.exitstatus

    def __repr__(self) -> str:  # shown by pytest on failure
        return "".join(self.transcript)


def write(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source).lstrip("\n"))
    return path


def line_of(path: Path, marker: str) -> int:
    """Line number of the line ending with `# marker` (keeps tests readable)."""
    for number, text in enumerate(path.read_text().splitlines(), 1):
        if text.rstrip().endswith(f"# {marker}"):
            return number
    raise LookupError(marker)


FIB = """
import sys


def fib(n):
    if n <= 1:  # FIRST
        f = n
    else:
        f1 = fib(n - 1)  # CALL1
        # a comment line: no code here  # BLANK
        f2 = fib(n - 2)  # CALL2
        f = f1 + f2  # SUM
    return f  # RET


def never_called():
    return 0


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    print("result", fib(n))  # MAIN
"""

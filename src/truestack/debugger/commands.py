"""pdb-style short commands typed at the prompt.

A line is a command only when its first word is a command name AND the rest
fits that command's syntax; everything else is Python. So `n` steps over but
`n + 1` or `n = 3` is Python, `p x` prints but `p(x)` calls p. A leading `!`
forces Python.
"""

from __future__ import annotations

import re

_INT = r"\d+"
_EXPR = r"(?!=)(?![-+*/%&|^@]=)(?!<<=|>>=|\*\*=|//=).+"  # not an assignment like `p = 1`
# name -> (canonical command, argument pattern or None for "no argument")
_COMMANDS: dict[str, tuple[str, str | None]] = {}


def _define(names: str, canonical: str, args: str | None) -> None:
    for name in names.split():
        _COMMANDS[name] = (canonical, args)


_define("c cont continue", "cont", None)
_define("s step", "step", None)
_define("n next", "next", None)
_define("r return", "step_out", None)
_define("unt until", "until", rf"(?:{_INT})?")
_define("b break", "break", r"(?:\S+(?:\s+if\s+.+|\s*,\s*.+)?)?")
_define("tbreak", "tbreak", r"\S+(?:\s+if\s+.+|\s*,\s*.+)?")
_define("cl clear", "clear", r"(?:\d+(?:\s+\d+)*)?")
_define("disable", "disable", r"\d+(?:\s+\d+)*")
_define("enable", "enable", r"\d+(?:\s+\d+)*")
_define("w where bt", "where", None)
_define("u up", "up", rf"(?:{_INT})?")
_define("d down", "down", rf"(?:{_INT})?")
_define("l list", "list", r"(?:\.|\d+(?:\s*,\s*\d+)?)?")
_define("ll longlist", "longlist", None)
_define("p", "p", _EXPR)
_define("pp", "pp", _EXPR)
_define("display", "display", rf"(?:{_EXPR})?")
_define("undisplay", "undisplay", r"(?:\d+)?")
_define("q quit", "quit", None)
_define("h help", "help", r"(?:\w+)?")
_define("skip", "skip_breaks", _INT)
_define("ignore", "ignore", r"\d+(?:\s+\d+)?")
_define("condition", "condition", r"\d+(?:\s+.+)?")

_LINE = re.compile(r"\s*(\w+)(?:\s+(.*?))?\s*$", re.S)


def parse(line: str) -> tuple[str, str] | None:
    """(command, argument string) if `line` is a short command, else None."""
    if line.lstrip().startswith("!"):
        return None
    match = _LINE.fullmatch(line)
    if not match:
        return None
    word, arg = match.group(1), match.group(2) or ""
    spec = _COMMANDS.get(word)
    if spec is None:
        return None
    canonical, pattern = spec
    if pattern is None:
        return (canonical, "") if not arg else None
    if not re.fullmatch(pattern, arg, re.S):
        return None
    return canonical, arg


def split_break_arg(arg: str) -> tuple[str, str | None]:
    """'FILE:LINE if COND' / 'FUNC, COND' -> (location, condition)."""
    match = re.fullmatch(r"(\S+?)(?:\s+if\s+(.+)|\s*,\s*(.+))?", arg.strip(), re.S)
    if not match:
        return arg.strip(), None
    return match.group(1), match.group(2) or match.group(3)


HELP = """\
Short commands (anything else is Python; prefix with ! to force Python):
  c            continue                 s          step into
  n            next line (step over)    r          step out (return)
  unt [LINE]   until a later line       q          quit (ends the program)
  b [LOC [if COND]]  breakpoint at FILE:LINE, LINE, FUNC or module:qualname
                     (no argument: list breakpoints)
  tbreak LOC   temporary breakpoint     cl [N ...] clear breakpoints (all if none)
  disable N    enable N                 skip N     ignore the next N breakpoint hits
  ignore N [COUNT]   skip breakpoint N's next COUNT stops
  condition N [COND] set (or without COND remove) breakpoint N's condition
  w            where (stack)            u [N] / d [N]  up / down the stack
  l [A[,B]]    list source              ll         whole current function
  p EXPR       print                    pp EXPR    pretty-print
  display EXPR watch at every stop      undisplay [N]
  h            this help; help(obj) or help(helper) for details
"""

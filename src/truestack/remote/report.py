"""`truestack dump`'s text output: one traceback-like block per thread."""

from __future__ import annotations

from .snapshot import ProcessDump, ThreadDump


def _heading(t: ThreadDump) -> str:
    name = f' "{t.name}"' if t.name else ""
    tid = f"{t.native_id}" if t.native_id else f"(native id unknown, ident {t.ident:#x})"
    gil = ", holds the GIL" if t.holds_gil else ""
    return f"Thread {tid}{name} ({t.state}{gil})"


def format_text(d: ProcessDump) -> str:
    lines = [f"Process {d.pid}: {d.executable} (Python {d.python}), {len(d.threads)} Python threads"]
    for t in d.threads:
        lines.append("")
        lines.append(_heading(t))
        if t.problem:
            flag = "" if t.consistent else "  [not a consistent read: approximate]"
            lines.append(f"  ({t.problem}){flag}")
        if not t.frames:
            lines.append("  (no Python frames)")
        elif t.depth > len(t.frames):
            lines.append(f"  ... {t.depth - len(t.frames)} outer frames not shown")
        for f in t.frames:
            line = f"line {f.line}" if f.line >= 0 else "line ?"
            lines.append(f'  File "{f.filename}", {line}, in {f.function}')
            for name, value in (f.locals or {}).items():
                lines.append(f"      {name} = {value}")
    return "\n".join(lines) + "\n"

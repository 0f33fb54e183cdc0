"""`truestack top`'s full-screen view, with the standard library's curses.

Keys: `o` / `t` / `n` sort by own %, total % or name; `w` switches between
the last window and the time since the start; `f` cycles the thread filter
(all threads, then each thread); `p` pauses the display (counting goes on);
`q` quits, which stops the program. The terminal is given back by `close()`,
which the supervisor calls when sampling ends and on its way out whatever
happened (an exception, Ctrl-C, a signal).

While the view is on screen the program's output would scribble over it:
when the program's stdout or stderr is the terminal, it goes to an unlinked
temporary file instead and is printed once the terminal is restored, and
a stdin that is the terminal (where the keys come from) becomes /dev/null.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from typing import Any

from ..exporters.top_text import Line, fit_row, header_facts, lines
from ..model import Profile
from ..model.live import SORT_KEYS, ProcessProfiles, Snapshot
from .live import Refresher

_HELP = "o own  t total  n name  w window/since start  f thread  p pause  q quit"


def screen_problem() -> str | None:
    """Why the full-screen view cannot run here (None when it can): checked before the program starts."""
    if not (os.isatty(0) and os.isatty(1)):
        return "stdin or stdout is not a terminal"
    try:
        import curses

        curses.setupterm(fd=1)
    except Exception as exc:  # curses.error, or no curses module in this build of Python
        return f"the terminal cannot be driven by curses ({exc})"
    return None


class ScreenView:
    """The live table, full-screen."""

    def __init__(self, interval: float, sort: str, include_idle: bool, title: str) -> None:
        self.refresher = Refresher(interval, include_idle)
        self.sort, self.scope = sort, "window"
        self.thread: int | None = None  # the thread filter (a tid), None for all
        self.paused = self.quitting = False
        self.title = title
        self.shown: Snapshot | None = None
        self.screen: Any = None  # the curses window while the view is on
        self.closed = False
        # Unlinked at once; kept open for the view's life, closed by finish().
        self._capture = tempfile.TemporaryFile(prefix="truestack-top-")  # noqa: SIM115
        self._replayed = 0

    # -- the program's process --------------------------------------------
    def prepare_child(self) -> None:
        capture = self._capture.fileno()
        for fd in (1, 2):
            if os.isatty(fd):
                os.dup2(capture, fd)
        if os.isatty(0):
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.close(null)
        self._capture.close()

    # -- the supervisor ------------------------------------------------------
    def open(self, profile: Profile, pid: int, now: float, children: ProcessProfiles | None = None) -> None:
        import curses

        self.refresher.open(profile, pid, now, children)
        self.screen = curses.initscr()
        try:
            curses.noecho()
            curses.cbreak()
            self.screen.keypad(True)
            self.screen.nodelay(True)
            with contextlib.suppress(curses.error):  # a terminal without an invisible cursor
                curses.curs_set(0)
            self._draw(full=True)
        except BaseException:
            self.close(now)
            raise

    def fileno(self) -> int | None:
        return 0 if self.screen is not None else None

    def step(self, now: float) -> bool:
        if self.screen is None:
            return False
        redraw = self._keys()
        if self.refresher.due(now):
            snapshot = self.refresher.advance(now)
            if not self.paused or self.shown is None:
                self.shown = snapshot
            self._draw(full=redraw)
        elif redraw:
            self._draw(full=True)
        return self.quitting

    def close(self, now: float) -> None:
        if self.closed:
            return
        self.closed = True
        if self.screen is not None:
            import curses

            self.screen = None
            curses.endwin()
        self._replay()

    def finish(self) -> None:
        self._replay()
        self._capture.close()

    def _replay(self) -> None:
        """Print what the program wrote while the view was on (pread: the program shares the file offset)."""
        if self.screen is not None or self._capture.closed:
            return
        self._replayed = _replay_from(self._capture.fileno(), self._replayed)

    # -- keys and drawing ----------------------------------------------------
    def _keys(self) -> bool:
        """Apply the keys pressed since the last turn; True when the table must be drawn anew."""
        import curses

        changed = False
        while True:
            key = self.screen.getch()
            if key == -1:
                return changed
            changed = True
            if key == curses.KEY_RESIZE:
                curses.update_lines_cols()
                continue
            char = chr(key).lower() if 0 <= key < 256 else ""
            if char == "q":
                self.quitting = True
            elif char in ("o", "t", "n"):
                self.sort = SORT_KEYS[("o", "t", "n").index(char)]
            elif char == "w":
                self.scope = "cumulative" if self.scope == "window" else "window"
            elif char == "p":
                self.paused = not self.paused
            elif char == "f":
                self.thread = self._next_thread()
            else:
                changed = False

    def _next_thread(self) -> int | None:
        tids = self.shown.thread_ids() if self.shown else []
        if not tids:
            return None
        if self.thread is None or self.thread not in tids:
            return tids[0] if self.thread is None else None
        i = tids.index(self.thread)
        return tids[i + 1] if i + 1 < len(tids) else None

    def _draw(self, full: bool) -> None:
        import curses

        screen = self.screen
        if screen is None:
            return
        if full:
            screen.clear()  # the next refresh repaints every line
        else:
            screen.erase()
        height, width = screen.getmaxyx()
        text = self._text_lines()
        for y, (line, attr) in enumerate(text[: max(height - 1, 0)]):
            self._put(y, line, width, attr)
        self._put(height - 1, "stopping the program…" if self.quitting else _HELP, width, curses.A_REVERSE)
        screen.refresh()

    def _width(self) -> int:
        return int(self.screen.getmaxyx()[1]) if self.screen is not None else 80

    def _put(self, y: int, text: str, width: int, attr: int) -> None:
        import curses

        if y < 0 or width < 2:
            return
        with contextlib.suppress(curses.error):  # the terminal shrank under us: the next refresh fits it again
            self.screen.addnstr(y, 0, text, width - 1, attr)

    def _text_lines(self) -> list[tuple[str, int]]:
        import curses

        state = "PAUSED  " if self.paused else ""
        out = [(f"truestack top — {self.title}", curses.A_BOLD)]
        snapshot, table = self.shown, self.refresher.table
        if snapshot is None or table is None:
            return [*out, ("", 0), ("waiting for the first samples…", 0)]
        facts = header_facts(snapshot, table.profile.meta, self.refresher.cpu_percent)
        out.extend((line, 0) for line in _wrap(facts, " · ", self._width()))
        scope = (
            f"last {snapshot.window_s:.1f} s" if self.scope == "window" else f"since start ({snapshot.elapsed_s:.0f} s)"
        )
        thread = "all" if self.thread is None else f"{snapshot.thread_name(self.thread)} ({self.thread})"
        out.append((f"{state}view: {scope}  sort: {self.sort}  thread: {thread}", 0))
        out.append(("", 0))
        out.append((f"{'OWN%':>6} {'TOTAL%':>6}  FUNCTION  FILE:LINE", curses.A_REVERSE))
        rows = lines(snapshot, self.sort, self.thread, self.scope)
        name_width = max((len(r.name) for r in rows), default=8)
        width = self._width() - 1  # curses cannot write the last column of the last line
        out.extend((_row(r, self.scope, name_width, width), 0) for r in rows)
        return out


def _wrap(parts: list[str], sep: str, width: int) -> list[str]:
    """`parts` joined by `sep` on as few lines of `width` as they fit on (a part is never split)."""
    out: list[str] = []
    for part in parts:
        if out and len(out[-1]) + len(sep) + len(part) < width:
            out[-1] += sep + part
        else:
            out.append(part)
    return out


def _row(r: Line, scope: str, name_width: int, width: int) -> str:
    own, total = (r.own, r.total) if scope == "window" else (r.cum_own, r.cum_total)
    return fit_row(f"{own:6.1f} {total:6.1f}  ", r.name, r.location, name_width, width)


def write_out(data: bytes) -> None:
    """Bytes to our stdout, as the program wrote them."""
    try:
        sys.stdout.flush()
        os.write(1, data)
    except OSError:
        pass


def _pread_all(fd: int, offset: int) -> bytes:
    chunks: list[bytes] = []
    while True:
        chunk = os.pread(fd, 1 << 20, offset)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        offset += len(chunk)


def _replay_from(fd: int, offset: int) -> int:
    data = _pread_all(fd, offset)
    if data:
        write_out(data)
    return offset + len(data)

"""truestack's debugger.

Engine (`core`, `breakpoints`, backends `monitoring`/`settrace`) is separate
from the console front end (`shell`, `helpers`, `commands`, `source`);
`api` holds the process-wide instance behind `truestack.debug`;
`ipython_shell` swaps in IPython when asked for.
"""

from __future__ import annotations

from .api import breakpoint, get_debugger, post_mortem, set_trace
from .core import Debugger, DebuggerQuit, Stop

__all__ = ["Debugger", "DebuggerQuit", "Stop", "breakpoint", "get_debugger", "post_mortem", "set_trace"]

"""IPython as the debugger shell (`--shell ipython` / TRUESTACK_SHELL=ipython).

The same rules as the plain shell: code runs in the merged frame namespace
and changed names are written back after every cell; helpers are in the
namespace; pdb-style short commands are rewritten into calls before IPython
compiles them. A resume helper (cont(), n, ...) ends IPython's loop.
"""

from __future__ import annotations

from .commands import parse
from .frame_eval import FrameNamespace

_COMMAND_HOOK = "__truestack_command__"


def available() -> bool:
    try:
        import IPython.terminal.embed  # noqa: F401
    except ImportError:
        return False
    return True


class _NamespaceModule:
    """A module stand-in whose __dict__ can be replaced (ModuleType's cannot)."""


class IPythonRepl:
    def __init__(self, debugger) -> None:
        from IPython.terminal.embed import InteractiveShellEmbed

        self.debugger = debugger
        self.view: FrameNamespace | None = None
        simple = not debugger.color  # no colour wanted: no fancy prompt_toolkit UI either
        self.shell = InteractiveShellEmbed(
            banner1="", exit_msg="", confirm_exit=False, display_banner=False, simple_prompt=simple
        )
        self.shell.events.register("post_run_cell", self._commit)
        self.shell.input_transformers_cleanup.append(self._short_commands)

    def run(self) -> None:
        """One stop: loop until a helper resumes the program (Ctrl-D continues)."""
        debugger = self.debugger
        self.view = FrameNamespace(debugger.current_frame, debugger.helpers.namespace(), debugger.scratch)
        namespace = self.view.ns
        namespace[_COMMAND_HOOK] = self._command
        # IPython evaluates in module.__dict__ as globals: make that the merged
        # namespace itself, or comprehensions (functions before 3.12) cannot
        # see the frame's locals.
        module = _NamespaceModule()
        module.__dict__ = namespace
        self.shell.keep_running = True
        self.shell(local_ns=namespace, module=module, stack_depth=2, compile_flags=0)
        if debugger._resume is None:
            debugger.resume("cont")

    def stop_loop(self) -> None:
        self.shell.ask_exit()

    def _commit(self, result=None) -> None:
        if self.view is not None:
            live = {
                k: v
                for k, v in self.shell.user_ns.items()
                if k not in self.shell.user_ns_hidden
                and k != _COMMAND_HOOK
                and not k.startswith("_i")
                and k not in ("_", "__", "___", "_oh", "_dh", "In", "Out", "exit", "quit", "get_ipython")
            }
            self.view.commit(live)
        if self.debugger._resume is not None:
            self.stop_loop()

    def _short_commands(self, lines: list[str]) -> list[str]:
        if len(lines) == 1:
            command = parse(lines[0].rstrip("\n"))
            if command is not None:
                return [f"{_COMMAND_HOOK}({command[0]!r}, {command[1]!r})\n"]
        return lines

    def _command(self, name: str, arg: str) -> None:
        self.debugger._run_command(name, arg)

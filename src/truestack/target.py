"""Running the user's program in-process, the way `python script.py` or
`python -m module` would: same `sys.argv`, `__main__`, and `sys.path[0]`.

Shared by `record`, `validate` and `debug`. Problems the user can fix (a
missing script or module) are raised as `UsageError` before anything runs.
"""

from __future__ import annotations

import builtins
import importlib.machinery
import importlib.util
import marshal
import os
import sys
import types

from .errors import UsageError
from .own_files import is_own_file

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Any, NoReturn


class Target:
    """The program to run: a script path or a module name, and its arguments."""

    __slots__ = ("_module_file", "args", "compiled", "kind", "name")

    def __init__(self, kind: str, name: str, args: list[str] | None = None) -> None:
        self.kind = kind  # "script" | "module" | "process" (`attach`: never run, it names the outputs)
        self.name = name  # script path or module name
        self.args = list(args) if args is not None else []
        self.compiled: tuple[types.CodeType, bool] | None = None  # a script's code, once compiled
        self._module_file: str | None = None  # a module's file, once found

    def __repr__(self) -> str:
        return f"Target(kind={self.kind!r}, name={self.name!r}, args={self.args!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Target):
            return NotImplemented
        return (self.kind, self.name, self.args) == (other.kind, other.name, other.args)

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dataclass it replaced

    @property
    def argv(self) -> list[str]:
        return [self.name if self.kind == "script" else self.module_file, *self.args]

    @property
    def module_file(self) -> str:
        return self._module_file or self.name

    @property
    def stem(self) -> str:
        """A short name for output files: the module, or the script without `.py`."""
        if self.kind != "script":  # a module, or the process `attach` names "pid<N>"
            return self.name
        base = os.path.basename(os.path.normpath(self.name))
        return base[:-3] if base.endswith(".py") else base

    def describe(self) -> str:
        head = self.name if self.kind == "script" else f"-m {self.name}"
        return " ".join([head, *self.args])


def resolve_target(script: str | None, module: str | None, args: list[str]) -> Target:
    """Check the target exists; raise UsageError with a one-line reason if not."""
    if module:
        target = Target("module", module, list(args))
        _put_cwd_first()  # as `python -m` does: packages in the current directory are found
        import runpy

        try:
            # Importing the package part may run user code; that is what -m does too.
            _spec_name, spec, _code = runpy._get_module_details(module)  # type: ignore[attr-defined]
        except BaseException as exc:  # ImportError, or whatever a package's __init__ raises
            raise UsageError(f"cannot run module {module!r}: {exc}") from None
        target._module_file = spec.origin or module
        return target
    if not script:
        raise UsageError("no target: give a script path or -m MODULE")
    if not os.path.exists(script):
        raise UsageError(f"no such script: {script}")
    if os.path.isdir(script):
        if not os.path.exists(os.path.join(script, "__main__.py")):
            raise UsageError(f"{script} is a directory with no __main__.py")
        return Target("script", script, list(args))
    target = Target("script", script, list(args))
    compile_script(target)  # before anything starts: a file python cannot compile shows python's error
    return target


def load_target(target: Target) -> tuple[types.CodeType, dict[str, Any]]:
    """Prepare sys.argv/sys.path/__main__ and return (code, globals) to exec.

    `__main__` starts with the names, in the order, that `python script.py`
    or `python -m module` give it.
    """
    main_mod = types.ModuleType("__main__")
    main_mod.__dict__.update(_interpreter_main_names())
    if target.kind == "module" or os.path.isdir(target.name):
        import runpy

        if target.kind == "module":
            sys.argv = [target.module_file, *target.args]
            _put_cwd_first()
            _mod_name, spec, code = runpy._get_module_details(target.name)  # type: ignore[attr-defined]
        else:  # a directory with __main__.py: python runs it as module `__main__` found there
            sys.argv = [target.name, *target.args]
            sys.path.insert(0, os.path.abspath(target.name))
            _mod_name, spec, code = runpy._get_main_module_details()  # type: ignore[attr-defined]
        main_mod.__dict__.update(
            __file__=spec.origin,
            __cached__=spec.cached,
            __loader__=spec.loader,
            __package__=spec.parent,
            __spec__=spec,
        )
    else:
        sys.argv = [target.name, *target.args]
        path = os.path.abspath(target.name)  # python's __file__ and co_filename (3.9+)
        sys.path.insert(0, os.path.dirname(path))
        code, compiled = compile_script(target)
        loader = importlib.machinery.SourcelessFileLoader if compiled else importlib.machinery.SourceFileLoader
        main_mod.__dict__.update(__loader__=loader("__main__", path), __file__=path, __cached__=None)
    sys.modules["__main__"] = main_mod
    return code, main_mod.__dict__


def _interpreter_main_names() -> dict[str, Any]:
    """What the interpreter puts in `__main__` before the program's own names."""
    extras: dict[str, Any] = {"__annotations__": {}} if sys.version_info < (3, 14) else {}
    extras["__builtins__"] = builtins
    return extras


def compile_script(target: Target) -> tuple[types.CodeType, bool]:
    """(code, whether it came from a .pyc) of a script target, compiled as python would.

    When Python cannot compile it, nothing of truestack should show: this
    process becomes `python script.py [args]` with the same flags, so the
    user sees exactly Python's own error (file, line, carets, exit status 1),
    whatever it is (a syntax error, a binary, an undecodable file).
    """
    if target.compiled is None:
        target.compiled = _compile_file(target)
    return target.compiled


def _compile_file(target: Target) -> tuple[types.CodeType, bool]:
    path = os.path.abspath(target.name)
    try:
        with open(path, "rb") as fh:
            source = fh.read()
    except OSError as exc:
        raise UsageError(f"cannot read {target.name}: {exc.strerror or exc}") from None
    try:
        if path.endswith(".pyc") or source[:4] == importlib.util.MAGIC_NUMBER:
            return marshal.loads(source[16:]), True  # python runs .pyc files too (16-byte header)
        return compile(source, path, "exec", dont_inherit=True), False
    except (SyntaxError, ValueError, EOFError, TypeError):
        _become_python(target)


def _become_python(target: Target) -> NoReturn:
    import subprocess

    sys.stdout.flush()
    sys.stderr.flush()
    flags: list[str] = subprocess._args_from_interpreter_flags()  # type: ignore[attr-defined]
    os.execv(sys.executable, [sys.executable, *flags, target.name, *target.args])


def _put_cwd_first() -> None:
    cwd = os.getcwd()
    if not sys.path or sys.path[0] != cwd:
        sys.path.insert(0, cwd)


def exit_code_of(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    sys.stderr.write(f"{code}\n")
    return 1


def run_target(target: Target) -> tuple[int, BaseException | None]:
    """Run the target to completion.

    Returns (exit status, the exception that ended it if any). An uncaught
    exception prints its normal traceback (status 1); KeyboardInterrupt is
    returned, not swallowed silently, so callers can say the run was cut short.
    """
    code, globs = load_target(target)
    try:
        exec(code, globs)
    except SystemExit as exc:
        return exit_code_of(exc), None
    except KeyboardInterrupt as exc:
        return 130, exc
    except BaseException as exc:
        _print_user_traceback(exc)
        return 1, exc
    return 0, None


def _print_user_traceback(exc: BaseException) -> None:
    """Print the traceback without truestack's own frames at the top."""
    import traceback

    tb = exc.__traceback__
    while tb is not None and is_own_file(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb)

"""Cutting the launcher and truestack's own frames off the root of recorded stacks."""

from __future__ import annotations

import sys

from ..own_files import is_own_file, own_path
from ..samples import Frame, FrameKind
from ..session import StackFilter

_TARGET_FILE = own_path("target.py")
_NATIVE = FrameKind.NATIVE.value


def _launcher_files() -> set[str]:
    """Files of the frames below the program: runpy and whatever script started truestack."""
    files = {"<frozen runpy>", "<string>"}  # "<string>": `python -c` launching truestack
    runpy = sys.modules.get("runpy")  # loaded when truestack was started by `python -m`
    if runpy is not None and runpy.__file__:
        files.add(runpy.__file__)
    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    if main_file:
        files.add(main_file)
    return files


def make_frame_stripper() -> StackFilter:
    """A stack filter that cuts the launcher and truestack frames off the root of stacks.

    The program's `<module>` becomes the root, as if it ran directly; samples
    taken in truestack itself (before or after the program) are dropped (None).
    With C frames (--native), the process's start below the launcher goes too,
    and the C calls by which truestack runs the program's code (exec).
    """
    launcher = _launcher_files()

    def strip(frames: tuple[Frame, ...]) -> tuple[Frame, ...] | None:
        root = next((f for f in frames if f.kind != _NATIVE), None)  # the root-most Python frame
        if root is not None and (root.file in launcher or is_own_file(root.file)):
            for i, frame in enumerate(frames):
                if frame.name == "run_target" and frame.file == _TARGET_FILE:
                    start = i + 1
                    while start < len(frames) and frames[start].kind == _NATIVE:
                        start += 1
                    frames = frames[start:]
                    break
            else:
                if any(is_own_file(f.file) for f in frames):
                    return None  # truestack's own work around the program
            if not frames or is_own_file(frames[0].file):
                return None  # empty, or truestack loading the program (load_target)
        return frames

    return strip

"""The recorder's private directory for `record --subprocesses`: how new interpreters get the sampler.

A fresh directory (`tempfile.mkdtemp`, mode 0700) holds the socket the
followed processes stream to and a `sitecustomize.py`. The directory is put
first on `PYTHONPATH` and the config in `wire.ENV_VAR`, in the environment
the program inherits, so every Python the program starts (with its
environment, without `-I`, `-E` or `-S`) imports that `sitecustomize` at
start-up, as coverage.py measures subprocesses. It:

1. starts following the process (`follow.follow_from_environment`);
2. takes its own directory off `sys.path`, so the program sees the path a
   plain run gives it;
3. runs the `sitecustomize` it hides, if there is one further on the path,
   under the same name, so that one works as it would alone.

The whole directory is removed when the recording ends: nothing is left behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile

from .wire import ENV_VAR, FollowConfig

SOCKET_NAME = "recorder.sock"

SITECUSTOMIZE = """\
# Written by `truestack record --subprocesses` for the Python processes it follows;
# removed with its directory when the recording ends.


def _truestack_follow():
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    try:
        from truestack.recording.follow import follow_from_environment
    except Exception:
        pass  # another interpreter, without truestack: it runs unprofiled
    else:
        follow_from_environment()
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    # The sitecustomize this one hides, run as if this one were not there.
    import importlib.machinery
    import importlib.util

    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        sys.modules["sitecustomize"] = module
        spec.loader.exec_module(module)


_truestack_follow()
del _truestack_follow
"""


class Bootstrap:
    """The private directory, its sitecustomize, and the environment that points children at it."""

    def __init__(
        self, mode: str, rate_hz: float, engine: str, max_depth: int, async_tasks: bool = False, native: str = "off"
    ) -> None:
        self.directory = tempfile.mkdtemp(prefix="truestack-")
        try:
            with open(os.path.join(self.directory, "sitecustomize.py"), "w", encoding="utf-8") as fh:
                fh.write(SITECUSTOMIZE)
        except OSError:
            self.remove()
            raise
        self.socket_path = os.path.join(self.directory, SOCKET_NAME)
        self.config = FollowConfig(
            self.socket_path, self.directory, mode, rate_hz, engine, max_depth, async_tasks, native
        )

    def export_environment(self) -> None:
        """Put the config and the directory in this process's environment, which the program inherits."""
        os.environ[ENV_VAR] = self.config.encode()
        path = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = self.directory + (os.pathsep + path if path else "")

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            shutil.rmtree(self.directory)

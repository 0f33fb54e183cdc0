"""What the recorder and the processes it follows (`record --subprocesses`) agree on.

- `ENV_VAR` carries the `FollowConfig` (the recorder's socket and how to
  sample) to every process the program starts; the bootstrap directory is put
  first on `PYTHONPATH` so a new interpreter finds its `sitecustomize`.
- Each followed process connects to the socket and sends one hello line, then
  its profile in the stream format of `model/stream.py`.
"""

from __future__ import annotations

import json
from typing import Any

from ..records import Record

ENV_VAR = "TRUESTACK_SUBPROCESS_RECORDER"
HELLO_MAGIC = b"TSPROC1 "
MAX_HELLO = 1 << 20  # a longer first line is not a hello


class FollowConfig(Record):
    """Where a followed process streams its samples, and how it samples."""

    __slots__ = ("async_tasks", "bootstrap_dir", "engine", "max_depth", "mode", "native", "rate_hz", "socket_path")

    def __init__(
        self,
        socket_path: str,
        bootstrap_dir: str,
        mode: str,
        rate_hz: float,
        engine: str,
        max_depth: int,
        async_tasks: bool = False,
        native: str = "off",
    ) -> None:
        self.socket_path = socket_path
        self.bootstrap_dir = bootstrap_dir  # holds the sitecustomize new interpreters run
        self.mode = mode
        self.rate_hz = rate_hz
        self.engine = engine
        self.max_depth = max_depth
        self.async_tasks = async_tasks  # --async
        self.native = native

    def encode(self) -> str:
        return json.dumps({name: getattr(self, name) for name in self.__slots__}, separators=(",", ":"))

    @classmethod
    def decode(cls, text: str) -> FollowConfig:
        """ValueError when `text` is not a config this truestack wrote."""
        try:
            data = json.loads(text)
            return cls(
                str(data["socket_path"]),
                str(data["bootstrap_dir"]),
                str(data["mode"]),
                float(data["rate_hz"]),
                str(data["engine"]),
                int(data["max_depth"]),
                bool(data.get("async_tasks", False)),
                str(data.get("native", "off")),
            )
        except (KeyError, TypeError, json.JSONDecodeError) as exc:
            raise ValueError(f"malformed {ENV_VAR} ({exc})") from None


def encode_hello(pid: int, parent: int, command: list[str], how: str, start_cpu_ns: int) -> bytes:
    fields = {"pid": pid, "parent": parent, "command": command, "how": how, "start_cpu_ns": start_cpu_ns}
    return HELLO_MAGIC + json.dumps(fields, separators=(",", ":")).encode() + b"\n"


def decode_hello(buffer: bytearray) -> dict[str, Any] | None:
    """The hello at the start of `buffer` (removed from it), or None until its line is whole.

    ValueError when the connection does not start with a hello."""
    end = buffer.find(b"\n")
    if end < 0:
        if len(buffer) > MAX_HELLO or not HELLO_MAGIC.startswith(bytes(buffer[: len(HELLO_MAGIC)])):
            raise ValueError("not a truestack process connection")
        return None
    line = bytes(buffer[:end])
    del buffer[: end + 1]
    if not line.startswith(HELLO_MAGIC):
        raise ValueError("not a truestack process connection")
    data = json.loads(line[len(HELLO_MAGIC) :])
    if not isinstance(data, dict):
        raise ValueError("malformed hello")
    return data

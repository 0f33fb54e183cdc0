"""Can this machine's gdb call a function in another process without breaking it?

The gdb route of `attach` has gdb call `dlopen` in the target. A call ends by
putting every register back, the extended (XSAVE) state included. On CPUs
with AMX the kernel's XSAVE area (~11 KB) is larger than gdb 13 knows, and
the kernel refuses the write ("Couldn't write extended state status: Bad
address"): the thread then runs on with registers gdb could not restore, and
the target crashes or misbehaves (measured: a `sleep` it was tried on died at
once). gdb 14 and later size the area from CPUID.

So, on a CPU that has AMX, gdb is first tried on a throwaway process of our
own, once per truestack process; elsewhere it is trusted without a try.
"""

from __future__ import annotations

import functools
import os
import subprocess

_PROBE_TIMEOUT_S = 30.0
_CPUINFO = "/proc/cpuinfo"


def _cpu_has_amx(cpuinfo: str = _CPUINFO) -> bool:
    try:
        with open(cpuinfo) as f:
            for line in f:
                if line.startswith("flags"):
                    return "amx_tile" in line.split()
    except OSError:
        pass
    return False


@functools.lru_cache(maxsize=1)
def calls_break_the_target(gdb: str = "gdb") -> str | None:
    """Why a call gdb makes in another process would leave it broken here; None when it works."""
    if not _cpu_has_amx():
        return None
    return probe(gdb)


def probe(gdb: str) -> str | None:
    """Have `gdb` call getpid() in a sleeping process of ours: None if the call came back right,
    else gdb's last words."""
    # Without LD_PRELOAD: a library preloaded into this process (a sanitizer runtime) is not gdb's to carry.
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    sleeper = subprocess.Popen(
        ["sleep", "60"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )
    try:
        done = subprocess.run(
            [gdb, "-nx", "-batch", "-p", str(sleeper.pid), "-ex", "print (int)getpid()"],
            capture_output=True, text=True, timeout=_PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL, env=env,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"gdb could not be tried ({exc})"
    finally:
        sleeper.kill()
        sleeper.wait()
    out = done.stdout + done.stderr
    if f"= {sleeper.pid}" in out and "extended state" not in out:
        return None
    lines = [line.strip().rstrip(".") for line in out.splitlines() if "extended state" in line or "rror" in line]
    return lines[-1] if lines else "its test call in a process of ours did not return"

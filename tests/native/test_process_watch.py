"""`record`'s watch for Python children is a C audit hook that calls Python
only for process creation (a Python hook would run for every audited event,
`id()` included: tens per collector sample)."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from conftest import truestack_env

PROGRAM = textwrap.dedent("""
    import json, os, sys
    from truestack import _native
    seen = []
    _native.watch_process_events(lambda event, args: seen.append(event))
    id(seen); open(os.devnull).close(); compile("1", "<x>", "eval")  # audited, not process creation
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    import subprocess
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    print(json.dumps(seen))
""")


def test_only_process_creation_reaches_python():
    proc = subprocess.run([sys.executable, "-c", PROGRAM], env=truestack_env(), capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen[0] == "os.fork", seen
    assert "subprocess.Popen" in seen, seen
    assert not {"builtins.id", "open", "compile"} & set(seen), seen

"""Runs a workload program of this directory in a real subprocess."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from conftest import truestack_env
from hang_report import run_reporting_hangs

HERE = Path(__file__).resolve().parent


def run_workload(name: str, *args: object, timeout: float = 180, **env_extra: str) -> dict:
    env = truestack_env(**env_extra)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
    proc = run_reporting_hangs([sys.executable, "-W", "ignore::DeprecationWarning", str(HERE / name), *map(str, args)],
                               timeout, env=env)
    assert proc.returncode == 0, f"{name} exited with {proc.returncode}\n{proc.stderr[-3000:]}"
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    # Shown on failure (pytest prints captured output) and with -s.
    st = result.get("stats", {})
    brief = {k: st.get(k) for k in ("timer", "achieved_rate_hz", "samples", "dropped", "partial")}
    brief["codes_resolved_at_death"] = st.get("extra", {}).get("codes_resolved_at_death")
    print(name, args, {k: v for k, v in result.items() if k != "stats"}, brief)
    return result

"""`record`, `debug` and `validate` run the program the way `python script.py` or
`python -m module` would: same errors, `__main__`, `sys.argv`, `sys.path[0]`,
exit status. Each test compares with a plain run."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from conftest import run_truestack, truestack_env

pytestmark = pytest.mark.timeout(120)

COMMANDS = [
    "record",
    "debug",
    pytest.param("validate", marks=pytest.mark.native),
]


def under(command: str, tmp_path, *target: str, **kw) -> subprocess.CompletedProcess:
    options = {
        "record": ["-q", "--engine", "safepoint", "-o", str(tmp_path / "out.tsp")],
        "debug": ["--no-stop"],
        "validate": ["--min-checks", "0"],
    }[command]
    return run_truestack(command, *options, *target, cwd=tmp_path, input="", **kw)


def plain(tmp_path, *target: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *target], cwd=tmp_path, capture_output=True, text=True,
                          env=truestack_env(), input="", timeout=60, **kw)


def tail(text: str, n: int = 4) -> list[str]:
    return text.rstrip("\n").splitlines()[-n:]


@pytest.mark.parametrize("command", COMMANDS)
def test_module_in_the_current_directory_is_found(tmp_path, command):
    pkg = tmp_path / "herepkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "tool.py").write_text("import sys\nprint('ran', sys.argv[1:], sys.path[0])\n")
    proc = under(command, tmp_path, "-m", "herepkg.tool", "a")
    assert proc.stdout.splitlines()[0] == plain(tmp_path, "-m", "herepkg.tool", "a").stdout.strip(), proc.stderr
    assert "truestack: error" not in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("case", ["syntax", "binary", "not-utf8"])
def test_a_file_python_cannot_compile_shows_pythons_own_error(tmp_path, command, case):
    if case == "syntax":
        (tmp_path / "bad.py").write_text("x = 1\nif x\n    pass\n")
        script = "bad.py"
    elif case == "binary":
        script = shutil.which("true") or "/bin/true"
    else:
        (tmp_path / "latin.py").write_bytes(b'x = "\xff"\n')
        script = "latin.py"
    expected = plain(tmp_path, script, "arg")
    assert expected.returncode == 1 and "SyntaxError" in expected.stderr  # the premise
    proc = under(command, tmp_path, script, "arg")
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr == expected.stderr  # python's lines only: no truestack frame, no summary
    assert not (tmp_path / "out.tsp").exists()


MAIN_STATE = '''"""the doc"""
import json, sys
names = list(globals())
print(json.dumps({
    "file": __file__, "argv": sys.argv, "path0": sys.path[0], "names": names, "doc": __doc__,
    "spec": repr(__spec__), "builtins": type(__builtins__).__name__, "loader": type(__loader__).__name__,
    "package": __package__, "cached": __cached__, "name": __name__,
}))
sys.exit(5)
'''


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("where", ["here", "subdir"])
def test_main_module_state_is_what_python_gives_a_script(tmp_path, command, where):
    script = tmp_path / ("sub" if where == "subdir" else "") / "state.py"
    script.parent.mkdir(exist_ok=True)
    script.write_text(MAIN_STATE)
    name = str(script.relative_to(tmp_path))
    expected = plain(tmp_path, name, "a", "-o", "x")
    proc = under(command, tmp_path, name, "a", "-o", "x")
    assert json.loads(proc.stdout.splitlines()[0]) == json.loads(expected.stdout), proc.stderr
    if command != "validate":  # validate's status is its verdict
        assert proc.returncode == expected.returncode == 5


@pytest.mark.parametrize("command", COMMANDS)
def test_main_module_state_is_what_python_gives_a_module(tmp_path, command):
    pkg = tmp_path / "statepkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "state.py").write_text(MAIN_STATE.replace('"spec": repr(__spec__)', '"spec": __spec__.name'))
    expected = plain(tmp_path, "-m", "statepkg.state", "a")
    proc = under(command, tmp_path, "-m", "statepkg.state", "a")
    assert json.loads(proc.stdout.splitlines()[0]) == json.loads(expected.stdout), proc.stderr
    if command != "validate":
        assert proc.returncode == expected.returncode == 5

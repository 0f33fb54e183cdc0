"""The shape of the source tree: no god-files."""
from __future__ import annotations

from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "truestack"
MAX_PYTHON_LINES = 400
MAX_C_LINES = 600


def _sizes(pattern: str) -> dict[str, int]:
    return {str(p.relative_to(PACKAGE)): len(p.read_text().splitlines()) for p in PACKAGE.rglob(pattern)}


@pytest.mark.parametrize("pattern,limit", [("*.py", MAX_PYTHON_LINES), ("*.c", MAX_C_LINES), ("*.h", MAX_C_LINES)])
def test_no_module_past_its_size_limit(pattern, limit):
    sizes = _sizes(pattern)
    assert sizes, f"no {pattern} files under {PACKAGE}"
    too_big = {name: n for name, n in sizes.items() if n > limit}
    assert not too_big, f"split these by job (limit {limit} lines): {too_big}"

"""`truestack dump` decodes the target's line tables itself (it cannot call
PyCode_Addr2Line on another process's code objects): the decoder gives, for
every instruction of real code, the line this interpreter gives."""
from __future__ import annotations

import json.decoder
import sys
import threading
import types
from pathlib import Path

from truestack.remote.linetable import addr2line


def all_codes(code: types.CodeType) -> list[types.CodeType]:
    out = [code]
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            out += all_codes(const)
    return out


def test_every_offset_maps_to_the_interpreters_line():
    sources = [threading.__file__, json.decoder.__file__]
    extra = "def g():\n    x = (1 +\n         2)\n    try:\n        pass\n    finally:\n        y = [i for i in range(3)]\n"
    codes = [c for path in sources for c in all_codes(compile(Path(path).read_text(), path, "exec"))]
    codes += all_codes(compile(extra + "\n" * 300 + "def far():\n    return 1\n", "<extra>", "exec"))
    checked = 0
    for code in codes:
        for start, end, line in code.co_lines():
            for offset in range(start, end, 2):
                expected = -1 if line is None else line
                assert addr2line(code.co_linetable, code.co_firstlineno, offset, sys.version_info[:2]) == expected, (
                    code, offset)
                checked += 1
    assert checked > 5000


def test_negative_offset_is_the_first_line_and_a_cut_table_no_line():
    code = compile("a = 1\nb = 2\n", "<m>", "exec")
    version = sys.version_info[:2]
    assert addr2line(code.co_linetable, 7, -2, version) == 7
    assert addr2line(code.co_linetable[:1], 1, 1000, version) == -1

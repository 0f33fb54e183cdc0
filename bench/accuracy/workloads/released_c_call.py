"""C calls that release the GIL while computing (hashlib, zlib) vs Python code.

The thread stays on CPU during these calls, so CPU-mode truth counts them.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hashlib
import zlib

from _truth import Truth, run

HASH_BUF = os.urandom(4 << 20)
ZLIB_BUF = (b"truestack accuracy " * 40_000) + os.urandom(200_000)


def hash_big(buf):
    return hashlib.sha256(buf).digest()


def compress_big(buf):
    return zlib.compress(buf, 6)


def python_loop(n):
    total = 0
    for i in range(n):
        total += i * i
    return total


def body(truth: Truth) -> None:
    for _ in truth.rounds_iter():
        truth.call(hash_big, HASH_BUF)
        truth.call(compress_big, ZLIB_BUF)
        truth.call(python_loop, 150_000)


if __name__ == "__main__":
    truth = Truth("released_c_call", "hashlib/zlib on big buffers (GIL released) vs a Python loop")
    truth.declare("hash_big", "compress_big", "python_loop")
    run(truth, body)

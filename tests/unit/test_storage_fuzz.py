"""Damaged saved profiles: every mutation either loads into a usable profile or
fails with ProfileFormatError's one-line message; never a crash, a hang or a
memory blow-up."""
from __future__ import annotations

import io
import json
import random
import resource
import struct
import time
import zlib

import pytest

from truestack.exporters import export
from truestack.model import Marker, Profile, ProfileFormatError
from truestack.model.storage import _PREFIX, FORMAT_VERSION, MAGIC, dumps, read
from truestack.samples import Frame, Sample, SamplerStats

MUTATIONS = 10_000


def sample_profile() -> Profile:
    profile = Profile({"mode": "wall", "rate_hz": 1000, "command": ["app.py", "-x"], "engine": "native-wall"})
    profile.meta.sampler_stats = SamplerStats("native-wall", "wall", 1000.0, 990.0, 40, 1, {"torn": 2})
    frames = [Frame(f"f{i}", f"/src/m{i % 3}.py", 10 + i, 5 + i, "python") for i in range(12)]
    frames.append(Frame("len", "", 0, 0, "native"))
    rng = random.Random(7)
    for i in range(40):
        depth = rng.randint(0, len(frames))
        profile.add_sample(Sample(1 + i % 3, f"thread-{i % 3}", 1_000 + i, 1_000_000 + i,
                                  tuple(frames[:depth]), cpu_delta_ns=i * 1000,
                                  state=rng.choice(["running", "idle", "unknown"])))
    profile.add_marker(Marker("phase", 1_001, 1_010, 1, {"n": 1}))
    return profile


def body_of(data: bytes) -> bytes:
    return zlib.decompress(data[_PREFIX.size:])


def wrap(body: bytes) -> bytes:
    return _PREFIX.pack(MAGIC, FORMAT_VERSION, 0) + zlib.compress(body)


def mutate_header(body: bytes, rng: random.Random) -> bytes:
    """Change one value of the JSON header (counts, indexes, types) and keep the columns."""
    (n,) = struct.unpack_from("<I", body)
    header = json.loads(body[4:4 + n])
    evil = [-1, 0, 2**31, 2**63, 10**12, "x", None, [], {}, 1.5, True, [[["deep"]]]]
    key = rng.choice(["columns", "strings", "funcs", "frames", "threads", "markers", "meta"])
    part = header[key]
    if isinstance(part, list) and part:
        i = rng.randrange(len(part))
        if isinstance(part[i], list) and part[i]:
            part[i][rng.randrange(len(part[i]))] = rng.choice(evil)
        elif isinstance(part[i], dict) and part[i]:
            part[i][rng.choice(list(part[i]))] = rng.choice(evil)
        else:
            part[i] = rng.choice(evil)
    elif isinstance(part, dict) and part:
        part[rng.choice(list(part))] = rng.choice(evil)
    else:
        header[key] = rng.choice(evil)
    text = json.dumps(header).encode()
    return struct.pack("<I", len(text)) + text + body[4 + n:]


def mutate(data: bytes, rng: random.Random) -> bytes:
    kind = rng.randrange(5)
    if kind == 0:  # truncated anywhere
        return data[:rng.randrange(len(data))]
    if kind == 1:  # bit flips in the compressed file
        out = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
        return bytes(out)
    body = body_of(data)
    if kind == 2:  # bit flips behind a valid zlib stream: the decoder sees them
        out = bytearray(body)
        for _ in range(rng.randint(1, 8)):
            out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
        return wrap(bytes(out))
    if kind == 3:  # a header value replaced by a hostile one
        return wrap(mutate_header(body, rng))
    # columns cut short or padded
    cut = rng.randrange(len(body))
    return wrap(body[:cut] + (b"\xff" * rng.randrange(64) if rng.random() < 0.5 else b""))


@pytest.mark.filterwarnings("error")  # a damaged file is an error or a profile, never a warning
def test_mutated_profiles_load_or_fail_with_one_line_error():
    original = dumps(sample_profile())
    rng = random.Random(20261125)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    loaded = failed = 0
    slowest = 0.0
    for _ in range(MUTATIONS):
        data = mutate(original, rng)
        start = time.perf_counter()
        try:
            profile = read(io.BytesIO(data), "fuzz.tsp")
        except ProfileFormatError as exc:
            message = str(exc)
            assert message.startswith("fuzz.tsp: ") and "\n" not in message, message
            failed += 1
        else:
            # A profile that loads must be usable by the outputs people open first.
            export(profile, "table")
            export(profile, "collapsed")
            loaded += 1
        slowest = max(slowest, time.perf_counter() - start)
    rss_growth_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    assert loaded + failed == MUTATIONS
    assert failed > MUTATIONS // 2  # most mutations must be caught, not silently accepted
    assert slowest < 2.0, f"one load took {slowest:.2f} s"
    assert rss_growth_mb < 200, f"loading damaged files grew RSS by {rss_growth_mb:.0f} MB"


@pytest.mark.parametrize("damage", ["frame kind", "stack prefix", "sample stack", "state"])
def test_dangling_indexes_are_reported_at_load(damage):
    body = body_of(dumps(sample_profile()))
    (n,) = struct.unpack_from("<I", body)
    header = json.loads(body[4:4 + n])
    columns = body[4 + n:]
    if damage == "frame kind":
        header["frames"][0][2] = 99
    elif damage == "stack prefix":
        header["frames"][0][0] = len(header["funcs"])
    else:
        # Rewrite the first sample's stack or state column entry out of range.
        offset = 0
        for name, typecode, count in header["columns"]:
            size = {"q": 8, "Q": 8, "i": 4, "I": 4, "b": 1}[typecode] * count
            if name.endswith(".stack" if damage == "sample stack" else ".state") and count:
                fmt = "<i" if typecode == "i" else "<b"
                columns = columns[:offset] + struct.pack(fmt, 120) + columns[offset + struct.calcsize(fmt):]
                break
            offset += size
    text = json.dumps(header).encode()
    with pytest.raises(ProfileFormatError, match="corrupt profile"):
        read(io.BytesIO(wrap(struct.pack("<I", len(text)) + text + columns)), "bad.tsp")


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("typecode", ["u", "w", "x", 7])
def test_a_column_of_no_number_type_is_a_format_error(typecode):
    # 'q' -> 'u' is one bit flip: array('u') was built (a DeprecationWarning on 3.13) before the check.
    body = body_of(dumps(sample_profile()))
    (n,) = struct.unpack_from("<I", body)
    header = json.loads(body[4:4 + n])
    header["columns"][0][1] = typecode
    text = json.dumps(header).encode()
    with pytest.raises(ProfileFormatError, match="column of unknown type"):
        read(io.BytesIO(wrap(struct.pack("<I", len(text)) + text + body[4 + n:])), "bad.tsp")

"""Parsing sampling rates written the way people write them: 250, 1k, 10khz."""

from __future__ import annotations

import re

_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(k|m)?\s*(hz)?\s*$", re.IGNORECASE)
MIN_RATE_HZ = 1.0
MAX_RATE_HZ = 100_000


def parse_rate(value: float | int | str) -> float:
    """Return a rate in Hz; raise ValueError with a readable reason."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        rate = float(value)
    else:
        match = _RATE.match(str(value))
        if not match:
            raise ValueError(f"invalid rate {value!r} (examples: 100, 250hz, 1k, 10khz)")
        rate = float(match.group(1)) * {None: 1, "k": 1e3, "m": 1e6}[(match.group(2) or "").lower() or None]
    if not MIN_RATE_HZ <= rate <= MAX_RATE_HZ:
        raise ValueError(f"invalid rate {value!r}: must be between 1 Hz and {MAX_RATE_HZ // 1000} kHz")
    return rate

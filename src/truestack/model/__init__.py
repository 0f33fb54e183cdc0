"""The profile model and its saved forms.

- `profile`, `tables`: the one in-memory profile (interned tables, per-thread columns)
- `meta`: `ProfileMeta`, how and when the profile was taken (typed, versioned)
- `aggregate`: the counting every output reads, done once
- `facts`: how a profile was taken, said the same way by every output
- `storage`: the saved `.tsp` file; `stream`: its streaming form
"""

from .meta import ProfileMeta
from .profile import STATES, Marker, Profile, SampleRow, ThreadSamples
from .storage import FORMAT_VERSION, ProfileFormatError, is_profile_file, load, save

__all__ = [
    "FORMAT_VERSION",
    "STATES",
    "Marker",
    "Profile",
    "ProfileFormatError",
    "ProfileMeta",
    "SampleRow",
    "ThreadSamples",
    "is_profile_file",
    "load",
    "save",
]

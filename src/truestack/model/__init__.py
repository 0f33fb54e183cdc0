"""The profile model and its saved form.

Metadata keys every producer fills in (exporters may rely on them):
  command (list[str]), python_version (str), truestack_version (str),
  start_time_unix_ns / start_monotonic_ns (int: the wall-clock start and the
  monotonic origin of every sample time), engine, mode, rate_hz (requested),
  sampler_stats (SamplerStats.as_dict()), function_level (bool),
  interrupted (str or None: why the run ended early, if it did).
"""

from .profile import STATES, Marker, Profile, SampleRow, ThreadSamples
from .storage import FORMAT_VERSION, ProfileFormatError, is_profile_file, load, save

__all__ = [
    "FORMAT_VERSION",
    "STATES",
    "Marker",
    "Profile",
    "ProfileFormatError",
    "SampleRow",
    "ThreadSamples",
    "is_profile_file",
    "load",
    "save",
]

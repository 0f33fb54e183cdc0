"""Recording: run a target under a session and write format F to path P.

Shared by the CLI's `record` and `report`, the API, and (later) attach and
subprocess children; it sits above the exporters and below the CLI.
"""
from .output import (DEFAULT_FORMAT, check_output_path, default_output_name, export_and_write, output_view,
                     resolve_format, save_fallback)
from .run import Plan, Recording, run_recording
from .stacks import make_frame_stripper

__all__ = ["DEFAULT_FORMAT", "Plan", "Recording", "check_output_path", "default_output_name", "export_and_write",
           "make_frame_stripper", "output_view", "resolve_format", "run_recording", "save_fallback"]

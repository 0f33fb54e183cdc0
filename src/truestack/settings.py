"""Defaults and choices the command line shows before anything heavy is loaded.

`record` parses its arguments and forks the program's process before it
imports the sampler, the engines or the model; what its parser needs lives
here, with nothing imported.
"""

DEFAULT_MAX_DEPTH = 128  # deepest stack kept, frames nearest the leaf first
ENGINE_CHOICES = ("auto", "native", "safepoint")
# --native: "off"; "on" (C frames interleaved, interpreter plumbing hidden); "all" (plumbing shown too)
NATIVE_CHOICES = ("off", "on", "all")

"""Recording: run a target under a session and write format F to path P.

Shared by the CLI's `record` and `report`, the API, and (later) attach and
subprocess children; it sits above the exporters and below the CLI.

- `output`: format resolution, the output-path check, the view a format
  sees, export-and-write with a rescue copy.
- `run`: the in-process run of a program under a session (`Plan`).
- `child`: the profiled program's process, streaming its profile.
- `supervisor`: `record`'s side: launches the child, reads the stream,
  writes the profile whatever happens to the program.

Nothing is imported here, so the child process pays only for what it uses.
"""

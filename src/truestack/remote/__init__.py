"""Reading a running Python process from outside, for `truestack dump`.

Nothing is injected and the target is never stopped: memory is read with
process_vm_readv through `truestack._remote`, the sampler's own walker
compiled against that load (one walker source, two load backends), so the
per-version frame layout lives in one place. This package finds the target's
interpreter (process.py), reads its objects (values.py, linetable.py) and
takes the snapshot of every thread (snapshot.py).

`truestack attach` starts here too: whether ptrace is allowed and which
truestack the target can import (attachable.py), and the routes that run a
line of Python inside it (inject.py).
"""

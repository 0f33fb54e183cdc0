"""The package's exceptions.

`UsageError` is the user's doing (a missing script, a bad option): the CLI
prints its message as one line and exits with status 2, never a traceback.
"""

from __future__ import annotations


class TruestackError(Exception):
    """Base of every error truestack raises on purpose."""


class UsageError(TruestackError):
    """A mistake the user can fix; the message is one line that says how."""

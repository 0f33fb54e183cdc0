"""Errors that are the user's doing: printed as one line, exit status 2."""


class UsageError(Exception):
    pass

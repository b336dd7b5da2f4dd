"""User-facing errors: the CLI prints the message as one line and exits non-zero."""
from __future__ import annotations


class EvolveMemError(Exception):
    """A problem the user can fix (bad input file, unknown config field, missing data)."""


class DataError(EvolveMemError):
    """A dataset file is missing, malformed, or lacks a required field."""


class ConfigError(EvolveMemError):
    """A configuration is malformed: unknown field, wrong type, unknown preset."""

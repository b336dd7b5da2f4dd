"""User-facing errors: the CLI prints the message as one line and exits non-zero."""

from __future__ import annotations


class EvolveMemError(Exception):
    """A problem the user can fix (bad input file, unknown config field, missing data)."""


class DataError(EvolveMemError):
    """A dataset file is missing, malformed, or lacks a required field."""


class ConfigError(EvolveMemError):
    """A configuration is malformed: unknown field, wrong type, unknown preset."""


_DISK_FULL = (28, 122)  # ENOSPC, EDQUOT
_READ_ONLY = (30, 13, 1)  # EROFS, EACCES, EPERM


def environment_problem(exc: BaseException) -> str | None:
    """One line naming what in the machine stopped a command (a full disk, a read-only directory,
    a damaged run store) and how to fix it; None for anything else (a bug). Matched on errno and,
    for DuckDB (whose errors are not OSErrors), on the operating system's words in its message."""
    import errno as errno_names

    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    where = getattr(exc, "filename", None)
    place = f" ({where})" if where else ""
    code = exc.errno if isinstance(exc, OSError) else None
    lowered = str(exc).lower()
    if code in _DISK_FULL or "no space left" in lowered or "disk quota" in lowered:
        return (
            f"the disk is full{place}: free some space (or point --out / EVOLVEMEM_CACHE_DIR at another disk), "
            "then resume; finished work is saved"
        )
    if code in _READ_ONLY or "read-only file system" in lowered or "permission denied" in lowered:
        return f"cannot write{place}: {text}; pick a writable --out (or EVOLVEMEM_CACHE_DIR)"
    if code == errno_names.ENOTDIR or (code == errno_names.EEXIST and where):
        return f"{where} is a file where a directory is needed; pick another --out"
    if "duckdb" in type(exc).__module__ and any(
        word in lowered
        for word in (
            "checksum",
            "corrupt",
            "not a valid duckdb",
            "truncated",
            "failed to read",
            "could not read enough bytes",
        )
    ):
        return f"a run store is damaged ({text}); restore run.duckdb from a copy, or start again with another --out"
    return None

"""A user's gate: its searches and answers in flight, and a forget waiting for them.

A forget must not leave a trace written after it: a search that began just before the delete would
otherwise finish after it and buffer its trace (query, answer) for a user who no longer exists.
So a forget closes the gate, waits until the user's readers in flight are done, and only then
drops the user's buffered traces and deletes; readers that arrive meanwhile wait at the gate and
find the user forgotten. Readers never wait for an add (an add swaps the new state in whole).
"""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator


class UserGate:
    """Readers in flight of one user, and whether a forget holds the gate."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._readers = 0
        self._closed = False

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """One search, context or answer (its trace included): waits while a forget holds the gate."""
        with self._changed:
            while self._closed:
                self._changed.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._changed:
                self._readers -= 1
                self._changed.notify_all()

    @contextlib.contextmanager
    def closed(self) -> Iterator[None]:
        """A forget: holds the gate (one forget at a time) once no reader is in flight."""
        with self._changed:
            while self._closed:
                self._changed.wait()
            self._closed = True
            while self._readers:
                self._changed.wait()
        try:
            yield
        finally:
            with self._changed:
                self._closed = False
                self._changed.notify_all()

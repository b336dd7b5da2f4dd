"""`Closing`: a resource a `with` block closes however the block ends (a run store, a session, a
served memory), so each of them writes only its `close`."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TypeVar

C = TypeVar("C", bound="Closing")


class Closing(ABC):
    @abstractmethod
    def close(self) -> None:
        """Release what the resource holds."""

    def __enter__(self: C) -> C:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

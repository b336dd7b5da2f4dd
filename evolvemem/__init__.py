"""evolvemem: tune the retrieval side of LLM-agent memory with an AutoResearch loop."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evolvemem.serving.memory import Memory

__version__ = "0.1.0"

__all__ = ["Memory", "__version__"]


def __getattr__(name: str) -> type[Memory]:
    """`evolvemem.Memory`, imported on first use so `import evolvemem` stays light."""
    if name == "Memory":
        from evolvemem.serving.memory import Memory

        return Memory
    raise AttributeError(f"module 'evolvemem' has no attribute {name!r}")

"""Serving an evolved config: the `Memory` library verb, its HTTP API and MCP tools, and traces."""

from evolvemem.contracts.local_models import LocalModels
from evolvemem.serving.memory import DEFAULT_NAMESPACE, Memory

__all__ = ["DEFAULT_NAMESPACE", "LocalModels", "Memory"]

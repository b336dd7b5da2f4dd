"""Content-addressed on-disk cache of LLM replies.

A round of evolution re-asks mostly the same prompts as the round before, so replaying them from
disk is what makes a round cost only what changed. We keep our own small cache rather than
litellm's: litellm's disk backend needs the extra `diskcache` package, hides whether a reply was
a hit, and keys on litellm-internal parameters; ours stores the token counts we account with,
is keyed only by what changes the reply, and is safe across threads and processes because every
entry is written to a temporary file and moved into place with `os.replace`.

Layout: `<root>/<key[:2]>/<key>.json`, one small JSON file per reply.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from evolvemem.paths import cache_dir, write_atomic

DISABLE_ENV = "EVOLVEMEM_NO_LLM_CACHE"


LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def server_identity(api_base: str) -> str:
    """What of a server's address names the model behind it. A server on this machine
    (llama.cpp, Ollama, vLLM) is started again on whatever port is free, so its port says nothing:
    the model name beside it does. A remote address is kept whole."""
    parts = urlsplit(api_base)
    if parts.hostname in LOOPBACK_HOSTS:
        return urlunsplit((parts.scheme, "localhost", parts.path.rstrip("/"), "", ""))
    return api_base


def make_cache_key(params: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of everything that determines a reply (model, messages, the
    server's identity, ...)."""
    if params.get("api_base"):
        params = {**params, "api_base": server_identity(str(params["api_base"]))}
    canonical = json.dumps(params, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _disabled_by_env() -> bool:
    return os.environ.get(DISABLE_ENV, "").strip().lower() not in ("", "0", "false", "no")


class ResponseCache:
    """Reply cache under `cache_dir()/llm` (or `path`); `EVOLVEMEM_NO_LLM_CACHE=1` turns it off."""

    def __init__(self, path: str | Path | None = None, enabled: bool = True):
        self.enabled = enabled and not _disabled_by_env()
        self._root = Path(path) if path is not None else None

    @property
    def root(self) -> Path:
        # Resolved on first use so that building a client never touches the disk when caching is off.
        if self._root is None:
            self._root = cache_dir() / "llm"
        return self._root

    def _file_for(self, key: str) -> Path:
        if len(key) < 8 or not all(c in "0123456789abcdef" for c in key):
            raise ValueError(f"cache key must be a hex digest, got {key!r}")
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored value, or None on a miss (an unreadable entry counts as a miss)."""
        if not self.enabled:
            return None
        target = self._file_for(key)
        try:
            with open(target, encoding="utf-8") as handle:
                value = json.load(handle)
        except (OSError, ValueError):
            return None
        return value if isinstance(value, dict) else None

    def put(self, key: str, value: dict[str, Any]) -> None:
        """Store `value` atomically: readers see the old entry or the new one, never half a file."""
        if not self.enabled:
            return
        write_atomic(self._file_for(key), json.dumps(value, ensure_ascii=False))

    def clear(self) -> None:
        """Delete every stored reply."""
        if self.root.is_dir():
            shutil.rmtree(self.root)

    def __len__(self) -> int:
        if not self.root.is_dir():
            return 0
        return sum(1 for _ in self.root.glob("??/*.json"))

    def __repr__(self) -> str:
        state = "on" if self.enabled else "off"
        return f"ResponseCache({str(self._root) if self._root else 'cache_dir()/llm'}, {state})"

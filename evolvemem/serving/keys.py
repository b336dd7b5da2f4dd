"""API keys: each key is a namespace of its own, and no key is ever stored or logged.

Keys come from `EVOLVEMEM_API_KEYS` (comma-separated) or a file (one per line). A key's
namespace is a hash of it: the store holds the hash, never the key, and two keys never share a
user. With no keys the server has one open namespace and must listen on loopback only.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from evolvemem.errors import EvolveMemError
from evolvemem.serving.memory import DEFAULT_NAMESPACE

KEYS_ENV = "EVOLVEMEM_API_KEYS"
MIN_KEY_LENGTH = 16
LOOPBACK = ("127.0.0.1", "localhost", "::1")
MISSING_KEY = "missing or unknown API key (send Authorization: Bearer KEY)"
TWO_KEYS = "more than one Authorization header (send one)"


@dataclass(frozen=True)
class Caller:
    """Who sent a request: its namespace, or None and why it has none (the 401 message)."""

    namespace: str | None
    refusal: str = ""


def namespace_of(key: str) -> str:
    return "key-" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:24]


@dataclass(frozen=True)
class KeyRing:
    """The accepted keys (as namespace -> key digest, so a comparison never short-circuits on a prefix)."""

    digests: tuple[tuple[str, bytes], ...]

    @property
    def open(self) -> bool:
        return not self.digests

    def namespace(self, authorization: str | None) -> str | None:
        """The namespace of a `Bearer KEY` header; None when the key is missing or unknown.
        Without keys every request is in the one open namespace."""
        if self.open:
            return DEFAULT_NAMESPACE
        if not authorization or not authorization.startswith("Bearer "):
            return None
        given = hashlib.sha256(authorization[len("Bearer ") :].strip().encode("utf-8")).digest()
        found = None
        for namespace, digest in self.digests:
            if hmac.compare_digest(given, digest):
                found = namespace
        return found

    def caller(self, headers: Iterable[tuple[bytes, bytes]]) -> Caller:
        """The caller of a request from its raw ASGI headers: the one rule of the JSON API and of
        /mcp. With keys, a request carrying more than one Authorization header is refused
        whatever they hold (proxies and frameworks disagree on which one counts)."""
        if self.open:
            return Caller(DEFAULT_NAMESPACE)
        given = [value for name, value in headers if name.lower() == b"authorization"]
        if len(given) > 1:
            return Caller(None, TWO_KEYS)
        found = self.namespace(given[0].decode("latin-1")) if given else None
        return Caller(found, "" if found is not None else MISSING_KEY)


def key_ring(keys: list[str]) -> KeyRing:
    cleaned = [k.strip() for k in keys if k.strip()]
    short = [k for k in cleaned if len(k) < MIN_KEY_LENGTH]
    if short:
        raise EvolveMemError(f"{len(short)} API key(s) shorter than {MIN_KEY_LENGTH} characters; use long random keys")
    return KeyRing(tuple((namespace_of(k), hashlib.sha256(k.encode("utf-8")).digest()) for k in dict.fromkeys(cleaned)))


def keys_from(file: str | None = None) -> KeyRing:
    """Keys from `file` (one a line, # comments) or else the environment."""
    if file:
        try:
            lines = Path(file).read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise EvolveMemError(f"{file}: cannot read API keys ({exc.strerror})") from None
        return key_ring([line for line in lines if not line.lstrip().startswith("#")])
    return key_ring(os.environ.get(KEYS_ENV, "").split(","))


def check_exposure(ring: KeyRing, host: str) -> None:
    """An open namespace is served on loopback only."""
    if ring.open and host not in LOOPBACK:
        raise EvolveMemError(
            f"no API keys are set ({KEYS_ENV}); without keys the memory is open to anyone who can "
            f"connect, so it is served on 127.0.0.1 only, not {host}"
        )

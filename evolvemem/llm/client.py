"""One LLM client for every role: litellm underneath, our own cache, retries and accounting on top.

litellm gives one call signature for every provider (`openai/…`, `azure/…`, `anthropic/…`,
`ollama/…`, `hosted_vllm/…`). We turn its own retries off (`num_retries=0`) and retry here, so
that backoff, `Retry-After`, the cache and the usage ledger behave the same for every provider.
API keys are read by litellm from the environment; they are never stored here, and anything
that looks like one is scrubbed from the errors we raise.
"""

from __future__ import annotations

import dataclasses
import email.utils
import logging
import os
import random
import re
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from evolvemem.llm.cache import ResponseCache, make_cache_key
from evolvemem.llm.context_window import estimate_tokens, from_model_table, probe_server, window_from_error
from evolvemem.llm.json_repair import parse_json_lenient
from evolvemem.llm.usage import UsageLedger
from evolvemem.contracts.usage import Usage

JSON_FOLLOW_UP = "Your previous reply was not valid JSON. Reply again with valid JSON only: no prose, no code fences."
_NO_RETRY_STATUS = frozenset({400, 401, 402, 403, 404, 405, 413, 422})
_RETRY_STATUS = frozenset({408, 409, 425, 429})
_MESSAGE_LIMIT = 300
# A reply longer than this many characters per requested token (never below REPLY_FLOOR_CHARS) is
# cut: a server that ignores max_tokens must not fill memory, the run store and the cache with
# megabytes per answer. Generous: a token is ~4 characters of English.
REPLY_CHARS_PER_TOKEN = 8
REPLY_FLOOR_CHARS = 4096
# sent with every request: the id its usage line carries in a run's journal (store/usage_journal.py),
# so a server's log and the run's accounting can be matched call by call
CALL_ID_HEADER = "X-Evolvemem-Call-Id"
# One chat message as litellm takes it: {"role": "user" | "assistant" | "system", "content": text}.
ChatMessage = dict[str, str]


@dataclass(frozen=True)
class LLMReply:
    """A reply. Token fields describe this response (for a cache hit: the original call's counts).

    `billed` is what obtaining the reply cost now when that differs from the fields (set by
    `complete_json` after a re-ask, so the first, unparseable reply is still paid for).
    """

    text: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    cached: bool
    billed: Usage | None = None
    truncated: bool = False  # the server sent more than the reply bound (`reply_limit`); the rest was dropped

    def as_cost(self) -> Usage:
        """New usage caused by this reply: a cache hit costs no tokens and no calls."""
        if self.billed is not None:
            return self.billed
        if self.cached:
            return Usage(cache_hits=1)
        return Usage(1, 0, self.prompt_tokens, self.completion_tokens, self.cost_usd)


class LLMCallFailed(Exception):
    """A call that gave up (after all retries, or at once for a non-retryable status). One clean line.

    `cost` is what the call used before giving up that the caller still bills (a request the server
    rejected; empty for most failures)."""

    def __init__(self, message: str, *, status_code: int | None = None, attempts: int = 1, cost: Usage | None = None):
        super().__init__(message)
        self.status_code = status_code
        self.attempts = attempts
        self.cost = cost or Usage()


class PromptTooLong(LLMCallFailed):
    """The prompt and the reply do not fit the model's context window: known beforehand (`sent`
    False: not sent), or learned from the server's rejection of it (`sent` True: the request
    reached the server and is billed as one failed call; a re-fitted prompt may now fit)."""

    def __init__(self, message: str, *, window: int, sent: bool = False, status_code: int | None = None):
        super().__init__(
            message, status_code=status_code, attempts=int(sent), cost=Usage(calls=1, failures=1) if sent else None
        )
        self.window = window
        self.sent = sent


class LLMJSONError(LLMCallFailed):
    """The model answered, but not with JSON, even after one re-ask. `raw_text` is its last reply."""

    def __init__(self, message: str, *, raw_text: str, reply: LLMReply):
        super().__init__(message)
        self.raw_text = raw_text
        self.reply = reply


# ----------------------------------------------------------------------------- secrets
_KEY_PATTERNS = (
    re.compile(r"\bsk-[A-Za-z0-9_\-]{6,}"),
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9_\-\.=]{8,}"),
    re.compile(r"(?i)((?:api[_-]?key|token|secret)[\"']?\s*[:=]\s*[\"']?)[A-Za-z0-9_\-\.]{8,}"),
)
_SECRET_ENV_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD", re.IGNORECASE)
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/\s@]+@")


def redact_url(url: str) -> str:
    """A URL with its user:password part masked (`http://***@host/v1`): safe to print and store."""
    return _URL_USERINFO.sub(r"\1***@", url)


def reply_limit(max_tokens: int) -> int:
    """The most characters of a reply kept for a call that asked for `max_tokens` tokens."""
    return max(REPLY_FLOOR_CHARS, REPLY_CHARS_PER_TOKEN * max(0, int(max_tokens)))


def scrub_secrets(text: str) -> str:
    """Mask API keys: `sk-…` strings, bearer tokens, credentials in URLs, and the values of env
    vars named *KEY*/*TOKEN*."""
    text = redact_url(text)
    for name, value in os.environ.items():
        if len(value) >= 6 and _SECRET_ENV_NAME.search(name) and value in text:
            text = text.replace(value, "***")
    text = _KEY_PATTERNS[0].sub("sk-***", text)
    for pattern in _KEY_PATTERNS[1:]:
        text = pattern.sub(lambda m: m.group(1) + "***", text)
    return text


def _clean_message(exc: BaseException) -> str:
    """A one-line, key-free description of a litellm/openai exception."""
    raw = str(getattr(exc, "message", None) or exc) or type(exc).__name__
    lines = [line.strip() for line in raw.splitlines() if line.strip()]
    first = lines[0] if lines else type(exc).__name__
    # litellm prefixes "litellm.RateLimitError: RateLimitError: "; the type name is reported separately.
    first = re.sub(r"^(?:(?:litellm\.)?\w+(?:Error|Timeout):\s*)+", "", first)
    first = scrub_secrets(first)
    return first if len(first) <= _MESSAGE_LIMIT else first[: _MESSAGE_LIMIT - 1] + "…"


# ----------------------------------------------------------------------------- litellm
_LITELLM_LOCK = threading.Lock()
_LITELLM: Any = None


def _litellm() -> Any:
    """Import and quieten litellm once (the cost map stays local: no network at import)."""
    global _LITELLM
    if _LITELLM is None:
        with _LITELLM_LOCK:
            if _LITELLM is None:
                os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
                import litellm

                litellm.suppress_debug_info = True
                litellm.telemetry = False
                litellm.set_verbose = False
                for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm"):
                    logging.getLogger(name).setLevel(logging.CRITICAL)
                _LITELLM = litellm
    return _LITELLM


def _status_code(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


class NotACompletion(Exception):
    """The server answered 200 with something that is not a chat completion (a proxy's page, an
    empty body): worth another try, and never an empty answer."""


def _is_retryable(exc: BaseException) -> bool:
    import openai  # a litellm dependency; its exception classes are the bases of litellm's

    if isinstance(exc, NotACompletion):
        return True
    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError)):
        return True  # litellm.Timeout, litellm.APIConnectionError
    status = _status_code(exc)
    if status in _NO_RETRY_STATUS:
        return False
    if status is not None:
        return status in _RETRY_STATUS or status >= 500
    return isinstance(exc, openai.APIError)  # a provider error without a status: worth another try


def _is_timeout(exc: BaseException) -> bool:
    import openai

    return isinstance(exc, openai.APITimeoutError)


def _causes(exc: BaseException) -> list[BaseException]:
    """The exception and the ones it was raised from or during (litellm wraps the socket's error)."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain and len(chain) < 12:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _connection_problem(exc: BaseException) -> str | None:
    """ "connection refused" / "connection failed" when no server could be reached at all (litellm
    reports that as an HTTP 500 "Connection error"), None for an answer or a timeout."""
    import openai

    chain = _causes(exc)
    if any(isinstance(e, openai.APITimeoutError) or isinstance(e, TimeoutError) for e in chain):
        return None
    texts = " ".join(str(e) for e in chain).lower()
    if (
        any(isinstance(e, ConnectionRefusedError) for e in chain)
        or "connection refused" in texts
        or "errno 111" in texts
    ):
        return "connection refused"
    if any(isinstance(e, (openai.APIConnectionError, ConnectionError)) for e in chain) or "connection error" in texts:
        return "connection failed"
    return None


def _retry_after_seconds(exc: BaseException) -> float | None:
    """Seconds the server asked us to wait (`retry-after-ms`, `Retry-After` seconds or HTTP date)."""
    sources = (
        getattr(exc, "litellm_response_headers", None),
        getattr(getattr(exc, "response", None), "headers", None),
        getattr(exc, "headers", None),
    )
    for headers in sources:
        if not headers:
            continue
        try:
            lowered = {str(k).lower(): str(v) for k, v in dict(headers).items()}
        except (TypeError, ValueError):
            continue
        if "retry-after-ms" in lowered:
            try:
                return max(0.0, float(lowered["retry-after-ms"]) / 1000.0)
            except ValueError:
                pass
        value = lowered.get("retry-after")
        if value is None:
            continue
        try:
            return max(0.0, float(value))
        except ValueError:
            parsed = email.utils.parsedate_to_datetime(value) if value.strip() else None
            if parsed is not None:
                return max(0.0, parsed.timestamp() - time.time())
    return None


def _completion_cost(litellm: Any, response: Any) -> float:
    """Price of a response when litellm knows the model's price, else 0.

    litellm already priced the response while logging it (`_hidden_params["response_cost"]`,
    None for a model without a price); pricing it again costs ~1 ms of GIL-held CPU per call,
    which caps throughput at high concurrency."""
    hidden = getattr(response, "_hidden_params", None)
    if isinstance(hidden, dict) and "response_cost" in hidden:
        try:
            return float(hidden["response_cost"] or 0.0)
        except (TypeError, ValueError):
            return 0.0
    try:
        return float(litellm.completion_cost(completion_response=response) or 0.0)
    except Exception:  # unknown model (local servers, fine-tunes): no price, not an error
        return 0.0


# ----------------------------------------------------------------------------- client
_DEFAULT_CACHE: Any = object()


class LLMClient:
    """Thread-safe chat client for one model; share one instance across a thread pool."""

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        cache: ResponseCache | None = _DEFAULT_CACHE,
        max_retries: int = 4,
        timeout: float = 60.0,
        backoff_base: float = 0.5,
        backoff_max: float = 20.0,
        usage: UsageLedger | None = None,
        seed: int | None = None,
        context_window: int | None = None,
        json_mode: bool | int = True,
        breaker: int = 8,
    ):
        if not isinstance(model, str) or not model.strip():
            raise ValueError("LLM model name is empty (expected e.g. 'openai/gpt-4o-mini')")
        self.model = model
        self.api_base = api_base
        self.cache = ResponseCache() if cache is _DEFAULT_CACHE else cache
        self.max_retries = max(0, int(max_retries))
        self.timeout = float(timeout)
        self.backoff_base = float(backoff_base)
        self.backoff_max = float(backoff_max)
        self.usage = usage if usage is not None else UsageLedger()
        self.seed = seed
        # response_format json_object for JSON calls; llama-cpp-python enforces it with a grammar under
        # which a small model may never stop (it fills max_tokens), so a user can turn it off
        self.json_mode = bool(json_mode)
        self._jitter = random.Random()
        self._window = context_window
        self._window_checked = context_window is not None
        self._window_lock = threading.Lock()
        # circuit breaker: after `breaker` failed calls in a row (each after its retries) the model
        # is not called again in this process; a dead endpoint fails fast instead of per question
        self.breaker = max(0, int(breaker))
        self._failures_in_a_row = 0
        self._last_failure = ""
        self._breaker_lock = threading.Lock()
        self.oversized_replies = 0  # replies cut at `reply_limit` (a server that ignores max_tokens)

    def __repr__(self) -> str:
        return f"LLMClient({self.model!r}, api_base={redact_url(self.api_base or '')!r})"

    def _request_params(
        self, messages: list[ChatMessage], temperature: float, max_tokens: int, json_mode: bool
    ) -> dict[str, Any]:
        """Everything that determines the reply; also the cache key's content."""
        params: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": temperature,
            "max_tokens": max_tokens,
        }
        if json_mode:
            params["response_format"] = {"type": "json_object"}
        if self.seed is not None:
            params["seed"] = self.seed
        if self.api_base:
            params["api_base"] = self.api_base  # one name can be a different model on another server
        return params

    def context_window(self) -> int | None:
        """The model's context window in tokens, looked up once (llm/context_window.py); None
        when neither the user, litellm's table nor the server says (then prompts go unsized
        until a rejection names the window)."""
        with self._window_lock:
            if not self._window_checked:
                self._window_checked = True
                self._window = from_model_table(_litellm(), self.model) if not self.api_base else None
                if self._window is None and self.api_base:
                    self._window = probe_server(self.api_base)
            return self._window

    def fits(self, messages: list[ChatMessage], max_tokens: int) -> bool:
        """Whether `messages` and a reply of `max_tokens` fit the model's window (unknown: yes)."""
        window = self.context_window()
        return window is None or estimate_tokens(messages) + max_tokens <= window

    def _check_fits(self, messages: list[ChatMessage], max_tokens: int, role: str) -> None:
        if self.fits(messages, max_tokens):
            return
        window = self.context_window()
        assert window is not None  # an unknown window always fits
        self.usage.record_failure(role)
        raise PromptTooLong(
            f"{self.model} [{role}]: a prompt of ~{estimate_tokens(messages)} tokens plus {max_tokens} reply "
            f"tokens does not fit the context window of {window} tokens (not sent)",
            window=window,
        )

    def _learn_window(self, exc: BaseException) -> int | None:
        """A rejection that names the window teaches it to this client for the rest of the run."""
        found = window_from_error(str(exc)) if _status_code(exc) in (400, 413, None) else None
        if found:
            with self._window_lock:
                self._window, self._window_checked = found, True
        return found

    def breaker_open(self) -> str | None:
        """Why this model is no longer called (the circuit breaker tripped), or None."""
        with self._breaker_lock:
            if not self.breaker or self._failures_in_a_row < self.breaker:
                return None
            return (
                f"circuit breaker open after {self.breaker} failed calls in a row (last: {self._last_failure}); "
                "fix the endpoint, then resume"
            )

    def _check_breaker(self, role: str) -> None:
        why = self.breaker_open()
        if why:
            self.usage.record_failure(role)
            raise LLMCallFailed(f"{self.model} [{role}] not called: {why}", attempts=0)

    def _count_failure(self, cause: str) -> None:
        with self._breaker_lock:
            self._failures_in_a_row += 1
            self._last_failure = cause

    def backoff_delay(self, attempt: int, retry_after: float | None) -> float:
        """Full jitter: uniform(0, base·2^attempt) capped at backoff_max; a Retry-After is a floor."""
        ceiling = min(self.backoff_max, self.backoff_base * (2**attempt))
        delay = self._jitter.uniform(0.0, ceiling)
        if retry_after is not None:
            delay = max(delay, retry_after)
        return min(delay, self.backoff_max)

    def complete(
        self,
        messages: list[ChatMessage],
        *,
        role: str,
        temperature: float = 0.0,
        max_tokens: int = 512,
        json_mode: bool = False,
    ) -> LLMReply:
        """One chat completion: from the cache when possible, else from the provider with retries."""
        if not messages or not all(isinstance(m, dict) and "role" in m for m in messages):
            raise ValueError("messages must be a non-empty list of {'role': ..., 'content': ...} dicts")
        params = self._request_params(messages, temperature, max_tokens, json_mode)
        key = make_cache_key(params) if self.cache is not None else ""
        hit = self._cached(key, role)
        if hit is not None:
            return hit
        self._check_fits(messages, max_tokens, role)
        self._check_breaker(role)
        litellm = _litellm()
        call_id = uuid.uuid4().hex
        response = self._send(litellm, params, role, call_id)
        reply = self._reply_from(litellm, response, reply_limit(max_tokens))
        # first thing once the reply is ours: with a run's journal attached, this is the line
        # that keeps the call's cost through a kill
        self.usage.record_call(role, reply.prompt_tokens, reply.completion_tokens, reply.cost_usd, call_id)
        with self._breaker_lock:
            self._failures_in_a_row = 0
        if reply.truncated:
            with self._breaker_lock:
                self.oversized_replies += 1
        self._keep(key, reply)
        return reply

    def _cached(self, key: str, role: str) -> LLMReply | None:
        """The cached reply to this request (counted as a cache hit), or None."""
        if self.cache is None:
            return None
        hit = self.cache.get(key)
        if hit is None or not isinstance(hit.get("text"), str):
            return None
        self.usage.record_cache_hit(role)
        return LLMReply(
            text=hit["text"],
            model=str(hit.get("model", self.model)),
            prompt_tokens=int(hit.get("prompt_tokens", 0)),
            completion_tokens=int(hit.get("completion_tokens", 0)),
            cost_usd=float(hit.get("cost_usd", 0.0)),
            cached=True,
            truncated=bool(hit.get("truncated", False)),
        )

    def _keep(self, key: str, reply: LLMReply) -> None:
        """Cache a provider's reply (a full or read-only disk costs a future cache hit, not this reply)."""
        if self.cache is None:
            return
        try:
            self.cache.put(
                key,
                {
                    "text": reply.text,
                    "truncated": reply.truncated,
                    "model": reply.model,
                    "prompt_tokens": reply.prompt_tokens,
                    "completion_tokens": reply.completion_tokens,
                    "cost_usd": reply.cost_usd,
                },
            )
        except OSError:
            pass

    def _send(self, litellm: Any, params: dict[str, Any], role: str, call_id: str) -> Any:
        """The provider's response, after up to `max_retries` retries of retryable faults with
        backoff; raises `PromptTooLong` or `LLMCallFailed` when it gives up."""
        attempt = 0
        while True:
            try:
                response = litellm.completion(
                    **params,
                    timeout=self.timeout,
                    num_retries=0,
                    drop_params=True,
                    extra_headers={CALL_ID_HEADER: call_id},
                )
                if not getattr(response, "choices", None):
                    raise NotACompletion("the reply is not a chat completion (it has no choices)")
                return response
            except Exception as exc:  # classified below; anything non-retryable ends the call
                retryable = _is_retryable(exc)
                if not retryable or attempt >= self.max_retries:
                    raise self._gave_up(exc, retryable, attempt, params["messages"], role, call_id) from None
                if _is_timeout(exc):
                    self._count_timeout(role, attempt)
                self.usage.record_retry(role)
                time.sleep(self.backoff_delay(attempt, _retry_after_seconds(exc)))
                attempt += 1
                # the breaker may have opened while this call waited (other calls failed or timed
                # out meanwhile): give up now rather than start another attempt against a dead server
                why = self.breaker_open()
                if why:
                    self.usage.record_failure(role)
                    raise LLMCallFailed(
                        f"{self.model} [{role}] stopped after {attempt} attempt(s): {why}", attempts=attempt
                    ) from None

    def _gave_up(
        self, exc: BaseException, retryable: bool, attempt: int, messages: list[ChatMessage], role: str, call_id: str
    ) -> LLMCallFailed:
        """The error a call ends with: `PromptTooLong` when the rejection names the model's window
        (learned for the rest of the run), else `LLMCallFailed` counted by the breaker."""
        status = _status_code(exc)
        learned = self._learn_window(exc)
        if learned:
            self.usage.record_rejection(role, call_id)
            return PromptTooLong(
                f"{self.model} [{role}] rejected a prompt of ~{estimate_tokens(messages)} tokens: its "
                f"context window is {learned} tokens (now used to size every prompt)",
                window=learned,
                sent=True,
                status_code=status,
            )
        self.usage.record_failure(role)
        tries = "(not retryable)" if not retryable else f"after {attempt + 1} attempt(s)"
        cause = self._cause(exc, status)
        self._count_failure(cause)
        return LLMCallFailed(f"{self.model} [{role}] failed {tries}: {cause}", status_code=status, attempts=attempt + 1)

    def _count_timeout(self, role: str, attempt: int) -> None:
        """A timed-out attempt costs as much as a failed call: a server that accepts connections but
        never answers trips the breaker after `breaker` waits, not after `breaker` × (retries + 1) of
        them. Raises `LLMCallFailed` when the breaker opens."""
        where = f" at {redact_url(self.api_base)}" if self.api_base else ""
        self._count_failure(f"timed out: no answer within {self.timeout:g} s{where}")
        why = self.breaker_open()
        if why:
            self.usage.record_failure(role)
            raise LLMCallFailed(
                f"{self.model} [{role}] stopped after {attempt + 1} timed-out attempt(s): {why}",
                attempts=attempt + 1,
            ) from None

    def _cause(self, exc: BaseException, status: int | None) -> str:
        """Why a call failed, in one line: an unreachable server is named as such (with its address,
        credentials masked), not as the HTTP 500 litellm turns it into."""
        problem = _connection_problem(exc)
        if problem:
            where = f" at {redact_url(self.api_base)}" if self.api_base else ""
            return f"{problem}{where}"
        where = f"HTTP {status} " if status else ""
        return f"{where}{type(exc).__name__}: {_clean_message(exc)}"

    def _reply_from(self, litellm: Any, response: Any, limit: int) -> LLMReply:
        choice = response.choices[0] if getattr(response, "choices", None) else None
        message = getattr(choice, "message", None)
        text = getattr(message, "content", None) or ""
        text = text if isinstance(text, str) else str(text)
        truncated = len(text) > limit
        if truncated:
            text = text[:limit]
        usage = getattr(response, "usage", None)
        return LLMReply(
            truncated=truncated,
            text=text,
            model=str(getattr(response, "model", None) or self.model),
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            cost_usd=_completion_cost(litellm, response),
            cached=False,
        )

    def complete_json(self, messages: list[ChatMessage], *, role: str, **kw: Any) -> tuple[Any, LLMReply]:
        """A JSON reply, parsed leniently; one re-ask when unparseable, then `LLMJSONError`."""
        kw["json_mode"] = self.json_mode
        first = self.complete(messages, role=role, **kw)
        try:
            return parse_json_lenient(first.text), first
        except ValueError:
            pass
        follow_up = [
            *messages,
            {"role": "assistant", "content": first.text},
            {"role": "user", "content": JSON_FOLLOW_UP},
        ]
        second = self.complete(follow_up, role=role, **kw)
        both = dataclasses.replace(second, billed=first.as_cost() + second.as_cost())
        try:
            return parse_json_lenient(second.text), both
        except ValueError as exc:
            raise LLMJSONError(
                f"{self.model} [{role}] did not reply with JSON after one re-ask: {exc}",
                raw_text=second.text,
                reply=both,
            ) from None

"""`evolve serve`'s HTTP API: the `Memory` verbs as JSON endpoints (FastAPI), plus MCP at /mcp.

Every error is `{"error": "<one message>"}` with a 4xx status for anything the client can fix;
every response carries the config's hash (`config_hash` in bodies, the `X-Evolvemem-Config`
header on all). The user named in a request lives in the namespace of the request's key.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import Any, AsyncIterator, Callable, Optional, cast

from fastapi import Depends, FastAPI, HTTPException, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from evolvemem.errors import EvolveMemError
from evolvemem.serving.config_source import SourceSignature, source_signature
from evolvemem.serving.http_guards import (
    ASGIApp,
    BodyLimit,
    HTTPMiddleware,
    InFlightLimit,
    Message,
    Receive,
    Scope,
    Send,
)
from evolvemem.serving.keys import KeyRing
from evolvemem.serving.memory import Memory
from evolvemem.serving.metrics import Metrics, MetricsMiddleware
from evolvemem.serving.models import (
    MAX_NAME,
    MAX_TURNS,
    AddRequest,
    AddResult,
    AnswerResult,
    ContextResult,
    ForgetResult,
    QueryRequest,
    SearchRequest,
    SearchResult,
    validation_message,
)

log = logging.getLogger("evolvemem.serve")
CONFIG_HEADER = b"x-evolvemem-config"
DEFAULT_MAX_BODY = 1_000_000
DEFAULT_MAX_IN_FLIGHT = 64


class Health(BaseModel):
    status: str
    config_hash: str
    config_source: str
    namespaces: str = Field(description="'open' (one namespace, loopback only) or 'keys'.")


class ErrorBody(BaseModel):
    error: str


ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": ErrorBody} for code in (400, 401, 413, 422, 503)}


class ConfigHeader(HTTPMiddleware):
    """Adds the current config's hash to every response."""

    def __init__(self, app: ASGIApp, memory: Memory):
        super().__init__(app)
        self.memory = memory

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def stamped(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {
                    **message,
                    "headers": [*message.get("headers", []), (CONFIG_HEADER, self.memory.config_hash.encode())],
                }
            await send(message)

        await self.app(scope, receive, stamped)


class ConfigWatcher:
    """Swaps a newly evolved config in when the files of `--config` change (checked every
    `interval` seconds); a config that does not load is reported and the old one kept.

    A change is read only once it has settled (the same size and modification time at two
    checks in a row): an editor or a script that writes the file in place would otherwise be
    read half-written, and an empty TOML file is a valid config (every default)."""

    def __init__(self, memory: Memory, spec: str, interval: float):
        self.memory, self.spec, self.interval = memory, spec, interval
        self._signature = source_signature(spec)
        self._unsettled: SourceSignature | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="evolvemem-config-watch", daemon=True)

    def start(self) -> None:
        if self.interval > 0:
            self._thread.start()

    def check(self) -> bool:
        """Whether a changed config was swapped in at this check."""
        signature = source_signature(self.spec)
        if signature == self._signature:
            self._unsettled = None
            return False
        if signature != self._unsettled:  # changed since the last check: maybe still being written
            self._unsettled = signature
            return False
        self._signature, self._unsettled = signature, None
        try:
            old, new = self.memory.config_hash, self.memory.use_config(self.spec)
        except EvolveMemError as exc:
            log.warning(
                "config %s changed but does not load (%s); still serving %s", self.spec, exc, self.memory.config_hash
            )
            return False
        if new != old:
            log.warning("config swapped: %s -> %s (%s)", old, new, self.memory.config_source)
        return new != old

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.check()

    def stop(self) -> None:
        self._stop.set()


def create_app(
    memory: Memory,
    keys: KeyRing,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY,
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    watcher: ConfigWatcher | None = None,
    with_mcp: bool = True,
    host: str = "127.0.0.1",
) -> ASGIApp:
    """The served ASGI app: the API behind its guards (outermost first: metrics, in-flight bound,
    body limit, config header)."""
    metrics = Metrics()
    slots: list[InFlightLimit] = []
    api = build_api(
        memory,
        keys,
        max_body_bytes=max_body_bytes,
        watcher=watcher,
        with_mcp=with_mcp,
        host=host,
        metrics=metrics,
        in_flight=lambda: slots[0].in_flight if slots else 0,
    )
    slots.append(InFlightLimit(BodyLimit(ConfigHeader(cast(ASGIApp, api), memory), max_body_bytes), max_in_flight))
    return MetricsMiddleware(slots[0], metrics)


def build_api(
    memory: Memory,
    keys: KeyRing,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY,
    watcher: ConfigWatcher | None = None,
    with_mcp: bool = True,
    host: str = "127.0.0.1",
    metrics: Metrics | None = None,
    in_flight: Callable[[], int] = lambda: 0,
) -> FastAPI:
    """The FastAPI app: routes, the error shape and, `with_mcp`, the MCP endpoint at /mcp."""
    mcp_server = None
    if with_mcp:
        from evolvemem.serving.mcp_tools import build_mcp_server

        mcp_server = build_mcp_server(memory, lambda headers: keys.namespace((headers or {}).get("authorization")))
    app = FastAPI(
        title="evolvemem memory",
        version="1",
        lifespan=_lifespan(memory, watcher, mcp_server),
        description="The memory an evolvemem run tuned, served: add a user's turns, search them, get the "
        "exact context the evolved config hands a reader, or an answer. Every response names "
        "the config's hash.",
    )
    app.state.memory = memory
    app.state.watcher = watcher
    _error_handlers(app)
    _memory_routes(app, memory, _namespace_of(keys))
    _status_routes(app, memory, keys, metrics or Metrics(), in_flight)
    if mcp_server is not None:
        mcp_app = mcp_server.streamable_http_app(
            streamable_http_path="/mcp",
            stateless_http=True,
            json_response=True,
            host=host,
            max_request_body_size=max_body_bytes,
        )
        for route in mcp_app.routes:
            app.router.routes.append(_keyed(route, keys))
    return app


def _lifespan(
    memory: Memory, watcher: ConfigWatcher | None, mcp_server: Any
) -> Callable[[FastAPI], contextlib.AbstractAsyncContextManager[None]]:
    """While the app serves: the config watcher runs and MCP's session manager is open; on the way
    out, the traces still buffered are written."""

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        if watcher is not None:
            watcher.start()
        try:
            if mcp_server is not None:
                async with mcp_server.session_manager.run():
                    yield
            else:
                yield
        finally:
            if watcher is not None:
                watcher.stop()
            memory.traces.flush()

    return lifespan


def _namespace_of(keys: KeyRing) -> Callable[..., str]:
    """The dependency that turns a request's bearer key into its namespace (401 without a known key)."""
    bearer = HTTPBearer(auto_error=False, description="An API key from EVOLVEMEM_API_KEYS (none: open namespace).")

    def namespace(credentials: Optional[HTTPAuthorizationCredentials] = Depends(bearer)) -> str:
        header = f"Bearer {credentials.credentials}" if credentials is not None else None
        found = keys.namespace(header)
        if found is None:
            raise HTTPException(
                401,
                "missing or unknown API key (send Authorization: Bearer KEY)",
                headers={"WWW-Authenticate": "Bearer"},
            )
        return found

    return namespace


def _error_handlers(app: FastAPI) -> None:
    """Every error as `{"error": "<one message>"}`: 422 for a request that does not validate, 400 for
    our own errors, 500 (logged) for the rest."""

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"error": validation_message(exc.errors())}, 422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"error": str(exc.detail)}, exc.status_code, headers=getattr(exc, "headers", None))

    @app.exception_handler(EvolveMemError)
    async def user_error(_request: Request, exc: EvolveMemError) -> JSONResponse:
        return JSONResponse({"error": str(exc).splitlines()[0] if str(exc) else "bad request"}, 400)

    @app.exception_handler(Exception)
    async def internal(_request: Request, exc: Exception) -> JSONResponse:
        log.error("internal error: %s: %s", type(exc).__name__, exc)
        return JSONResponse({"error": f"internal error ({type(exc).__name__}); see the server log"}, 500)


def _memory_routes(app: FastAPI, memory: Memory, namespace: Callable[..., str]) -> None:
    """The `Memory` verbs, each in the namespace of the request's key."""

    @app.post("/v1/memories", response_model=AddResult, responses=ERRORS, summary="Remember turns of a user")
    def add_memories(body: AddRequest, ns: str = Depends(namespace)) -> AddResult:
        return memory.add(body.user, body.turns, session=body.session, at=body.at, namespace=ns)

    @app.post("/v1/search", response_model=SearchResult, responses=ERRORS, summary="Ranked memories for a query")
    def search(body: SearchRequest, ns: str = Depends(namespace)) -> SearchResult:
        return memory.search(
            body.user, body.query, limit=body.limit, question_type=body.question_type, at=body.at, namespace=ns
        )

    @app.post(
        "/v1/context",
        response_model=ContextResult,
        responses=ERRORS,
        summary="The exact context the config hands a reader",
    )
    def context(body: QueryRequest, ns: str = Depends(namespace)) -> ContextResult:
        return memory.context(body.user, body.query, question_type=body.question_type, at=body.at, namespace=ns)

    @app.post("/v1/answer", response_model=AnswerResult, responses=ERRORS, summary="An answer read from the memories")
    def answer(body: QueryRequest, ns: str = Depends(namespace)) -> AnswerResult:
        return memory.answer(body.user, body.query, question_type=body.question_type, at=body.at, namespace=ns)

    @app.delete(
        "/v1/users/{user}", response_model=ForgetResult, responses=ERRORS, summary="Forget a user, or some of its turns"
    )
    def forget(
        user: str = Path(min_length=1, max_length=MAX_NAME),
        session: Optional[str] = Query(None, min_length=1, max_length=MAX_NAME),
        turn_id: Optional[list[str]] = Query(None, max_length=MAX_TURNS),
        ns: str = Depends(namespace),
    ) -> ForgetResult:
        return memory.forget(user, turn_ids=turn_id, session=session, namespace=ns)


def _status_routes(app: FastAPI, memory: Memory, keys: KeyRing, counted: Metrics, in_flight: Callable[[], int]) -> None:
    """/health (liveness and the config served) and /metrics (Prometheus text), open to any caller."""

    @app.get("/health", response_model=Health, summary="Liveness and the config served")
    def health() -> Health:
        return Health(
            status="ok",
            config_hash=memory.config_hash,
            config_source=memory.config_source,
            namespaces="open" if keys.open else "keys",
        )

    @app.get("/metrics", response_class=PlainTextResponse, summary="Prometheus metrics")
    def metrics_text() -> str:
        loaded = memory.loaded_users()
        gauges = {
            "users_loaded": float(len(loaded)),
            "memories_indexed": float(sum(loaded.values())),
            "requests_in_flight": float(in_flight()),
            "query_embeddings_total": float(memory.embedder.queries_embedded),
            "query_embedding_batches_total": float(memory.embedder.query_batches),
        }
        return counted.render(gauges, {"config_hash": memory.config_hash})


def _keyed(route: Any, keys: KeyRing) -> Any:
    """The MCP route behind the same bearer check as the JSON API (401 without a known key)."""
    from evolvemem.serving.http_guards import send_error

    inner = route.app

    async def checked(scope: Scope, receive: Receive, send: Send) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}
        if keys.namespace(headers.get("authorization")) is None:
            await send_error(send, 401, "missing or unknown API key (send Authorization: Bearer KEY)")
            return
        await inner(scope, receive, send)

    route.app = checked
    return route

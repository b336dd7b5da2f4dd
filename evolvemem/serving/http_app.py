"""`evolve serve`'s HTTP API: the `Memory` verbs as JSON endpoints (FastAPI), plus MCP at /mcp.

Every error is `{"error": "<one message>"}` with a 4xx status for anything the client can fix;
every response carries the config's hash (`config_hash` in bodies, the `X-Evolvemem-Config`
header on all). The user named in a request lives in the namespace of the request's key.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import Annotated, Any, AsyncIterator, Awaitable, Callable, Optional, cast

from fastapi import Depends, FastAPI, HTTPException, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from annotated_types import Len
from pydantic import BaseModel, Field, StringConstraints
from pydantic.json_schema import SkipJsonSchema
from starlette.convertors import Convertor, register_url_convertor
from starlette.exceptions import HTTPException as StarletteHTTPException

from evolvemem.errors import EvolveMemError
from evolvemem.serving.config_source import ConfigSpec, SourceSignature, source_signature
from evolvemem.serving.http_guards import (
    ASGIApp,
    BodyLimit,
    HTTPMiddleware,
    InFlightLimit,
    KeyGate,
    Message,
    Receive,
    Scope,
    Send,
    send_error,
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
    validation_message,
    SearchResult,
    UserId,
)

log = logging.getLogger("evolvemem.serve")
CONFIG_HEADER = b"x-evolvemem-config"
DEFAULT_MAX_BODY = 1_000_000
DEFAULT_MAX_IN_FLIGHT = 64
DEFAULT_MAX_UNAUTHENTICATED = 8  # requests at once on the paths open without a key (health, schema, docs)
DEFAULT_READ_TIMEOUT = 10.0  # seconds a client has to send a request's head, and again its body


class Health(BaseModel):
    status: str
    config_hash: str
    namespaces: str = Field(description="'open' (one namespace, loopback only) or 'keys'.")


class ErrorBody(BaseModel):
    error: str


TurnIds = Annotated[list[Annotated[str, StringConstraints(min_length=1, max_length=MAX_NAME)]], Len(0, MAX_TURNS)]
KEYED_ERRORS = (400, 401, 408, 413, 422, 503)
ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": ErrorBody} for code in KEYED_ERRORS}


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

    def __init__(self, memory: Memory, spec: ConfigSpec, interval: float):
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
    max_unauthenticated: int = DEFAULT_MAX_UNAUTHENTICATED,
    read_timeout: float = DEFAULT_READ_TIMEOUT,
    watcher: ConfigWatcher | None = None,
    with_mcp: bool = True,
    host: str = "127.0.0.1",
) -> ASGIApp:
    """The served ASGI app: the API behind its guards (outermost first: metrics, the config header,
    the key check; then for a keyed request the in-flight bound and the body's size and deadline,
    for one on a path open without a key a bound of its own)."""
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
    routes = cast(ASGIApp, api)
    slots.append(InFlightLimit(BodyLimit(routes, max_body_bytes, read_timeout), max_in_flight))
    public = InFlightLimit(routes, max_unauthenticated, exempt=())
    gate = KeyGate(slots[0], public, keys.caller, public_paths(api))
    return MetricsMiddleware(ConfigHeader(gate, memory), metrics)


def public_paths(api: FastAPI) -> frozenset[str]:
    """What answers without a key: liveness, and the schema and docs (which name no user)."""
    paths = ("/health", api.openapi_url, api.docs_url, api.redoc_url, api.swagger_ui_oauth2_redirect_url)
    return frozenset(path for path in paths if path)


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


Namespace = Callable[..., Awaitable[str]]  # the dependency giving a request's namespace


def _namespace_of(keys: KeyRing) -> Namespace:
    """The dependency that turns a request's bearer key into its namespace (401 without a known key),
    by the rule `KeyGate` applied before (the bearer scheme is declared for the schema)."""
    bearer = HTTPBearer(auto_error=False, description="An API key from EVOLVEMEM_API_KEYS (none: open namespace).")

    # async: a dictionary look-up, so it runs on the event loop instead of costing every request a
    # second trip through the thread pool (a sync dependency gets one of its own)
    async def namespace(
        request: Request, _credentials: Optional[HTTPAuthorizationCredentials] = Depends(bearer)
    ) -> str:
        found = keys.caller(request.scope.get("headers") or [])
        if found.namespace is None:
            raise HTTPException(401, found.refusal, headers={"WWW-Authenticate": "Bearer"})
        return found.namespace

    return namespace


def _error_handlers(app: FastAPI) -> None:
    """Every error as `{"error": "<one message>"}`: 422 for a request that does not validate or a
    body that does not parse, 400 for our own errors, 500 (logged) for the rest."""

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        if errors and errors[0].get("type") == "json_invalid":
            return JSONResponse({"error": "request body is not valid JSON"}, 422)
        return JSONResponse({"error": validation_message(errors)}, 422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400:  # the framework's own: a body it cannot parse (not UTF-8 JSON)
            return JSONResponse({"error": "request body is not UTF-8 JSON"}, 422)
        return JSONResponse({"error": str(exc.detail)}, exc.status_code, headers=getattr(exc, "headers", None))

    @app.exception_handler(EvolveMemError)
    async def user_error(_request: Request, exc: EvolveMemError) -> JSONResponse:
        return JSONResponse({"error": str(exc).splitlines()[0] if str(exc) else "bad request"}, 400)

    @app.exception_handler(Exception)
    async def internal(_request: Request, exc: Exception) -> JSONResponse:
        log.error("internal error: %s: %s", type(exc).__name__, exc)
        return JSONResponse({"error": f"internal error ({type(exc).__name__}); see the server log"}, 500)


class _AnyText(Convertor[str]):
    """A path parameter that is the rest of the path, "/" and line breaks included (Starlette's
    `path` stops at a line break): a user id is refused by its own rule (422), never by routing (404)."""

    regex = r"[\s\S]*"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("user_id", _AnyText())


def _memory_routes(app: FastAPI, memory: Memory, namespace: Namespace) -> None:
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
        "/v1/users/{user:user_id}",
        response_model=ForgetResult,
        responses=ERRORS,
        summary="Forget a user, or some of its turns",
        description="The user id is the rest of the path, percent-encoded or not: a user added as "
        "`team/alice` is `/v1/users/team%2Falice` (or `/v1/users/team/alice`).",
    )
    def forget(
        request: Request,
        user: Annotated[UserId, Path()],
        # absent, not null: a query string has no null, so the schema names none
        session: Annotated[str | SkipJsonSchema[None], Query(min_length=1, max_length=MAX_NAME)] = None,
        turn_id: Annotated[TurnIds | SkipJsonSchema[None], Query()] = None,
        ns: str = Depends(namespace),
    ) -> ForgetResult:
        if len(request.query_params.getlist("session")) > 1:
            raise RequestValidationError([{"loc": ("query", "session"), "msg": "one session, given once"}])
        return memory.forget(user, turn_ids=turn_id, session=session, namespace=ns)


def _status_routes(app: FastAPI, memory: Memory, keys: KeyRing, counted: Metrics, in_flight: Callable[[], int]) -> None:
    """/health (liveness and the config's hash, nothing about files), open to any caller, and
    /metrics (Prometheus text), for a caller with a key: its counts span every key's users."""

    @app.get(
        "/health",
        response_model=Health,
        responses={503: {"model": ErrorBody}},
        summary="Liveness and the config served",
    )
    def health() -> Health:
        return Health(status="ok", config_hash=memory.config_hash, namespaces="open" if keys.open else "keys")

    @app.get(
        "/metrics",
        response_class=PlainTextResponse,
        responses={
            code: {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}}
            for code in (401, 503)
        },
        summary="Prometheus metrics (any API key)",
    )
    def metrics_text(_ns: str = Depends(_namespace_of(keys))) -> str:
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
    inner = route.app

    async def checked(scope: Scope, receive: Receive, send: Send) -> None:
        found = keys.caller(scope.get("headers") or [])
        if found.namespace is None:
            await send_error(send, 401, found.refusal, ((b"www-authenticate", b"Bearer"),))
            return
        await inner(scope, receive, send)

    route.app = checked
    return route

"""Everything a command that answers questions needs first: roles, question types, memories
and indexes, opened once per session and shared by every round."""

from __future__ import annotations

from evolvemem.contracts.local_models import LocalModels
from evolvemem.contracts.roles import AnswerJudge
from evolvemem.data.models import Dataset
from evolvemem.contracts.vocab import Metric
from evolvemem.errors import ConfigError, EvolveMemError
from evolvemem.llm.client import redact_url, scrub_secrets
from evolvemem.llm.preflight import PREFLIGHT_TIMEOUT, endpoint_problem
from evolvemem.llm.usage import UsageSink
from evolvemem.retrieval.rerank import load_reranker
from evolvemem.retrieval.second_embedder import load_second_embedder
from evolvemem.roles.classify import reclassify
from evolvemem.roles.factory import OFFLINE, ModelSettings, build_roles, client_options_from_env
from evolvemem.scoring.judge import judge_version
from evolvemem.session.reporter import Reporter
from evolvemem.space.config import RetrievalConfig
from evolvemem.workspace import Workspace


def announce_models(reporter: Reporter, settings: ModelSettings, diagnoses: bool = True) -> None:
    """Which roles use which model; `diagnoses` is False for commands that score without evolving."""
    if settings.is_offline():
        roles = "rule-based extraction, extractive reader" + (", rubric diagnosis" if diagnoses else "")
        reporter.info(
            f"[dim]No model configured: using the offline roles ({roles}). Pass --model <litellm model> "
            "to use an LLM.[/dim]"
        )
    else:
        shown = {role: model for role, model in settings.as_dict().items() if diagnoses or role != "diagnose"}
        roles = ", ".join(f"{role}={model}" for role, model in shown.items())
        reporter.info(f"[dim]Models: {roles}[/dim]")


def check_endpoint(settings: ModelSettings) -> None:
    """Fail in one line before any work when the configured endpoint does not answer."""
    if settings.is_offline() or not settings.api_base:
        return
    # a user who set a short call timeout (tests, a fast local server) wants a short preflight too
    timeout = min(PREFLIGHT_TIMEOUT, float(client_options_from_env().get("timeout", PREFLIGHT_TIMEOUT)))
    problem = endpoint_problem(settings.api_base, timeout)
    if problem:
        models = sorted({m for m in settings.as_dict().values() if m != "offline"})
        raise EvolveMemError(
            f"the model endpoint {redact_url(settings.api_base)} ({', '.join(models)}) does not "
            f"answer: {scrub_secrets(problem)}; start the server or fix --api-base"
        )


def check_metric(metric: str, settings: ModelSettings) -> Metric:
    """The `--metric` asked for; the judge metric needs a judge model (one line otherwise)."""
    try:
        chosen = Metric(metric)
    except ValueError:
        raise ConfigError(f"--metric {metric!r}: expected one of {', '.join(m.value for m in Metric)}") from None
    if chosen is Metric.JUDGE and settings.for_role("judge") == OFFLINE:
        raise ConfigError("--metric judge needs --judge-model MODEL (the litellm model that judges the answers)")
    return chosen


def judge_manifest(settings: ModelSettings) -> dict[str, str]:
    """The manifest's label of the judge's verdicts (model:prompt-version); empty without a judge."""
    model = settings.for_role("judge")
    return {} if model == OFFLINE else {"judge": judge_version(model)}


def check_judge(judge: AnswerJudge | None) -> None:
    """Fail in one line before any memory is built or answer paid for when the judge's model cannot
    be asked at all (a hosted model has no endpoint for `check_endpoint` to try)."""
    problem = judge.unreachable() if judge is not None else None
    if problem:
        raise EvolveMemError(
            f"the judge model cannot be asked: {scrub_secrets(problem)}; fix --judge-model or its server"
        )


def open_workspace(
    reporter: Reporter,
    dataset: Dataset,
    settings: ModelSettings,
    *,
    cache_enabled: bool,
    local_models: LocalModels = LocalModels(),
    usage_sink: UsageSink | None = None,
    config: RetrievalConfig | None = None,
) -> Workspace:
    """Roles for `settings`, the questions re-typed if --classify-model asks, then memories and
    indexes (and the cross-encoder and second embedding model loaded, so a wrong --rerank-model
    or --second-embedding-model fails before any work).
    `usage_sink` (a run's usage journal) gets each LLM call's usage as it returns, from the first
    extraction call on; `config`, the config evaluated first (Workspace.expect)."""
    check_endpoint(settings)
    roles = build_roles(settings, cache_enabled=cache_enabled)
    check_judge(roles.judge)
    if usage_sink is not None and roles.ledger is not None:
        roles.ledger.attach(usage_sink)
    if roles.classifier is not None:
        dataset, changed, cost = reclassify(dataset, roles.classifier)
        reporter.info(
            f"[dim]question types: the LLM re-typed {changed} rule-typed questions ({cost.calls} calls)[/dim]"
        )
    reranker = load_reranker(local_models.rerank)
    if reranker is not None:
        reporter.info(f"[dim]rerank stage: cross-encoder {local_models.rerank}[/dim]")
    encoder = local_models.resolved_encoder()
    second_embedder = load_second_embedder(local_models.second_embedding, encoder)
    if second_embedder is not None:
        reporter.info(f"[dim]second dense view: embedding model {local_models.second_embedding}[/dim]")
    workspace = Workspace(
        dataset, roles, local_models.embedding, reranker=reranker, second_embedder=second_embedder, encoder=encoder
    )
    if config is not None:  # the config evaluated first: its indexes keep what it will read
        workspace.expect(config)
    with reporter.progress() as bars:
        stats = workspace.build(progress=bars.stage)
    reporter.info(
        f"[dim]{stats.memories} memories in {len(dataset.conversations)} conversations "
        f"({stats.conversations_from_cache} from cache); extraction {stats.extraction_seconds:.1f}s, "
        f"indexing {stats.index_seconds:.1f}s[/dim]"
    )
    return workspace

"""The options of the `evolve` commands, each declared once: a typer option object where several
commands take it alone, a field of a frozen dataclass where commands take options together (a
field's default is its typer option; `with_option_groups` spells the fields out in a command's
signature, in their order, and hands the command one typed object)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

import typer

from evolvemem.cli.defaults import BENCHMARK_HELP, GUARD_DEFAULTS, PRESETS, RUN_DEFAULTS
from evolvemem.labelling.kinds import DEFAULT_MATCH_F1, DEFAULT_PER_SESSION

if TYPE_CHECKING:
    from evolvemem.session import LocalModels, ModelSettings

ModelOpt = typer.Option(
    None, "--model", help="litellm model for every role (e.g. openai/gpt-4o-mini); default: offline roles."
)
ExtractOpt = typer.Option(None, "--extract-model", help="Model for memory extraction (or 'offline').")
AnswerOpt = typer.Option(
    None, "--answer-model", help="Model for decomposition, answering and verification (or 'offline')."
)
DiagnosisOpt = typer.Option(None, "--diagnosis-model", help="Model for diagnosis (or 'offline').")
JudgeOpt = typer.Option(None, "--judge-model", help="Model for the LLM-judge metric (off unless set).")
MetricOpt = typer.Option(
    "f1",
    "--metric",
    help="f1 (the official LoCoMo token F1) or judge: F1 and an LLM judge's CORRECT/WRONG per answer (Mem0's LoCoMo judge protocol, our prompt), printed beside F1; needs --judge-model, and an eval where no answer got a verdict fails. A --judge-model alone also stores the judge column.",
)
ClassifyOpt = typer.Option(
    None, "--classify-model", help="Model that re-types questions that came without a type (default: rules)."
)
ApiBaseOpt = typer.Option(None, "--api-base", help="Base URL of an OpenAI-compatible server (vLLM, Ollama, ...).")
RunApiBaseOpt = typer.Option(
    None,
    "--api-base",
    help="Base URL of an OpenAI-compatible server (vLLM, Ollama, ...); with --resume, the run's server at a new address.",
)
ContextWindowOpt = typer.Option(
    None,
    "--context-window",
    min=256,
    help="Tokens the model's window holds (default: from litellm's table or the server); every prompt is sized to fit it.",
)
SplitAllOpt = typer.Option("all", "--split", help="dev, test or all (split by conversation).")
ConcurrencyOpt = typer.Option(
    RUN_DEFAULTS.concurrency, "--concurrency", min=1, help="Questions answered at once when an LLM is used (1 or more)."
)
RUNS_OWN = "starting from a run directory (--init, --config, transfer's RUN): the run's own"
EmbeddingOpt = typer.Option(
    None,
    "--embedding-model",
    help=f"sentence-transformers model name [default: all-MiniLM-L6-v2; {RUNS_OWN}].",
)
RerankOpt = typer.Option(
    None,
    "--rerank-model",
    help=f"A sentence-transformers CrossEncoder (a local folder or a cached name) for the rerank stage: its settings (rerank_top_k, rerank_weight) join the action space only with one [default: none; {RUNS_OWN}].",
)
SecondEmbeddingOpt = typer.Option(
    None,
    "--second-embedding-model",
    help=f"A second sentence-transformers model (a local folder or a cached name) for a second dense view fused beside the first: its settings (second_semantic_top_k, second_semantic_weight) join the action space only with one [default: none; {RUNS_OWN}].",
)
EncoderOpt = typer.Option(
    None,
    "--encoder",
    help=f"What runs the embedding models: torch, onnx (an fp32 ONNX export of the same model, made once and cached) or onnx-int8 [default: $EVOLVEMEM_ENCODER, else onnx when onnxruntime is installed, else torch; {RUNS_OWN}].",
)
NoCacheOpt = typer.Option(False, "--no-cache", help="Do not read or write the LLM response cache.")
QuietOpt = typer.Option(False, "--quiet", "-q", help="No progress bars.")
JsonOpt = typer.Option(False, "--json", help="Print one JSON object to stdout (the tables go to stderr).")
ExecutorOpt = typer.Option(
    "local",
    "--executor",
    help='Where questions are answered: local (this process) or ray (Ray tasks, one per conversation and config, in parallel; pip install -e ".[ray]").',
)
RayAddressOpt = typer.Option(
    None,
    "--ray-address",
    help="With --executor ray: auto, or HOST:PORT of a cluster started with `ray start --head` [default: a local cluster on this machine, shut down at the end].",
)
StoreOpt = typer.Option(
    ..., "--store", "-s", help="The memory store file (DuckDB; created if missing; one writer at a time)."
)
BudgetOpt = typer.Option(
    None,
    "--budget",
    min=1,
    help="With --config RUN: the run's point at this token budget (a --budgets run's best_config.<budget>.toml, its own budget for a one-budget run); another budget is an error naming the run's budgets.",
)
ServeConfigOpt = typer.Option(
    "default",
    "--config",
    "-c",
    help="Preset name, config file, or a run directory (its best round's config, answered with the run's models unless a model option is given).",
)
BenchmarkOpt = typer.Option(RUN_DEFAULTS.benchmark, "--benchmark", "-b", help=f"{BENCHMARK_HELP}.")


@dataclass(frozen=True)
class ScoringModels:
    """The models of `evolve eval` and `evolve transfer` (no diagnosis: nothing is proposed)."""

    model: Optional[str] = ModelOpt
    extract_model: Optional[str] = ExtractOpt
    answer_model: Optional[str] = AnswerOpt
    judge_model: Optional[str] = JudgeOpt
    classify_model: Optional[str] = ClassifyOpt
    api_base: Optional[str] = ApiBaseOpt
    context_window: Optional[int] = ContextWindowOpt

    def settings(self) -> ModelSettings:
        from evolvemem.session import model_settings

        return model_settings(self)


@dataclass(frozen=True)
class ServedModels:
    """The LLMs of `evolve serve` and `evolve mcp`."""

    model: Optional[str] = ModelOpt
    extract_model: Optional[str] = ExtractOpt
    answer_model: Optional[str] = AnswerOpt
    api_base: Optional[str] = ApiBaseOpt

    def settings(self) -> ModelSettings | None:
        """Model settings given on the command line, or None (a run directory's own, else offline)."""
        from evolvemem.session import ModelSettings, model_settings

        settings = model_settings(self)
        return settings if settings != ModelSettings() else None


@dataclass(frozen=True)
class ServerLimits:
    """How much one client may ask of `evolve serve`: a body's size, requests at once, and how
    long it may take to send one (a slow client must not hold the server)."""

    max_body: int = typer.Option(1_000_000, "--max-body", min=1024, help="Largest request body in bytes (larger: 413).")
    max_in_flight: int = typer.Option(
        64, "--max-in-flight", min=1, help="Keyed requests handled at once (more: 503 with Retry-After)."
    )
    read_timeout: float = typer.Option(
        10.0,
        "--read-timeout",
        min=0.1,
        help="Seconds a client has to send a request's headers, and again its body (slower: connection closed, 408).",
    )


@dataclass(frozen=True)
class LocalModelOptions:
    """The sentence-transformers models of `evolve run`, `eval`, `transfer`, `serve` and `mcp`
    (each defaults to a run's own where the command starts from a run directory)."""

    embedding_model: Optional[str] = EmbeddingOpt
    rerank_model: Optional[str] = RerankOpt
    second_embedding_model: Optional[str] = SecondEmbeddingOpt
    encoder: Optional[str] = EncoderOpt

    def models(self) -> LocalModels:
        from evolvemem.contracts.local_models import default_encoder, encoder_named
        from evolvemem.session import LocalModels

        default_encoder()  # a wrong EVOLVEMEM_ENCODER is refused before any directory is made
        encoder = encoder_named(self.encoder) if self.encoder else None
        return LocalModels(self.embedding_model, self.rerank_model, self.second_embedding_model, encoder)


@dataclass(frozen=True)
class RunOptions:
    """Every option of `evolve run` but its local models, in the order of its `--help`."""

    benchmark: str = BenchmarkOpt
    data: Optional[str] = typer.Option(
        None,
        "--data",
        help="Path to the benchmark file (with --resume: the run's file at a new location; its content must not differ).",
    )
    rounds: Optional[int] = typer.Option(
        None,
        "--rounds",
        "-n",
        help=f"Evolution rounds after the starting round 0 [default: {RUN_DEFAULTS.rounds}; with --resume: the run's own].",
    )
    model: Optional[str] = ModelOpt
    extract_model: Optional[str] = ExtractOpt
    answer_model: Optional[str] = AnswerOpt
    diagnosis_model: Optional[str] = DiagnosisOpt
    judge_model: Optional[str] = JudgeOpt
    classify_model: Optional[str] = ClassifyOpt
    api_base: Optional[str] = RunApiBaseOpt
    context_window: Optional[int] = ContextWindowOpt
    diagnoser: Optional[str] = typer.Option(
        None, "--diagnoser", help="llm, rubric, random or tpe (default: llm with a model, else rubric)."
    )
    diagnosis_mode: str = typer.Option(
        RUN_DEFAULTS.diagnosis_mode,
        "--diagnosis-mode",
        help="llm diagnoser: free (it writes the changes) or menu (it picks one of the rubric's ranked candidates; short prompt, small reply).",
    )
    init: str = typer.Option(
        RUN_DEFAULTS.init, "--init", help=f"Starting config: a preset ({PRESETS}), a config file, or a run directory."
    )
    seed: int = typer.Option(RUN_DEFAULTS.seed, "--seed", help="Seed for exploration, random and tpe.")
    objective: Optional[str] = typer.Option(
        None,
        "--objective",
        help="balanced (a gain on answerable or unanswerable questions without a loss on the other), all (every question), main (answerable only) or evidence (no answer model: evidence recall of the answer context on answerable questions at a token budget, --context-tokens) [default: balanced when a model answers; evidence with offline answers, whose F1 barely moves with retrieval].",
    )
    context_tokens: Optional[int] = typer.Option(
        None,
        "--context-tokens",
        help="Cut every answer context of every round at this many estimated tokens, so configs are compared at an equal budget; the budget travels with the configs the run hands on (best_config.toml) [default: the budget of an --init run's config; with --objective evidence the answer model's window share (4096-token window without a model); otherwise none].",
    )
    budgets: Optional[str] = typer.Option(
        None,
        "--budgets",
        help="Several token budgets in one run, e.g. 600,1500,3000 (distinct, ascending; needs --objective evidence; instead of --context-tokens): every round ranks each question once and cuts its context at each budget; the first budget drives the loop, each keeps its own best config (best_config.<budget>.toml; evolve show --frontier).",
    )
    no_evidence_rung: bool = typer.Option(
        False,
        "--no-evidence-rung",
        help="Skip rung 0 of the screening ladder (a candidate that changes the context is first compared on the evidence recall of its contexts, without answer calls).",
    )
    no_sequential: bool = typer.Option(
        False,
        "--no-sequential",
        help="Ask a screened candidate its whole minibatch, and one that passed its screening every dev question, at once (by default both go in looks and stop when the candidate clearly cannot gain the minimum effect; docs/concepts/screening.md).",
    )
    adversarial_protocol: str = typer.Option(RUN_DEFAULTS.protocol, "--adversarial-protocol", help="official or paper.")
    tau_rev: float = typer.Option(
        GUARD_DEFAULTS.revert_threshold,
        "--tau-rev",
        help="Revert when the objective drops more than this below the best (or significantly).",
    )
    alpha: float = typer.Option(
        GUARD_DEFAULTS.alpha,
        "--alpha",
        help="Significance level of the paired tests that accept a round as the new best.",
    )
    min_effect: float = typer.Option(
        GUARD_DEFAULTS.min_effect,
        "--min-effect",
        help="Smallest mean F1 gain (paired, on the same dev questions) that counts.",
    )
    max_loss: float = typer.Option(
        GUARD_DEFAULTS.max_loss,
        "--max-loss",
        help="Largest mean F1 loss the other group may take (balanced objective).",
    )
    folds: int = typer.Option(
        GUARD_DEFAULTS.folds,
        "--folds",
        help="Split dev conversations into K folds; a change must hold in every fold (0 = off).",
    )
    no_parsimony: bool = typer.Option(
        False,
        "--no-parsimony",
        help="Build on a round that switched a lever on even when it gained nothing significant, and prune nothing after the last round (by default the next round goes back to the best config, and each kept lever is tried off at the end: a lever must pay for itself).",
    )
    max_ms: Optional[float] = typer.Option(
        None,
        "--max-ms",
        help="Refuse a round whose retrieval takes more than this many ms a question beyond the query embedding (timed after each dev evaluation beside BM25 alone; evolve show --frontier prints it).",
    )
    explore_dims: int = typer.Option(
        GUARD_DEFAULTS.explore_dims, "--explore-dims", help="Dimensions changed by an exploration step."
    )
    patience: int = typer.Option(
        RUN_DEFAULTS.patience,
        "--patience",
        help="Stop early after this many rounds without a significant gain (0 = never).",
    )
    no_reextract: bool = typer.Option(False, "--no-reextract", help="Never re-extract sessions with extraction gaps.")
    screen_fraction: Optional[float] = typer.Option(
        None,
        "--screen-fraction",
        help=f"Score each round's candidate first on this share of the dev questions (stratified by question type and conversation) and evaluate it fully only when it is not worse than the best there and gains; 0 or 1 = every candidate is fully evaluated [default: {RUN_DEFAULTS.screen_fraction} when a model answers; 0 with offline answers, where a full evaluation costs seconds].",
    )
    screen_alpha: float = typer.Option(
        RUN_DEFAULTS.screen_alpha,
        "--screen-alpha",
        help="Significance a minibatch gain needs to pass screening (looser than --alpha: a quarter of the questions has less power, and a passing candidate still faces the full paired test).",
    )
    screen_budget: int = typer.Option(
        RUN_DEFAULTS.screen_budget,
        "--screen-budget",
        help="Screenings per round: after a screened-out candidate the round tries an exploration, up to this many; then it keeps the best config.",
    )
    candidates: int = typer.Option(
        RUN_DEFAULTS.candidates,
        "--candidates",
        help="Candidates each round screens at once: the guard's next config and the diagnoser's next K-1 proposals (rubric: next-ranked actions, tpe: further trials, random: further draws, llm: further menu picks), in parallel with --executor ray; the best that passes its minibatch (Holm's correction over the K) is evaluated in full and judged at --alpha / K. Needs screening (on by default when K > 1).",
    )
    no_context_reuse: bool = typer.Option(
        False,
        "--no-context-reuse",
        help="Answer every question again even when its answer context and answer settings are those of an answer already given.",
    )
    freeze: Optional[list[str]] = typer.Option(
        None,
        "--freeze",
        help="Dimensions, groups (e.g. scenes, cue_graph) or a stage (retrieval: evolve only the answer side; answer) the loop may not change; repeat or comma-separate.",
    )
    concurrency: int = ConcurrencyOpt
    no_cache: bool = NoCacheOpt
    out: Optional[str] = typer.Option(
        None, "--out", "-o", help="Run directory (default runs/run-<diagnoser>-<benchmark>-<time>)."
    )
    resume: Optional[str] = typer.Option(None, "--resume", help="Continue an interrupted run (its directory).")
    executor_name: str = ExecutorOpt
    ray_address: Optional[str] = RayAddressOpt
    json_out: bool = typer.Option(False, "--json", help="End stdout with one JSON object describing the run.")
    quiet: bool = QuietOpt


@dataclass(frozen=True)
class LabelOptions:
    """The options of `evolve label` but its output switches (--json, --quiet)."""

    data: Optional[str] = typer.Option(
        None, "--data", help="Conversations to label (custom format, .json or .jsonl; its questions may be empty)."
    )
    out: str = typer.Option(
        ..., "--out", "-o", help="Dev set to write (custom format); its journal is written beside it."
    )
    model: Optional[str] = typer.Option(
        None,
        "--model",
        help="litellm model that writes and checks the questions, or 'offline' (rule-based questions from dated facts, labelled offline) [default: EVOLVEMEM_MODEL].",
    )
    types: Optional[str] = typer.Option(
        None,
        "--types",
        help="Comma-separated kinds to write: single-hop, multi-hop, temporal, open-domain, unanswerable [default: all; offline: temporal, single-hop].",
    )
    per_session: int = typer.Option(
        DEFAULT_PER_SESSION,
        "--per-session",
        min=1,
        help="Candidate questions asked per session (kinds in turn); offline: at most this many per session.",
    )
    sessions: Optional[int] = typer.Option(
        None, "--sessions", min=1, help="Sessions labelled per conversation, spread from first to last [default: all]."
    )
    traces: Optional[str] = typer.Option(
        None, "--traces", help="Traced queries (evolve traces export) to label as questions first."
    )
    match_f1: float = typer.Option(
        DEFAULT_MATCH_F1, "--match-f1", help="Token F1 at which a check's answer matches the gold."
    )
    retrieval_config: str = typer.Option(
        "default",
        "--retrieval-config",
        help="Preset or config file whose retrieval gives the best context (the leak and unanswerable checks).",
    )
    api_base: Optional[str] = ApiBaseOpt
    context_window: Optional[int] = ContextWindowOpt
    embedding_model: Optional[str] = EmbeddingOpt
    no_cache: bool = NoCacheOpt

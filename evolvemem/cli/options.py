"""The options several `evolve` commands share and the many of `evolve run`, declared once as typer
option objects so that a command's signature only names them (and the order of its `--help`)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Generic, Optional, TypeVar

import typer

from evolvemem.cli.defaults import BENCHMARK_HELP, GUARD_DEFAULTS, RUN_DEFAULTS

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    from evolvemem.session import ModelSettings

ModelOpt = typer.Option(
    None, "--model", help="litellm model for every role (e.g. openai/gpt-4o-mini); default: offline roles."
)
ExtractOpt = typer.Option(None, "--extract-model", help="Model for memory extraction (or 'offline').")
AnswerOpt = typer.Option(
    None, "--answer-model", help="Model for decomposition, answering and verification (or 'offline')."
)
DiagnosisOpt = typer.Option(None, "--diagnosis-model", help="Model for diagnosis (or 'offline').")
JudgeOpt = typer.Option(None, "--judge-model", help="Model for the LLM-judge metric (off unless set).")
ClassifyOpt = typer.Option(
    None, "--classify-model", help="Model that re-types questions that came without a type (default: rules)."
)
ApiBaseOpt = typer.Option(
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
EmbeddingOpt = typer.Option(None, "--embedding-model", help="sentence-transformers model name.")
RerankOpt = typer.Option(
    None,
    "--rerank-model",
    help="A sentence-transformers CrossEncoder (a local folder or a cached name) for the rerank stage: its settings (rerank_top_k, rerank_weight) join the action space only with one.",
)
SecondEmbeddingOpt = typer.Option(
    None,
    "--second-embedding-model",
    help="A second sentence-transformers model (a local folder or a cached name) for a second dense view fused beside the first: its settings (second_semantic_top_k, second_semantic_weight) join the action space only with one.",
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
ServeConfigOpt = typer.Option(
    "default",
    "--config",
    "-c",
    help="Preset name, config file, or a run directory (its best round's config, answered with the run's models unless a model option is given).",
)

# evolve run
BenchmarkOpt = typer.Option(RUN_DEFAULTS.benchmark, "--benchmark", "-b", help=f"{BENCHMARK_HELP}.")
RunDataOpt = typer.Option(
    None,
    "--data",
    help="Path to the benchmark file (with --resume: the run's file at a new location; its content must not differ).",
)
RoundsOpt = typer.Option(
    None,
    "--rounds",
    "-n",
    help=f"Evolution rounds after the starting round 0 [default: {RUN_DEFAULTS.rounds}; with --resume: the run's own].",
)
DiagnoserOpt = typer.Option(
    None, "--diagnoser", help="llm, rubric, random or tpe (default: llm with a model, else rubric)."
)
DiagnosisModeOpt = typer.Option(
    RUN_DEFAULTS.diagnosis_mode,
    "--diagnosis-mode",
    help="llm diagnoser: free (it writes the changes) or menu (it picks one of the rubric's ranked candidates; short prompt, small reply).",
)
InitOpt = typer.Option(
    RUN_DEFAULTS.init, "--init", help="Starting config: weak, default, a config file, or a run directory."
)
SeedOpt = typer.Option(RUN_DEFAULTS.seed, "--seed", help="Seed for exploration, random and tpe.")
ObjectiveOpt = typer.Option(
    None,
    "--objective",
    help="balanced (a gain on answerable or unanswerable questions without a loss on the other), all (every question), main (answerable only) or evidence (no answer model: evidence recall of the answer context on answerable questions at a token budget, --context-tokens) [default: balanced when a model answers; evidence with offline answers, whose F1 barely moves with retrieval].",
)
RunContextTokensOpt = typer.Option(
    None,
    "--context-tokens",
    help="--objective evidence: cut every answer context at this many estimated tokens, so configs are compared at an equal budget [default: the answer model's window share; 4096-token window without a model].",
)
NoEvidenceRungOpt = typer.Option(
    False,
    "--no-evidence-rung",
    help="Skip rung 0 of the screening ladder (a candidate that changes the context is first compared on the evidence recall of its contexts, without answer calls).",
)
RunProtocolOpt = typer.Option(RUN_DEFAULTS.protocol, "--adversarial-protocol", help="official or paper.")
TauRevOpt = typer.Option(
    GUARD_DEFAULTS.revert_threshold,
    "--tau-rev",
    help="Revert when the objective drops more than this below the best (or significantly).",
)
AlphaOpt = typer.Option(
    GUARD_DEFAULTS.alpha,
    "--alpha",
    help="Significance level of the paired tests that accept a round as the new best.",
)
MinEffectOpt = typer.Option(
    GUARD_DEFAULTS.min_effect,
    "--min-effect",
    help="Smallest mean F1 gain (paired, on the same dev questions) that counts.",
)
MaxLossOpt = typer.Option(
    GUARD_DEFAULTS.max_loss,
    "--max-loss",
    help="Largest mean F1 loss the other group may take (balanced objective).",
)
FoldsOpt = typer.Option(
    GUARD_DEFAULTS.folds,
    "--folds",
    help="Split dev conversations into K folds; a change must hold in every fold (0 = off).",
)
ExploreDimsOpt = typer.Option(
    GUARD_DEFAULTS.explore_dims, "--explore-dims", help="Dimensions changed by an exploration step."
)
PatienceOpt = typer.Option(
    RUN_DEFAULTS.patience,
    "--patience",
    help="Stop early after this many rounds without a significant gain (0 = never).",
)
NoReextractOpt = typer.Option(False, "--no-reextract", help="Never re-extract sessions with extraction gaps.")
ScreenFractionOpt = typer.Option(
    None,
    "--screen-fraction",
    help=f"Score each round's candidate first on this share of the dev questions (stratified by question type and conversation) and evaluate it fully only when it is not worse than the best there and gains; 0 or 1 = every candidate is fully evaluated [default: {RUN_DEFAULTS.screen_fraction} when a model answers; 0 with offline answers, where a full evaluation costs seconds].",
)
ScreenAlphaOpt = typer.Option(
    RUN_DEFAULTS.screen_alpha,
    "--screen-alpha",
    help="Significance a minibatch gain needs to pass screening (looser than --alpha: a quarter of the questions has less power, and a passing candidate still faces the full paired test).",
)
ScreenBudgetOpt = typer.Option(
    RUN_DEFAULTS.screen_budget,
    "--screen-budget",
    help="Screenings per round: after a screened-out candidate the round tries an exploration, up to this many; then it keeps the best config.",
)
CandidatesOpt = typer.Option(
    RUN_DEFAULTS.candidates,
    "--candidates",
    help="Candidates each round screens at once: the guard's next config and the diagnoser's next K-1 proposals (rubric: next-ranked actions, tpe: further trials, random: further draws, llm: further menu picks), in parallel with --executor ray; the best that passes its minibatch (Holm's correction over the K) is evaluated in full and judged at --alpha / K. Needs screening (on by default when K > 1).",
)
NoContextReuseOpt = typer.Option(
    False,
    "--no-context-reuse",
    help="Answer every question again even when its answer context and answer settings are those of an answer already given.",
)
FreezeOpt = typer.Option(
    None,
    "--freeze",
    help="Dimensions or groups (e.g. scenes, cue_graph) the loop may not change; repeat or comma-separate.",
)
RunOutOpt = typer.Option(None, "--out", "-o", help="Run directory (default runs/run-<diagnoser>-<benchmark>-<time>).")
ResumeOpt = typer.Option(None, "--resume", help="Continue an interrupted run (its directory).")
RunJsonOpt = typer.Option(False, "--json", help="End stdout with one JSON object describing the run.")


T = TypeVar("T")


D = TypeVar("D", bound="DataclassInstance")


def options_from(cls: type[D], params: Mapping[str, Any]) -> D:
    """A command's options as one typed dataclass, read by field name off its parameters (ctx.params)."""
    return cls(**{f.name: params[f.name] for f in fields(cls)})


# Option groups: options several commands take together, in the same order.


@dataclass(frozen=True)
class OptionGroup(Generic[T]):
    """Options declared once and taken by several commands as one typed object: a command names the
    group as a single parameter (`models: ScoringModels = SCORING_MODELS`) and `with_option_groups`
    spells the options out for typer in that place (so `--help` lists them there) and hands the
    command the object built from their values."""

    build: Callable[..., T]
    options: tuple[tuple[str, object, Any], ...]  # (parameter name, its type, its typer option)


def option_group(build: Callable[..., T], *options: tuple[str, object, Any]) -> Any:
    """An `OptionGroup` typed as typer's options are (Any), to stand as a parameter's default."""
    return OptionGroup(build, options)


def with_option_groups(command: Callable[..., Any]) -> Callable[..., Any]:
    """Spell out every `OptionGroup` default of `command` as its options; call it with the groups built."""
    signature = inspect.signature(command, eval_str=True)
    groups = {p.name: p.default for p in signature.parameters.values() if isinstance(p.default, OptionGroup)}
    parameters: list[inspect.Parameter] = []
    for p in signature.parameters.values():
        if p.name not in groups:
            parameters.append(p)
            continue
        for name, annotation, option in groups[p.name].options:
            parameters.append(inspect.Parameter(name, p.kind, default=option, annotation=annotation))

    @functools.wraps(command)
    def grouped(*args: Any, **kwargs: Any) -> Any:
        for group_name, group in groups.items():
            kwargs[group_name] = group.build(**{name: kwargs.pop(name) for name, _, _ in group.options})
        return command(*args, **kwargs)

    grouped.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    grouped.__annotations__ = {p.name: p.annotation for p in parameters}  # what get_type_hints reads
    return grouped


@dataclass(frozen=True)
class ScoringModels:
    """The models of `evolve eval` and `evolve transfer` (no diagnosis: nothing is proposed)."""

    model: str | None
    extract_model: str | None
    answer_model: str | None
    judge_model: str | None
    classify_model: str | None
    api_base: str | None
    context_window: int | None

    def settings(self) -> ModelSettings:
        from evolvemem.session import model_settings

        return model_settings(
            self.model,
            self.extract_model,
            self.answer_model,
            None,
            self.judge_model,
            self.api_base,
            self.classify_model,
            self.context_window,
        )


SCORING_MODELS = option_group(
    ScoringModels,
    ("model", Optional[str], ModelOpt),
    ("extract_model", Optional[str], ExtractOpt),
    ("answer_model", Optional[str], AnswerOpt),
    ("judge_model", Optional[str], JudgeOpt),
    ("classify_model", Optional[str], ClassifyOpt),
    ("api_base", Optional[str], ApiBaseOpt),
    ("context_window", Optional[int], ContextWindowOpt),
)


@dataclass(frozen=True)
class ServedModels:
    """The models and retrieval models of `evolve serve` and `evolve mcp`."""

    model: str | None
    extract_model: str | None
    answer_model: str | None
    api_base: str | None
    embedding_model: str | None
    rerank_model: str | None
    second_embedding_model: str | None

    def settings(self) -> ModelSettings | None:
        """Model settings given on the command line, or None (a run directory's own, else offline)."""
        import os

        from evolvemem.session import model_settings

        given = (self.model, self.extract_model, self.answer_model, self.api_base, os.environ.get("EVOLVEMEM_MODEL"))
        if not any(given):
            return None
        return model_settings(self.model, self.extract_model, self.answer_model, None, None, self.api_base)


SERVED_MODELS = option_group(
    ServedModels,
    ("model", Optional[str], ModelOpt),
    ("extract_model", Optional[str], ExtractOpt),
    ("answer_model", Optional[str], AnswerOpt),
    ("api_base", Optional[str], ApiBaseOpt),
    ("embedding_model", Optional[str], EmbeddingOpt),
    ("rerank_model", Optional[str], RerankOpt),
    ("second_embedding_model", Optional[str], SecondEmbeddingOpt),
)

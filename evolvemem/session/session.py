"""`Session`: one run directory opened for work — its run store, its workspace, its manifest.

The composition root of the library: `Session.create` (a new `evolve run`), `Session.resume`
(continue one from its directory alone), `Session.open_eval` (`evolve eval` / `evolve transfer`,
which resumes itself when pointed at the same directory) and `Session.open_ablation`. Every
evaluation goes through its `RoundBracket` (session/rounds.py): begin the round → build the memory
stores the config reads → evaluate → usage rows → finish the round. The CLI parses options and
renders; benchmarks and tests call these same verbs."""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from evolvemem.workspace.memory_rows import all_memories, restore_added
from evolvemem import __version__
from evolvemem.benchmarks import load_benchmark
from evolvemem.contracts.closing import Closing
from evolvemem.answering.oracle import oracle_questions
from evolvemem.contracts.local_models import LocalModels
from evolvemem.contracts.vocab import ContextMode, Phase
from evolvemem.data.models import Dataset, Question
from evolvemem.data.split import SPLITS, split_dataset, split_ids
from evolvemem.errors import EvolveMemError
from evolvemem.executor import Executor
from evolvemem.executor.local import LocalExecutor
from evolvemem.llm.client import redact_url
from evolvemem.loop.ablate import run_ablation
from evolvemem.loop.retrieval_cost import time_retrieval, timed_sample
from evolvemem.loop.scorer import RecordFn, RoundJob, Scoring, StageFn
from evolvemem.loop.paired import Comparison, compare
from evolvemem.loop.result import RunResult
from evolvemem.loop.runner import EvolutionRunner, Hooks
from evolvemem.loop.spec import CONTEXTS_ONLY, RunSpec, manifest_budget
from evolvemem.roles.answer_llm import context_token_share
from evolvemem.roles.factory import ModelSettings
from evolvemem.scoring.aggregate import EvaluationScores
from evolvemem.scoring.judge_summary import JudgeTally
from evolvemem.scoring.locomo import check_protocol
from evolvemem.session.inputs import best_config_path, manifest_start_config, small_dev_warning
from evolvemem.session.reporter import QuietReporter, Reporter
from evolvemem.retrieval.stage_models import require_stage_models
from evolvemem.session.setup import announce_models, check_endpoint, judge_manifest, open_workspace
from evolvemem.session.rounds import RoundBracket
from evolvemem.space.action_space import ActionSpace, files_space
from evolvemem.space.config import RetrievalConfig, config_to_toml, load_config
from evolvemem.space.emerged import begin_run_dimensions, run_space
from evolvemem.store.rows import ReaderSplitCounts
from evolvemem.store.run_store import DB_NAME, RunStore
from evolvemem.store.usage_journal import JOURNAL_NAME
from evolvemem.workspace import Workspace


def resolved_data_path(data: str | None, dataset: Dataset) -> str | None:
    """The absolute path of the data file a run reads (None for a benchmark without a file)."""
    for candidate in (data, dataset.source):
        if candidate and Path(candidate).is_file():
            return str(Path(candidate).resolve())
    return data


def command_line() -> str:
    """The command as typed, credentials in a URL masked (the manifest keeps it)."""
    return redact_url(" ".join(["evolve", *sys.argv[1:]]))


def open_run(run: str) -> RunStore:
    """A run directory opened read-only (also accepted: a name under runs/)."""
    path = Path(run)
    if not path.is_dir() and (Path("runs") / run).is_dir():
        path = Path("runs") / run
    if not (path / DB_NAME).is_file():
        raise EvolveMemError(f"{run}: not a run directory (no {DB_NAME})")
    return RunStore(path, read_only=True)


def check_out_dir(run_dir: Path, kind: str) -> bool:
    """--out must name a directory (or nothing yet) and not one holding another command's work
    (`kind`: the command's manifest kind, "run", "eval" or "transfer"): one line, before any work,
    the directory only read. True when it holds another command's store stopped before its first
    evaluation, which the caller takes over (`take_over_unstarted`)."""
    if run_dir.exists() and not run_dir.is_dir():
        raise EvolveMemError(f"--out {run_dir} is a file, not a directory; pick another --out")
    if not (run_dir / DB_NAME).is_file():
        return False
    with RunStore(run_dir, read_only=True) as store:
        held = store.manifest().get("kind") or "run"  # runs written before manifests named their kind
        unstarted = store.is_unstarted()
    if held == kind:
        return False
    if not unstarted:
        raise EvolveMemError(
            f"{run_dir} holds the work of an `evolve {held}`, which is never taken over; pick another --out"
        )
    return True


def take_over_unstarted(run_dir: Path, reporter: Reporter) -> None:
    """A run directory whose command stopped before evaluating anything (killed during setup, a
    closed port, bad data) is taken over by a new run; one that holds work is not."""
    with RunStore(run_dir) as store:
        unstarted = store.is_unstarted()
    if not unstarted:
        raise EvolveMemError(
            f"{run_dir} already holds a run; use --resume {run_dir} to continue it or pick another --out"
        )
    for name in (DB_NAME, DB_NAME + ".wal", JOURNAL_NAME):
        (run_dir / name).unlink(missing_ok=True)
    reporter.info(f"[dim]{run_dir} held a run stopped before its first round: starting it afresh[/dim]")


@dataclass
class EvalResult:
    run_dir: Path
    summary: EvaluationScores
    wall_seconds: float
    skipped: int = 0  # questions an oracle context could not be built for (no gold evidence turn)


class Session(Closing):
    """A run store and the workspace its rounds are scored in; close it (or use `with`)."""

    def __init__(
        self,
        store: RunStore,
        workspace: Workspace,
        reporter: Reporter,
        *,
        scoring: Scoring = Scoring(),
        executor: Executor | None = None,
        spec: RunSpec | None = None,
        space: ActionSpace | None = None,
    ):
        self.store = store
        self.spec = spec  # an evolve run's (None for an eval or transfer directory)
        self.workspace = workspace
        self.reporter = reporter
        # where evaluations run (executor/): in this process unless a caller passes another; the
        # caller that made an executor closes it
        self.executor: Executor = executor or LocalExecutor()
        # a run's action space (the files' dimensions and its levers, read from the run's files);
        # the runner replaces it as levers emerge
        self.space: ActionSpace = space or files_space()
        # every evaluation goes through the one round bracket (session/rounds.py)
        self.rounds = RoundBracket(store, workspace, self.executor, scoring)
        # every LLM event goes to the run's usage journal as it happens (the openers attach it
        # before the workspace is built, so setup's extraction calls are journaled one by one too)
        if workspace.roles.ledger is not None:
            workspace.roles.ledger.attach(store.journal.append)
        store.fold_usage_journal()

    # ---- lifecycle ---------------------------------------------------------------------------
    def close(self) -> None:
        if self.workspace.roles.ledger is not None:
            self.workspace.roles.ledger.detach()
        try:
            self.store.fold_usage_journal()
        except Exception:  # noqa: BLE001 - a failing disk: the journal keeps the lines; the next open folds them
            pass
        finally:
            self.store.close()

    @property
    def run_dir(self) -> Path:
        return self.store.run_dir

    @property
    def run_spec(self) -> RunSpec:
        """The spec of the evolve run this session opened (an eval directory has none)."""
        if self.spec is None:
            raise EvolveMemError(f"{self.run_dir}: not an evolve run (an `evolve eval` or `transfer` directory)")
        return self.spec

    @property
    def dataset(self) -> Dataset:
        return self.workspace.dataset

    def oversized_replies(self) -> int:
        """Replies this process's clients cut at the reply bound (a server ignoring max_tokens)."""
        return sum(client.oversized_replies for client in self.workspace.roles.clients.values())

    def failure_causes(self) -> list[tuple[str, int]]:
        """(cause, questions) of every failed question of the run, most common first."""
        return self.store.failure_causes()

    def eval_reader_split(self) -> ReaderSplitCounts | None:
        """The reader failure split of an eval directory's round (None: no model answered)."""
        return self.store.reader_splits().get((0, Phase.EVAL))

    def judge_tally(self, phase: str = "eval") -> JudgeTally | None:
        """The LLM judge's verdicts on round 0 of `phase` (an eval's), None when no judge is configured."""
        if self.workspace.roles.judge is None:
            return None
        return self.store.judge_tallies((phase,)).get((0, phase), JudgeTally(0, 0, 0, 0, 0, None))

    # ---- evolve run --------------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        spec: RunSpec,
        run_dir: Path,
        init_config: RetrievalConfig,
        reporter: Reporter | None = None,
        executor: Executor | None = None,
    ) -> Session:
        """A new run: checks the inputs, writes the manifest, opens the workspace; its evaluations
        run on `executor` (default: in this process)."""
        reporter = reporter or QuietReporter()
        check_protocol(spec.protocol)
        check_out_dir(run_dir, "run")
        if (run_dir / DB_NAME).exists():
            take_over_unstarted(run_dir, reporter)
        dataset = load_benchmark(spec.benchmark, spec.data)
        for warning in dataset.warnings:
            reporter.warn(warning)
        settings = ModelSettings(**spec.models)
        check_endpoint(settings)  # a closed port is told before the run directory exists
        # everything is checked before the run directory exists: a bad input leaves nothing behind
        dev_ids, test_ids = split_ids(dataset.conversations)
        if not test_ids:
            reporter.warn(
                f"{dataset.name} has one conversation: nothing is held out, the run evolves on it "
                "and reports no test score"
            )
        too_small = small_dev_warning(dataset, dev_ids, spec.objective, spec.guard.alpha, spec.guard.min_effect)
        if too_small:
            reporter.warn(too_small)
        # resume must not depend on the shell: the manifest holds the resolved data file
        spec = replace(spec, data=resolved_data_path(spec.data, dataset))
        run_dir.mkdir(parents=True, exist_ok=True)
        # the levers an --init RUN config uses become the run's own
        space, start = begin_run_dimensions(run_dir, init_config.model_dump(), init_config.space)
        store = RunStore.create(
            run_dir,
            {
                "kind": "run",
                "spec": spec.as_dict(),
                "init_config": start,
                "benchmark": spec.benchmark,
                "data_source": dataset.source,
                "data_hash": dataset.content_hash,
                "models": settings.as_dict(),
                **judge_manifest(settings),
                "diagnoser": spec.diagnoser,
                "seed": spec.seed,
                "version": __version__,
                "command": command_line(),
                "dev_conversations": dev_ids,
                "test_conversations": test_ids,
            },
        )
        return cls._open_run(store, dataset, spec, reporter, executor, space)

    @classmethod
    def resume(
        cls,
        run: str | Path,
        reporter: Reporter | None = None,
        rounds: int | None = None,
        data: str | None = None,
        api_base: str | None = None,
        executor: Executor | None = None,
    ) -> Session:
        """Continue a run from its directory alone (a higher `rounds` extends a finished run; `data`
        relocates its data file, which must hold the same content; `api_base` is the same model's
        server at a new address, e.g. a local server restarted on another port)."""
        reporter = reporter or QuietReporter()
        with open_run(str(run)) as peek:
            manifest = peek.manifest()
            run_dir = peek.run_dir
        if "spec" not in manifest:
            if manifest.get("kind") not in (None, "run"):
                raise EvolveMemError(f"{run}: not an evolve run (an `evolve {manifest['kind']}` directory)")
            raise EvolveMemError(
                f"{run}: the run was stopped before it began (its manifest holds no spec); start it "
                f"again with the same options and --out {run}: the directory is reused"
            )
        space = run_space(run_dir)  # the levers that emerged before the interruption
        spec = RunSpec.from_dict(manifest["spec"])
        if rounds is not None:
            spec = replace(spec, rounds=rounds)
        if api_base is not None:
            spec = replace(spec, models={**spec.models, "api_base": api_base})
        elif "***@" in str(spec.models.get("api_base") or ""):
            raise EvolveMemError(
                f"{run}: its --api-base held credentials, which are not stored; pass the URL again: "
                f"evolve run --resume {run} --api-base URL"
            )
        # older manifests recorded a file read through the environment only as its source
        source = manifest.get("data_source")
        recorded = spec.data or (source if source and Path(source).is_file() else None)
        dataset = load_benchmark(spec.benchmark, data or recorded)
        if manifest.get("data_hash") and manifest["data_hash"] != dataset.content_hash:
            what = f"--data {data}" if data else "the data file"
            raise EvolveMemError(
                f"{run_dir}: {what} differs from the one the run started with (hash "
                f"{dataset.content_hash} ≠ {manifest['data_hash']})"
            )
        spec = replace(spec, data=resolved_data_path(data or recorded, dataset))
        store = RunStore(run_dir)
        store.set_manifest({"spec": spec.as_dict()})
        store.extend_rounds(spec.rounds)
        return cls._open_run(store, dataset, spec, reporter, executor, space)

    @classmethod
    def _open_run(
        cls,
        store: RunStore,
        dataset: Dataset,
        spec: RunSpec,
        reporter: Reporter,
        executor: Executor | None,
        space: ActionSpace,
    ) -> Session:
        try:
            settings = ModelSettings(**spec.models)
            announce_models(reporter, settings)
            start = manifest_start_config(store.manifest(), store.run_dir, space)
            workspace = _run_workspace(reporter, dataset, settings, spec, store, start)
            if spec.objective == CONTEXTS_ONLY and spec.token_budget is None:
                # fixed once, in the manifest: every round's contexts are cut at the same budget
                spec = replace(spec, token_budget=context_token_share(workspace.roles.mechanism_client))
                store.set_manifest({"spec": spec.as_dict()})
                reporter.info(
                    f"[dim]evidence objective: contexts cut at {spec.token_budget} tokens "
                    "(the answer model's window share; --context-tokens sets it)[/dim]"
                )
            session = cls(store, workspace, reporter, scoring=spec.scoring, executor=executor, spec=spec, space=space)
            if not store.has_memories():
                store.record_memories(all_memories(workspace))
            else:
                restored = restore_added(workspace, store.added_memories())
                if restored:
                    reporter.info(f"[dim]restored {restored} re-extracted memories[/dim]")
        except BaseException:
            store.close()
            raise
        return session

    def init_config(self) -> RetrievalConfig:
        return manifest_start_config(self.store.manifest(), self.run_dir, self.space)

    def run(self, hooks: Hooks | None = None) -> RunResult:
        """Rounds 0..N (continuing from the store), then start and best scored once on test."""
        start = self.init_config()
        require_stage_models(start, self.workspace.reranker, self.workspace.second_embedder)
        runner = EvolutionRunner(self.run_spec, self.store, self.workspace, self.rounds, start, hooks)
        try:
            return runner.run()
        finally:
            self.space = runner.space  # with the levers that emerged

    # ---- evolve eval / transfer --------------------------------------------------------------
    @classmethod
    def open_eval(
        cls,
        *,
        run_dir: Path,
        benchmark: str,
        data: str | None,
        split: str,
        config: RetrievalConfig,
        config_source: str,
        settings: ModelSettings,
        protocol: str = "official",
        concurrency: int = 8,
        local_models: LocalModels = LocalModels(),
        cache_enabled: bool = True,
        kind: str = "eval",
        source_run: str | None = None,
        reporter: Reporter | None = None,
        executor: Executor | None = None,
        context: ContextMode = ContextMode.RETRIEVED,
        metric: str = "f1",
    ) -> Session:
        """A one-round evaluation directory; an existing one is resumed when it scored the same
        config on the same questions in the same way (its failed questions are asked again).
        `context`: what the reader is handed (`--context`, answering/oracle.py)."""
        reporter = reporter or QuietReporter()
        check_protocol(protocol)
        if check_out_dir(run_dir, kind):
            take_over_unstarted(run_dir, reporter)
        full = load_benchmark(benchmark, data)
        for warning in full.warnings:
            reporter.warn(warning)
        dataset = split_dataset(full, split)
        announce_models(reporter, settings, diagnoses=False)
        store = RunStore(run_dir)
        try:
            _check_resumable(reporter, store, config, full.content_hash, split, protocol, context)
            store.set_manifest(
                {
                    "kind": kind,
                    "source_run": source_run,
                    "benchmark": benchmark,
                    "data_source": full.source,
                    "data_hash": full.content_hash,
                    "split": split,
                    "models": settings.as_dict(),
                    **judge_manifest(settings),
                    "metric": metric,
                    "adversarial_protocol": protocol,
                    "config_source": config_source,
                    "token_budget": config.budget.tokens,
                    "context": str(context),
                    "command": command_line(),
                    **local_models.as_spec(),
                }
            )
            workspace = open_workspace(
                reporter,
                dataset,
                settings,
                cache_enabled=cache_enabled,
                local_models=local_models,
                usage_sink=store.journal.append,
                config=config,
            )
            require_stage_models(config, workspace.reranker, workspace.second_embedder)
            session = cls(store, workspace, reporter, scoring=Scoring(protocol, concurrency), executor=executor)
            if not store.has_memories():
                store.record_memories(all_memories(workspace))
        except BaseException:
            store.close()
            raise
        return session

    def eval_questions(self, context: ContextMode) -> tuple[list[Question], int]:
        """The questions an eval with `context` asks, and how many it skips (oracle contexts only
        exist for questions with a gold evidence turn)."""
        if context is ContextMode.RETRIEVED:
            return self.dataset.questions, 0
        return oracle_questions(self.dataset, self.dataset.questions)

    def evaluate_once(
        self,
        config: RetrievalConfig,
        config_source: str,
        on_record: RecordFn | None = None,
        on_stage: StageFn | None = None,
        context: ContextMode = ContextMode.RETRIEVED,
    ) -> EvalResult:
        """Round 0 of an eval directory, and its config.toml. An oracle `context` skips the
        questions without a gold evidence turn (counted in `skipped`)."""
        questions, skipped = self.eval_questions(context)
        [(scores, row)] = self.rounds.score_with_scores(
            [RoundJob(config, questions, 0, "eval", on_record, context=context)], on_stage
        )
        (self.run_dir / "config.toml").write_text(
            config_to_toml(config, header=f"evolvemem config (from {config_source})"), encoding="utf-8"
        )
        return EvalResult(self.run_dir, scores, row.wall_seconds or 0.0, skipped)

    def compare_with_baseline(self, baseline: RetrievalConfig) -> tuple[EvaluationScores, Comparison]:
        """The same questions scored with `baseline` (phase "baseline"), and the paired comparison of
        the eval's config against it: what a transferred config is worth on the target."""
        [(scores, _)] = self.rounds.score_with_scores([RoundJob(baseline, self.dataset.questions, 0, "baseline")])
        evaluated, base = self.store.round_records(0, "eval"), self.store.round_records(0, "baseline")
        return scores, compare(evaluated, base, 0, 0, "balanced")

    # ---- evolve ablate -----------------------------------------------------------------------
    @classmethod
    def open_ablation(
        cls, run: str, split: str, reporter: Reporter | None = None
    ) -> tuple[Session, RetrievalConfig, int]:
        """A finished run reopened to re-score its best config: (session, best config, best round)."""
        reporter = reporter or QuietReporter()
        best_path = best_config_path(run)
        if split not in SPLITS:  # checked before the (slow) workspace build
            raise EvolveMemError(f"--split must be one of {', '.join(SPLITS)}, not {split!r}")
        store = RunStore(Path(run))
        try:
            manifest = store.manifest()
            if "spec" not in manifest:
                raise EvolveMemError(f"{run}: not an evolve run")
            spec = RunSpec.from_dict(manifest["spec"])
            best_round = store.best_round()
            config = load_config(str(best_path))[0]
            config = (
                config if config.budget else config.with_budget(spec.budget)
            )  # a file from before budgets travelled
            dataset = load_benchmark(spec.benchmark, spec.data)
            workspace = _run_workspace(reporter, dataset, ModelSettings(**spec.models), spec, store, config)
            session = cls(store, workspace, reporter, scoring=spec.scoring, spec=spec)
        except BaseException:
            store.close()
            raise
        return session, config, best_round

    def ablate(
        self,
        config: RetrievalConfig,
        split: str,
        round_no: int,
        on_variant: Callable[[dict[str, Any]], None] | None = None,
    ) -> list[dict[str, Any]]:
        questions = split_dataset(self.dataset, split).questions
        contexts_only = self.spec is not None and self.spec.objective == CONTEXTS_ONLY
        sample = timed_sample(questions, self.spec.seed if self.spec else 0)
        return run_ablation(
            self.rounds,
            config,
            questions,
            round_no,
            on_variant,
            contexts_only=contexts_only,
            measure=lambda variant: time_retrieval(self.workspace, variant, sample),
        )


def _check_resumable(
    reporter: Reporter,
    store: RunStore,
    config: RetrievalConfig,
    data_hash: str,
    split: str,
    protocol: str,
    context: ContextMode = ContextMode.RETRIEVED,
) -> None:
    """A second eval into the same directory resumes the first; it must therefore score the same
    config on the same questions in the same way."""
    existing = store.round_row(0, "eval")
    if existing is None:
        return
    manifest = store.manifest()
    differences = [
        name
        for name, old, new in (
            ("config", existing.config_fingerprint, config.fingerprint()),
            ("token budget", manifest_budget(manifest), config.budget),
            ("data", manifest.get("data_hash"), data_hash),
            ("split", manifest.get("split"), split),
            ("adversarial protocol", manifest.get("adversarial_protocol"), protocol),
            ("--context", manifest.get("context") or ContextMode.RETRIEVED, context),
        )
        if old != new
    ]
    if differences:
        raise EvolveMemError(
            f"{store.run_dir} holds an eval with another {', '.join(differences)}; "
            "repeat its options to resume it, or pick another --out"
        )
    done = len(store.finished_question_ids(0, "eval"))
    reporter.info(
        f"[dim]resuming {store.run_dir}: {done} questions already answered; failed ones are asked again[/dim]"
    )


def compare_rounds(store: RunStore, a: int, b: int, objective: str = "balanced") -> Comparison:
    """Round `b` against round `a` on the questions both answered (the guard's paired statistics)."""
    phase = "dev" if store.round_row(a, "dev") else "eval"
    first, second = store.round_records(a, phase), store.round_records(b, phase)
    return compare(second, first, b, a, objective)


def _run_workspace(
    reporter: Reporter,
    dataset: Dataset,
    settings: ModelSettings,
    spec: RunSpec,
    store: RunStore,
    config: RetrievalConfig,
) -> Workspace:
    """The workspace a run's spec asks for (its local models and cache), its model calls
    journaled to the run's store; `config` is the one evaluated first (Workspace.expect)."""
    return open_workspace(
        reporter,
        dataset,
        settings,
        cache_enabled=spec.cache_enabled,
        local_models=spec.local_models,
        usage_sink=store.journal.append,
        config=config,
    )

"""`evolve label`: parse and render only; the labelling run is evolvemem/labelling/run.py."""

from __future__ import annotations

import os
from pathlib import Path

from evolvemem.cli.options import LabelOptions
from evolvemem.cli.ui import UI, JsonResult
from evolvemem.data.models import Dataset, Question
from evolvemem.errors import EvolveMemError
from evolvemem.labelling.kinds import LABEL_KINDS
from evolvemem.labelling.offline import OFFLINE_KINDS
from evolvemem.labelling.run import OFFLINE, LabelSettings, LabelSummary

NO_MODEL = (
    "no model to write questions: pass --model (a litellm name, e.g. openai/gpt-4o-mini, or openai/NAME with "
    "--api-base for a local server; or set EVOLVEMEM_MODEL), or --model offline for rule-based temporal and "
    "single-hop questions from the offline extractor's dated facts (labelled offline, not checked by a model)"
)


def chosen_model(model: str | None) -> str:
    chosen = model or os.environ.get("EVOLVEMEM_MODEL")
    if not chosen or not chosen.strip():
        raise EvolveMemError(NO_MODEL)
    return chosen.strip()


def parse_types(ui: UI, types: str | None, offline: bool) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(t.strip() for t in (types or "").split(",") if t.strip())) or tuple(LABEL_KINDS)
    unknown = [t for t in names if t not in LABEL_KINDS]
    if unknown:
        raise EvolveMemError(f"--types: unknown type {unknown[0]!r} (known: {', '.join(LABEL_KINDS)})")
    if offline:
        kept = tuple(t for t in names if t in OFFLINE_KINDS)
        if not kept:
            raise EvolveMemError(
                f"--model offline writes only {' and '.join(OFFLINE_KINDS)} questions; "
                f"--types asked for {', '.join(names)}"
            )
        if types and len(kept) < len(names):
            ui.warn(
                f"--model offline writes only {' and '.join(OFFLINE_KINDS)} questions; "
                f"skipped: {', '.join(t for t in names if t not in kept)}"
            )
        return kept
    return names


def load_inputs(data: str | None, traces: str | None) -> tuple[Dataset, list[Question]]:
    """The conversations to label and the traced queries that seed questions."""
    from evolvemem.data.custom import load_custom

    if data is None and traces is None:
        raise EvolveMemError("--data (conversations in the custom format) or --traces (evolve traces export) is needed")
    dataset = load_custom(data) if data is not None else None
    seeds: list[Question] = []
    if traces is not None:
        exported = load_custom(traces)
        seeds = [q for q in exported.questions if not q.answers]
        if dataset is None:
            dataset = Dataset(exported.name, exported.conversations, [])
        else:
            missing = {cid: c for cid, c in exported.conversations.items() if cid not in dataset.conversations}
            dataset = Dataset(
                dataset.name,
                {**dataset.conversations, **missing},
                dataset.questions,
                dataset.category_names,
                dataset.adversarial_categories,
                dataset.source,
            )
    assert dataset is not None
    if not dataset.conversations:
        raise EvolveMemError(f"{data or traces}: no conversations to label")
    return dataset, seeds


def run_label(ui: UI, o: LabelOptions) -> JsonResult:
    from evolvemem.labelling.run import label_dataset

    chosen = chosen_model(o.model)
    offline = chosen == OFFLINE
    if not 0.0 < o.match_f1 <= 1.0:
        raise EvolveMemError(f"--match-f1 must be above 0 and at most 1, not {o.match_f1:g}")
    settings = LabelSettings(
        model=chosen,
        types=parse_types(ui, o.types, offline),
        per_session=o.per_session,
        sessions=o.sessions,
        match_f1=o.match_f1,
        retrieval_config=o.retrieval_config,
        api_base=o.api_base,
        context_window=o.context_window,
        embedding_model=o.embedding_model,
        cache_enabled=not o.no_cache,
    )
    dataset, seeds = load_inputs(o.data, o.traces)
    if offline and seeds:
        raise EvolveMemError("trace seeds need a model to write their answers: pass --model")
    unlabelled = [q for q in dataset.questions if not q.answers]
    if unlabelled:
        ui.warn(
            f"{len(unlabelled)} questions of {o.data} have no answer and are left out (pass the file as --traces "
            "to label them)"
        )
    if offline:
        ui.info(
            "offline labeller: rule-based temporal and single-hop questions from the offline extractor's dated "
            "facts, not checked by a model (each question's provenance says model: offline)"
        )
    with ui.progress() as bars:
        summary = label_dataset(
            dataset,
            settings,
            Path(o.out),
            seeds=seeds,
            progress=lambda done, total: bars.update("conversations", done, total),
        )
    report(ui, summary, len(dataset.conversations))
    if summary.stopped:
        raise EvolveMemError(
            f"stopped: {summary.stopped}; {sum(summary.kept.values())} questions so far written to "
            f"{summary.out}; run the same command again to continue (answered calls are replayed "
            f"from {summary.journal})"
        )
    return summary.as_dict()


def report(ui: UI, summary: LabelSummary, conversations: int) -> None:
    kept = sum(summary.kept.values())
    by_kind = ", ".join(f"{k} {n}" for k, n in sorted(summary.kept.items())) or "none"
    ui.info(
        f"kept {kept} of {summary.candidates} candidate questions over {conversations} conversations ({by_kind})"
        + (f"; {summary.carried} labelled questions of the input kept as they were" if summary.carried else "")
    )
    if summary.rejected:
        ui.info("rejected: " + ", ".join(f"{reason} {n}" for reason, n in summary.rejected.most_common()))
    if not summary.offline:
        spent, total = summary.spent, summary.journaled
        ui.info(
            f"model calls: {spent.calls} this run ({spent.prompt_tokens:,} prompt + {spent.completion_tokens:,} "
            f"completion tokens, {spent.cache_hits} from the reply cache), {summary.replayed} replayed from the "
            f"journal; all runs: {total.calls} calls, {total.tokens:,} tokens"
        )
    if summary.dropped_conversations:
        ui.warn(
            f"{len(summary.dropped_conversations)} conversations got no question and are left out of the file: "
            + ", ".join(summary.dropped_conversations[:5])
        )
    ui.info(
        f"wrote {summary.out}"
        + ("" if summary.offline else f" (journal: {summary.journal})")
        + (" — offline labels" if summary.offline else "")
    )

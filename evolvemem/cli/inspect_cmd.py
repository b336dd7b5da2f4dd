"""`evolve runs`, `evolve show`, `evolve diff`: read a run store and explain it."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.table import Table

from evolvemem.contracts.vocab import Phase
from evolvemem.loop.spec import objective_column, objective_label, objective_metric
from evolvemem.cli.run_cmd import changes_text, decision_text, emerged_text, paired_text, round_label
from evolvemem.cli.ui import UI, JsonResult, fmt, paired_table
from evolvemem.errors import EvolveMemError
from evolvemem.loop.guard import next_step_text
from evolvemem.report import RIGHT_F1, flipped_questions
from evolvemem.space.emerged import read_run_dimensions, run_space, switched_on

if TYPE_CHECKING:
    from evolvemem.loop.outcome import RoundOutcome
    from evolvemem.scoring.judge_summary import JudgeTally
    from evolvemem.store.rows import JSONObject, RoundSummary


def list_runs(ui: UI, root: str) -> list[JsonResult]:
    from evolvemem.session import RunLockedError, open_run

    rows = []
    for db in sorted(Path(root).glob("*/run.duckdb")):
        item: dict[str, Any] = {
            "run_dir": str(db.parent),
            "kind": "?",
            "benchmark": "?",
            "diagnoser": "",
            "rounds": 0,
            "best_round": None,
            "best_dev": None,
            "objective": "",
            "status": "",
        }
        try:
            with open_run(str(db.parent)) as store:
                m = store.manifest()
                objective = (m.get("spec") or {}).get("objective", "all")
                # a run's best is the guard's (paired evidence), not the round with the highest mean
                best = store.best_round()
                done = store.round_summaries((Phase.DEV, Phase.EVAL), done_only=True)
                best_row = next((r for r in done if r.round == best), None)
                final = Phase.TEST_BEST in store.test_scores()
                item.update(
                    kind=m.get("kind", "?"),
                    benchmark=m.get("benchmark", "?"),
                    diagnoser=m.get("diagnoser", ""),
                    rounds=len(done),
                    best_round=best if best_row else None,
                    best_dev=best_row and best_row.column(objective_column(objective)),
                    objective=objective_label(objective),
                    status="running"
                    if store.live
                    else "finished"
                    if (final or m.get("kind") != "run")
                    else "unfinished",
                )
        except RunLockedError:
            item["status"] = "running"
        except Exception as exc:  # one damaged run must not hide the others: say why, on its row
            item["status"] = "unreadable: " + unreadable_reason(exc)
        rows.append(item)
    table = Table(
        title=f"runs in {root} (best = the guard's best round: paired evidence, not the highest mean)",
        title_justify="left",
    )
    for col in ("run", "kind", "benchmark", "diagnoser", "rounds", "best round", "its dev score", "status"):
        table.add_column(col)
    for r in rows:
        score = "-" if r["best_dev"] is None else f"{fmt(r['best_dev'])} {r['objective']}"
        table.add_row(
            r["run_dir"],
            r["kind"],
            r["benchmark"],
            r["diagnoser"] or "-",
            str(r["rounds"]),
            "-" if r["best_round"] is None else str(r["best_round"]),
            score,
            escape(r["status"]),
        )
    ui.print(table)
    return rows


def unreadable_reason(exc: BaseException) -> str:
    """Why a run directory could not be listed, in one short line."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 160 else text[:159] + "…"


def models_line(models: Mapping[str, object]) -> str:
    """Roles grouped by the model they use, e.g. `openai/qwen (answer, verify) · offline (the rest)`."""
    by_model: dict[str, list[str]] = {}
    for role, model in sorted(models.items()):
        by_model.setdefault(str(model), []).append(role)
    if len(by_model) == 1:
        return f"{next(iter(by_model))} (every role)"
    ordered = sorted(by_model.items(), key=lambda item: (item[0] == "offline", item[0]))
    return " · ".join(f"{model} ({', '.join(roles)})" for model, roles in ordered)


def proposed_status(row: JSONObject) -> str:
    """A proposed dimension's fate in words: materialised with its bundle, or refused and why."""
    if row.get("status") == "materialised":
        bundle = ", ".join(f"{k} = {v}" for k, v in (row.get("maps_to") or {}).items())
        return f"materialised ({bundle}; {row.get('file')})"
    if row.get("status") is None:
        return "recorded (a run from before levers could emerge)"
    return f"refused ({row.get('reason')})"


def show_run(ui: UI, run: str) -> JsonResult:
    from evolvemem.cli.run_cmd import cost_line, held_out_text
    from evolvemem.session import RoundFacts, open_run, round_outcomes, stored_held_out, total_cost

    with open_run(run) as store:
        if store.live:
            ui.warn(f"{run} is still being written by another process: showing it as of now")
        manifest = store.manifest()
        spec = manifest.get("spec", {})
        objective = spec.get("objective", "all")
        levers = {d.name for d in read_run_dimensions(store.run_dir)}
        facts = RoundFacts.read(store)
        rounds = round_outcomes(store, (Phase.DEV, Phase.EVAL), objective, levers, facts)
        finals = store.test_scores()
        held = stored_held_out(store)
        new_dims = [d.as_row() for d in store.proposed_dimensions()]
        best_round = store.best_round()
        tallies = store.judge_tallies(tuple(p.value for p in Phase))
    total = total_cost(list(facts.costs.values()))
    ui.info(
        f"[bold]{run}[/bold] · {manifest.get('kind')} · benchmark {manifest.get('benchmark')} · "
        f"diagnoser {manifest.get('diagnoser', '-')} · seed {manifest.get('seed', '-')} · "
        f"models: {models_line(manifest.get('models') or {})}"
    )
    # offline runs: no calls/tokens columns of zeros (any call of the run counts, setup's too)
    with_calls = any(u.calls for u in facts.usage.values())
    out_rounds = _show_rounds(ui, rounds, objective, with_calls)
    if facts.screenings:
        ui.info(cost_line(total))
    print_round_notes(ui, rounds)
    print_reader_split(ui, rounds, best_round)
    result: dict[str, Any] = {"run_dir": run, "manifest": manifest, "rounds": out_rounds, "cost": total.as_dict()}
    if out_rounds and manifest.get("kind") == "run":
        by_recall = objective_metric(objective) == "evidence_recall"
        result.update(print_start_vs_best(ui, rounds, out_rounds, best_round, finals, by_recall))
        if held is not None:  # the held-out verdict, as `evolve run` printed it
            result["test"]["paired"] = held.as_dict()
            ui.result(held_out_text(result["test"]["paired"], objective))
    if new_dims:
        ui.info("[bold]proposed new dimensions[/bold] (a materialised one is a lever from the next round on):")
        for d in new_dims:
            ui.info(
                escape(
                    f"  round {d['round']}: {d['name']} — {proposed_status(d)}: {d['description']} "
                    f"{d['rationale']}".rstrip()
                )
            )
    result["proposed_dimensions"] = new_dims
    judged = show_judge(ui, manifest, tallies)
    if judged is not None:
        result["judge"] = judged
    return result


def show_judge(ui: UI, manifest: JSONObject, tallies: Mapping[tuple[int, str], JudgeTally]) -> JsonResult | None:
    """Judge accuracy beside F1 for each evaluation a judge scored, with the note that it is our
    judge (None: no judge in this run)."""
    from evolvemem.scoring.judge_summary import judge_line

    model = str((manifest.get("models") or {}).get("judge") or "offline")
    shown = {key: t for key, t in tallies.items() if t.judged or manifest.get("judge")}
    if model == "offline" or not shown:
        return None
    ui.info(f"[bold]LLM judge[/bold] {escape(str(manifest.get('judge') or model))}:")
    for (round_no, phase), tally in shown.items():
        ui.result(escape(f"  round {round_no} ({phase}): {judge_line(tally, model)}"))
    return {
        "model": model,
        "version": manifest.get("judge"),
        "evaluations": [{"round": r, "phase": p, **t.as_dict()} for (r, p), t in shown.items()],
    }


def _show_rounds(ui: UI, rounds: list[RoundOutcome], objective: str, with_calls: bool) -> list[dict[str, Any]]:
    """The rounds table and the per-category table of `evolve show`; returns its rounds for `--json`."""
    categories = sorted({c for r in rounds for c in (r.summary.by_category or {})})
    names = {c: category_name(c, *(r.summary.by_category for r in rounds)) for c in categories}
    # an evidence run scores contexts, not answers: its F1 columns would be empty, so it shows
    # recall over every question with evidence and what the contexts cost in tokens instead
    metric = objective_metric(objective)
    by_recall = metric == "evidence_recall"
    table = _rounds_table(objective, by_recall, with_calls)
    # categories get their own table: beside the decisions they pushed the headers into wrapping
    by_category = Table(title=f"{'evidence recall' if by_recall else 'F1'} per category (dev)", title_justify="left")
    for col in ["round", *[names[c] for c in categories]]:
        by_category.add_column(col, overflow="fold")
    out_rounds = []
    prev = None
    for r in rounds:
        s, score = r.summary, r.score
        by_cat = s.by_category or {}
        table.add_row(
            round_label(r.round, r.emerged_used),
            fmt(score),
            "" if prev is None or score is None else f"{score - prev:+.4f}",
            *(
                (fmt(s.evidence_recall), fmt(s.context_tokens, 0), fmt(s.retrieval_ms, 2))
                if by_recall
                else (fmt(s.main_f1), fmt(s.adversarial_f1))
            ),
            paired_text(r.paired, r.accepted, r.screenings, objective),
            decision_text(r.next_step, r.fallback, r.flags),
            changes_text(r.changes, limit=6),
            *(_usage_cells(r) if with_calls else []),
        )
        out_rounds.append(round_entry(r, {c: (by_cat.get(c) or {}).get(metric) for c in categories}))
        by_category.add_row(str(r.round), *[fmt((by_cat.get(c) or {}).get(metric)) for c in categories])
        prev = score if score is not None else prev
    ui.print(table)
    if categories:
        ui.print(by_category)
    return out_rounds


def _rounds_table(objective: str, by_recall: bool, with_calls: bool) -> Table:
    """The rounds table's columns: an evidence run's side columns are recall, tokens and retrieval ms
    a question, not F1; the usage columns only when some call was made."""
    side_columns = ("recall (all)", "tokens", "ms") if by_recall else ("main", "adv.")
    table = Table(
        title=f"rounds (dev; score = {objective_label(objective)}, objective {objective})", title_justify="left"
    )
    for col in [
        "round",
        "score",
        "Δ",
        *side_columns,
        "paired vs best",
        "next round",
        "changes for next round",
        *(["calls", "tokens", "cost vs full evaluation"] if with_calls else []),
    ]:
        wrap = col.startswith(("changes", "paired"))
        table.add_column(col, overflow="fold" if wrap else "ellipsis", no_wrap=not wrap, min_width=10 if wrap else None)
    return table


def _usage_cells(r: RoundOutcome) -> list[str]:
    """A round's calls, tokens and its cost against a full evaluation (dev rounds only)."""
    from evolvemem.session import vs_full_text

    u = r.usage
    dev = r.summary.phase == Phase.DEV
    return [str(u.calls if u else 0), str(u.tokens if u else 0), vs_full_text(r.cost) if dev else "-"]


def round_entry(r: RoundOutcome, by_category: dict[str, float | None]) -> dict[str, Any]:
    """One round of `evolve show --json`: scores, decision, usage, emerged levers, cost and screenings
    (`by_category`: its figure per category of the run). The decision's JSON columns are quoted as
    the store holds them."""
    s, u, stored = r.summary, r.usage, r.decision
    return {
        "round": r.round,
        "dev_score": r.score,
        "main_f1": s.main_f1,
        "adversarial_f1": s.adversarial_f1,
        "all_f1": s.all_f1,
        "evidence_recall": s.evidence_recall,
        "main_evidence_recall": s.main_evidence_recall,
        "context_tokens": s.context_tokens,
        "retrieval_ms": s.retrieval_ms,
        "bm25_ms": s.bm25_ms,
        "stopped_at": s.stopped_at,
        "by_category": by_category,
        "decision": r.next_step,
        "reason": r.reason,
        "changes": (stored.changes if stored else None) or [],
        "accepted": r.accepted,
        "verdict": r.verdict,
        "paired": stored.paired if stored else None,
        "flags": r.flags,
        "fallback": r.fallback,
        "calls": u.calls if u else 0,
        "cache_hits": u.cache_hits if u else 0,
        "tokens": u.tokens if u else 0,
        "cost_usd": u.cost_usd if u else 0.0,
        "memories_added": r.memories_added,
        "emerged_used": list(r.emerged_used),
        "cost": r.cost.as_dict() if r.cost else None,
        "screenings": [row.as_row() for row in r.screenings],
        "reader_split": r.reader_split.as_dict() if r.reader_split else None,
    }


def print_reader_split(ui: UI, rounds: list[RoundOutcome], best_round: int) -> None:
    """The reader failure split of the eval round, or of a run's best round, when a model answered."""
    from evolvemem.cli.ui import full_wrong_text, reader_split_table

    shown = next((r for r in rounds if r.summary.phase == Phase.EVAL), None) or next(
        (r for r in rounds if r.round == best_round), None
    )
    if shown is None or shown.reader_split is None:
        return
    ui.print(reader_split_table(shown.reader_split, f"reader split · round {shown.round} {shown.summary.phase}"))
    ui.info(f"right = the judge's verdict, else F1 ≥ {RIGHT_F1}; {full_wrong_text(shown.reader_split)}")


def print_round_notes(ui: UI, rounds: list[RoundOutcome]) -> None:
    """Under the rounds table: each round's screenings, verdict, reason, fallback, flags and emerged levers."""
    from evolvemem.cli.run_cmd import screening_lines

    for r in rounds:
        for line in screening_lines(r.round, r.screenings):
            ui.info(line)
        if r.verdict and r.round > 0:
            ui.info(f"  round {r.round} judged: {r.verdict}")
        reason = without_verdict(r.reason or "", r.verdict or "")
        if reason:
            ui.info(f"  round {r.round} → {next_step_text(r.next_step)}: {reason}")
        if r.fallback:
            ui.info(f"  round {r.round} fallback: {r.fallback}")
        for flag in r.flags:
            ui.info(f"  round {r.round} ⚑ against the evidence: {flag}")
        if r.emerged_used:
            ui.info(f"  round {r.round} {emerged_text(r.emerged_used)}")


def print_start_vs_best(
    ui: UI,
    rounds: list[RoundOutcome],
    out_rounds: list[dict[str, Any]],
    best_round: int,
    finals: dict[str, RoundSummary],
    by_recall: bool,
) -> dict[str, Any]:
    """The start and the best config side by side, dev and test; returns their entries of `show --json`
    (`out_rounds`: `rounds` as `round_entry` renders them)."""
    best = next((i for i, r in enumerate(rounds) if r.round == best_round), 0)
    test_scores = {k.removeprefix("test_"): v.headline() for k, v in finals.items()}
    t = Table(title="start vs best: dev (evolution) and test (scored once at the end)", title_justify="left")
    fields = (
        (("main_evidence_recall", "recall (answerable)"), ("context_tokens", "context tokens"))
        if by_recall
        else (("main_f1", "main"), ("adversarial_f1", "adv."), ("all_f1", "all"), ("evidence_recall", "recall"))
    )
    t.add_column("config")
    for side in ("dev", "test"):
        for _, label in fields:
            t.add_column(f"{side} {label}")
    for which, row in (("start", rounds[0]), (f"best (round {rounds[best].round})", rounds[best])):
        test = test_scores.get("start" if which == "start" else "best", {})
        dev = row.summary.headline()
        t.add_row(
            which,
            *[fmt(source.get(key), 0 if key == "context_tokens" else 3) for source in (dev, test) for key, _ in fields],
        )
    ui.print(t)
    return {
        "best_round": rounds[best].round,
        "dev": {"start": out_rounds[0], "best": out_rounds[best]},
        "test": test_scores,
    }


def category_name(key: str, *by_category: JSONObject | None) -> str:
    """A category as `evolve show` names it (from rounds' per-category figures): the benchmark's name
    for it, else `cat <key>`."""
    for figures in by_category:
        name = ((figures or {}).get(key) or {}).get("name")
        if name:
            return str(name)
    return f"cat {key}"


def without_verdict(reason: str, verdict: str) -> str:
    """A decision's reason without the verdict it repeats (a revert's reason starts with it), so each
    verdict is printed once."""
    if verdict and reason.startswith(verdict):
        return reason[len(verdict) :].lstrip(" ;:,")
    return reason


def diff_rounds(ui: UI, run: str, a: int, b: int, limit: int = 20) -> JsonResult:
    from evolvemem.session import compare_rounds, open_run
    from evolvemem.space.config import parse_config
    from evolvemem.space.ops import diff_configs

    with open_run(run) as store:
        space = run_space(store.run_dir)  # its configs may use its levers
        levers = {d.name for d in space.added()}
        cfg = {r.round: r.as_row() for r in store.round_summaries((Phase.DEV, Phase.EVAL)) if r.round in (a, b)}
        for r in (a, b):
            if r not in cfg:
                raise EvolveMemError(f"{run}: no evaluated round {r}")
        objective = (store.manifest().get("spec") or {}).get("objective", "balanced")
        paired = compare_rounds(store, a, b, objective)
        phase = {r["round"]: r["phase"] for r in cfg.values()}
        flips = [asdict(f) for f in flipped_questions(store, (phase[a], a), (phase[b], b))]
    old = parse_config(cfg[a]["config"], source=f"round {a}", space=space)[0]
    new = parse_config(cfg[b]["config"], source=f"round {b}", space=space)[0]
    changes = diff_configs(old, new)
    metric = objective_metric(objective)  # F1, or the contexts' evidence recall of an evidence run
    score_diff = _category_diff(cfg[a], cfg[b], metric)
    ui.info(f"[bold]config diff[/bold] round {a} → round {b}: {changes_text(changes, limit=50)}")
    emerged_used = {r: switched_on(cfg[r]["config"] or {}, levers) for r in (a, b)}
    for r, used in emerged_used.items():
        if used:
            ui.info(f"round {r} {emerged_text(used)}")
    ui.print(_score_diff_table(score_diff, cfg, a, b, metric, objective))
    ui.print(
        paired_table(
            paired,
            f"round {a}",
            f"round {b}",
            f"paired: round {b} − round {a} on the same "
            "questions (95% interval: conversations and questions resampled; p: sign-flip "
            "permutation, one-sided)",
        )
    )
    fixed, broken = _print_flips(ui, flips, a, b, limit)
    by_reason: dict[str, int] = {}
    for f in flips:
        key = f"{f['flip']}:{f['failure_a'] if f['flip'] == 'fixed' else f['failure_b']}"
        by_reason[key] = by_reason.get(key, 0) + 1
    return {
        "run_dir": run,
        "a": a,
        "b": b,
        "config_changes": [c.as_dict() for c in changes],
        "score_diff": score_diff,
        "all_f1": {"a": cfg[a]["all_f1"], "b": cfg[b]["all_f1"]},
        "fixed": fixed,
        "broken": broken,
        "flips_by_reason": by_reason,
        "flips": flips,
        "paired": paired.as_dict(),
        "emerged_used": {str(r): used for r, used in emerged_used.items()},
    }


def _category_diff(row_a: dict[str, Any], row_b: dict[str, Any], metric: str) -> dict[str, dict[str, Any]]:
    """Per category of either round: its name, both rounds' figure and the difference (None when one is missing)."""
    cats = sorted(set(row_a["by_category"] or {}) | set(row_b["by_category"] or {}))
    score_diff: dict[str, dict[str, Any]] = {
        c: {
            "name": category_name(c, row_a["by_category"], row_b["by_category"]),
            "a": ((row_a["by_category"] or {}).get(c) or {}).get(metric),
            "b": ((row_b["by_category"] or {}).get(c) or {}).get(metric),
        }
        for c in cats
    }
    for v in score_diff.values():
        v["delta"] = None if v["a"] is None or v["b"] is None else v["b"] - v["a"]
    return score_diff


def _score_diff_table(
    score_diff: dict[str, dict[str, Any]], cfg: dict[int, dict[str, Any]], a: int, b: int, metric: str, objective: str
) -> Table:
    """The per-category figures of both rounds, then their headline scores."""
    t = Table(title=f"{'F1' if metric == 'f1' else 'evidence recall'} per category", title_justify="left")
    for col in ("category", f"round {a}", f"round {b}", "Δ"):
        t.add_column(col)
    for c, v in score_diff.items():
        t.add_row(
            category_name(c, cfg[a]["by_category"], cfg[b]["by_category"]),
            fmt(v["a"]),
            fmt(v["b"]),
            "-" if v["delta"] is None else f"{v['delta']:+.3f}",
        )
    t.add_section()
    column = objective_column(objective)
    head = {r: cfg[r][column] for r in (a, b)}
    t.add_row(
        objective_label(objective),
        fmt(head[a]),
        fmt(head[b]),
        "-" if head[a] is None or head[b] is None else f"{head[b] - head[a]:+.3f}",
    )
    return t


def _print_flips(ui: UI, flips: list[dict[str, Any]], a: int, b: int, limit: int) -> tuple[int, int]:
    """How many questions became right and wrong, and the first `limit` of each with why; returns both counts."""
    fixed = [f for f in flips if f["flip"] == "fixed"]
    broken = [f for f in flips if f["flip"] == "broken"]
    ui.info(f"{len(fixed)} questions became right, {len(broken)} became wrong (right = F1 ≥ {RIGHT_F1})")
    for label, items, why in (("fixed", fixed, "failure_a"), ("broken", broken, "failure_b")):
        if not items:
            continue
        table = Table(title=f"{label} (why, per the failure taxonomy)", title_justify="left")
        for col in ("type", "question", "gold", f"round {a}", f"round {b}", "why"):
            table.add_column(col, overflow="fold")
        for f in items[:limit]:
            table.add_row(f["question_type"], f["question"], f["gold"], f["prediction_a"], f["prediction_b"], f[why])
        ui.print(table)
    return len(fixed), len(broken)

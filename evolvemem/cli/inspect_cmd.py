"""`evolve runs`, `evolve show`, `evolve diff`: read a run store and explain it."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.table import Table

from evolvemem.cli.run_cmd import changes_text, decision_text, paired_text
from evolvemem.cli.ui import UI, fmt, paired_table
from evolvemem.errors import EvolveMemError


def list_runs(ui: UI, root: str) -> list[dict]:
    from evolvemem.session import RunLockedError, open_run

    rows = []
    for db in sorted(Path(root).glob("*/run.duckdb")):
        item: dict[str, Any] = {"run_dir": str(db.parent), "kind": "?", "benchmark": "?", "diagnoser": "", "rounds": 0,
                "best_dev": None, "status": ""}
        try:
            with open_run(str(db.parent)) as store:
                m = store.manifest()
                stats = store.query("""SELECT count(*) AS rounds, max(all_f1) AS best FROM rounds
                                       WHERE phase IN ('dev', 'eval') AND status = 'done'""")[0]
                final = store.query("SELECT 1 FROM rounds WHERE phase = 'test_best' AND status = 'done'")
                item.update(kind=m.get("kind", "?"), benchmark=m.get("benchmark", "?"),
                            diagnoser=m.get("diagnoser", ""), rounds=stats["rounds"], best_dev=stats["best"],
                            status="running" if store.live else
                            "finished" if (final or m.get("kind") != "run") else "unfinished")
        except RunLockedError:
            item["status"] = "running"
        rows.append(item)
    table = Table(title=f"runs in {root}", title_justify="left")
    for col in ("run", "kind", "benchmark", "diagnoser", "rounds", "best dev F1 (all)", "status"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["run_dir"], r["kind"], r["benchmark"], r["diagnoser"] or "-", str(r["rounds"]),
                      fmt(r["best_dev"]), r["status"])
    ui.print(table)
    return rows


def models_line(models: dict) -> str:
    """Roles grouped by the model they use, e.g. `openai/qwen (answer, verify) · offline (the rest)`."""
    by_model: dict[str, list[str]] = {}
    for role, model in sorted(models.items()):
        by_model.setdefault(str(model), []).append(role)
    if len(by_model) == 1:
        return f"{next(iter(by_model))} (every role)"
    ordered = sorted(by_model.items(), key=lambda item: (item[0] == "offline", item[0]))
    return " · ".join(f"{model} ({', '.join(roles)})" for model, roles in ordered)


def show_run(ui: UI, run: str) -> dict:
    from evolvemem.cli.run_cmd import cost_line, screening_lines
    from evolvemem.session import headline, open_run, round_costs, total_cost, vs_full_text

    with open_run(run) as store:
        if store.live:
            ui.warn(f"{run} is still being written by another process: showing it as of now")
        manifest = store.manifest()
        rounds = store.query("""SELECT r.round, r.phase, r.main_f1, r.adversarial_f1, r.all_f1, r.evidence_recall,
                                       r.by_category, r.n_questions, r.n_failed, r.wall_seconds, d.decision, d.reason,
                                       d.changes, d.delta, d.memories_added, d.accepted, d.paired, d.verdict, d.flags, d.fallback
                                FROM rounds r LEFT JOIN decisions d ON d.round = r.round AND r.phase = 'dev'
                                WHERE r.phase IN ('dev', 'eval') ORDER BY r.round""")
        usage = {u["round"]: u for u in store.query(
            """SELECT round, sum(calls) AS calls, sum(cache_hits) AS cache_hits,
                      sum(prompt_tokens) AS prompt_tokens, sum(completion_tokens) AS completion_tokens,
                      sum(cost_usd) AS cost_usd FROM usage GROUP BY round""")}
        finals = {r["phase"]: r for r in store.query(
            "SELECT * FROM rounds WHERE phase IN ('test_start', 'test_best') AND status = 'done'")}
        new_dims = store.query("SELECT round, name, description, rationale FROM proposed_dimensions ORDER BY round")
        costs = {c.round: c.as_dict() for c in round_costs(store)}
        total = total_cost(list(round_costs(store)))
        screenings = store.screenings()
    spec = manifest.get("spec", {})
    objective = spec.get("objective", "all")
    ui.info(f"[bold]{run}[/bold] · {manifest.get('kind')} · benchmark {manifest.get('benchmark')} · "
            f"diagnoser {manifest.get('diagnoser', '-')} · seed {manifest.get('seed', '-')} · "
            f"models: {models_line(manifest.get('models') or {})}")
    categories = sorted({c for r in rounds for c in (r["by_category"] or {})})
    names = {c: (r["by_category"][c] or {}).get("name") or f"cat {c}" for r in rounds for c in (r["by_category"] or {})}
    table = Table(title="rounds (dev)", title_justify="left")
    for col in ["round", f"dev {objective}", "Δ", "main", "adv.", *[names[c] for c in categories],
                "paired vs best", "decision", "changes for next round", "calls", "tokens", "cost vs full evaluation"]:
        wrap = col.startswith(("changes", "paired"))
        table.add_column(col, overflow="fold" if wrap else "ellipsis", min_width=28 if wrap else None)
    out_rounds = []
    prev = None
    for r in rounds:
        score = r["main_f1"] if objective == "main" else r["all_f1"]
        u = usage.get(r["round"], {})
        tokens = (u.get("prompt_tokens") or 0) + (u.get("completion_tokens") or 0)
        by_cat = r["by_category"] or {}
        table.add_row(str(r["round"]), fmt(score), "" if prev is None or score is None else f"{score - prev:+.4f}",
                      fmt(r["main_f1"]), fmt(r["adversarial_f1"]),
                      *[fmt((by_cat.get(c) or {}).get("f1")) for c in categories],
                      paired_text(r["paired"], r["accepted"], [s for s in screenings if s["round"] == r["round"]]),
                      decision_text(r), changes_text(r["changes"] or [], limit=6), str(u.get("calls") or 0),
                      str(tokens), vs_full_text(costs.get(r["round"])) if r["phase"] == "dev" else "-")
        out_rounds.append({"round": r["round"], "dev_score": score, "main_f1": r["main_f1"],
                           "adversarial_f1": r["adversarial_f1"], "all_f1": r["all_f1"],
                           "evidence_recall": r["evidence_recall"],
                           "by_category": {c: (by_cat.get(c) or {}).get("f1") for c in categories},
                           "decision": r["decision"], "reason": r["reason"], "changes": r["changes"] or [],
                           "accepted": r["accepted"], "verdict": r["verdict"], "paired": r["paired"],
                           "flags": r["flags"] or [], "fallback": r["fallback"],
                           "calls": u.get("calls") or 0, "cache_hits": u.get("cache_hits") or 0, "tokens": tokens,
                           "cost_usd": u.get("cost_usd") or 0.0, "memories_added": r["memories_added"] or 0,
                           "cost": costs.get(r["round"]) if r["phase"] == "dev" else None,
                           "screenings": [s for s in screenings if s["round"] == r["round"]]})
        prev = score if score is not None else prev
    ui.print(table)
    if screenings:
        ui.info(cost_line(total))
    for r in out_rounds:
        for line in screening_lines(r["round"], r["screenings"]):
            ui.info(line)
        if r["verdict"] and r["round"] > 0:
            ui.info(f"  round {r['round']} judged: {r['verdict']}")
        if r["reason"]:
            ui.info(f"  round {r['round']} → {r['decision']}: {r['reason']}")
        if r["fallback"]:
            ui.info(f"  round {r['round']} fallback: {r['fallback']}")
        for flag in r["flags"]:
            ui.info(f"  round {r['round']} ⚑ against the evidence: {flag}")
    result: dict = {"run_dir": run, "manifest": manifest, "rounds": out_rounds, "cost": total}
    if out_rounds and manifest.get("kind") == "run":
        accepted = [x for x in out_rounds if x["accepted"]]
        best = accepted[-1] if accepted else max(out_rounds, key=lambda x: (x["dev_score"] or 0, -x["round"]))
        result["best_round"] = best["round"]
        result["dev"] = {"start": out_rounds[0], "best": best}
        result["test"] = {k.removeprefix("test_"): headline(v) for k, v in finals.items()}
        t = Table(title="start vs best: dev (evolution) and test (scored once at the end)", title_justify="left")
        for col in ("config", "dev all", "dev main", "test all", "test main", "test evid. recall"):
            t.add_column(col)
        for which, row in (("start", out_rounds[0]), (f"best (round {best['round']})", best)):
            test = result["test"].get("start" if which == "start" else "best", {})
            t.add_row(which, fmt(row["all_f1"]), fmt(row["main_f1"]), fmt(test.get("all_f1")),
                      fmt(test.get("main_f1")), fmt(test.get("evidence_recall")))
        ui.print(t)
    if new_dims:
        ui.info("[bold]proposed new dimensions[/bold] (recorded, not applied):")
        for d in new_dims:
            ui.info(f"  round {d['round']}: {d['name']} — {d['description']} {d['rationale']}")
    result["proposed_dimensions"] = new_dims
    return result


def diff_rounds(ui: UI, run: str, a: int, b: int, limit: int = 20) -> dict:
    from evolvemem.session import compare_rounds, open_run
    from evolvemem.space.config import parse_config
    from evolvemem.space.ops import diff_configs

    with open_run(run) as store:
        cfg = {r["round"]: r for r in store.query(
            "SELECT round, config, by_category, all_f1, main_f1 FROM rounds WHERE phase IN ('dev', 'eval') AND round IN (?, ?)",
            [a, b])}
        for r in (a, b):
            if r not in cfg:
                raise EvolveMemError(f"{run}: no evaluated round {r}")
        objective = (store.manifest().get("spec") or {}).get("objective", "balanced")
        paired = compare_rounds(store, a, b, objective)
        flips = store.query("""
            SELECT fa.question_id, fa.question_type, fa.question, fa.gold,
                   fa.prediction AS prediction_a, fb.prediction AS prediction_b,
                   round(fa.f1, 3) AS f1_a, round(fb.f1, 3) AS f1_b, fa.failure AS failure_a, fb.failure AS failure_b,
                   CASE WHEN fb.f1 >= 0.5 THEN 'fixed' ELSE 'broken' END AS flip
            FROM question_failures fa JOIN question_failures fb
              ON fa.question_id = fb.question_id AND fb.round = ? AND fb.phase = fa.phase
            WHERE fa.round = ? AND fa.phase IN ('dev', 'eval') AND (fa.f1 >= 0.5) <> (fb.f1 >= 0.5)
            ORDER BY flip, fa.question_type, fa.question_id""", [b, a])
    old = parse_config(cfg[a]["config"], source=f"round {a}")[0]
    new = parse_config(cfg[b]["config"], source=f"round {b}")[0]
    changes = [c.as_dict() for c in diff_configs(old, new)]
    cats = sorted(set(cfg[a]["by_category"] or {}) | set(cfg[b]["by_category"] or {}))
    score_diff = {c: {"a": ((cfg[a]["by_category"] or {}).get(c) or {}).get("f1"),
                      "b": ((cfg[b]["by_category"] or {}).get(c) or {}).get("f1")} for c in cats}
    for v in score_diff.values():
        v["delta"] = None if v["a"] is None or v["b"] is None else v["b"] - v["a"]
    ui.info(f"[bold]config diff[/bold] round {a} → round {b}: {changes_text(changes, limit=50)}")
    t = Table(title="F1 per category", title_justify="left")
    for col in ("category", f"round {a}", f"round {b}", "Δ"):
        t.add_column(col)
    for c, v in score_diff.items():
        t.add_row(c, fmt(v["a"]), fmt(v["b"]), "-" if v["delta"] is None else f"{v['delta']:+.3f}")
    t.add_section()
    t.add_row("all", fmt(cfg[a]["all_f1"]), fmt(cfg[b]["all_f1"]), f"{cfg[b]['all_f1'] - cfg[a]['all_f1']:+.3f}")
    ui.print(t)
    fixed = [f for f in flips if f["flip"] == "fixed"]
    broken = [f for f in flips if f["flip"] == "broken"]
    ui.print(paired_table(paired, f"round {a}", f"round {b}", f"paired: round {b} − round {a} on the same "
                         "questions (95% interval: conversations and questions resampled; p: sign-flip "
                         "permutation, one-sided)"))
    ui.info(f"{len(fixed)} questions became right, {len(broken)} became wrong (right = F1 ≥ 0.5)")
    for label, items, why in (("fixed", fixed, "failure_a"), ("broken", broken, "failure_b")):
        if not items:
            continue
        table = Table(title=f"{label} (why, per the failure taxonomy)", title_justify="left")
        for col in ("type", "question", "gold", f"round {a}", f"round {b}", "why"):
            table.add_column(col, overflow="fold")
        for f in items[:limit]:
            table.add_row(f["question_type"], f["question"], f["gold"], f["prediction_a"], f["prediction_b"], f[why])
        ui.print(table)
    by_reason: dict[str, int] = {}
    for f in flips:
        key = f"{f['flip']}:{f['failure_a'] if f['flip'] == 'fixed' else f['failure_b']}"
        by_reason[key] = by_reason.get(key, 0) + 1
    return {"run_dir": run, "a": a, "b": b, "config_changes": changes, "score_diff": score_diff,
            "all_f1": {"a": cfg[a]["all_f1"], "b": cfg[b]["all_f1"]}, "fixed": len(fixed), "broken": len(broken),
            "flips_by_reason": by_reason, "flips": flips, "paired": paired.as_dict()}

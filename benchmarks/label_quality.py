"""Are generated dev sets worth evolving on? `evolve label` on LoCoMo's dev conversations (turns
only), checked against LoCoMo's own questions for the same and held-out conversations.

    python benchmarks/label_quality.py [--data PATH] [--state runs/label-quality] [--model 1.5b]
        [--sessions 5] [--per-session 5] [--review 60] [--rounds 7] [--runs-dir DIR]
        [--stages label,review,rank,rank_f1,transfer] [--f1-questions 40]

`--model offline` runs the rank and transfer stages on the offline labeller's questions instead (no
review): a check of the pipeline and of the rule-based labels, not of a model's.

Stages, each resumable (run the same command again: finished stages are read back, the labelling
and review calls are replayed from their journals, an unfinished evolve run is resumed):
1. label: the dev split's conversations (their LoCoMo questions dropped) labelled by the local
   model (benchmarks/local_llm_server.py, 4,096-token window); prints kept / rejected per check
   and the rejection rate of each check.
2. review: a second, independent call (prompts/label_review.md) on up to --review kept questions,
   spread evenly over the file: the share it finds wrong or unanswerable, per kind. It sees the
   evidence lines with what their relative dates mean ("[last week = the week before 9 July
   2023]"); without those notes the 1.5B judge called most resolved temporal golds wrong.
3. rank: >= 8 configs (the presets and every best_config.toml under --runs-dir) scored offline on
   evidence recall of the answerable questions, generated vs real LoCoMo questions of the same
   conversations, at each config's own budget and cut at 1,500 tokens; Kendall tau-b of the two
   orderings.
4. rank_f1: the same configs, each context cut at 1,500 tokens, answered by the local model:
   answerable F1 on up to --f1-questions real LoCoMo questions of the dev conversations (taken
   category by category) and on up to as many generated ones; Kendall tau-b of the two orderings.
   Answers go through the LLM reply cache and each config's figures are saved as it finishes, so
   an interrupted stage asks again only what it had not asked.
5. transfer: `evolve run --objective evidence` on the generated questions (a custom file whose
   held-out conversations carry their real LoCoMo questions, so its test score is the real one)
   beside the same run on the real dev questions; the test gain (best - start) of each and their ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks._mechanisms import DEFAULT_DATA, load_locomo_file  # noqa: E402

WINDOW = 4096
STAGES = ("label", "review", "rank", "rank_f1", "transfer")
BUDGET = 1500


def say(text: str) -> None:
    print(text, flush=True)


def kendall_tau_b(xs: list[float], ys: list[float]) -> float:
    """Kendall's tau-b (ties in either ranking allowed)."""
    concordant = discordant = ties_x = ties_y = 0
    for i in range(len(xs)):
        for j in range(i + 1, len(xs)):
            dx, dy = xs[i] - xs[j], ys[i] - ys[j]
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                ties_x += 1
            elif dy == 0:
                ties_y += 1
            elif (dx > 0) == (dy > 0):
                concordant += 1
            else:
                discordant += 1
    denominator = ((concordant + discordant + ties_x) * (concordant + discordant + ties_y)) ** 0.5
    return (concordant - discordant) / denominator if denominator else 0.0


def dev_and_test(data: Path) -> tuple[Any, Any, Any]:
    from evolvemem.data.split import split_dataset

    dataset = load_locomo_file(data)
    return dataset, split_dataset(dataset, "dev"), split_dataset(dataset, "test")


# ----------------------------------------------------------------------------- 1. label
def stage_label(args: argparse.Namespace, dev: Any) -> dict:
    from benchmarks.local_llm_server import serve
    from evolvemem.data.custom import dump_custom, load_custom
    from evolvemem.data.models import Dataset
    from evolvemem.labelling.run import LabelSettings, label_dataset

    done = args.state / "label_summary.json"
    if done.is_file():
        return json.loads(done.read_text(encoding="utf-8"))
    turns_only = dump_custom(Dataset("locomo-dev-turns", dev.conversations, []), args.state / "dev_turns.json")
    conversations = load_custom(turns_only)
    say(
        f"labelling {len(conversations.conversations)} dev conversations ({', '.join(conversations.conversations)}) "
        f"from their turns alone: {args.sessions} sessions each, {args.per_session} candidates a session, "
        f"Qwen2.5-Coder {args.model}"
    )

    def progress(n: int, total: int) -> None:
        say(f"  labelled conversation {n}/{total}")

    if args.model == "offline":  # the rule-based labeller: a check of the pipeline, not of model labels
        summary = label_dataset(
            conversations,
            LabelSettings(model="offline", per_session=args.per_session),
            args.state / "generated.json",
            progress=progress,
        )
    else:
        with serve(args.model, n_ctx=WINDOW) as server:
            settings = LabelSettings(
                model=server.model,
                api_base=server.api_base,
                context_window=WINDOW,
                sessions=args.sessions,
                per_session=args.per_session,
            )
            summary = label_dataset(conversations, settings, args.state / "generated.json", progress=progress)
    result = summary.as_dict()
    if summary.stopped:
        raise SystemExit(f"labelling stopped: {summary.stopped} (run the same command again to continue)")
    done.write_text(json.dumps(result, indent=1), encoding="utf-8")
    return result


def print_label(result: dict) -> None:
    say(
        f"label{' (offline labeller)' if result['offline'] else ''}: kept {result['kept_total']} of {result['candidates']} candidates ({result['kept']}); "
        f"model calls {result['journaled']['calls']}, tokens "
        f"{int(result['journaled']['prompt_tokens']) + int(result['journaled']['completion_tokens']):,}"
    )
    say("  rejected per reason: " + ", ".join(f"{k} {v}" for k, v in result["rejected"].items()))
    for name, row in result["checks"].items():
        say(
            f"  check {name:34s} reached {row['reached']:4d}  rejected {row['failed']:4d}  "
            f"rate {row['rejection_rate']:.3f}"
        )


# ----------------------------------------------------------------------------- 2. review
def spread(items: list, count: int) -> list:
    """`count` items evenly spaced through `items` (all of them when there are fewer), so a sample
    reaches every conversation, not only the first ones."""
    if count >= len(items):
        return list(items)
    return [items[i * len(items) // count] for i in range(count)]


def stage_review(args: argparse.Namespace) -> dict:
    from benchmarks.local_llm_server import serve
    from evolvemem.data.custom import load_custom
    from evolvemem.labelling.contexts import Retrieval, evidence_context
    from evolvemem.labelling.journal import Journal
    from evolvemem.labelling.model_calls import JournaledModel, reply_field
    from evolvemem.llm.cache import ResponseCache
    from evolvemem.llm.client import LLMClient
    from evolvemem.prompts import load_prompt
    from evolvemem.space.config import load_config

    done = args.state / "review.json"
    if done.is_file():
        return json.loads(done.read_text(encoding="utf-8"))
    generated = load_custom(args.state / "generated.json")
    questions = spread(generated.questions, args.review)
    retrieval = Retrieval(generated, load_config("default")[0])
    verdicts: list[dict] = []
    with serve(args.model, n_ctx=WINDOW) as server:
        client = LLMClient(
            server.model, api_base=server.api_base, context_window=WINDOW, cache=ResponseCache(), timeout=600
        )
        model = JournaledModel(client, Journal(args.state / "review-journal.jsonl"))
        for question in questions:
            conversation = generated.conversations[question.conversation_id]
            unanswerable = question.question_type == "adversarial"
            context = (
                retrieval.context(conversation, question.text, question.question_type)
                if unanswerable
                else evidence_context(conversation, question.evidence, date_notes=True)
            )
            prompt = load_prompt("label_review").render(context=context, question=question.text, gold=question.answer)
            reply = model.ask(prompt, purpose="review", max_tokens=16)
            verdict = (reply_field(reply.parsed, "verdict") or "unparsed").lower()
            verdicts.append({"id": question.question_id, "kind": question.category, "verdict": verdict})
    flagged = [
        v
        for v in verdicts
        if v["verdict"] in ("wrong", "unanswerable")
        if v["kind"] != "unanswerable" or v["verdict"] == "wrong"
    ]
    kinds = sorted({v["kind"] for v in verdicts})
    result = {
        "reviewed": len(verdicts),
        "flagged": len(flagged),
        "share_flagged": len(flagged) / max(len(verdicts), 1),
        "unparsed": sum(v["verdict"] not in ("right", "wrong", "unanswerable") for v in verdicts),
        "by_kind": {
            k: {"reviewed": sum(v["kind"] == k for v in verdicts), "flagged": sum(v["kind"] == k for v in flagged)}
            for k in kinds
        },
        "verdicts": verdicts,
    }
    done.write_text(json.dumps(result, indent=1), encoding="utf-8")
    return result


def print_review(result: dict) -> None:
    say(
        f"review: a second judge call flags {result['flagged']} of {result['reviewed']} kept questions "
        f"({result['share_flagged']:.1%}) as wrong or unanswerable; {result['unparsed']} replies unparsed"
    )
    for kind, row in result["by_kind"].items():
        say(f"  {kind:14s} {row['flagged']}/{row['reviewed']} flagged")


# ----------------------------------------------------------------------------- 3. rank
def rank_configs(args: argparse.Namespace) -> dict[str, Any]:
    from evolvemem.space.config import load_config

    configs = {name: load_config(name)[0] for name in ("weak", "default", "hybrid")}
    for path in sorted(Path(args.runs_dir).glob("*/best_config.toml")):
        configs[path.parent.name] = load_config(str(path))[0]
    return configs


def answerable_questions(args: argparse.Namespace, dev: Any) -> tuple[list, list]:
    """The dev conversations' answerable questions with gold evidence: LoCoMo's, and the generated ones."""
    from evolvemem.data.custom import load_custom

    generated = load_custom(args.state / "generated.json")
    real = [q for q in dev.questions if q.category not in dev.adversarial_categories and q.evidence]
    made = [q for q in generated.questions if q.question_type != "adversarial" and q.evidence]
    return real, [q for q in made if q.conversation_id in dev.conversations]


def stage_rank(args: argparse.Namespace, dev: Any) -> dict:
    from benchmarks._mechanisms import offline_workspace
    from evolvemem.answering.contexts import evaluate_contexts
    from evolvemem.data.models import Dataset
    from evolvemem.space.budget import TokenBudget

    done = args.state / "rank.json"
    if done.is_file():
        return json.loads(done.read_text(encoding="utf-8"))
    real, made = answerable_questions(args, dev)
    both = Dataset("rank", dev.conversations, real + made, dev.category_names, dev.adversarial_categories)
    ws = offline_workspace(both)
    configs = rank_configs(args)
    rows: dict[str, dict[str, float]] = {}
    from evolvemem.answering.stores import stores_needed

    for name, config in configs.items():
        ws.ensure_stores(stores_needed(config))
        row = {}
        for label, questions in (("real", real), ("generated", made)):
            for cap, key in ((None, "own"), (BUDGET, str(BUDGET))):
                records = evaluate_contexts(ws, config.with_budget(TokenBudget(cap)), questions).records
                failed = [r for r in records if r.get("failed")]
                if failed:
                    raise SystemExit(f"{name}: {len(failed)} questions failed, e.g. {failed[0].get('error')}")
                values = [r["evidence_recall"] for r in records if r["evidence_recall"] is not None]
                row[f"{label}@{key}"] = sum(values) / max(len(values), 1)
        rows[name] = row
        say(f"  {name:24s} " + "  ".join(f"{k} {v:.3f}" for k, v in row.items()))
    names = list(rows)
    result: dict[str, Any] = {"configs": rows, "n_real": len(real), "n_generated": len(made)}
    for key in ("own", str(BUDGET)):
        result[f"tau@{key}"] = kendall_tau_b(
            [rows[n][f"real@{key}"] for n in names], [rows[n][f"generated@{key}"] for n in names]
        )
    done.write_text(json.dumps(result, indent=1), encoding="utf-8")
    return result


def print_rank(result: dict) -> None:
    say(
        f"rank: {len(result['configs'])} configs, evidence recall on {result['n_real']} real and "
        f"{result['n_generated']} generated answerable questions of the same conversations"
    )
    for name, row in result["configs"].items():
        say(
            f"  {name:24s} real {row['real@own']:.3f} generated {row['generated@own']:.3f} | at {BUDGET} tokens: "
            f"real {row[f'real@{BUDGET}']:.3f} generated {row[f'generated@{BUDGET}']:.3f}"
        )
    say(
        f"  Kendall tau-b, evidence recall: own budgets {result['tau@own']:.3f}, at {BUDGET} tokens "
        f"{result[f'tau@{BUDGET}']:.3f} (the reader's answerable F1: the rank_f1 stage)"
    )


# ----------------------------------------------------------------------------- 4. rank by the reader's F1
def stage_rank_f1(args: argparse.Namespace, dev: Any) -> dict:
    from benchmarks.local_llm_server import serve
    from benchmarks.reader_frontier import stratified_questions
    from evolvemem.data.models import Dataset
    from evolvemem.session import ModelSettings, QuietReporter, evaluate, open_workspace
    from evolvemem.space.budget import TokenBudget

    done = args.state / "rank_f1.json"
    saved: dict[str, Any] = json.loads(done.read_text(encoding="utf-8")) if done.is_file() else {}
    if "tau" in saved:
        return saved
    real, made = (stratified_questions(qs, args.f1_questions) for qs in answerable_questions(args, dev))
    if not made:
        raise SystemExit("rank_f1: no generated answerable questions to answer (run the label stage first)")
    both = Dataset("rank-f1", dev.conversations, real + made, dev.category_names, dev.adversarial_categories)
    rows: dict[str, dict[str, float]] = saved.get("configs", {})
    say(f"rank_f1: {len(real)} real and {len(made)} generated answerable questions, reader Qwen2.5-Coder {args.model}")
    with serve(args.model, n_ctx=WINDOW) as server:
        settings = ModelSettings(
            answer_model=server.model, extract_model="offline", api_base=server.api_base, context_window=WINDOW
        )
        ws = open_workspace(QuietReporter(), both, settings, cache_enabled=True)
        for name, config in rank_configs(args).items():
            if name in rows:
                continue
            row = {}
            for label, questions in (("real", real), ("generated", made)):
                records = evaluate(ws, config.with_budget(TokenBudget(BUDGET)), questions, concurrency=1).records
                failed = [r for r in records if r.get("failed")]
                if failed:
                    raise SystemExit(f"{name}: {len(failed)} answers failed, e.g. {failed[0].get('error')}")
                row[label] = sum(r["f1"] for r in records) / len(records)
            rows[name] = row
            done.write_text(json.dumps({"configs": rows}, indent=1), encoding="utf-8")
            say(f"  {name:24s} real F1 {row['real']:.3f}  generated F1 {row['generated']:.3f}")
    names = list(rows)
    result = {
        "configs": rows,
        "n_real": len(real),
        "n_generated": len(made),
        "tau": kendall_tau_b([rows[n]["real"] for n in names], [rows[n]["generated"] for n in names]),
    }
    done.write_text(json.dumps(result, indent=1), encoding="utf-8")
    return result


def print_rank_f1(result: dict) -> None:
    say(
        f"rank_f1: {len(result['configs'])} configs, answerable F1 of the local reader at {BUDGET} tokens on "
        f"{result['n_real']} real and {result['n_generated']} generated questions; Kendall tau-b {result['tau']:.3f}"
    )
    for name, row in result["configs"].items():
        say(f"  {name:24s} real {row['real']:.3f} generated {row['generated']:.3f}")


# ----------------------------------------------------------------------------- 5. transfer
def evolve(args: argparse.Namespace, out: Path, *options: str) -> dict:
    result = out / "result.json"
    if not result.is_file():
        command = [sys.executable, "-m", "evolvemem.cli.main", "run"]
        command += ["--resume", str(out)] if (out / "run.duckdb").is_file() else [*options, "--out", str(out)]
        subprocess.run(command + ["--quiet"], check=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    return json.loads(result.read_text(encoding="utf-8"))


def stage_transfer(args: argparse.Namespace, dataset: Any, dev: Any, test: Any) -> dict:
    from evolvemem.data.custom import custom_records, load_custom
    from evolvemem.data.models import Dataset
    from evolvemem.data.split import split_ids

    done = args.state / "transfer.json"
    if done.is_file():
        return json.loads(done.read_text(encoding="utf-8"))
    generated = load_custom(args.state / "generated.json")
    header, conversations, questions = custom_records(
        Dataset(
            "generated-dev+real-test",
            {**dev.conversations, **test.conversations},
            [q for q in generated.questions] + list(test.questions),
            {**dataset.category_names, **generated.category_names},
            tuple(dict.fromkeys((*dataset.adversarial_categories, *generated.adversarial_categories))),
        )
    )
    turns = {c["id"]: {t["id"] for s in c["sessions"] for t in s["turns"]} for c in conversations}
    for question in questions:  # LoCoMo cites a few turns that do not exist; the custom format refuses them
        question["evidence"] = [e for e in question["evidence"] if e in turns[question["conversation_id"]]]
    dev_ids, test_ids = split_ids(c["id"] for c in conversations)
    assert set(dev_ids) == set(dev.conversations) and set(test_ids) == set(test.conversations), "splits differ"
    combined = args.state / "generated_dev_real_test.json"
    combined.write_text(
        json.dumps({**header, "conversations": conversations, "questions": questions}), encoding="utf-8"
    )
    common = ["--objective", "evidence", "--rounds", str(args.rounds), "--seed", "0"]
    arms = {
        "generated": evolve(
            args, args.state / "evolve-generated", "--benchmark", "custom", "--data", str(combined), *common
        ),
        "real": evolve(args, args.state / "evolve-real", "--benchmark", "locomo", "--data", str(args.data), *common),
    }
    result = {}
    for arm, run in arms.items():
        start, best = run["test"]["start"]["main_evidence_recall"], run["test"]["best"]["main_evidence_recall"]
        result[arm] = {"best_round": run["best_round"], "test_start": start, "test_best": best, "gain": best - start}
    real_gain = result["real"]["gain"]
    result["ratio"] = result["generated"]["gain"] / real_gain if real_gain else None
    done.write_text(json.dumps(result, indent=1), encoding="utf-8")
    return result


def print_transfer(result: dict) -> None:
    for arm in ("generated", "real"):
        row = result[arm]
        say(
            f"transfer: evolved on {arm} dev questions (best round {row['best_round']}): real test evidence recall "
            f"{row['test_start']:.3f} -> {row['test_best']:.3f} ({row['gain']:+.3f})"
        )
    ratio = result["ratio"]
    say(f"  generated gain / real gain: {'-' if ratio is None else f'{ratio:.2f}'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--state", type=Path, default=REPO / "runs" / "label-quality")
    parser.add_argument("--model", default="1.5b")
    parser.add_argument("--sessions", type=int, default=5)
    parser.add_argument("--per-session", type=int, default=5)
    parser.add_argument("--review", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--runs-dir", type=Path, default=REPO / "runs")
    parser.add_argument("--stages", default=",".join(STAGES))
    parser.add_argument("--f1-questions", type=int, default=40, help="rank_f1: real and generated questions each")
    args = parser.parse_args()
    from benchmarks.local_llm_server import placeholder_api_key

    placeholder_api_key()
    os.environ.setdefault("EVOLVEMEM_LLM_TIMEOUT", "600")
    args.state.mkdir(parents=True, exist_ok=True)
    stages = [s.strip() for s in args.stages.split(",") if s.strip()]
    dataset, dev, test = dev_and_test(args.data)
    if "label" in stages:
        print_label(stage_label(args, dev))
    if "review" in stages and args.model != "offline":
        print_review(stage_review(args))
    if "rank" in stages:
        print_rank(stage_rank(args, dev))
    if "rank_f1" in stages and args.model != "offline":
        print_rank_f1(stage_rank_f1(args, dev))
    if "transfer" in stages:
        print_transfer(stage_transfer(args, dataset, dev, test))


if __name__ == "__main__":
    main()

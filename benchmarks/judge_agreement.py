"""How far can our LLM judge be trusted? Its agreement with token F1, with a hand-read sample, and
how often a deliberately vague wrong answer fools it.

    python benchmarks/judge_agreement.py RUN_OR_EVAL_DIR --judge-model M [--api-base URL]
        [--labels benchmarks/judge_hand_labels.jsonl] [--questions N] [--concurrency 4] [--json]

The answers judged are the evaluation's scored answers to answerable questions (LoCoMo's
adversarial category is left out, as the field's judge figures leave it out): an `evolve eval`
directory's round 0, an `evolve run` directory's best dev round (`--questions N`: N of them, the
hand-labelled ones first, the rest in the store's order — a small local judge takes seconds a
verdict). Each is judged with the judge of
`--metric judge` (prompts/judge.md, Mem0's CORRECT/WRONG LoCoMo protocol), through the LLM reply
cache, so a second run asks nothing again. Printed:

(a) the judge against F1 >= 0.5 (the run store's "right"): the 2x2 confusion, raw agreement and
    Cohen's kappa;
(b) the judge against a human reading: `--labels` holds question id, the SHA-256 of the prediction
    read and the reader's verdict (no question or answer text); a label counts only where the
    evaluation's prediction for that question hashes the same. The shipped file labels the offline
    extractive reader's answers of
    `evolve eval --benchmark locomo --data locomo10_dev8.json --split test --config default`;
(c) the fooled rate: per question a vague wrong answer made by rules from the question's form and
    type alone ("sometime last year", "a friend of theirs", never from the gold), and how often the
    judge accepts it.

A judge whose model cannot be asked at all stops the script in one line before any judging.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

LABELS = REPO / "benchmarks" / "judge_hand_labels.jsonl"
# the question's first words → a vague answer of the right form that names nothing
VAGUE_BY_OPENER = (
    (("how many", "how much"), "a few"),
    (("how long", "when", "what year", "what month", "what date"), "sometime last year"),
    (("who", "whom", "whose", "with whom"), "a friend of theirs"),
    (("where",), "somewhere they had been before"),
    (("why",), "for personal reasons"),
    (("how",), "in their own way"),
    (("which",), "one of the ones they mentioned"),
)


@dataclass(frozen=True)
class Confusion:
    """The judge's verdicts against a reference's (F1 >= 0.5, or a human reader)."""

    both_right: int
    judge_only: int  # the judge says correct, the reference wrong
    reference_only: int
    both_wrong: int

    @property
    def n(self) -> int:
        return self.both_right + self.judge_only + self.reference_only + self.both_wrong

    @property
    def agreement(self) -> float | None:
        return (self.both_right + self.both_wrong) / self.n if self.n else None

    @property
    def kappa(self) -> float | None:
        """Cohen's kappa: agreement beyond what the two marginals give by chance."""
        if not self.n:
            return None
        judge_yes = (self.both_right + self.judge_only) / self.n
        reference_yes = (self.both_right + self.reference_only) / self.n
        chance = judge_yes * reference_yes + (1 - judge_yes) * (1 - reference_yes)
        observed = (self.both_right + self.both_wrong) / self.n
        return None if chance >= 1 else (observed - chance) / (1 - chance)

    def as_dict(self) -> dict[str, Any]:
        return {
            "both_right": self.both_right,
            "judge_only": self.judge_only,
            "reference_only": self.reference_only,
            "both_wrong": self.both_wrong,
            "n": self.n,
            "agreement": self.agreement,
            "kappa": self.kappa,
        }


def confusion(pairs: Sequence[tuple[int, bool]]) -> Confusion:
    """(judge verdict 1/0, reference says right) pairs → their confusion."""
    count = {(j, r): 0 for j in (0, 1) for r in (False, True)}
    for judged, right in pairs:
        count[(judged, right)] += 1
    return Confusion(count[(1, True)], count[(1, False)], count[(0, True)], count[(0, False)])


def vague_answer(question: str, question_type: str) -> str:
    """A deliberately vague wrong answer from the question's form and type alone (never its gold)."""
    from evolvemem.roles.reader_lexicon import AUXILIARIES

    text = " ".join(question.lower().split())
    if question_type == "temporal" and not text.startswith(("how many", "how much", "where", "who")):
        return "sometime last year"
    for openers, answer in VAGUE_BY_OPENER:
        if text.startswith(openers):
            return answer
    if text.split(" ", 1)[0] in AUXILIARIES:  # a yes/no question opens with one
        return "maybe, it is hard to say"
    return "something they talked about"


def prediction_hash(prediction: str) -> str:
    return hashlib.sha256(prediction.encode("utf-8")).hexdigest()


def read_labels(path: Path) -> dict[tuple[str, str], int]:
    """(question id, prediction hash) → the reader's verdict 1/0; a bad line stops in one line."""
    labels: dict[tuple[str, str], int] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            verdict = {"correct": 1, "wrong": 0}[row["verdict"]]
            labels[(str(row["question_id"]), str(row["prediction_sha256"]))] = verdict
        except (ValueError, KeyError, TypeError):
            raise SystemExit(f"{path}:{number}: expected question_id, prediction_sha256 and verdict correct|wrong")
    return labels


def scored_answers(run_dir: Path) -> tuple[list[Any], str]:
    """The answerable questions' scored records of the evaluation in `run_dir`, and which one it is."""
    from evolvemem.qtypes import is_adversarial
    from evolvemem.session import open_run

    with open_run(str(run_dir)) as store:
        kind = str(store.manifest().get("kind") or "run")
        where = (store.best_round(), "dev") if kind == "run" else (0, "eval")  # eval and transfer: round 0
        records = store.round_records(*where)
    answered = [
        r for r in records if not r.failed and r.f1 is not None and r.prediction and not is_adversarial(r.question_type)
    ]
    return answered, f"{kind}, round {where[0]} ({where[1]})"


def first_answers(records: list[Any], labels: dict[tuple[str, str], int], limit: int) -> list[Any]:
    """`limit` of `records` (all when 0): those a hand label reads first, then the rest in order."""
    if limit <= 0:
        return records
    labelled = [r for r in records if (r.question_id, prediction_hash(r.prediction)) in labels]
    rest = [r for r in records if (r.question_id, prediction_hash(r.prediction)) not in labels]
    return (labelled + rest)[:limit]


def open_judge(model: str, api_base: str | None) -> Any:
    """The metric's judge (through the user's LLM reply cache), or one line when it cannot be asked."""
    from evolvemem.llm import LLMClient, ResponseCache
    from evolvemem.roles.factory import client_options_from_env
    from evolvemem.scoring.judge import LLMJudge

    judge = LLMJudge(LLMClient(model, api_base=api_base, cache=ResponseCache(), **client_options_from_env()))
    problem = judge.unreachable()
    if problem:
        raise SystemExit(f"the judge model cannot be asked: {problem}")
    return judge


def judge_all(judge: Any, cases: list[tuple[str, str, str]], concurrency: int) -> list[int | None]:
    """The judge's verdict (1, 0 or None: no usable reply) on each (question, gold, prediction)."""
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        return list(pool.map(lambda case: judge.judge(*case)[0], cases))


def measure(records: list[Any], judge: Any, labels: dict[tuple[str, str], int], concurrency: int) -> dict[str, Any]:
    """The three figures over `records` (verdicts without a usable reply are counted apart)."""
    from evolvemem.contracts.records import RIGHT_F1

    real = judge_all(judge, [(r.question, r.gold, r.prediction) for r in records], concurrency)
    vague_cases = [(r.question, r.gold, vague_answer(r.question, r.question_type)) for r in records]
    vague = judge_all(judge, vague_cases, concurrency)
    by_f1 = confusion([(v, (r.f1 or 0.0) >= RIGHT_F1) for r, v in zip(records, real) if v is not None])
    hand_pairs = []
    for r, v in zip(records, real):
        label = labels.get((r.question_id, prediction_hash(r.prediction)))
        if label is not None and v is not None:
            hand_pairs.append((v, bool(label)))
    judged_real = [v for v in real if v is not None]
    judged_vague = [v for v in vague if v is not None]
    return {
        "answers": len(records),
        "no_verdict": len(real) - len(judged_real),
        "judge_accuracy": sum(judged_real) / len(judged_real) if judged_real else None,
        "vs_f1": by_f1.as_dict(),
        "vs_hand": {**confusion(hand_pairs).as_dict(), "labels": len(labels)},
        "vague": {
            "judged": len(judged_vague),
            "accepted": sum(judged_vague),
            "fooled_rate": sum(judged_vague) / len(judged_vague) if judged_vague else None,
            "no_verdict": len(vague) - len(judged_vague),
        },
    }


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def print_table(figures: dict[str, Any], judge_version: str, which: str) -> None:
    f1, hand, vague = figures["vs_f1"], figures["vs_hand"], figures["vague"]
    print(f"judge {judge_version} on {which}: {figures['answers']} scored answers to answerable questions")
    print(f"  judge accuracy {_rate(figures['judge_accuracy'])}; no verdict on {figures['no_verdict']}")
    print(
        f"  {'reference':<28} {'n':>5} {'both ok':>8} {'judge only':>11} {'ref only':>9} {'both no':>8} {'agree':>7} {'kappa':>7}"
    )
    for name, c in (("(a) F1 >= 0.5", f1), (f"(b) hand labels ({hand['labels']} in file)", hand)):
        print(
            f"  {name:<28} {c['n']:>5} {c['both_right']:>8} {c['judge_only']:>11} {c['reference_only']:>9} "
            f"{c['both_wrong']:>8} {_rate(c['agreement']):>7} {_rate(c['kappa']):>7}"
        )
    print(
        f"  (c) vague wrong answers: {vague['accepted']} of {vague['judged']} accepted, "
        f"fooled rate {_rate(vague['fooled_rate'])} (no verdict on {vague['no_verdict']})"
    )


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("run_dir", type=Path, metavar="RUN_OR_EVAL_DIR")
    parser.add_argument("--judge-model", required=True, help="litellm model of the judge (e.g. openai/gpt-4o-mini)")
    parser.add_argument("--api-base", default=None, help="base URL of an OpenAI-compatible server")
    parser.add_argument("--labels", type=Path, default=LABELS, help="hand-read verdicts (JSONL)")
    parser.add_argument(
        "--questions", type=int, default=0, help="judge N answers, the hand-labelled first (0 = every answer)"
    )
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--json", action="store_true", help="end with one JSON object of the figures")
    args = parser.parse_args(argv)
    from benchmarks.local_llm_server import placeholder_api_key

    placeholder_api_key()
    if not (args.run_dir / "run.duckdb").is_file():
        raise SystemExit(f"{args.run_dir}: no run.duckdb (expected an `evolve eval` or `evolve run` directory)")
    labels = read_labels(args.labels) if args.labels.is_file() else {}
    records, which = scored_answers(args.run_dir)
    records = first_answers(records, labels, args.questions)
    if not records:
        raise SystemExit(f"{args.run_dir}: no scored answers to answerable questions to judge")
    judge = open_judge(args.judge_model, args.api_base)
    figures = measure(records, judge, labels, args.concurrency)
    print_table(figures, judge.version, which)
    figures["judge"] = judge.version
    if args.json:
        print(json.dumps(figures))
    return figures


if __name__ == "__main__":
    main()

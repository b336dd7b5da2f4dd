"""Judge accuracy beside F1, in words that cannot be mistaken for the field's figures.

The field quotes LLM-judge accuracy on LoCoMo with GPT-4o-class judges; ours runs with whatever
model the user names, and a judge's leniency is a property of the judge (an audit found a
gpt-4o-mini judge accepting most deliberately vague wrong answers). So every line that prints a
judge accuracy names the judge's model and says it is ours, and points at the agreement script
that measures it. The counts come from the run store (`RunReads.judge_tallies`)."""

from __future__ import annotations

from dataclasses import dataclass

AGREEMENT_SCRIPT = "benchmarks/judge_agreement.py"


@dataclass(frozen=True)
class JudgeTally:
    """The judge's verdicts over one evaluation's scored answers (failed questions left out)."""

    answered: int  # scored answers
    judged: int  # answers with a verdict (the rest: the judge's reply was unusable or its call failed)
    correct: int
    main_judged: int  # answerable questions (not adversarial) with a verdict
    main_correct: int
    main_f1: float | None  # mean token F1 of those same answerable questions

    @property
    def unjudged(self) -> int:
        return self.answered - self.judged

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.judged if self.judged else None

    @property
    def main_accuracy(self) -> float | None:
        """What the field quotes: LoCoMo's adversarial category is left out of judge accuracy."""
        return self.main_correct / self.main_judged if self.main_judged else None

    def as_dict(self) -> dict[str, float | int | None]:
        return {
            "answered": self.answered,
            "judged": self.judged,
            "unjudged": self.unjudged,
            "accuracy": self.accuracy,
            "main_judged": self.main_judged,
            "main_accuracy": self.main_accuracy,
            "main_f1": self.main_f1,
        }


def honesty_note(model: str) -> str:
    """The note every printed judge accuracy carries."""
    return (
        f"our judge with {model}: not comparable to the field's GPT-4o judge figures without its "
        f"agreement figures ({AGREEMENT_SCRIPT})"
    )


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def judge_line(tally: JudgeTally, model: str) -> str:
    """One line: judge accuracy (answerable, then all) beside F1 on the same answers, and the note."""
    return (
        f"judge accuracy {_figure(tally.main_accuracy)} on {tally.main_judged} answerable answers "
        f"(token F1 {_figure(tally.main_f1)} on the same), {_figure(tally.accuracy)} on all {tally.judged} "
        f"judged — {honesty_note(model)}"
    )


def unjudged_warning(tally: JudgeTally) -> str:
    """The one warning line for answers the judge gave no verdict on ('' when there are none)."""
    if not tally.unjudged:
        return ""
    return (
        f"the judge gave no verdict on {tally.unjudged} of {tally.answered} answers (a malformed reply "
        "after one re-ask, or a failed call): their judge column is NULL and they are left out of judge accuracy"
    )

"""The run's vocabularies as enums: phase, guard decision, failure class, objective, memory store.

Each is a `StrEnum`, so a member *is* its stored string: the run store, the manifest and JSON keep
the same values they always held, and a member compares equal to the string read back from a
table. The SQL view `question_failures` (store/schema.py) takes its labels from `FailureClass`."""

from __future__ import annotations

import sys
from enum import Enum

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # pragma: no cover - Python 3.10

    class StrEnum(str, Enum):
        """A str whose `str()` is its value (enum.StrEnum from 3.11 on)."""

        def __str__(self) -> str:
            return str(self.value)


class Phase(StrEnum):
    """What an evaluation in `rounds` / `question_records` was for. Screenings number their own
    phases (`screen_phase`, `contexts_phase`)."""

    DEV = "dev"  # a round of `evolve run` on the dev questions
    TEST_START = "test_start"  # the starting config on the test questions, once at the end
    TEST_BEST = "test_best"  # the best config on the test questions, once at the end
    EVAL = "eval"  # `evolve eval`
    TRANSFER = "transfer"  # `evolve transfer`
    BASELINE = "baseline"  # the baseline `evolve eval --baseline` is compared with


SCREEN_PREFIX = "screen"
CONTEXTS_PREFIX = "contexts"


def screen_phase(attempt: int) -> str:
    """The phase of a round's `attempt`-th minibatch screening (rung 1)."""
    return f"{SCREEN_PREFIX}{attempt}"


def contexts_phase(attempt: int) -> str:
    """The phase of a round's `attempt`-th contexts-only screening (rung 0)."""
    return f"{CONTEXTS_PREFIX}{attempt}"


BUDGET_MARK = "@"


def budget_phase(phase: str, tokens: int) -> str:
    """The phase of `phase`'s contexts cut at a frontier run's further budget (`--budgets`):
    "dev@1500" beside "dev" (the primary budget), so every reader of "dev" sees one budget."""
    return f"{phase}{BUDGET_MARK}{tokens}"


# The phases a report or `evolve show` draws as the rounds of a run, in order of preference.
EVALUATED_PHASES = (Phase.DEV, Phase.EVAL, Phase.TRANSFER)
TEST_PHASES = (Phase.TEST_START, Phase.TEST_BEST)


class Decision(StrEnum):
    """What the guard decided for the next round (`decisions.decision`)."""

    APPLIED = "applied"  # the proposal is applied to this round's config
    REVERTED = "reverted"  # worse, refused or stopped: the proposal goes onto the best config instead
    EXPLORED = "explored"  # a random perturbation (stagnation, an empty or repeated proposal)
    STOPPED = "stopped"  # the round limit
    CONVERGED = "converged"  # no new best for --patience rounds
    # end-of-run pruning (loop/pruning.py): a round that is the best config with one kept lever off
    PRUNED = "pruned"  # dropping the lever lost nothing significant: the pruned config is the best
    LEVER_PAYS = "lever_pays"  # dropping it was a significant loss: the lever stays


FINAL_DECISIONS = (Decision.STOPPED, Decision.CONVERGED, Decision.PRUNED, Decision.LEVER_PAYS)


class FailureClass(StrEnum):
    """Why a question's answer went wrong (the `question_failures` view, from the gold evidence)."""

    CALL_FAILED = "call_failed"
    CORRECT = "correct"
    UNKNOWN = "unknown"
    HALLUCINATION = "hallucination"
    EXTRACTION_GAP = "extraction_gap"
    RETRIEVAL_MISS = "retrieval_miss"
    BUDGET_CUT = "budget_cut"
    WRONG_ABSTENTION = "wrong_abstention"
    FORMAT_MISMATCH = "format_mismatch"
    ANSWER_ERROR = "answer_error"


class Objective(StrEnum):
    """What a round must gain to count (loop/spec.py: OBJECTIVE_MEANING)."""

    BALANCED = "balanced"
    ALL = "all"
    MAIN = "main"
    EVIDENCE = "evidence"  # no reader: evidence recall of the contexts at a token budget


class Metric(StrEnum):
    """What `evolve eval` scores answers with: token F1 always; `judge` adds the LLM judge and
    makes its verdicts required (every judge call failing is an error, not a warning)."""

    F1 = "f1"
    JUDGE = "judge"


class StoreKind(StrEnum):
    """A memory store a question can read (memory/stores.py builds them)."""

    FACT = "fact"  # the run's own extraction
    RECURRENCE = "recurrence"  # RecMem's consolidated store
    RAW = "raw"  # the conversation's turns, one memory each
    EPISODE = "episode"  # a narrative per session


class ContextMode(StrEnum):
    """What the reader is handed in `evolve eval --context` (an evaluation mode, never a config
    dimension: the loop cannot pick the gold evidence). answering/oracle.py builds the oracle ones."""

    RETRIEVED = "retrieved"  # the config's own retrieval (every run and eval until now)
    ORACLE = "oracle"  # exactly the question's gold evidence turns, in conversation order
    ORACLE_DISTRACTORS = "oracle+distractors"  # the gold turns, topped up to the budget with retrieved lines


class EvidenceInContext(StrEnum):
    """How much of a question's gold evidence its answer context held (evidence recall 1 / between / 0)."""

    FULL = "full"
    PARTIAL = "partial"
    NONE = "none"


class ReaderFailure(StrEnum):
    """Why a reader answered wrong although the whole gold evidence was in its context
    (scoring/failure_split.py holds the rules)."""

    ABSTAINED = "abstained"  # it said the context does not hold the answer
    DATE_FORM = "date_form"  # the gold is a date; the answer gives it relatively or in another form
    WRONG_DATE = "wrong_date"  # the gold is a date; the answer names another one
    TOO_LONG = "too_long"  # the gold is mostly inside an answer too long for token F1
    INCOMPLETE = "incomplete"  # the answer is mostly part of the gold but leaves most of it out
    ENTITY = "entity"  # the answer names another person or thing than the gold does
    OTHER = "other"

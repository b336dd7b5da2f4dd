"""Answer-level metrics shared by every benchmark: token F1, BLEU-1, exact match, multiple-choice
accuracy, evidence recall, and the one abstention recogniser.

All text metrics read the same tokens: the LoCoMo reference normalisation (drop commas, lowercase,
strip ASCII punctuation, remove the words a/an/the/and, collapse whitespace) followed by NLTK's
Porter stemmer in its default mode. Using the reference normalisation for every benchmark keeps
scores comparable across benchmarks and with published LoCoMo numbers.

NLTK takes about a second to import, so the stemmer is built on first use; stems and token lists
are memoised because gold answers are scored again every round.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from functools import lru_cache
from typing import Iterable, Protocol, Sequence

from evolvemem.errors import DataError

# --- abstention -------------------------------------------------------------------------------

# The official LoCoMo scorer counts an adversarial answer as correct iff the lowercased
# prediction contains one of these phrases. Every abstention check in evolvemem uses them.
ABSTENTION_PHRASES: tuple[str, ...] = ("not mentioned", "no information available")
# Other ways models decline; recognised only with `lenient=True` (diagnosis, never scoring).
_LENIENT_PHRASES: tuple[str, ...] = (
    "don't know",
    "do not know",
    "no information",
    "not enough information",
    "insufficient information",
    "cannot be determined",
    "can't be determined",
    "cannot determine",
    "not specified",
    "not stated",
    "no mention",
    "not provided",
    "unanswerable",
    "unknown",
)


def is_abstention(text: str, *, lenient: bool = False) -> bool:
    """True when `text` declines to answer.

    The default is exactly the official LoCoMo test, so whatever is recognised here is what the
    scorer rewards on adversarial questions. `lenient=True` also accepts other refusals
    ("I don't know", "cannot be determined", ...) — useful to diagnose an answerer that abstains
    in words the official scorer does not accept."""
    lowered = str(text).lower()
    phrases = ABSTENTION_PHRASES + _LENIENT_PHRASES if lenient else ABSTENTION_PHRASES
    return any(phrase in lowered for phrase in phrases)


# --- normalisation ----------------------------------------------------------------------------

_PUNCTUATION = str.maketrans("", "", string.punctuation)
_FILLER_WORDS = re.compile(r"\b(a|an|the|and)\b")


class _Stemmer(Protocol):
    """What this module uses of nltk's PorterStemmer (nltk ships no type information)."""

    def stem(self, word: str) -> str: ...


_stemmer: _Stemmer | None = None


def normalize_answer(text: str) -> str:
    """The reference normalisation, in the reference order (the order matters: punctuation goes
    before the filler words, so "an-apple" stays one word "anapple")."""
    text = str(text).replace(",", "").lower().translate(_PUNCTUATION)
    return " ".join(_FILLER_WORDS.sub(" ", text).split())


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    global _stemmer
    if _stemmer is None:
        from nltk.stem.porter import PorterStemmer

        _stemmer = PorterStemmer()  # default mode (NLTK_EXTENSIONS), as the reference uses
    return _stemmer.stem(word)


@lru_cache(maxsize=32768)
def answer_tokens(text: str) -> tuple[str, ...]:
    """Normalised, Porter-stemmed tokens: the unit every text metric here counts."""
    return tuple(_stem(word) for word in normalize_answer(text).split())


# --- text metrics -----------------------------------------------------------------------------


def token_f1(prediction: str, gold: str) -> float:
    """Harmonic mean of token precision and recall over multisets; 0 when nothing overlaps."""
    predicted, expected = answer_tokens(str(prediction)), answer_tokens(str(gold))
    overlap = sum((Counter(predicted) & Counter(expected)).values())
    if overlap == 0:
        return 0.0
    precision, recall = overlap / len(predicted), overlap / len(expected)
    return 2 * precision * recall / (precision + recall)


def bleu1(prediction: str, references: str | Sequence[str]) -> float:
    """BLEU-1 on the same tokens as F1: clipped unigram precision times the brevity penalty
    exp(1 - r/c) when the prediction (c tokens) is shorter than the reference (r tokens).

    Choice: with several references we take the best single-reference score (as F1 does) rather
    than BLEU's pooled clipping, and we stem like F1 does. Figures are therefore comparable with
    our F1 but not with papers that run `nltk.sentence_bleu` on raw lowercased words."""
    refs = [references] if isinstance(references, str) else list(references)
    predicted = answer_tokens(str(prediction))
    if not predicted or not refs:
        return 0.0
    best = 0.0
    for reference in refs:
        expected = answer_tokens(str(reference))
        clipped = sum((Counter(predicted) & Counter(expected)).values())
        c, r = len(predicted), len(expected)
        brevity = 1.0 if c > r else math.exp(1 - r / c)
        best = max(best, brevity * clipped / c)
    return best


def exact_match(prediction: str, gold: str | Sequence[str]) -> float:
    """1.0 when the normalised prediction equals a normalised gold answer (no stemming: exact
    means exact, so "lisbons" does not match "lisbon")."""
    golds = [gold] if isinstance(gold, str) else list(gold)
    predicted = normalize_answer(str(prediction))
    return float(any(predicted == normalize_answer(str(g)) for g in golds))


# --- multiple choice --------------------------------------------------------------------------

_LETTERS = string.ascii_uppercase
# "B", "(B)", "b", "B.", "B)", "B: Porto", "(b) Porto" — a letter standing alone at the start.
_LEADING_LETTER = re.compile(r"^\s*(?:\(([A-Za-z])\)|([A-Z])(?:[.):](?:\s|$)|\s*$)|([a-z])\s*$)")
# "The answer is B", "Answer: (C)", "option D", "choice (a)". Only the keyword ignores case: a
# bare letter must be uppercase, so "the answer is a dog" names no letter.
_NAMED_LETTER = re.compile(r"\b(?i:answer|option|choice)\s*(?:(?i:is)|:)?\s*(?:\(([A-Za-z])\)|([A-Z]))(?![\w'])")


def _letter_index(match: re.Match[str] | None, n_choices: int) -> int | None:
    if match is None:
        return None
    letter = next(group for group in match.groups() if group).upper()
    index = _LETTERS.index(letter)
    return index if index < n_choices else None


def choice_index(prediction: str, choices: Sequence[str]) -> int | None:
    """The 0-based choice a free-text prediction picks, or None when it picks none or several.

    Tried in order: the prediction is a choice's text; it is a choice letter (A for the first
    choice); it names a letter ("the answer is C"); it contains exactly one choice's text."""
    prediction = str(prediction)
    normalised = normalize_answer(prediction)
    texts = [normalize_answer(str(choice)) for choice in choices]
    if normalised and normalised in texts and texts.count(normalised) == 1:
        return texts.index(normalised)
    index = _letter_index(_LEADING_LETTER.match(prediction), len(choices))
    if index is None:
        index = _letter_index(_NAMED_LETTER.search(prediction), len(choices))
    if index is not None:
        return index
    padded = f" {normalised} "
    contained = [i for i, text in enumerate(texts) if text and f" {text} " in padded]
    return contained[0] if len(contained) == 1 else None


def correct_choice_index(correct_choice: str, choices: Sequence[str]) -> int:
    """Resolve a gold choice given as a letter ("B") or as the choice's text."""
    gold = str(correct_choice).strip()
    if len(gold) == 1 and gold.upper() in _LETTERS[: len(choices)]:
        return _LETTERS.index(gold.upper())
    texts = [normalize_answer(str(choice)) for choice in choices]
    if normalize_answer(gold) in texts:
        return texts.index(normalize_answer(gold))
    raise DataError(f"correct choice {gold!r} is neither a choice letter nor the text of one of {len(choices)} choices")


def mc_accuracy(prediction: str, choices: Sequence[str], correct_choice: str) -> float:
    """1.0 when the prediction picks the gold choice (by letter or text), else 0.0."""
    return float(choice_index(prediction, choices) == correct_choice_index(correct_choice, choices))


# --- retrieval --------------------------------------------------------------------------------


def evidence_recall(gold_evidence: Iterable[str], context_turn_ids: Iterable[str | Iterable[str]]) -> float | None:
    """Share of the gold evidence turns that some context memory was extracted from.

    `context_turn_ids` is one entry per context memory — its source turn ids (a single id string
    is accepted too). None when the question has no gold evidence (it does not count as 0)."""
    gold = {str(turn_id).strip() for turn_id in gold_evidence if str(turn_id).strip()}
    if not gold:
        return None
    missing = set(gold)
    for entry in context_turn_ids:  # a whole ranking can be hundreds of memories: stop once all are found
        for turn_id in (entry,) if isinstance(entry, str) else entry:
            missing.discard(turn_id if turn_id in missing else str(turn_id).strip())
        if not missing:
            break
    return (len(gold) - len(missing)) / len(gold)

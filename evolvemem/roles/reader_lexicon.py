"""Word lists and tokenisation for the offline reader: general English, nothing from any benchmark.

`stem` and `word_tokens` are the only ways the reader turns text into words, so the question,
the memories and the verifier all agree on what counts as the same word.
"""

from __future__ import annotations

import functools
import re
from typing import Protocol

from evolvemem.data.dates import WEEKDAY_NAMES

STOPWORDS = frozenset(
    """
a an the and or but if then than so as of at by for with about against between into through during
before after above below to from up down in out on off over under again further once here there all
any both each few more most other some such no nor not only own same too very can will just should
now i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her
hers herself it its itself they them their theirs themselves what which who whom whose this that these
those am is are was were be been being have has had having do does did doing would could might must
shall may i'm i've i'd i'll you're you've it's that's there's we're they're he's she's let's
don't didn't doesn't isn't wasn't aren't weren't can't couldn't won't wouldn't haven't hasn't
when where why how also get got gets getting
""".split()
)
QUESTION_FILLERS = frozenset(
    "kind type sort thing things something name specific exactly likely "
    "probably usually ever yet one ones many much long old often ago times".split()
)
FILLERS = frozenset(
    """yeah yes wow oh hey hi hello thanks thank really so just like totally actually
pretty super lol haha awesome amazing great cool nice definitely absolutely literally basically
honestly seriously glad okay ok um uh hmm sure lot lots much many always""".split()
)
GLUE = frozenset("and or of &".split())
TIME_WORDS = frozenset(
    """yesterday today tonight tomorrow recently lately last next ago weekend week
month year day night time first""".split()
)
CLAUSE_WORDS = frozenset(
    """because since while when whenever although though unless until that which
who where whether but so if""".split()
)
NEGATIONS = frozenset("not never no nope neither nor".split())
AUXILIARIES = (
    "is",
    "are",
    "was",
    "were",
    "do",
    "does",
    "did",
    "has",
    "have",
    "had",
    "can",
    "could",
    "would",
    "will",
    "should",
    "shall",
    "might",
    "am",
)
WEEKDAYS = frozenset(WEEKDAY_NAMES)
NUMBER_WORDS = frozenset(
    """one two three four five six seven eight nine ten eleven twelve thirteen
fourteen fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty hundred dozen
couple several""".split()
)
RELATIONS = frozenset(
    """mother mom mum father dad parents sister brother siblings husband wife partner
spouse friend friends kids children son daughter grandma grandmother grandpa grandfather aunt uncle
cousin boss coworker colleague teacher mentor neighbor neighbour boyfriend girlfriend family""".split()
)
DURATION = re.compile(
    r"\b(?:for\s+|since\s+)?(?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|"
    r"a few|a couple of|several|many)\s+(?:years?|months?|weeks?|days?|hours?|minutes?|decades?)(?:\s+ago)?\b"
    r"|\bsince\s+(?:(?:19|20)\d{2}|[A-Z][a-z]+(?:\s+(?:19|20)\d{2})?)",
    re.I,
)
FREQUENCY = re.compile(
    r"\b(?:once|twice|thrice|(?:\d+|two|three|four|five|six|seven|a few|several) times)\s+(?:a|an|per|every|each)\s+\w+"
    r"|\b(?:every|each)\s+(?:other\s+)?(?:day|week|weekend|month|year|morning|evening|night|\w+day)\b"
    r"|\b(?:daily|weekly|monthly|yearly|annually|nightly)\b",
    re.I,
)
# A caption answers questions about a picture, whatever word the question uses for it (stems).
CAPTION_WORDS = frozenset({"share", "photo", "photographi", "pictur", "pic", "imag", "snapshot"})
SECOND_PERSON = frozenset("you your yours yourself you're you've you'd you'll".split())
FIRST_PERSON = frozenset("i me my mine myself we us our ours i'm i've i'd i'll we're we've".split())
# Irregular verb forms mapped to their base so "made" matches "make" (the stemmer cannot).
_IRREGULAR = dict(
    pair.split(":")
    for pair in """made:make went:go gone:go took:take taken:take bought:buy
saw:see seen:see gave:give given:give got:get gotten:get ran:run came:come felt:feel found:find
left:leave met:meet read:read said:say told:tell thought:think taught:teach brought:bring built:build
began:begin begun:begin wrote:write written:write drew:draw drawn:draw sang:sing sung:sing
won:win lost:lose kept:keep held:hold heard:hear knew:know known:know spent:spend sent:send
became:become ate:eat eaten:eat drove:drive driven:drive flew:fly flown:fly swam:swim
chose:choose chosen:choose wore:wear worn:wear grew:grow grown:grow paid:pay sold:sell
caught:catch fell:fall fallen:fall forgot:forget forgotten:forget""".split()
)
# Words a question and a memory use for the same fact ("where does she live?" / "I moved to
# Lisbon"): each group's stems count as evidence for one another, at `ALIKE_WEIGHT` of the word's
# weight. General English only; a group joins here when a reader test shows it is needed.
_ALIKE_GROUPS = ("live lives living move moved moving relocate relocated settle settled reside resides",)
ALIKE_WEIGHT = 0.75
_WORD = re.compile(r"[A-Za-z0-9]+(?:['’][A-Za-z]+)?|[^\sA-Za-z0-9]")


class _Stemmer(Protocol):
    """What the reader uses of nltk's PorterStemmer (nltk ships no type information)."""

    def stem(self, word: str) -> str: ...


@functools.lru_cache(maxsize=1)
def _stemmer() -> _Stemmer:
    from nltk.stem.porter import PorterStemmer  # lazy: nltk import is slow-ish

    stemmer: _Stemmer = PorterStemmer()
    return stemmer


@functools.lru_cache(maxsize=131072)
def stem(word: str) -> str:
    """Porter stem of a lowercase word (irregular verbs mapped to their base first)."""
    word = word.replace("’", "'")
    if word.endswith("'s"):
        word = word[:-2]
    return _stemmer().stem(_IRREGULAR.get(word, word))


def word_tokens(text: str) -> list[tuple[str, str]]:
    """(surface, lowercase) tokens: words, numbers and single punctuation marks."""
    return [(w, w.lower().replace("’", "'")) for w in _WORD.findall(text)]


@functools.lru_cache(maxsize=1)
def _alike_table() -> dict[str, frozenset[str]]:
    table: dict[str, frozenset[str]] = {}
    for group in _ALIKE_GROUPS:
        stems = frozenset(stem(w) for w in group.split())
        for s in stems:
            table[s] = table.get(s, frozenset()) | (stems - {s})
    return table


def alike(word_stem: str) -> frozenset[str]:
    """Stems that say the same thing as `word_stem` in other words (empty for most words)."""
    return _alike_table().get(word_stem, frozenset())

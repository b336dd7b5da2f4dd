"""Rule-based annotations (persons, locations, entities, keywords, topics) for memories and queries.

No model: a regex tokenizer, a handful of word tables and a small gazetteer, fast enough to run
on every turn of a benchmark in well under a second. Both the memory side and the query side go
through `annotate`, and every value is lowercased, so the two sides match by plain equality.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Collection, Iterable

from evolvemem.data import dates

# --------------------------------------------------------------------------------------- tables


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


def _phrases(text: str) -> frozenset[str]:
    return frozenset(p.strip().lower() for p in text.split(",") if p.strip())


STOPWORDS = _words(
    """a about above after again against all almost also am an and any are aren't as at be because been
    before being below between both but by can can't cannot could couldn't did didn't do does doesn't doing
    don't down during each either else even ever every few for from further get gets getting got gonna had
    hadn't has hasn't have haven't having he he'd he'll he's her here here's hers herself him himself his how
    how's i i'd i'll i'm i've if in into is isn't it it's its itself just let let's lot lots may me might more
    most much must mustn't my myself no nor not now of off oh ok okay on once one only or other ought our ours
    ourselves out over own really same shall shan't she she'd she'll she's should shouldn't so some still such
    sure than that that's the their theirs them themselves then there there's these they they'd they'll they're
    they've thing things this those though through to too under until up upon us very via was wasn't we we'd
    we'll we're we've were weren't what what's when when's where where's which while who who's whom whose why
    why's will with won't would wouldn't yeah yes yet you you'd you'll you're you've your yours yourself
    yourselves hey hi hello wow thanks thank lol haha hmm um uh yep nope gotta wanna kinda like well
    definitely totally absolutely actually pretty quite great good nice cool awesome amazing"""
)

MONTHS = frozenset(dates.MONTHS)  # names and abbreviations
WEEKDAYS = frozenset(dates.WEEKDAY_NAMES) | _words("mon tue tues wed thu thur thurs fri sat")

# Capitalised words that are never person names: interjections, family titles, languages and
# nationalities, holidays. (Languages/holidays still count as entities.)
_NOT_A_NAME = _words(
    """i mom dad mum mommy daddy grandma grandpa god lord sir madam mr mrs ms dr miss aunt uncle bro dude
    omg btw lmao ugh yay aww congrats congratulations cheers sorry please sounds same good great thanks
    yesterday today tomorrow tonight last next this that these those anyway anyways also totally"""
)
DEMONYMS_AND_LANGUAGES = _words(
    """english spanish french german italian portuguese dutch swedish norwegian danish finnish polish russian
    ukrainian greek turkish arabic hebrew persian hindi urdu bengali chinese mandarin cantonese japanese
    korean thai vietnamese indonesian filipino tagalog swahili american canadian mexican brazilian
    argentinian british irish scottish welsh australian african asian european latin latino latina
    christian muslim jewish buddhist hindu catholic"""
)
HOLIDAYS = _words(
    """christmas easter halloween thanksgiving hanukkah diwali ramadan eid passover kwanzaa
    valentine's valentines"""
)
# Head nouns that turn a capitalised phrase into a place or an organisation, not a person.
_PLACE_HEADS = _words(
    """street st avenue ave road rd park lake river mountain mountains mount beach bay island islands valley
    canyon falls forest desert coast county city town village square bridge airport station harbor harbour
    museum gallery library zoo garden gardens center centre hall stadium arena theater theatre cafe restaurant
    hotel resort mall market church temple mosque cathedral hospital clinic school college university academy
    institute campus"""
)
_ORG_HEADS = _words(
    """club team band company corp inc ltd group society association foundation festival parade conference
    summit show series league championship cup tournament award awards prize day week month program
    programme project camp workshop class course game games"""
)

# General world geography (not tied to any benchmark). Multiword names are matched as n-grams.
GAZETTEER = _phrases(
    """afghanistan, albania, algeria, argentina, armenia, australia, austria, azerbaijan, bangladesh, belarus,
    belgium, bolivia, bosnia, brazil, bulgaria, cambodia, cameroon, canada, chile, china, colombia, costa rica,
    croatia, cuba, cyprus, czech republic, czechia, denmark, dominican republic, ecuador, egypt, el salvador,
    england, estonia, ethiopia, fiji, finland, france, georgia, germany, ghana, greece, guatemala, haiti,
    honduras, hungary, iceland, india, indonesia, iran, iraq, ireland, israel, italy, jamaica, japan, jordan,
    kazakhstan, kenya, korea, south korea, north korea, kuwait, laos, latvia, lebanon, libya, lithuania,
    luxembourg, madagascar, malaysia, maldives, mali, malta, mexico, moldova, monaco, mongolia, montenegro,
    morocco, mozambique, myanmar, namibia, nepal, netherlands, holland, new zealand, nicaragua, niger, nigeria,
    norway, oman, pakistan, panama, paraguay, peru, philippines, poland, portugal, qatar, romania, russia,
    rwanda, saudi arabia, scotland, senegal, serbia, singapore, slovakia, slovenia, somalia, south africa,
    spain, sri lanka, sudan, sweden, switzerland, syria, taiwan, tanzania, thailand, tunisia, turkey, uganda,
    ukraine, united arab emirates, uae, united kingdom, uk, united states, usa, us, america, uruguay,
    uzbekistan, venezuela, vietnam, wales, yemen, zambia, zimbabwe,
    africa, antarctica, asia, europe, north america, south america, latin america, oceania, caribbean,
    middle east, scandinavia, balkans, mediterranean, siberia, patagonia, sahara, himalayas, alps, andes,
    rockies, amazon, pacific, atlantic, midwest, new england,
    alabama, alaska, arizona, arkansas, california, colorado, connecticut, delaware, florida, hawaii, idaho,
    illinois, indiana, iowa, kansas, kentucky, louisiana, maine, maryland, massachusetts, michigan,
    minnesota, mississippi, missouri, montana, nebraska, nevada, new hampshire, new jersey, new mexico,
    new york, north carolina, north dakota, ohio, oklahoma, oregon, pennsylvania, rhode island,
    south carolina, south dakota, tennessee, texas, utah, vermont, virginia, washington, west virginia,
    wisconsin, wyoming, ontario, quebec, british columbia, alberta, bavaria, catalonia, tuscany, provence,
    sicily, bali, tasmania, queensland, andalusia,
    amsterdam, athens, atlanta, auckland, austin, baltimore, bangkok, barcelona, beijing, berlin, bogota,
    boston, brussels, budapest, buenos aires, cairo, cape town, chicago, copenhagen, dallas, delhi,
    new delhi, denver, detroit, dubai, dublin, edinburgh, florence, frankfurt, geneva, glasgow, hamburg,
    havana, helsinki, hong kong, honolulu, houston, istanbul, jakarta, jerusalem, johannesburg, kyoto,
    kyiv, kiev, la, lagos, las vegas, lima, lisbon, london, los angeles, lyon, madrid, manchester, manila,
    marseille, melbourne, miami, milan, minneapolis, montreal, moscow, mumbai, munich, nairobi, naples,
    nashville, new orleans, nyc, orlando, osaka, oslo, ottawa, paris, philadelphia, phoenix, portland,
    prague, rio, rio de janeiro, rome, san antonio, san diego, san francisco, santiago, sao paulo,
    seattle, seoul, shanghai, singapore, stockholm, sydney, taipei, tel aviv, tokyo, toronto, vancouver,
    venice, vienna, warsaw, washington dc, zurich, reykjavik, marrakech, kathmandu, hanoi, krakow, porto,
    seville, valencia, salzburg, santorini, cancun, tijuana, quito, cusco, kingston"""
)
# first word of a gazetteer place -> the word counts of places starting with it, longest first
_GAZETTEER_BY_FIRST_WORD: dict[str, tuple[int, ...]] = {}
for _place in GAZETTEER:
    _first, _size = _place.split()[0], len(_place.split())
    _GAZETTEER_BY_FIRST_WORD[_first] = tuple(sorted({*_GAZETTEER_BY_FIRST_WORD.get(_first, ()), _size}, reverse=True))
# "us" and "la" are ordinary words in lowercase text; they count as places only when capitalised.
_GAZETTEER_CASE_SENSITIVE = frozenset({"us", "la"})

_LOCATION_PREPOSITIONS = _words("at in from near visited visiting visit around across")
# "to" marks a place only after a verb of motion ("moved to Woodhaven", not "said to Tomasz").
_MOTION_WORDS = _words(
    "go goes going gone went move moves moving moved travel traveled travelled traveling "
    "travelling trip trips fly flew flying drive drove driving road way back return returned "
    "returning relocate relocated headed heading"
)

UNITS = (
    r"years?|yrs?|months?|weeks?|days?|hours?|hrs?|minutes?|mins?|seconds?|km|kilometers?|kilometres?|miles?|"
    r"mi|meters?|metres?|m|feet|ft|inches|in|pounds?|lbs?|kg|kilograms?|grams?|g|liters?|litres?|l|"
    r"percent|%|dollars?|euros?|bucks|k|times|people|kids|children|pages|books|songs|paintings|steps|laps"
)

# topic -> trigger words (their plurals match too, see `_plural_forms`).
TOPIC_TRIGGERS: dict[str, frozenset[str]] = {
    "family": _words(
        "family mother father mom dad mum parent parents son daughter kid kids child children "
        "brother sister sibling grandma grandpa grandmother grandfather aunt uncle cousin niece "
        "nephew husband wife baby adopt adoption adopted"
    ),
    "relationships": _words(
        "friend friendship boyfriend girlfriend partner dating date marriage married "
        "wedding divorce breakup crush love relationship engaged engagement fiance fiancee"
    ),
    "work": _words(
        "work job career boss colleague coworker office promotion salary hired interview "
        "business startup company manager client meeting project deadline shift employer"
    ),
    "education": _words(
        "school college university class course degree study studying exam student teacher "
        "professor lecture homework graduate graduation thesis research scholarship"
    ),
    "health": _words(
        "health doctor hospital sick ill illness injury surgery therapy therapist medicine "
        "diet workout mental anxiety depression stress recovery diagnosis pain sleep clinic"
    ),
    "travel": _words(
        "travel trip vacation holiday flight fly flew airport hotel abroad visit visited tour "
        "journey road camping camp hike hiking beach passport backpacking cruise"
    ),
    "hobby": _words(
        "hobby hobbies craft crafts knitting pottery gardening garden reading book novel "
        "photography collecting puzzle puzzles chess baking woodworking sewing fishing"
    ),
    "pets": _words("pet pets dog dogs puppy cat cats kitten bird fish hamster rabbit horse vet"),
    "food": _words(
        "food cook cooking recipe bake baking dinner lunch breakfast restaurant meal cake pizza "
        "pasta coffee tea vegan vegetarian chef dish cuisine snack"
    ),
    "music": _words(
        "music song songs sing singing singer band concert guitar piano violin drum drums album "
        "musician playlist choir melody"
    ),
    "sports": _words(
        "sport sports football soccer basketball baseball tennis golf swim swimming run running "
        "marathon race cycling bike yoga gym match team coach game surfing skiing climbing"
    ),
    "art": _words(
        "art artist paint painting paintings drawing draw sketch sculpture museum gallery "
        "exhibition poetry poem writing write novel film movie theater theatre dance dancing"
    ),
    "finance": _words(
        "money finance budget savings save invest investment stock stocks loan mortgage rent "
        "debt bank bill bills income tax taxes price expensive cheap afford"
    ),
    "events": _words(
        "party birthday celebration celebrate festival parade conference event events ceremony "
        "anniversary holiday christmas thanksgiving halloween easter reunion fundraiser"
    ),
    "community": _words(
        "volunteer volunteering charity community activism activist protest support group "
        "nonprofit church mentor mentoring donation donate campaign"
    ),
    "home": _words(
        "home house apartment move moved moving neighborhood neighbourhood renovation roommate "
        "furniture kitchen garden yard"
    ),
    "technology": _words(
        "computer phone app software code coding programming website internet online game gaming video laptop ai robot"
    ),
    "nature": _words(
        "nature outdoors forest mountain mountains lake river ocean sea sunset hike hiking park "
        "camping trees flowers wildlife"
    ),
}

# ---------------------------------------------------------------------------------------- regexes

_WORD_RE = re.compile(r"[a-z0-9]+(?:'(?!s\b)[a-z]+)*")  # a possessive "'s" is left out
_CAP_TOKEN_RE = re.compile(r"[A-Z][A-Za-z'’\-]*")
_PREV_WORDS_RE = re.compile(r"(?:([A-Za-z]+)[^A-Za-z]+)?([A-Za-z]+)[^A-Za-z]*$")
_DIGIT_RE = re.compile(r"\d")
_WORD_CONTINUES = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_'’-")
_SENTENCE_BREAK = frozenset('.!?:;\n"“”([]')
_QUOTED_RE = re.compile(r"[\"“]([A-Z0-9][^\"“”]{1,59}?)[.,!?]?[\"”]")
_NUMBER_UNIT_RE = re.compile(rf"\b(\d+(?:[.,]\d+)?)\s?({UNITS})\b", re.I)
_YEAR_RE = re.compile(r"\b(19\d\d|20\d\d)s?\b")
_MONTH_NAMES = "january|february|march|april|may|june|july|august|september|october|november|december"
_DATE_RE = re.compile(
    rf"\b(\d{{1,2}}\s+(?:{_MONTH_NAMES})(?:,?\s+\d{{4}})?|(?:{_MONTH_NAMES})\s+\d{{1,2}}(?:st|nd|rd|th)?"
    rf"(?:,?\s+\d{{4}})?)\b",
    re.I,
)
_SPACES_RE = re.compile(r"\s{2,}")


def _plural_forms(word: str) -> tuple[str, ...]:
    if word.endswith("y") and len(word) > 2 and word[-2] not in "aeiou":
        return word, word[:-1] + "ies"
    return word, word + "s", word + "es"


# word (or its plural) -> topics it triggers; one set intersection finds every candidate
_TOPICS_BY_WORD: dict[str, frozenset[str]] = {}
for _topic, _triggers in TOPIC_TRIGGERS.items():
    for _trigger in _triggers:
        for _form in _plural_forms(_trigger):
            _TOPICS_BY_WORD[_form] = _TOPICS_BY_WORD.get(_form, frozenset()) | {_topic}
_TOPIC_WORDS = frozenset(_TOPICS_BY_WORD)

_GAZETTEER_FIRST_WORDS = frozenset(_GAZETTEER_BY_FIRST_WORD)


# ------------------------------------------------------------------------------------ public API


@dataclass(frozen=True)
class Annotations:
    """Lowercased annotation values of one text (a memory or a query)."""

    persons: tuple[str, ...] = ()
    locations: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()
    topics: tuple[str, ...] = ()


def tokenize(text: str) -> list[str]:
    """Lowercase word tokens with stopwords and possessive endings removed (keywords, Jaccard)."""
    return [
        w
        for w in _WORD_RE.findall(text.lower().replace("’", "'"))
        if w not in STOPWORDS and (len(w) > 1 or w.isdigit())
    ]


def annotate(text: str, known_persons: Collection[str] = (), max_keywords: int = 8) -> Annotations:
    """Persons, locations, entities, keywords and topics of `text`, each lowercased and de-duplicated.

    `known_persons` (e.g. the conversation's speakers) are found case-insensitively anywhere,
    including sentence-initially where an unknown capitalised word is ignored as ordinary prose."""
    known = {p.lower() for p in known_persons if p}
    lowered = text.lower().replace("’", "'")
    all_words = _WORD_RE.findall(lowered)
    words = [w for w in all_words if w not in STOPWORDS and (len(w) > 1 or w.isdigit())]

    persons: dict[str, None] = dict.fromkeys(_known_persons_in(lowered, known))
    locations: dict[str, None] = {}
    entities: dict[str, None] = {}
    if _GAZETTEER_FIRST_WORDS.intersection(all_words):
        for place in _gazetteer_places(text, all_words):
            if place not in known:
                locations[place] = None

    for phrase, after_preposition, acronym in _capitalised_phrases(text):
        if phrase in known or phrase in persons:
            continue
        parts = phrase.split()
        if acronym:
            entities[phrase] = None
        elif after_preposition and not _ORG_HEADS.intersection(parts):
            locations[phrase] = None
        elif parts[-1] in _PLACE_HEADS:
            locations[phrase] = None
        elif len(parts) > 2 or _ORG_HEADS.intersection(parts):
            entities[phrase] = None
        elif DEMONYMS_AND_LANGUAGES.intersection(parts) or HOLIDAYS.intersection(parts):
            entities[phrase] = None
        elif phrase not in locations:
            persons[phrase] = None
            if len(parts) > 1:
                entities[phrase] = None
    for phrase in _special_entities(text):
        entities[phrase] = None
    for place in locations:
        if place not in known:
            persons.pop(place, None)

    return Annotations(
        persons=tuple(persons),
        locations=tuple(locations),
        entities=tuple(e for e in entities if e not in locations),
        keywords=_top_keywords(words, persons.keys() | known, max_keywords),
        topics=topics_of(words),
    )


def strip_persons(text: str, persons: Collection[str]) -> str:
    """`text` without the given person names (full names, their parts and possessives like "Ana's").

    Entity swap uses it to search for what a question asks about without the name it hangs on."""
    variants: set[str] = set()
    for person in persons:
        person = person.strip()
        if not person:
            continue
        variants.add(person)
        variants.update(part for part in person.split() if len(part) >= 3)
    if not variants:
        return text
    alternatives = "|".join(re.escape(v) for v in sorted(variants, key=len, reverse=True))
    pattern = re.compile(rf"\b(?:{alternatives})(?:['’]s?)?(?![\w'’])", re.I)
    return _SPACES_RE.sub(" ", pattern.sub("", text)).strip()


def topics_of(words: Iterable[str]) -> tuple[str, ...]:
    """Topics whose trigger words (or their plurals) occur among tokenized `words`, in table order."""
    hits = _TOPIC_WORDS.intersection(words)
    if not hits:
        return ()
    found: set[str] = set().union(*(_TOPICS_BY_WORD[w] for w in hits))
    return tuple(topic for topic in TOPIC_TRIGGERS if topic in found)


# ---------------------------------------------------------------------------------------- helpers


def _known_persons_in(lowered: str, known: set[str]) -> list[str]:
    """Known names occurring as whole words in the lowercased text."""
    found = []
    for name in known:
        idx = lowered.find(name)
        while idx >= 0:
            end = idx + len(name)
            if (idx == 0 or not lowered[idx - 1].isalnum()) and (end == len(lowered) or not lowered[end].isalnum()):
                found.append(name)
                break
            idx = lowered.find(name, end)
    return found


def _clean(token: str) -> str:
    """Lowercase without a possessive ending ("Ana's" -> "ana")."""
    low = token.lower()
    if low.endswith(("'s", "’s")):
        return low[:-2]
    return low.rstrip("'’")


def _is_name_word(low: str) -> bool:
    return not (low in STOPWORDS or low in MONTHS or low in WEEKDAYS or low in _NOT_A_NAME or len(low) < 2)


def _sentence_initial(text: str, start: int) -> bool:
    j = start - 1
    while j >= 0 and text[j] == " ":
        j -= 1
    return j < 0 or text[j] in _SENTENCE_BREAK


def _capitalised_phrases(text: str) -> list[tuple[str, bool, bool]]:
    """Runs of adjacent capitalised words worth annotating, as (phrase, after a place preposition,
    is an acronym).

    A sentence-initial word only starts a run when the same word also appears capitalised
    mid-sentence or is possessive (so "Yesterday I met Tomasz" yields "tomasz", not "yesterday",
    and "Ana's bike" yields "ana"). Quoted titles are left to `_special_entities`."""
    caps = [
        (m.group().rstrip("-"), m.start(), m.end())
        for m in _CAP_TOKEN_RE.finditer(text)
        if m.start() == 0 or text[m.start() - 1] not in _WORD_CONTINUES
    ]
    if not caps:
        return []
    if '"' in text or "“" in text:
        spans = [m.span() for m in _QUOTED_RE.finditer(text)]
        caps = [c for c in caps if not any(a <= c[1] < b for a, b in spans)]
    flagged = [(tok, _clean(tok), _sentence_initial(text, start), start, end) for tok, start, end in caps]
    mid_caps = {low for _, low, initial, _, _ in flagged if not initial}

    out: list[tuple[str, bool, bool]] = []
    i, n = 0, len(flagged)
    while i < n:
        tok, low, initial, start, end = flagged[i]
        possessive = low != tok.lower()
        if (
            not _is_name_word(low)
            or (initial and low not in mid_caps and not possessive)
            or (tok.isupper() and len(tok) > 5)
        ):
            i += 1
            continue
        run = [low]
        j = i + 1
        while j < n and not possessive:
            ntok, nlow, ninitial, nstart, _ = flagged[j]
            if ninitial or nstart - flagged[j - 1][4] != 1 or text[nstart - 1] != " " or not _is_name_word(nlow):
                break
            run.append(nlow)
            possessive = nlow != ntok.lower()
            j += 1
        if tok.isupper() and len(tok) > 1 and len(run) == 1:
            out.append((low, False, True))  # an acronym: an entity, never a person
        else:
            out.append((" ".join(run), not possessive and _after_place_preposition(text, start), False))
        i = j
    return out


def _after_place_preposition(text: str, start: int) -> bool:
    prev = _PREV_WORDS_RE.search(text, max(0, start - 30), start)
    if not prev:
        return False
    word = prev.group(2).lower()
    if word == "to":
        return (prev.group(1) or "").lower() in _MOTION_WORDS
    return word in _LOCATION_PREPOSITIONS


def _gazetteer_places(text: str, words: list[str]) -> list[str]:
    """Gazetteer places in the word sequence, longest match first.

    Ambiguous short names ("us", "la") count only when written in capitals."""
    found = []
    i, n = 0, len(words)
    while i < n:
        sizes = _GAZETTEER_BY_FIRST_WORD.get(words[i])
        if sizes:
            for size in sizes:
                phrase = " ".join(words[i : i + size]) if size > 1 else words[i]
                if phrase in GAZETTEER:
                    if phrase in _GAZETTEER_CASE_SENSITIVE and not re.search(rf"\b{phrase.upper()}\b", text):
                        continue
                    found.append(phrase)
                    i += size - 1
                    break
        i += 1
    return found


def _special_entities(text: str) -> list[str]:
    """Quoted titles, numbers with units, years and calendar dates."""
    out = []
    if '"' in text or "“" in text:
        out = [q for q in (m.group(1).strip().lower() for m in _QUOTED_RE.finditer(text)) if q not in STOPWORDS]
    if not _DIGIT_RE.search(text):
        return out
    out += [f"{m.group(1)} {m.group(2).lower()}" for m in _NUMBER_UNIT_RE.finditer(text)]
    out += [m.group(1) for m in _YEAR_RE.finditer(text)]
    out += [_SPACES_RE.sub(" ", m.group(1).lower().replace(",", "")) for m in _DATE_RE.finditer(text)]
    return out


def _top_keywords(words: list[str], exclude: Collection[str], limit: int) -> tuple[str, ...]:
    """Most frequent content words (ties: longer first, then first seen), names and numbers excluded."""
    counts: dict[str, int] = {}
    for w in words:
        if len(w) > 2 and w not in exclude and not w.isdigit():
            counts[w] = counts.get(w, 0) + 1
    by_length = sorted(counts, key=len, reverse=True)  # stable sorts: first-seen order breaks ties
    return tuple(sorted(by_length, key=counts.__getitem__, reverse=True)[:limit])

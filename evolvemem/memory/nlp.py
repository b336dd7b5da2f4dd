"""Rule-based annotations (persons, locations, entities, keywords, topics) for memories and queries.

No model: a regex tokenizer, a handful of word tables and a small gazetteer, fast enough to run
on every turn of a benchmark in well under a second. Both the memory side and the query side go
through `annotate`, and every value is lowercased, so the two sides match by plain equality.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Collection, Iterable

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
    definitely totally absolutely actually pretty quite great good nice cool awesome amazing""")

MONTHS = _words(
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec")
WEEKDAYS = _words("monday tuesday wednesday thursday friday saturday sunday")

# Capitalised words that are never person names: interjections, family titles, languages and
# nationalities, holidays. (Languages/holidays still count as entities.)
_NOT_A_NAME = _words(
    """i mom dad mum mommy daddy grandma grandpa god lord sir madam mr mrs ms dr miss aunt uncle bro dude
    omg btw lmao ugh yay aww congrats congratulations cheers sorry please sounds same good great thanks
    yesterday today tomorrow tonight last next this that these those anyway anyways also totally""")
DEMONYMS_AND_LANGUAGES = _words(
    """english spanish french german italian portuguese dutch swedish norwegian danish finnish polish russian
    ukrainian greek turkish arabic hebrew persian hindi urdu bengali chinese mandarin cantonese japanese
    korean thai vietnamese indonesian filipino tagalog swahili american canadian mexican brazilian
    argentinian british irish scottish welsh australian african asian european latin latino latina
    christian muslim jewish buddhist hindu catholic""")
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
    institute campus""")
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
_GAZETTEER_BY_FIRST_WORD: dict[str, tuple[int, ...]] = {}
for _place in GAZETTEER:
    _first, _size = _place.split()[0], len(_place.split())
    _GAZETTEER_BY_FIRST_WORD[_first] = tuple(sorted({*_GAZETTEER_BY_FIRST_WORD.get(_first, ()), _size}, reverse=True))
# "us" and "la" are ordinary words in lowercase text; they count as places only when capitalised.
_GAZETTEER_CASE_SENSITIVE = frozenset({"us", "la"})

_LOCATION_PREPOSITIONS = _words("at in to from near visited visiting around across")

UNITS = (
    r"years?|yrs?|months?|weeks?|days?|hours?|hrs?|minutes?|mins?|seconds?|km|kilometers?|kilometres?|miles?|"
    r"mi|meters?|metres?|m|feet|ft|inches|in|pounds?|lbs?|kg|kilograms?|grams?|g|liters?|litres?|l|"
    r"percent|%|dollars?|euros?|bucks|k|times|people|kids|children|pages|books|songs|paintings|steps|laps"
)

# topic -> trigger words (compared after `_stem`, so plurals match).
TOPIC_TRIGGERS: dict[str, frozenset[str]] = {
    "family": _words("family mother father mom dad mum parent parents son daughter kid kids child children "
                     "brother sister sibling grandma grandpa grandmother grandfather aunt uncle cousin niece "
                     "nephew husband wife baby adopt adoption adopted"),
    "relationships": _words("friend friendship boyfriend girlfriend partner dating date marriage married "
                            "wedding divorce breakup crush love relationship engaged engagement fiance fiancee"),
    "work": _words("work job career boss colleague coworker office promotion salary hired interview "
                   "business startup company manager client meeting project deadline shift employer"),
    "education": _words("school college university class course degree study studying exam student teacher "
                        "professor lecture homework graduate graduation thesis research scholarship"),
    "health": _words("health doctor hospital sick ill illness injury surgery therapy therapist medicine "
                     "diet workout mental anxiety depression stress recovery diagnosis pain sleep clinic"),
    "travel": _words("travel trip vacation holiday flight fly flew airport hotel abroad visit visited tour "
                     "journey road camping camp hike hiking beach passport backpacking cruise"),
    "hobby": _words("hobby hobbies craft crafts knitting pottery gardening garden reading book novel "
                    "photography collecting puzzle puzzles chess baking woodworking sewing fishing"),
    "pets": _words("pet pets dog dogs puppy cat cats kitten bird fish hamster rabbit horse vet"),
    "food": _words("food cook cooking recipe bake baking dinner lunch breakfast restaurant meal cake pizza "
                   "pasta coffee tea vegan vegetarian chef dish cuisine snack"),
    "music": _words("music song songs sing singing singer band concert guitar piano violin drum drums album "
                    "musician playlist choir melody"),
    "sports": _words("sport sports football soccer basketball baseball tennis golf swim swimming run running "
                     "marathon race cycling bike yoga gym match team coach game surfing skiing climbing"),
    "art": _words("art artist paint painting paintings drawing draw sketch sculpture museum gallery "
                  "exhibition poetry poem writing write novel film movie theater theatre dance dancing"),
    "finance": _words("money finance budget savings save invest investment stock stocks loan mortgage rent "
                      "debt bank bill bills income tax taxes price expensive cheap afford"),
    "events": _words("party birthday celebration celebrate festival parade conference event events ceremony "
                     "anniversary holiday christmas thanksgiving halloween easter reunion fundraiser"),
    "community": _words("volunteer volunteering charity community activism activist protest support group "
                        "nonprofit church mentor mentoring donation donate campaign"),
    "home": _words("home house apartment move moved moving neighborhood neighbourhood renovation roommate "
                   "furniture kitchen garden yard"),
    "technology": _words("computer phone app software code coding programming website internet online game "
                         "gaming video laptop ai robot"),
    "nature": _words("nature outdoors forest mountain mountains lake river ocean sea sunset hike hiking park "
                     "camping trees flowers wildlife"),
}

# ---------------------------------------------------------------------------------------- regexes

_TOKEN_RE = re.compile(r"[A-Za-z][A-Za-z'’\-]*[A-Za-z]|[A-Za-z]|\d+(?:[.,:]\d+)*")
_WORD_RE = re.compile(r"[a-z0-9]+(?:'[a-z]+)*")
_DIGIT_RE = re.compile(r"\d")
_SENTENCE_BREAK = set(".!?:;\n\"“”([]")
_QUOTED_RE = re.compile(r"[\"“]([^\"“”]{2,60})[\"”]")
_NUMBER_UNIT_RE = re.compile(rf"\b(\d+(?:[.,]\d+)?)\s?({UNITS})\b", re.I)
_YEAR_RE = re.compile(r"\b(19\d\d|20\d\d)s?\b")
_MONTH_NAMES = "january|february|march|april|may|june|july|august|september|october|november|december"
_DATE_RE = re.compile(
    rf"\b(\d{{1,2}}\s+(?:{_MONTH_NAMES})(?:,?\s+\d{{4}})?|(?:{_MONTH_NAMES})\s+\d{{1,2}}(?:st|nd|rd|th)?"
    rf"(?:,?\s+\d{{4}})?)\b",
    re.I,
)
_SPACES_RE = re.compile(r"\s{2,}")


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
    out = []
    for word in _WORD_RE.findall(text.lower().replace("’", "'")):
        if word.endswith("'s"):
            word = word[:-2]
        if word not in STOPWORDS and (len(word) > 1 or word.isdigit()):
            out.append(word)
    return out


def annotate(text: str, known_persons: Collection[str] = (), max_keywords: int = 8) -> Annotations:
    """Persons, locations, entities, keywords and topics of `text`, each lowercased and de-duplicated.

    `known_persons` (e.g. the conversation's speakers) are found case-insensitively anywhere,
    including sentence-initially where an unknown capitalised word is ignored as ordinary prose."""
    known = {p.lower() for p in known_persons if p}
    tokens = _tokens_with_flags(text)
    words = tokenize(text)

    persons: dict[str, None] = {}
    locations: dict[str, None] = {}
    entities: dict[str, None] = {}
    for name in _known_persons_in(text, known):
        persons[name] = None
    for place in _gazetteer_places(tokens):
        if place not in known:
            locations[place] = None

    mid_caps = {_clean(t[0]) for t in tokens if t[1] and not t[2]}
    for phrase, after_preposition in _capitalised_phrases(_outside_quotes(text, tokens), mid_caps):
        if phrase in known or phrase in persons:
            continue
        words_in = phrase.split()
        if after_preposition and not (set(words_in) & _ORG_HEADS):
            locations[phrase] = None
        elif words_in[-1] in _PLACE_HEADS:
            locations[phrase] = None
        elif set(words_in) & _ORG_HEADS or len(words_in) > 2:
            entities[phrase] = None
        elif any(w in DEMONYMS_AND_LANGUAGES or w in HOLIDAYS for w in words_in):
            entities[phrase] = None
        elif phrase not in locations:
            persons[phrase] = None
            if len(words_in) > 1:
                entities[phrase] = None
    for phrase in _special_entities(text):
        entities[phrase] = None
    for loc in locations:
        if loc not in known:
            persons.pop(loc, None)

    return Annotations(
        persons=tuple(persons),
        locations=tuple(locations),
        entities=tuple(e for e in entities if e not in locations),
        keywords=_top_keywords(words, set(persons) | known, max_keywords),
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
    """Topics whose trigger words occur among `words` (already tokenized), in table order."""
    hit: set[str] = set()
    for word in set(words):
        hit.update(_TOPICS_BY_WORD.get(word, ()))
        hit.update(_TOPICS_BY_WORD.get(_stem(word), ()))
    return tuple(topic for topic in TOPIC_TRIGGERS if topic in hit)


# ---------------------------------------------------------------------------------------- helpers


def _stem(word: str) -> str:
    """A tiny plural stripper so "dogs" triggers "dog" and "parties" triggers "party"."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


_TOPICS_BY_WORD: dict[str, set[str]] = {}
for _topic, _triggers in TOPIC_TRIGGERS.items():
    for _word in _triggers:
        _TOPICS_BY_WORD.setdefault(_word, set()).add(_topic)
        _TOPICS_BY_WORD.setdefault(_stem(_word), set()).add(_topic)


def _tokens_with_flags(text: str) -> list[tuple[str, bool, bool, int, int]]:
    """(token, is_capitalised, is_sentence_initial, start, end) for each token of `text`.

    Only capitalised tokens need the sentence-initial test, so lowercase ones skip it."""
    out = []
    append = out.append
    for m in _TOKEN_RE.finditer(text):
        tok = m.group()
        start = m.start()
        if tok[0].isupper():
            j = start - 1
            while j >= 0 and text[j] == " ":
                j -= 1
            append((tok, True, j < 0 or text[j] in _SENTENCE_BREAK, start, m.end()))
        else:
            append((tok, False, False, start, m.end()))
    return out


def _outside_quotes(text: str, tokens: list[tuple[str, bool, bool, int, int]]) -> list[tuple[str, bool, bool, int, int]]:
    """Tokens not inside a quoted title: a capitalised title is an entity, not a run of names."""
    if '"' not in text and "“" not in text:
        return tokens
    spans = [m.span() for m in _QUOTED_RE.finditer(text)]
    return [t for t in tokens if not any(a <= t[3] < b for a, b in spans)]


def _known_persons_in(text: str, known: set[str]) -> list[str]:
    if not known:
        return []
    lowered = text.lower()
    found = []
    for name in known:
        idx = lowered.find(name)
        while idx >= 0:
            end = idx + len(name)
            before_ok = idx == 0 or not lowered[idx - 1].isalnum()
            after_ok = end == len(lowered) or not lowered[end].isalnum()
            if before_ok and after_ok:
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
    return not (
        low in STOPWORDS or low in MONTHS or low in WEEKDAYS or low in _NOT_A_NAME
        or low.isdigit() or len(low) < 2
    )


def _capitalised_phrases(tokens: list[tuple[str, bool, bool, int, int]], mid_caps: set[str]) -> list[tuple[str, bool]]:
    """Runs of adjacent capitalised tokens worth annotating, with whether a location preposition precedes.

    A sentence-initial word only starts a run when the same word also appears capitalised
    mid-sentence or is possessive (so "Yesterday I met Tomasz" yields "tomasz", not "yesterday",
    and "Ana's bike" yields "ana")."""
    out: list[tuple[str, bool]] = []
    i, n = 0, len(tokens)
    while i < n:
        tok, cap, initial, _, _ = tokens[i]
        low = _clean(tok)
        possessive = tok.endswith(("'s", "’s"))
        if not cap or not _is_name_word(low) or (initial and low not in mid_caps and not possessive) or (
            tok.isupper() and len(tok) > 5
        ):
            i += 1
            continue
        run = [low]
        j = i + 1
        while j < n:
            nxt, ncap, ninitial, nstart, _ = tokens[j]
            gap_ok = nstart - tokens[j - 1][4] <= 1 and not tokens[j - 1][0].endswith(("'s", "’s"))
            nlow = _clean(nxt)
            if not (ncap and not ninitial and gap_ok and _is_name_word(nlow)):
                break
            run.append(nlow)
            j += 1
        prev = tokens[i - 1][0].lower() if i > 0 else ""
        out.append((" ".join(run), prev in _LOCATION_PREPOSITIONS))
        i = j
    return out


def _gazetteer_places(tokens: list[tuple[str, bool, bool, int, int]]) -> list[str]:
    """Gazetteer places, longest match first; only positions whose word can start a place are tried."""
    lows = [_clean(t[0]) for t in tokens]
    found = []
    i, n = 0, len(lows)
    while i < n:
        sizes = _GAZETTEER_BY_FIRST_WORD.get(lows[i])
        if sizes:
            for size in sizes:
                phrase = " ".join(lows[i:i + size])
                if phrase in GAZETTEER and (phrase not in _GAZETTEER_CASE_SENSITIVE or tokens[i][0].isupper()):
                    found.append(phrase)
                    i += size - 1
                    break
        i += 1
    return found


def _special_entities(text: str) -> list[str]:
    """Quoted titles, numbers with units, years and calendar dates."""
    out = [m.group(1).strip().lower() for m in _QUOTED_RE.finditer(text)] if '"' in text or "“" in text else []
    if not _DIGIT_RE.search(text):
        return out
    out += [f"{m.group(1)} {m.group(2).lower()}" for m in _NUMBER_UNIT_RE.finditer(text)]
    out += [m.group(1) for m in _YEAR_RE.finditer(text)]
    out += [_SPACES_RE.sub(" ", m.group(1).lower().replace(",", "")) for m in _DATE_RE.finditer(text)]
    return out


def _top_keywords(words: list[str], exclude: set[str], limit: int) -> tuple[str, ...]:
    """Most frequent content words (ties: longer first, then first seen), names excluded."""
    counts = Counter(w for w in words if w not in exclude and not w.isdigit() and len(w) > 2)
    first_seen = {w: i for i, w in reversed(list(enumerate(words)))}
    ranked = sorted(counts, key=lambda w: (-counts[w], -len(w), first_seen[w]))
    return tuple(ranked[:limit])

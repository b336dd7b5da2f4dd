"""A seeded synthetic benchmark: gold answers and evidence are known by construction.

Each conversation is between two invented people over several dated sessions. The script
plants facts (job, city, pet, favourite food, an instrument), changes over time (a move, a job
change), dated events written with absolute dates, a repeated hobby (for counting), sibling
links that need two turns (multi-hop) and attributes that are never mentioned (adversarial,
gold "not mentioned", with the other person's value as the trap). Every fact turn sits among
chit-chat that shares none of the planted words, so retrieval has to find it.

It serves tests and quick experiments without downloading anything: `evolve run --benchmark
synth` exercises the whole loop in seconds. Same seed and options, same dataset, on any machine.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from datetime import datetime, timedelta

from evolvemem.data.custom import custom_records
from evolvemem.data.dates import format_day
from evolvemem.data.loader import bytes_hash
from evolvemem.data.models import Conversation, Dataset, Question, Session, Turn
from evolvemem.errors import ConfigError

NOT_MENTIONED = "not mentioned"

NAMES = (
    "Priya Raman",
    "Tomasz Wiśniewski",
    "Ines Carvalho",
    "Kofi Mensah",
    "Yuki Tanabe",
    "Mateo Ibarra",
    "Ayesha Siddiqui",
    "Bjorn Halvorsen",
    "Leilani Kahale",
    "Dmitri Volkov",
    "Saoirse Byrne",
    "Oluwaseun Adeyemi",
    "Farah Haddad",
    "Anders Lindqvist",
    "Mei Lin Ho",
    "Rafael Okonjo",
)
SISTERS = ("Wren", "Noor", "Ottilie", "Ilse", "Esme", "Marisol", "Thandiwe", "Annika")
BROTHERS = ("Idris", "Casimir", "Bastian", "Ravi", "Teodor", "Lorcan", "Emeka", "Joaquin")
CITIES = (
    "Lisbon",
    "Ghent",
    "Bergen",
    "Tallinn",
    "Valencia",
    "Trieste",
    "Galway",
    "Utrecht",
    "Aarhus",
    "Ljubljana",
    "Bilbao",
    "Turku",
    "Graz",
    "Cork",
    "Brno",
    "Malmo",
)
JOBS = (
    "marine biologist",
    "sound engineer",
    "pastry chef",
    "tram driver",
    "urban planner",
    "veterinary nurse",
    "translator",
    "data analyst",
    "carpenter",
    "pharmacist",
    "librarian",
    "architect",
    "park ranger",
    "radio producer",
)
PETS = ("parrot", "tortoise", "ferret", "gecko", "rabbit", "corgi", "hamster", "cockatiel", "axolotl")
HOBBIES = ("hiking", "bouldering", "kayaking", "sailing", "birdwatching", "fishing", "skating")
FOODS = ("ramen", "paella", "dumplings", "falafel", "pierogi", "pho", "risotto", "tacos")
INSTRUMENTS = ("cello", "banjo", "ukulele", "trumpet", "harp", "accordion", "clarinet")
# (what the speaker says they did, how the question asks about it)
EVENTS = (
    ("ran a half marathon", "run a half marathon"),
    ("passed my driving test", "pass the driving test"),
    ("gave a talk at a conference", "give a talk at a conference"),
    ("finished a woodworking course", "finish a woodworking course"),
    ("went to a jazz festival", "go to a jazz festival"),
    ("hosted a dinner party for the neighbours", "host a dinner party for the neighbours"),
    ("got my scuba certification", "get a scuba certification"),
)
HOBBY_LINES = (
    "I went {h} on Saturday, it was glorious.",
    "Went {h} with some friends yesterday, we lost track of time.",
    "I went {h} early this morning before work.",
    "We went {h} on Sunday and the weather was perfect.",
)
# Chit-chat shares no word with the pools above; tests check this.
CHITCHAT = (
    "Work has been non-stop this week, I need a proper rest.",
    "Did you watch that documentary everyone keeps talking about?",
    "I finally finished the novel I started ages ago.",
    "The weather cannot decide what it wants to do lately.",
    "I reorganised my whole wardrobe yesterday, very satisfying.",
    "My phone screen cracked again, typical.",
    "I have been trying to drink more water, it is harder than it sounds.",
    "Our building had a fire drill at seven in the morning.",
    "I am thinking about repainting the living room a warmer colour.",
    "Have you tried that new podcast about old mysteries?",
    "I spent the whole evening sorting out paperwork.",
    "The neighbours are renovating and the drilling never stops.",
    "I baked bread for the first time, it came out a bit flat.",
    "My laptop decided to update itself right before a meeting.",
    "I signed up for a language app but keep forgetting to practise.",
    "The train was delayed for an hour this morning.",
    "I found an old photo album while tidying up.",
    "I am trying to wake up earlier, with mixed results.",
)
REACTIONS = (
    "That sounds lovely!",
    "Ha, classic.",
    "How did that go?",
    "Oh no, that is annoying.",
    "Tell me more next time.",
    "I know exactly what you mean.",
    "Good for you!",
    "Wow, really?",
    "That made me laugh.",
    "Fingers crossed it gets better.",
    "Sounds like quite a week.",
)
GREETINGS = ("Hey, good to hear from you!", "Hi! How have you been?", "Hello again!")
GOODBYES = ("Talk soon, take care!", "Anyway, I should get going. Bye!", "Catch up again soon!")


@dataclass
class _Line:
    session: int
    speaker: str
    text: str
    tag: str = ""  # names the fact, so questions can point at the turn that states it


def generate_synth(
    seed: int = 0, n_conversations: int = 4, n_sessions: int = 6, chitchat_per_session: int = 4
) -> Dataset:
    """Generate the synthetic benchmark (deterministic per arguments)."""
    for name, value, minimum in (
        ("n_conversations", n_conversations, 1),
        ("n_sessions", n_sessions, 4),
        ("chitchat_per_session", chitchat_per_session, 0),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ConfigError(f"synth: {name} must be an integer >= {minimum}, got {value!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"synth: seed must be an integer, got {seed!r}")
    conversations: dict[str, Conversation] = {}
    questions: list[Question] = []
    for index in range(n_conversations):
        rng = random.Random(f"evolvemem-synth:{seed}:{index}")
        conversation_id = f"synth-{seed}-{index}"
        conversation, conv_questions = _conversation(rng, conversation_id, n_sessions, chitchat_per_session)
        conversations[conversation_id] = conversation
        questions.extend(conv_questions)
    types = sorted({q.question_type for q in questions})
    dataset = Dataset(
        name="synth",
        conversations=conversations,
        questions=questions,
        category_names={t: t.replace("_", " ") for t in types},
        adversarial_categories=("adversarial",),
        source=f"synth(seed={seed}, n_conversations={n_conversations}, n_sessions={n_sessions}, "
        f"chitchat_per_session={chitchat_per_session})",
    )
    dataset.content_hash = bytes_hash(json.dumps(custom_records(dataset), sort_keys=True).encode("utf-8"))
    return dataset


@dataclass(frozen=True)
class _Event:
    """A dated event a speaker tells of, in session `session`, having happened on `day`."""

    said: str  # what the speaker says they did
    ask: str  # how the question asks about it
    session: int
    day: datetime


@dataclass(frozen=True)
class _Cast:
    """What one conversation plants: the session dates, two dated events, two speakers (a, b),
    their relatives and the facts about them."""

    dates: list[datetime]
    event_a: _Event
    event_b: _Event
    a: str
    b: str
    sister: str
    brother: str
    city_a_old: str
    city_a_new: str
    city_b: str
    city_sister: str
    job_a: str
    job_b_old: str
    job_b_new: str
    job_brother: str
    pet_a: str
    pet_b: str
    hobby_a: str
    hobby_b: str
    food: str
    instrument: str

    @property
    def first_a(self) -> str:
        return self.a.split()[0]

    @property
    def first_b(self) -> str:
        return self.b.split()[0]


def _conversation(
    rng: random.Random, conversation_id: str, n_sessions: int, n_chitchat: int
) -> tuple[Conversation, list[Question]]:
    cast = _cast(rng, n_sessions)
    lines, counts = _planted(rng, cast, n_sessions)
    conversation, turn_of = _render(rng, conversation_id, (cast.a, cast.b), cast.dates, lines, n_chitchat)
    return conversation, _questions(conversation_id, cast, counts, turn_of)


def _cast(rng: random.Random, n_sessions: int) -> _Cast:
    """The people, facts, dates and events of one conversation, drawn in a fixed order (same seed,
    same dataset) and passed in `_Cast`'s field order."""
    people = [*rng.sample(NAMES, 2), rng.choice(SISTERS), rng.choice(BROTHERS)]
    facts = [*rng.sample(CITIES, 4), *rng.sample(JOBS, 4), *rng.sample(PETS, 2), *rng.sample(HOBBIES, 2)]
    (said_a, ask_a), (said_b, ask_b) = rng.sample(EVENTS, 2)
    tastes = [rng.choice(FOODS), rng.choice(INSTRUMENTS)]
    dates = _session_dates(rng, n_sessions)
    event_a = _event(rng, dates, said_a, ask_a)
    event_b = _event(rng, dates, said_b, ask_b)
    return _Cast(dates, event_a, event_b, *people, *facts, *tastes)


def _event(rng: random.Random, dates: list[datetime], said: str, ask: str) -> _Event:
    """An event told in a random session, having happened up to five days before it."""
    session = rng.choice(range(len(dates)))
    return _Event(said, ask, session, dates[session] - timedelta(days=rng.randint(0, 5)))


def _planted(rng: random.Random, c: _Cast, n_sessions: int) -> tuple[list[_Line], dict[str, int]]:
    """The fact lines, each in a session drawn from the range its fact belongs to (a fact that
    changes is stated early and changed late), then the hobby lines; and how often each hobby is done."""
    early, late = range(0, n_sessions // 2), range(n_sessions // 2, n_sessions)
    anywhere = range(n_sessions)
    a, b = c.a, c.b
    table = [
        (anywhere, a, f"I've been working as {_a(c.job_a)} for a few years now.", "job_a"),
        (early, a, f"My flat in {c.city_a_old} finally has working heating.", "city_a_old"),
        (late, a, f"I finally moved from {c.city_a_old} to {c.city_a_new} last week, still unpacking boxes.", "move_a"),
        (anywhere, b, f"I love living in {c.city_b}, the markets are great on weekends.", "city_b"),
        (early, b, f"Another long week as {_a(c.job_b_old)}, the deadlines never stop.", "job_b_old"),
        (
            late,
            b,
            f"Big change: I left my job as {_a(c.job_b_old)} and started as {_a(c.job_b_new)} this month.",
            "job_b_new",
        ),
        (anywhere, a, f"I finally adopted {_a(c.pet_a)}, we're still getting used to each other.", "pet_a"),
        (anywhere, b, f"My {c.pet_b} has claimed the sunniest spot in the flat.", "pet_b"),
        (early, a, f"My sister {c.sister} is coming to stay for a week.", "sister_intro"),
        (late, a, f"{c.sister} sent me photos from {c.city_sister}; she loves living there.", "sister_city"),
        (early, b, f"My brother {c.brother} keeps sending me terrible puns.", "brother_intro"),
        (late, b, f"{c.brother} just started working as {_a(c.job_brother)} and he's thrilled.", "brother_job"),
        (anywhere, a, f"Honestly, {c.food} is my favourite food, I could eat it every day.", "food_a"),
        (anywhere, a, f"I've started learning the {c.instrument}, my neighbours are very patient.", "instrument_a"),
    ]
    lines = [_Line(rng.choice(when), speaker, text, tag) for when, speaker, text, tag in table]
    lines += [
        _Line(c.event_a.session, a, f"Big day: I {c.event_a.said} on {format_day(c.event_a.day)}!", "event_a"),
        _Line(c.event_b.session, b, f"Guess what, I {c.event_b.said} on {format_day(c.event_b.day)}.", "event_b"),
    ]
    counts = {}
    for person, hobby, tag in ((a, c.hobby_a, "hobby_a"), (b, c.hobby_b, "hobby_b")):
        sessions = sorted(rng.sample(list(anywhere), rng.randint(2, min(4, n_sessions))))
        templates = rng.sample(HOBBY_LINES, len(sessions))
        lines += [_Line(s, person, t.format(h=hobby), tag) for s, t in zip(sessions, templates)]
        counts[tag] = len(sessions)
    return lines, counts


def _questions(conversation_id: str, c: _Cast, counts: dict[str, int], turn_of: dict[str, list[str]]) -> list[Question]:
    """The questions of one conversation, each with its gold answer and the turns that state it
    (adversarial ones: none, with the trap answer the other person's fact would give)."""

    def ev(*tags: str) -> tuple[str, ...]:
        return tuple(turn_id for tag in tags for turn_id in turn_of[tag])

    first_a, first_b = c.first_a, c.first_b
    specs = [
        ("single_fact", f"What does {first_a} do for work?", c.job_a, ev("job_a"), None),
        ("single_fact", f"What kind of pet does {first_a} have?", c.pet_a, ev("pet_a"), None),
        ("single_fact", f"What kind of pet does {first_b} have?", c.pet_b, ev("pet_b"), None),
        ("single_fact", f"Which city does {first_b} live in?", c.city_b, ev("city_b"), None),
        ("knowledge_update", f"Which city does {first_a} live in now?", c.city_a_new, ev("move_a"), None),
        ("knowledge_update", f"What is {first_b}'s job now?", c.job_b_new, ev("job_b_new"), None),
        ("temporal", f"When did {first_a} {c.event_a.ask}?", format_day(c.event_a.day), ev("event_a"), None),
        ("temporal", f"When did {first_b} {c.event_b.ask}?", format_day(c.event_b.day), ev("event_b"), None),
        ("counting", f"How many times did {first_a} go {c.hobby_a}?", str(counts["hobby_a"]), ev("hobby_a"), None),
        ("counting", f"How many times did {first_b} go {c.hobby_b}?", str(counts["hobby_b"]), ev("hobby_b"), None),
        (
            "multi_hop",
            f"Which city does {first_a}'s sister live in?",
            c.city_sister,
            ev("sister_intro", "sister_city"),
            None,
        ),
        (
            "multi_hop",
            f"What does {first_b}'s brother do for work?",
            c.job_brother,
            ev("brother_intro", "brother_job"),
            None,
        ),
        ("preference", f"What is {first_a}'s favourite food?", c.food, ev("food_a"), None),
        ("adversarial", f"Which instrument does {first_b} play?", NOT_MENTIONED, (), c.instrument),
        ("adversarial", f"Which city does {first_a}'s brother live in?", NOT_MENTIONED, (), c.city_sister),
    ]
    return [
        Question(
            question_id=f"{conversation_id}:q{i}",
            conversation_id=conversation_id,
            text=text,
            category=qtype,
            question_type=qtype,
            answers=(answer,),
            evidence=evidence,
            question_date=c.dates[-1],
            adversarial_answer=trap,
        )
        for i, (qtype, text, answer, evidence, trap) in enumerate(specs)
    ]


def _a(noun: str) -> str:
    return f"{'an' if noun[0] in 'aeiou' else 'a'} {noun}"


def _session_dates(rng: random.Random, n_sessions: int) -> list[datetime]:
    day = datetime(2022, 1, 1) + timedelta(days=rng.randint(0, 700))
    dates = []
    for _ in range(n_sessions):
        dates.append(day.replace(hour=rng.randint(8, 21), minute=rng.choice((0, 15, 30, 45))))
        day += timedelta(days=rng.randint(6, 40))
    return dates


def _render(
    rng: random.Random,
    conversation_id: str,
    speakers: tuple[str, str],
    dates: list[datetime],
    lines: list[_Line],
    n_chitchat: int,
) -> tuple[Conversation, dict[str, list[str]]]:
    """Lay the planted lines out as exchanges (statement + reaction) among chit-chat."""
    a, b = speakers
    other = {a: b, b: a}
    sessions = []
    turn_of: dict[str, list[str]] = {}
    for s, timestamp in enumerate(dates):
        exchanges: list[list[tuple[str, str, str]]] = [
            [(line.speaker, line.text, line.tag), (other[line.speaker], rng.choice(REACTIONS), "")]
            for line in lines
            if line.session == s
        ]
        if n_chitchat <= len(CHITCHAT):
            topics = rng.sample(CHITCHAT, n_chitchat)
        else:
            topics = rng.choices(CHITCHAT, k=n_chitchat)
        for topic in topics:
            talker = rng.choice(speakers)
            exchanges.append([(talker, topic, ""), (other[talker], rng.choice(REACTIONS), "")])
        rng.shuffle(exchanges)
        opener = rng.choice(speakers)
        flat = [(opener, rng.choice(GREETINGS), "")] + [t for ex in exchanges for t in ex]
        flat.append((rng.choice(speakers), rng.choice(GOODBYES), ""))
        session_id = f"session_{s + 1}"
        turns = []
        for j, (speaker, text, tag) in enumerate(flat):
            turn_id = f"D{s + 1}:{j + 1}"
            turns.append(Turn(turn_id=turn_id, speaker=speaker, text=text, session_id=session_id, timestamp=timestamp))
            if tag:
                turn_of.setdefault(tag, []).append(turn_id)
        sessions.append(Session(session_id=session_id, timestamp=timestamp, turns=tuple(turns)))
    return Conversation(conversation_id=conversation_id, sessions=tuple(sessions), speakers=speakers), turn_of

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


def _conversation(
    rng: random.Random, conversation_id: str, n_sessions: int, n_chitchat: int
) -> tuple[Conversation, list[Question]]:
    a, b = rng.sample(NAMES, 2)
    first_a, first_b = a.split()[0], b.split()[0]
    sister, brother = rng.choice(SISTERS), rng.choice(BROTHERS)
    city_a_old, city_a_new, city_b, city_sister = rng.sample(CITIES, 4)
    job_a, job_b_old, job_b_new, job_brother = rng.sample(JOBS, 4)
    pet_a, pet_b = rng.sample(PETS, 2)
    hobby_a, hobby_b = rng.sample(HOBBIES, 2)
    (event_a, ask_a), (event_b, ask_b) = rng.sample(EVENTS, 2)
    food, instrument = rng.choice(FOODS), rng.choice(INSTRUMENTS)
    dates = _session_dates(rng, n_sessions)
    early, late = range(0, n_sessions // 2), range(n_sessions // 2, n_sessions)
    anywhere = range(n_sessions)
    pick = rng.choice

    event_day_a = dates[(s_event_a := pick(anywhere))] - timedelta(days=rng.randint(0, 5))
    event_day_b = dates[(s_event_b := pick(anywhere))] - timedelta(days=rng.randint(0, 5))
    lines = [
        _Line(pick(anywhere), a, f"I've been working as {_a(job_a)} for a few years now.", "job_a"),
        _Line(pick(early), a, f"My flat in {city_a_old} finally has working heating.", "city_a_old"),
        _Line(
            pick(late),
            a,
            f"I finally moved from {city_a_old} to {city_a_new} last week, still unpacking boxes.",
            "move_a",
        ),
        _Line(pick(anywhere), b, f"I love living in {city_b}, the markets are great on weekends.", "city_b"),
        _Line(pick(early), b, f"Another long week as {_a(job_b_old)}, the deadlines never stop.", "job_b_old"),
        _Line(
            pick(late),
            b,
            f"Big change: I left my job as {_a(job_b_old)} and started as {_a(job_b_new)} this month.",
            "job_b_new",
        ),
        _Line(pick(anywhere), a, f"I finally adopted {_a(pet_a)}, we're still getting used to each other.", "pet_a"),
        _Line(pick(anywhere), b, f"My {pet_b} has claimed the sunniest spot in the flat.", "pet_b"),
        _Line(pick(early), a, f"My sister {sister} is coming to stay for a week.", "sister_intro"),
        _Line(pick(late), a, f"{sister} sent me photos from {city_sister}; she loves living there.", "sister_city"),
        _Line(pick(early), b, f"My brother {brother} keeps sending me terrible puns.", "brother_intro"),
        _Line(pick(late), b, f"{brother} just started working as {_a(job_brother)} and he's thrilled.", "brother_job"),
        _Line(pick(anywhere), a, f"Honestly, {food} is my favourite food, I could eat it every day.", "food_a"),
        _Line(
            pick(anywhere),
            a,
            f"I've started learning the {instrument}, my neighbours are very patient.",
            "instrument_a",
        ),
        _Line(s_event_a, a, f"Big day: I {event_a} on {format_day(event_day_a)}!", "event_a"),
        _Line(s_event_b, b, f"Guess what, I {event_b} on {format_day(event_day_b)}.", "event_b"),
    ]
    counts = {}
    for person, hobby, tag in ((a, hobby_a, "hobby_a"), (b, hobby_b, "hobby_b")):
        sessions = sorted(rng.sample(list(anywhere), rng.randint(2, min(4, n_sessions))))
        templates = rng.sample(HOBBY_LINES, len(sessions))
        lines += [_Line(s, person, t.format(h=hobby), tag) for s, t in zip(sessions, templates)]
        counts[tag] = len(sessions)

    conversation, turn_of = _render(rng, conversation_id, (a, b), dates, lines, n_chitchat)

    def ev(*tags: str) -> tuple[str, ...]:
        return tuple(turn_id for tag in tags for turn_id in turn_of[tag])

    specs = [
        ("single_fact", f"What does {first_a} do for work?", job_a, ev("job_a"), None),
        ("single_fact", f"What kind of pet does {first_a} have?", pet_a, ev("pet_a"), None),
        ("single_fact", f"What kind of pet does {first_b} have?", pet_b, ev("pet_b"), None),
        ("single_fact", f"Which city does {first_b} live in?", city_b, ev("city_b"), None),
        ("knowledge_update", f"Which city does {first_a} live in now?", city_a_new, ev("move_a"), None),
        ("knowledge_update", f"What is {first_b}'s job now?", job_b_new, ev("job_b_new"), None),
        ("temporal", f"When did {first_a} {ask_a}?", format_day(event_day_a), ev("event_a"), None),
        ("temporal", f"When did {first_b} {ask_b}?", format_day(event_day_b), ev("event_b"), None),
        ("counting", f"How many times did {first_a} go {hobby_a}?", str(counts["hobby_a"]), ev("hobby_a"), None),
        ("counting", f"How many times did {first_b} go {hobby_b}?", str(counts["hobby_b"]), ev("hobby_b"), None),
        (
            "multi_hop",
            f"Which city does {first_a}'s sister live in?",
            city_sister,
            ev("sister_intro", "sister_city"),
            None,
        ),
        (
            "multi_hop",
            f"What does {first_b}'s brother do for work?",
            job_brother,
            ev("brother_intro", "brother_job"),
            None,
        ),
        ("preference", f"What is {first_a}'s favourite food?", food, ev("food_a"), None),
        ("adversarial", f"Which instrument does {first_b} play?", NOT_MENTIONED, (), instrument),
        ("adversarial", f"Which city does {first_a}'s brother live in?", NOT_MENTIONED, (), city_sister),
    ]
    question_date = dates[-1]
    questions = [
        Question(
            question_id=f"{conversation_id}:q{i}",
            conversation_id=conversation_id,
            text=text,
            category=qtype,
            question_type=qtype,
            answers=(answer,),
            evidence=evidence,
            question_date=question_date,
            adversarial_answer=trap,
        )
        for i, (qtype, text, answer, evidence, trap) in enumerate(specs)
    ]
    return conversation, questions


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

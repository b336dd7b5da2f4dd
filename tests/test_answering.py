"""Answering: the offline extractive reader, the LLM answerer, verification and the prompts.

Contexts are hand-built about invented people; the LLM roles run through the real LLM client
against the fake OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json
import re
import string
from datetime import datetime
from pathlib import Path

import pytest

from evolvemem.data.models import Question, Turn
from evolvemem.contracts.memory import MemoryUnit
from evolvemem.prompts import load_prompt
from evolvemem.roles.answer_offline import STYLES, OfflineAnswerer, analyse_question, rank_support
from evolvemem.data.date_mentions import find_dates
from evolvemem.roles.context_format import (
    ABSTENTION,
    format_context,
    format_question_date,
    memory_date_text,
    parse_memory_text,
    quoted_turns,
)
from evolvemem.contracts.roles import AnswerResult
from evolvemem.contracts.usage import Usage
from evolvemem.roles.reader_support import view_of
from evolvemem.roles.verify import OfflineVerifier, grounding

MAY_8 = datetime(2023, 5, 8, 14, 0)
JUNE_2 = datetime(2023, 6, 2, 10, 30)
AUG_20 = datetime(2023, 8, 20, 18, 0)


def memory(n: int, content: str, when: datetime | None, persons=(), locations=()) -> MemoryUnit:
    return MemoryUnit(
        f"c1:m{n}",
        "c1",
        content,
        source_turn_ids=(f"D1:{n}",),
        timestamp=when,
        persons=tuple(persons),
        locations=tuple(locations),
    )


# Annotations are lowercased, as the offline extractor writes them.
CONTEXT = [
    memory(1, "[8 May 2023] Priya: I started a pottery class yesterday. (yesterday = 7 May 2023)", MAY_8, ["priya"]),
    memory(
        2,
        "[8 May 2023] Tomasz: That's great! I just got back from Lisbon with my sister.",
        MAY_8,
        ["tomasz"],
        ["lisbon"],
    ),
    memory(
        3,
        "[2 June 2023] Priya: I made a blue ceramic bowl in class. I have three cats and they ignore it.",
        JUNE_2,
        ["priya"],
    ),
    memory(
        4, "[2 June 2023] Tomasz: My favourite novel is Dune, I've been reading it for 3 years.", JUNE_2, ["tomasz"]
    ),
    memory(
        5, "[2 June 2023] Priya: I researched adoption agencies because I want to build a family.", JUNE_2, ["priya"]
    ),
    memory(
        6, "[2 June 2023] Tomasz: I'm not going to the jazz concert, loud music gives me headaches.", JUNE_2, ["tomasz"]
    ),
    memory(
        7, "[20 August 2023] Tomasz: I bought a second-hand guitar in Porto last Friday.", AUG_20, ["tomasz"], ["porto"]
    ),
    memory(8, "[20 August 2023] Priya: I swim at the lake twice a week now.", AUG_20, ["priya"]),
]


def ask(text: str, context=CONTEXT, style: str = "concise", answerer: OfflineAnswerer | None = None) -> str:
    question = Question("q1", "c1", text, "1", "single_fact", ("gold",))
    return (answerer or OfflineAnswerer()).answer(question, context, style).text


# ----------------------------------------------------------------------------- question forms
@pytest.mark.parametrize(
    "text, kind",
    [
        ("When did Priya start a pottery class?", "date"),
        ("What year did Tomasz move?", "year"),
        ("In which month did Priya adopt a cat?", "month"),
        ("How many cats does Priya have?", "count"),
        ("How long has Tomasz been reading Dune?", "duration"),
        ("How often does Priya swim?", "frequency"),
        ("Is Tomasz going to the concert?", "yesno"),
        ("Would Priya enjoy a pottery fair?", "yesno"),
        ("Who did Tomasz travel with?", "who"),
        ("Where did Tomasz buy his guitar?", "where"),
        ("Which city did Tomasz visit?", "where"),
        ("Why did Priya research adoption agencies?", "why"),
        ("What did Priya make in class?", "phrase"),
        ("What did Tomasz play when he was younger?", "phrase"),
        ("What is the name of Priya's dog?", "name"),
    ],
)
def test_question_forms(text, kind):
    assert analyse_question(text).kind == kind


def test_question_dates_become_a_constraint_not_words():
    form = analyse_question("What did Priya buy on 7 May 2023?")
    assert [d.canonical for d in form.dates] == ["7 May 2023"]
    assert "2023" not in form.terms and "may" not in form.terms
    assert form.names == ("Priya",)


# ----------------------------------------------------------------------------- reader: each form
def test_date_from_the_extractors_resolved_note():
    assert ask("When did Priya start a pottery class?") == "7 May 2023"
    assert ask("What year did Priya start a pottery class?") == "2023"
    assert ask("In which month did Priya start a pottery class?") == "May 2023"


def test_date_from_a_relative_time_without_a_note_and_from_an_explicit_date():
    # 20 August 2023 is a Sunday: "last Friday" is 18 August 2023.
    assert ask("When did Tomasz buy a guitar?") == "18 August 2023"
    explicit = [memory(9, "Priya Raman moved into a flat in Lisbon on 3 March 2022.", datetime(2022, 4, 1), ["priya"])]
    assert ask("When did Priya move into a flat?", explicit) == "3 March 2022"
    plain = [memory(10, "[4 April 2024] Priya: We planted tomatoes in the garden.", datetime(2024, 4, 4), ["priya"])]
    assert ask("When did Priya plant tomatoes?", plain) == "4 April 2024"


def test_count_duration_frequency():
    assert ask("How many cats does Priya have?") == "three"
    assert ask("How long has Tomasz been reading Dune?") == "3 years"
    assert ask("How often does Priya swim at the lake?") == "twice a week"


def test_count_without_a_number_tallies_the_supporting_memories():
    visits = [
        memory(
            1,
            "[1 May 2023] Tomasz: Went to the climbing gym again, my arms are sore.",
            datetime(2023, 5, 1),
            ["tomasz"],
        ),
        memory(
            2,
            "[9 May 2023] Tomasz: Climbing gym this morning, finally topped the blue route.",
            datetime(2023, 5, 9),
            ["tomasz"],
        ),
        memory(3, "[9 May 2023] Priya: I prefer the swimming pool.", datetime(2023, 5, 9), ["priya"]),
    ]
    assert ask("How many times has Tomasz gone to the climbing gym?", visits) == "2"


def test_yes_no():
    assert ask("Is Tomasz going to the jazz concert?") == "No"
    assert ask("Did Priya make a ceramic bowl?") == "Yes"
    assert ask("Did Priya make a ceramic bowl?", style="detailed").startswith("Yes — ")


def test_who_where_what_why():
    assert ask("Who did Tomasz go to Lisbon with?") == "sister"
    assert ask("Where did Tomasz buy a second-hand guitar?") == "Porto"  # case restored from the text
    assert ask("What did Priya research?") == "adoption agencies"
    assert ask("What did Priya make in class?") == "blue ceramic bowl"
    assert ask("Why did Priya research adoption agencies?") == "I want to build a family"


def test_who_answers_with_the_speaker_who_speaks_of_themselves():
    gift = [
        memory(
            1,
            "[3 March 2024] Tomasz: I gave Priya a telescope for her birthday.",
            datetime(2024, 3, 3),
            ["tomasz", "priya"],
        )
    ]
    assert ask("Who gave Priya a telescope?", gift) == "Tomasz"


def test_a_picture_question_reads_the_photo_caption():
    photo = [
        memory(
            1,
            "[5 May 2023] Priya: Look what I finished! [shares a photo of a green glazed vase on a shelf]",
            datetime(2023, 5, 5),
            ["priya"],
        )
    ]
    answer = ask("What did Priya share a picture of?", photo)
    assert "vase" in answer and "photo" not in answer


# ----------------------------------------------------------------------------- abstention
def test_abstains_when_nothing_supports_the_question():
    assert ask("What did Zed buy at the market?") == ABSTENTION
    assert ask("What car does Priya drive?") == ABSTENTION
    assert ask("What did Priya research?", context=[]) == ABSTENTION


def test_abstains_when_the_memory_is_about_someone_else():
    assert ask("What did Tomasz research?") == ABSTENTION
    assert ask("What did Priya research?") == "adoption agencies"


def test_a_name_used_to_address_someone_is_not_what_the_memory_is_about():
    chat = [
        memory(
            1,
            "[6 July 2023] Tomasz: Thanks, Priya! Here's my family camping by the lake.",
            datetime(2023, 7, 6),
            ["tomasz", "priya"],
        )
    ]
    assert ask("Where did Priya go camping with her family?", chat) == ABSTENTION
    assert ask("Where did Tomasz go camping with his family?", chat) != ABSTENTION
    # ...unless the sentence speaks to her: "you" is the person addressed
    praise = [
        memory(
            2,
            "[6 July 2023] Tomasz: Priya, you finished the marathon in Porto, amazing!",
            datetime(2023, 7, 6),
            ["tomasz", "priya"],
            ["porto"],
        )
    ]
    assert ask("Where did Priya finish the marathon?", praise) == "Porto"


def test_a_memory_that_only_asks_the_question_does_not_answer_it():
    asked = [
        memory(1, "[1 May 2023] Tomasz: What pet do you have, Priya?", datetime(2023, 5, 1), ["tomasz", "priya"]),
        memory(2, "[1 May 2023] Priya: My pet is a fluffy grey rabbit called Miso.", datetime(2023, 5, 1), ["priya"]),
    ]
    _, _, supports = rank_support("What pet does Priya have?", asked)
    assert [s.unit.memory_id for s in supports] == ["c1:m2", "c1:m1"]
    assert supports[1].coverage == pytest.approx(supports[0].coverage / 2)  # asking counts half
    assert "rabbit" in ask("What pet does Priya have?", asked)


def test_a_date_in_the_question_selects_the_memory_of_that_date():
    runs = [
        memory(1, "[10 March 2023] Priya: I ran a 10k race by the river today.", datetime(2023, 3, 10), ["priya"]),
        memory(
            2, "[20 September 2023] Priya: I ran a trail race in the hills today.", datetime(2023, 9, 20), ["priya"]
        ),
    ]
    assert "river" in ask("What race did Priya run in March 2023?", runs)
    assert "hills" in ask("What race did Priya run in September 2023?", runs)


# ----------------------------------------------------------------------------- digests of several turns
def turn(n: int, speaker: str, text: str, when: datetime) -> Turn:
    return Turn(f"D1:{n}", speaker, text, "S1", when)


def episode_digest(turns: list[Turn]) -> MemoryUnit:
    """An episode memory exactly as the offline episode store writes it."""
    from evolvemem.memory.narrative import dated_digest
    from evolvemem.memory.granularity import turn_line

    text = dated_digest([turn_line(t) for t in turns], "8 May 2023")
    speakers = tuple(dict.fromkeys(t.speaker.lower() for t in turns))
    return MemoryUnit(
        "c1:e1",
        "c1",
        text,
        memory_type="episodic",
        source_turn_ids=tuple(t.turn_id for t in turns),
        timestamp=turns[0].timestamp,
        persons=speakers,
        locations=("lisbon",),
    )


ADOPTION = [
    turn(1, "Priya Raman", "I adopted a greyhound yesterday! She sleeps all day.", MAY_8),
    Turn("D1:2", "Tomasz", "Priya, you must be thrilled. I'm still fixing my bike.", "S1", MAY_8, "a red bike"),
    turn(3, "Priya Raman", "Thanks, Tomasz! Next month we fly to Lisbon for my cousin's wedding.", MAY_8),
]


def test_a_digest_is_taken_apart_into_the_turns_it_quotes():
    unit = episode_digest(ADOPTION)
    assert unit.content.startswith("On 8 May 2023: Priya Raman: I adopted")
    turns = quoted_turns(unit.content, unit.persons)
    assert [t.speaker for t in turns] == ["Priya Raman", "Tomasz", "Priya Raman"]
    assert turns[0].body == "I adopted a greyhound yesterday! She sleeps all day."
    assert turns[0].notes == (("yesterday", "7 May 2023"),)  # each turn keeps its own resolved dates
    assert turns[1].notes == () and turns[1].body.startswith("Priya, you must")
    assert turns[1].body.endswith("[shares a photo of a red bike]")  # a caption stays with its turn
    # a recurring-topic digest dates a turn where the day changes; the turns after it keep that date
    from evolvemem.memory.recurrence import digest

    recurring = digest(
        [
            turn(4, "Tomasz", "I want a guitar.", MAY_8),
            turn(5, "Priya Raman", "Get one!", MAY_8),
            turn(6, "Tomasz", "I finally bought the guitar.", AUG_20),
            turn(7, "Priya Raman", "Play me something.", AUG_20),
        ]
    )
    parts = quoted_turns(recurring, ("tomasz", "priya raman"))
    assert [(t.date_label, t.speaker, t.body) for t in parts] == [
        ("8 May 2023", "Tomasz", "I want a guitar."),
        ("8 May 2023", "Priya Raman", "Get one!"),
        ("20 August 2023", "Tomasz", "I finally bought the guitar."),
        ("20 August 2023", "Priya Raman", "Play me something."),
    ]
    # one turn, or "Name:" of nobody the memory names, is not a digest
    assert quoted_turns(CONTEXT[0].content, ("priya", "tomasz")) == ()
    assert quoted_turns("On 8 May 2023: Priya: Note: bring clay. Also: glaze.", ("priya",)) == ()


def test_a_digest_answers_for_the_speaker_who_said_it():
    context = [episode_digest(ADOPTION)]
    assert "greyhound" in ask("What did Priya adopt?", context)
    assert ask("What did Tomasz adopt?", context) == ABSTENTION
    assert ask("When did Priya adopt a greyhound?", context) == "7 May 2023"
    assert ask("When did Tomasz adopt a greyhound?", context) == ABSTENTION
    assert "bike" in ask("What is Tomasz fixing?", context)
    assert ask("What is Priya fixing?", context) == ABSTENTION
    assert ask("Who is fixing a bike?", context) == "Tomasz"  # the speaker of the turn, not of the digest
    assert ask("Where will Priya fly for the wedding?", context) == "Lisbon"
    assert ask("Where will Tomasz fly for the wedding?", context) == ABSTENTION
    _, _, supports = rank_support("What did Priya adopt?", context)
    assert supports[0].view.speaker == "Priya Raman"  # the support is the turn, with that turn's notes
    assert supports[0].view.notes == (("yesterday", "7 May 2023"),)


def test_each_turn_of_a_digest_is_dated_by_its_own_label():
    from evolvemem.memory.recurrence import digest

    text = digest(
        [
            turn(4, "Tomasz", "I want a guitar.", MAY_8),
            turn(5, "Priya Raman", "Get one!", MAY_8),
            turn(6, "Tomasz", "I finally bought the guitar.", AUG_20),
        ]
    )
    unit = MemoryUnit(
        "c1:r1",
        "c1",
        text,
        source_turn_ids=("D1:4", "D1:5", "D1:6"),
        timestamp=MAY_8,
        persons=("tomasz", "priya raman"),
    )
    assert ask("When did Tomasz buy the guitar?", [unit]) == "20 August 2023"
    assert "guitar" in ask("What did Tomasz buy in August 2023?", [unit])


def test_a_one_turn_memory_is_read_whole_even_when_it_quotes_someone():
    quoting = memory(
        1, "[8 May 2023] Priya: My coach told me, Tomasz: never skip a warm-up.", MAY_8, ["priya", "tomasz"]
    )
    view = view_of(quoting)
    assert view.turns == () and view.parts == (view,) and view.speaker == "Priya"
    assert len(view.sentences) == 1 and "Tomasz: never skip" in view.sentences[0].text


# ----------------------------------------------------------------------------- styles
def test_styles_change_the_answer():
    question = "What did Priya make in class?"
    answers = {style: ask(question, style=style) for style in STYLES}
    assert answers["concise"] == "blue ceramic bowl"
    assert answers["extractive"] == "I made a blue ceramic bowl in class."
    assert answers["detailed"] == "blue ceramic bowl — I made a blue ceramic bowl in class."
    assert answers["temporal"] == "blue ceramic bowl (2 June 2023)"
    assert len({answers[s] for s in ("concise", "extractive", "detailed", "temporal")}) == 4


def test_extractive_keeps_the_date_for_time_questions():
    assert (
        ask("When did Priya start a pottery class?", style="extractive")
        == "7 May 2023: I started a pottery class yesterday."
    )


def test_step_by_step_combines_several_memories():
    hobbies = [
        memory(1, "[5 April 2023] Tomasz: I've taken up rock climbing at the gym.", datetime(2023, 4, 5), ["tomasz"]),
        memory(
            2,
            "[19 May 2023] Tomasz: I've taken up pottery too, my first bowl is lopsided.",
            datetime(2023, 5, 19),
            ["tomasz"],
        ),
        memory(3, "[19 May 2023] Priya: I've taken up Portuguese lessons.", datetime(2023, 5, 19), ["priya"]),
    ]
    combined = ask("What has Tomasz taken up?", hobbies, style="step_by_step")
    single = ask("What has Tomasz taken up?", hobbies, style="concise")
    assert "climbing" in combined and "pottery" in combined and "," in combined
    assert "Portuguese" not in combined  # Priya's memory does not count
    assert "," not in single


def test_cautious_abstains_where_concise_answers():
    weak = [
        memory(
            1, "[1 June 2023] Tomasz: The bakery on the corner sells great rye bread.", datetime(2023, 6, 1), ["tomasz"]
        )
    ]
    question = "What did Tomasz buy at the bakery?"  # half supported: the bakery, but no purchase
    assert ask(question, weak, style="concise") != ABSTENTION
    assert ask(question, weak, style="cautious") == ABSTENTION


def test_temporal_style_prefers_the_memory_that_dates_the_event():
    trips = [
        memory(1, "[12 May 2023] Priya: The Lisbon trip photos are finally printed.", datetime(2023, 5, 12), ["priya"]),
        memory(
            2,
            "[30 April 2023] Priya: Back from the Lisbon trip, we flew home last night.",
            datetime(2023, 4, 30),
            ["priya"],
        ),
    ]
    assert ask("When did Priya fly home from the Lisbon trip?", trips, style="temporal") == "29 April 2023"


def test_unknown_style_is_an_error():
    with pytest.raises(ValueError, match="unknown answer style"):
        ask("What did Priya make?", style="poetic")


def test_third_person_llm_memories_work_too():
    facts = [
        MemoryUnit(
            "c2:m1",
            "c2",
            "Priya Raman adopted a rescue greyhound named Biscuit on 14 February 2024.",
            timestamp=datetime(2024, 2, 20),
            persons=("Priya Raman",),
        )
    ]
    assert ask("When did Priya adopt a greyhound?", facts) == "14 February 2024"
    assert "Biscuit" in ask("What is the name of Priya's greyhound?", facts)
    assert ask("When did Tomasz adopt a greyhound?", facts) == ABSTENTION


def test_answers_record_their_support():
    result = OfflineAnswerer().answer(
        Question("q", "c1", "What did Priya research?", "1", "single_fact", ()), CONTEXT, "concise"
    )
    assert result.notes["memory_id"] == "c1:m5" and result.notes["support"] > 0.5
    assert result.cost == Usage() and not result.failed


# ----------------------------------------------------------------------------- offline verification
def _verify(text: str, answer: str, style: str, context=CONTEXT) -> AnswerResult:
    question = Question("q", "c1", text, "1", "single_fact", ())
    return OfflineVerifier().verify(question, context, AnswerResult(answer), style)


def test_strict_keeps_a_supported_answer_and_withdraws_an_unsupported_one():
    kept = _verify("What did Priya research?", "adoption agencies", "strict")
    assert kept.text == "adoption agencies" and kept.notes["verified"] == "kept"
    withdrawn = _verify("What did Priya research?", "Lisbon apartments", "strict")
    assert withdrawn.text == ABSTENTION and withdrawn.notes["original"] == "Lisbon apartments"
    assert _verify("When did Priya start a pottery class?", "7 May 2023", "strict").text == "7 May 2023"
    assert _verify("What did Zed buy?", ABSTENTION, "strict").text == ABSTENTION


def test_strict_is_stricter_than_answering():
    weak = [
        memory(
            1, "[1 June 2023] Tomasz: The bakery on the corner sells great rye bread.", datetime(2023, 6, 1), ["tomasz"]
        )
    ]
    question = "What did Tomasz buy at the bakery?"
    answer = ask(question, weak)
    assert answer != ABSTENTION
    assert _verify(question, answer, "strict", weak).text == ABSTENTION


def test_multi_candidate_replaces_an_unsupported_answer_with_the_best_supported_one():
    replaced = _verify("What did Priya make in class?", "a wooden spoon", "multi_candidate")
    assert replaced.text == "blue ceramic bowl" and replaced.notes["verified"] == "replaced"
    assert "a wooden spoon" in replaced.notes["candidates"]
    kept = _verify("What did Priya make in class?", "blue ceramic bowl", "multi_candidate")
    assert kept.text == "blue ceramic bowl" and kept.notes["verified"] == "kept"
    assert _verify("What did Zed buy at the market?", "apples", "multi_candidate").text == ABSTENTION


def test_grounding_counts_dates_resolved_from_relative_times():
    _, _, supports = rank_support("When did Tomasz buy a guitar?", CONTEXT)
    assert grounding("18 August 2023", supports[0], "date") == 1.0
    assert grounding("3 March 2021", supports[0], "date") < 0.5


def test_verifier_cost_is_its_own_and_styles_are_checked():
    result = _verify("What did Priya research?", "adoption agencies", "strict")
    assert result.cost == Usage()
    with pytest.raises(ValueError, match="unknown verification style"):
        _verify("What did Priya research?", "adoption agencies", "lenient")


# ----------------------------------------------------------------------------- context formatting
def test_memory_text_round_trip():
    parsed = parse_memory_text("[8 May 2023] Priya: I started a pottery class yesterday. (yesterday = 7 May 2023)")
    assert (parsed.date_label, parsed.speaker) == ("8 May 2023", "Priya")
    assert parsed.body == "I started a pottery class yesterday."
    assert parsed.notes == (("yesterday", "7 May 2023"),)
    plain = parse_memory_text("Priya Raman adopted a greyhound.")
    assert plain.speaker is None and plain.date_label is None


def test_find_dates_reads_common_formats():
    text = "On May 7, 2023, then 2023-05-09, the 3rd of June 2022, in 2021 and June 2020"
    assert [d.canonical for d in find_dates(text)] == ["7 May 2023", "9 May 2023", "3 June 2022", "2021", "June 2020"]


def test_format_context_numbers_and_dates_every_memory():
    third_person = MemoryUnit("c2:m1", "c2", "Priya Raman adopted a greyhound.", timestamp=datetime(2024, 2, 20))
    text = format_context([CONTEXT[0], third_person])
    assert text.splitlines() == [
        "1. [8 May 2023] Priya: I started a pottery class yesterday. (yesterday = 7 May 2023)",
        "2. [20 February 2024] Priya Raman adopted a greyhound.",
    ]
    assert memory_date_text(MemoryUnit("x", "c", "[8 May 2023] Priya: hi")) == "8 May 2023"
    assert format_context([]) == "(no memories were retrieved)"
    assert format_question_date(None) == "unknown" and format_question_date(MAY_8) == "8 May 2023"


# ----------------------------------------------------------------------------- prompts
ANSWER_PROMPTS = [f"answer_{style}" for style in STYLES]
VERIFY_PROMPTS = ["verify_strict", "verify_multi_candidate"]


def _placeholders(text: str) -> set[str]:
    return {
        m.group("named") or m.group("braced")
        for m in string.Template.pattern.finditer(text)
        if m.group("named") or m.group("braced")
    }


@pytest.mark.parametrize("name", ANSWER_PROMPTS + VERIFY_PROMPTS)
def test_prompts_render_with_all_placeholders(name):
    prompt = load_prompt(name)
    expected = {"question", "question_date", "context"} | ({"answer"} if name.startswith("verify") else set())
    assert _placeholders(prompt.text) == expected
    values = dict(
        question="Q-MARKER?", question_date="9 May 2023", context="1. [8 May 2023] C-MARKER", answer="A-MARKER"
    )
    rendered = prompt.render(**{k: values[k] for k in expected})
    assert "$" not in rendered
    for key in expected:
        assert values[key] in rendered
    assert ABSTENTION in rendered  # every prompt says how to abstain
    assert "Priya" in rendered or "Tomasz" in rendered  # examples are about invented people


def test_answer_prompts_are_distinct():
    texts = [load_prompt(name).text for name in ANSWER_PROMPTS]
    assert len(set(texts)) == len(texts)
    assert "Answer:" in load_prompt("answer_step_by_step").text


# ----------------------------------------------------------------------------- LLM roles
FakeLLMServer = pytest.importorskip("tests.fake_llm_server").FakeLLMServer
llm = pytest.importorskip("evolvemem.llm")


@pytest.fixture
def client_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")

    def make(server) -> object:
        return llm.LLMClient(
            "openai/fake-model",
            api_base=server.url,
            cache=llm.ResponseCache(tmp_path / "llm"),
            max_retries=1,
            backoff_base=0.01,
            timeout=5.0,
        )

    return make


def _question(text: str = "When did Priya start a pottery class?") -> Question:
    return Question("q1", "c1", text, "2", "temporal", ("7 May 2023",), question_date=datetime(2023, 9, 1))


def _prompt_of(body: dict) -> str:
    return body["messages"][-1]["content"]


def test_llm_answerer_renders_the_style_prompt_and_parses_the_reply(client_for):
    from evolvemem.roles.answer_llm import LLMAnswerer

    def responder(body: dict) -> str:
        prompt = _prompt_of(body)
        if "Reasoning:" in prompt.splitlines()[-1]:
            return "Memory 1 is about Priya; yesterday relative to 8 May 2023.\nAnswer: 7 May 2023"
        return "7 May 2023"

    with FakeLLMServer(responder=responder) as server:
        answerer = LLMAnswerer(client_for(server))
        assert answerer.name == "llm:openai/fake-model"
        concise = answerer.answer(_question(), CONTEXT[:2], "concise")
        reasoned = answerer.answer(_question(), CONTEXT[:2], "step_by_step")
        prompts = [_prompt_of(body) for body in server.requests]
    assert concise.text == "7 May 2023" and not concise.failed
    assert concise.cost.calls == 1 and concise.cost.prompt_tokens > 0 and concise.cost.completion_tokens == 3
    assert reasoned.text == "7 May 2023" and "Memory 1" in reasoned.notes["raw"]
    assert "1. [8 May 2023] Priya: I started a pottery class yesterday." in prompts[0]
    assert "asked on 1 September 2023" in prompts[0] and "When did Priya start a pottery class?" in prompts[0]
    assert prompts[0] != prompts[1]


def test_llm_answerer_normalises_abstentions_and_uses_the_cache(client_for):
    from evolvemem.roles.answer_llm import LLMAnswerer

    with FakeLLMServer(responder=lambda body: "The memories do not say; it is not stated.") as server:
        answerer = LLMAnswerer(client_for(server))
        first = answerer.answer(_question("What car does Priya drive?"), CONTEXT, "cautious")
        second = answerer.answer(_question("What car does Priya drive?"), CONTEXT, "cautious")
        assert server.request_count == 1
    assert first.text == ABSTENTION
    assert second.cost.cache_hits == 1 and second.cost.calls == 0


def test_llm_answerer_reports_a_failed_call_instead_of_raising(client_for):
    from evolvemem.roles.answer_llm import LLMAnswerer

    with FakeLLMServer() as server:
        server.fail_next(500, count=10)
        result = LLMAnswerer(client_for(server)).answer(_question(), CONTEXT, "concise")
    assert result.failed and result.text == "" and "500" in result.error
    with FakeLLMServer() as server:
        server.fail_next(401)
        result = LLMAnswerer(client_for(server)).answer(_question(), CONTEXT, "detailed")
    assert result.failed and "401" in result.error


def test_llm_verifier_strict_and_multi_candidate(client_for):
    from evolvemem.roles.verify import LLMVerifier

    def responder(body: dict) -> str:
        prompt = _prompt_of(body)
        proposed = re.findall(r"^(?:Proposed|First) answer: (.*)$", prompt, re.M)[-1]
        if "Proposed answer" in prompt:  # strict
            if proposed == "7 May 2023":
                return json.dumps({"supported": True, "answer": "7 May 2023", "reason": "memory 1"})
            return json.dumps({"supported": False, "answer": "Not mentioned in the conversation.", "reason": "none"})
        return json.dumps(
            {
                "candidates": [
                    {"answer": "7 May 2023", "memories": [1], "score": 0.9},
                    {"answer": proposed, "memories": [], "score": 0.1},
                ],
                "answer": "7 May 2023",
            }
        )

    with FakeLLMServer(responder=responder) as server:
        verifier = LLMVerifier(client_for(server))
        kept = verifier.verify(_question(), CONTEXT, AnswerResult("7 May 2023"), "strict")
        withdrawn = verifier.verify(_question(), CONTEXT, AnswerResult("8 May 2022"), "strict")
        replaced = verifier.verify(_question(), CONTEXT, AnswerResult("2022"), "multi_candidate")
        assert json.loads(json.dumps(server.requests[0]["response_format"])) == {"type": "json_object"}
    assert kept.text == "7 May 2023" and kept.notes["verified"] == "kept"
    assert kept.cost.calls == 1  # its own call only; the answer's cost is not repeated
    assert withdrawn.text == ABSTENTION and withdrawn.notes["verified"] == "abstained"
    assert replaced.text == "7 May 2023" and replaced.notes["verified"] == "replaced"
    assert len(replaced.notes["candidates"]) == 2


def test_llm_verifier_keeps_the_answer_when_verification_fails(client_for):
    from evolvemem.roles.verify import LLMVerifier

    with FakeLLMServer(responder=lambda body: "I would rather not say.") as server:
        result = LLMVerifier(client_for(server)).verify(_question(), CONTEXT, AnswerResult("7 May 2023"), "strict")
    assert result.text == "7 May 2023" and result.notes["verified"] == "error" and not result.failed
    assert result.cost.calls == 2  # the reply and the one re-ask for JSON were both paid for
    with FakeLLMServer() as server:
        server.fail_next(503, count=10)
        result = LLMVerifier(client_for(server)).verify(
            _question(), CONTEXT, AnswerResult("7 May 2023"), "multi_candidate"
        )
    assert result.text == "7 May 2023" and "verify_error" in result.notes
    failed = AnswerResult("", failed=True, error="boom")
    with FakeLLMServer() as server:
        assert LLMVerifier(client_for(server)).verify(_question(), CONTEXT, failed, "strict") is failed
        assert server.request_count == 0


# ----------------------------------------------------------------------------- real LoCoMo text
def test_reader_handles_every_dev_question_given_its_evidence(locomo_path):
    """Robustness on real conversation text: with the gold evidence turns in the context (plus
    distractors), every question gets an answer string and time questions mostly get dates."""
    from evolvemem.data.locomo import load_locomo
    from evolvemem.memory.offline_extract import OfflineExtractor
    from evolvemem.scoring.locomo import locomo_f1

    dataset = load_locomo(locomo_path)
    extractor = OfflineExtractor()
    reader = OfflineAnswerer()
    scores: dict[str, list[float]] = {}
    for conversation_id, conversation in dataset.conversations.items():
        units, _ = extractor.extract(conversation)
        by_turn = {u.source_turn_ids[0]: u for u in units}
        for question in (q for q in dataset.questions if q.conversation_id == conversation_id):
            evidence = [by_turn[t] for t in question.evidence if t in by_turn]
            distractors = units[len(question.text) % 50 :: 97][:6]
            result = reader.answer(question, evidence + distractors, "concise")
            assert isinstance(result.text, str) and result.text.strip()
            if question.category != "5":
                scores.setdefault(question.category, []).append(
                    locomo_f1(result.text, question.answer, question.category)
                )
    mean = {category: sum(v) / len(v) for category, v in scores.items()}
    assert mean["2"] > 0.4  # temporal: dates resolved from the memory's date and notes
    assert mean["4"] > 0.15

"""What small local models do, handled by the product (against the fake server, exactly):
prompts sized to a small context window, text copied from the prompt's example dropped,
contradicting or failed diagnoses replaced by the rubric's best action, the menu mode, and
model-only settings following the answer-side model."""

from __future__ import annotations

import json
from pathlib import Path

from evolvemem.space.action_space import files_space
from tests.fake_llm_server import FakeLLMServer, wants_json
from tests.test_llm_pipeline import (  # noqa: F401 - new_cache and seed_cache are fixtures
    MODEL,
    evolve,
    first_memory_word,
    first_user_message,
    new_cache,
    query,
    seed_cache,
)


def is_free_diagnosis(body: dict) -> bool:
    return wants_json(body) and "Your reply" in first_user_message(body)


def is_menu_diagnosis(body: dict) -> bool:
    return wants_json(body) and "candidate changes" in first_user_message(body)


def responder(diagnosis: str = "{}", menu: str = "{}"):
    def respond(body: dict) -> str:
        if is_free_diagnosis(body):
            return diagnosis
        if is_menu_diagnosis(body):
            return menu
        if wants_json(body):
            return "{}"
        return first_memory_word(first_user_message(body))

    return respond


def run(server: FakeLLMServer, out: Path, *extra: str, rounds: str = "1"):
    result = evolve(
        "run",
        "--benchmark",
        "synth",
        "--rounds",
        rounds,
        "--diagnosis-model",
        MODEL,
        "--api-base",
        server.url,
        "--diagnoser",
        "llm",
        "--out",
        str(out),
        "--quiet",
        *extra,
    )
    assert result.exit_code == 0, result.output
    return result


def decisions(out: Path) -> list[dict]:
    return query(out, "SELECT * FROM decisions ORDER BY round")


def test_a_small_window_gets_a_trimmed_prompt_and_never_an_oversized_request(tmp_path: Path) -> None:
    reply = json.dumps({"analysis": "Misses dominate.", "changes": {"semantic_top_k": 10}, "rationale": "more"})
    with FakeLLMServer(responder(reply), context_window=4096) as server:
        run(server, tmp_path / "run")
        assert server.oversized == [] and any(is_free_diagnosis(b) for b in server.requests)
    diagnosis = query(tmp_path / "run", "SELECT * FROM diagnoses")[0]
    assert diagnosis["prompt_trimmed"] and diagnosis["parse_error"] is None
    assert "the settings' descriptions" in diagnosis["prompt_trimmed"] or diagnosis["prompt_trimmed"]
    assert decisions(tmp_path / "run")[0]["fallback"] is None


def test_an_unreported_window_is_learned_from_the_first_rejection(tmp_path: Path) -> None:
    """llama.cpp's wording; tests/test_window_retry.py has llama-cpp-python's and the fallbacks."""
    reply = json.dumps({"analysis": "Misses dominate.", "changes": {"semantic_top_k": 10}, "rationale": "more"})
    with FakeLLMServer(responder(reply), context_window=4096, report_window=False) as server:
        # round 1 (no gain on saturated synth) is built on, so round 1 is diagnosed anew
        run(server, tmp_path / "run", "--no-parsimony", rounds="2")
        assert len(server.oversized) == 1  # the first diagnosis; its retry and every later prompt are sized
    rows = query(tmp_path / "run", "SELECT round, parse_error, prompt_trimmed, calls FROM diagnoses ORDER BY round")
    assert rows[0]["parse_error"] is None and rows[0]["calls"] == 2 and rows[0]["prompt_trimmed"]
    assert rows[1]["prompt_trimmed"] and rows[1]["calls"] == 1
    assert decisions(tmp_path / "run")[0]["fallback"] is None  # retried in the same round, not the rubric


def test_a_window_too_small_for_any_prompt_fails_clearly_and_falls_back(tmp_path: Path) -> None:
    with FakeLLMServer(responder("{}"), context_window=900) as server:
        run(server, tmp_path / "run")
        assert server.oversized == []
    row = query(tmp_path / "run", "SELECT parse_error FROM diagnoses")[0]
    assert "does not fit the context window of 900" in row["parse_error"]
    assert "rubric fallback" in decisions(tmp_path / "run")[0]["fallback"]


def test_text_copied_from_the_prompt_example_is_dropped_or_refused(tmp_path: Path) -> None:
    """The example is about an invented person and a budget cut; a small model repeats it."""
    reply = json.dumps(
        {
            "analysis": "The budget cut drops the dated memories.",
            "changes": {"semantic_top_k": 10},
            "missing_topics": ["when Priya moved", "pets"],
            "new_dimensions": [
                {"name": "priya_boost", "description": "favour memories about Priya", "rationale": "x"},
                {
                    "name": "speaker_filter",
                    "description": "keep memories said by the asked person",
                    "rationale": "answers mix speakers",
                },
            ],
            "rationale": "The budget cut drops the dated memories.",
        }
    )
    with FakeLLMServer(responder(reply)) as server:
        run(server, tmp_path / "run")
    proposal = query(tmp_path / "run", "SELECT proposal FROM diagnoses")[0]["proposal"]
    assert proposal["changes"] == {"semantic_top_k": 10} and proposal["rationale"] == ""
    assert proposal["missing_topics"] == ["pets"]
    # a copied lever is recorded as refused with the reason, never materialised
    refused = {d["name"]: d["refused"] for d in proposal["new_dimensions"]}
    assert refused["priya_boost"] == "copied from the prompt's example"
    assert sum("copied from the prompt's example" in r for r in proposal["rejected"]) == 3
    rows = {r["name"]: r for r in query(tmp_path / "run", "SELECT name, status, reason FROM proposed_dimensions")}
    assert rows["priya_boost"]["status"] == "refused" and "copied" in rows["priya_boost"]["reason"]
    # no bundle: not a lever either, and said so
    assert rows["speaker_filter"]["status"] == "refused" and "empty bundle" in rows["speaker_filter"]["reason"]
    assert not (tmp_path / "run" / "rounds" / "round_00" / "new_dimensions").exists()


def test_a_change_against_the_evidence_is_rejected_and_the_rubric_acts_instead(tmp_path: Path) -> None:
    """Round 0 of `weak` on synth: retrieval misses dominate (the dense view is off); the model
    wants a smaller context."""
    reply = json.dumps({"analysis": "too much noise", "changes": {"max_context": 6}, "rationale": "less noise"})
    with FakeLLMServer(responder(reply)) as server:
        # balanced: without a token budget `weak`'s eight memories are what cut (an evidence run fills its budget)
        run(server, tmp_path / "run", "--objective", "balanced")
    proposal = query(tmp_path / "run", "SELECT proposal FROM diagnoses")[0]["proposal"]
    assert proposal["changes"] == {} and any("shrinks max_context" in r for r in proposal["rejected"])
    first = decisions(tmp_path / "run")[0]
    assert "rubric fallback" in first["fallback"] and first["decision"] == "applied"
    assert all(c["field"] != "max_context" or c["new"] > c["old"] for c in first["changes"])
    shown = evolve("show", str(tmp_path / "run"))
    assert "rubric fallback" in shown.stdout


def test_menu_mode_applies_the_chosen_candidate_with_valid_adjustments_only(tmp_path: Path) -> None:
    menu = json.dumps({"choice": 1, "adjust": {"semantic_top_k": 14, "max_context": 30}, "why": "misses"})
    with FakeLLMServer(responder(menu=menu)) as server:
        run(server, tmp_path / "run", "--diagnosis-mode", "menu", "--objective", "balanced")
        prompts = [first_user_message(b) for b in server.requests if is_menu_diagnosis(b)]
    assert len(prompts) == 1 and "1. " in prompts[0] and len(prompts[0]) < 3000
    first = decisions(tmp_path / "run")[0]
    assert first["fallback"] is None and first["decision"] == "applied"
    assert [(c["field"], c["new"]) for c in first["changes"]] == [("semantic_top_k", 14)]
    proposal = query(tmp_path / "run", "SELECT proposal FROM diagnoses")[0]["proposal"]
    assert any("max_context: not a setting of candidate 1" in r for r in proposal["rejected"])


def test_menu_mode_with_a_bad_choice_falls_back_to_the_rubric(tmp_path: Path) -> None:
    with FakeLLMServer(responder(menu=json.dumps({"choice": 99}))) as server:
        run(server, tmp_path / "run", "--diagnosis-mode", "menu", "--objective", "balanced")
    first = decisions(tmp_path / "run")[0]
    assert "not one of the" in first["fallback"] and first["decision"] == "applied"


def test_model_only_settings_follow_the_answer_side_model(tmp_path: Path) -> None:
    """Only the diagnosis has a model: settings that ask the answer model are never changed."""
    name, dim = next((n, d) for n, d in sorted(files_space().items()) if d.needs_model and d.kind in ("enum", "bool"))
    value = (not dim.default) if dim.kind == "bool" else next(c for c in dim.choices if c != dim.default)
    with FakeLLMServer(responder(json.dumps({"changes": {name: value, "semantic_top_k": 10}}))) as server:
        run(server, tmp_path / "run")
    proposal = query(tmp_path / "run", "SELECT proposal FROM diagnoses")[0]["proposal"]
    assert proposal["changes"] == {"semantic_top_k": 10}
    assert any(r.startswith(name) and "answers offline" in r for r in proposal["rejected"])


def test_answer_and_verification_prompts_leave_out_the_lowest_ranked_memories_to_fit(tmp_path: Path) -> None:
    config = tmp_path / "wide.toml"
    config.write_text(
        f"max_context = {files_space()['max_context'].max}\nenable_answer_verification = true\n"
        'verification_style = "strict"\n',
        encoding="utf-8",
    )
    with FakeLLMServer(responder(), context_window=900) as server:
        result = evolve(
            "eval",
            "--benchmark",
            "synth",
            "--model",
            MODEL,
            "--extract-model",
            "offline",
            "--api-base",
            server.url,
            "--config",
            str(config),
            "--out",
            str(tmp_path / "ev"),
            "--quiet",
        )
        assert result.exit_code == 0, result.output
        assert server.oversized == []
    rows = query(tmp_path / "ev", "SELECT failed, prompt_trimmed, len(context_ids) AS shown FROM question_records")
    assert rows and not any(r["failed"] for r in rows)
    trimmed = [r for r in rows if r["prompt_trimmed"]]
    assert trimmed, "a 900-token window cannot hold the widest context"
    notes = [note for r in trimmed for note in r["prompt_trimmed"]]
    assert any(n.startswith("the ") and "lowest-ranked" in n for n in notes)
    assert any(n.startswith("verification: ") for n in notes)

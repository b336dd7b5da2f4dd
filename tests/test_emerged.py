"""Emerged dimensions without a run: what makes a proposed bundle valid, how its definition travels
with a config, and that every diagnoser can switch a lever on (space/emerged.py, loop/emergence.py)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from evolvemem.contracts.diagnosis import UNKNOWN_SETTING, DiagnosisInput, NewDimension, ScoreSummary, proposal_from_raw
from evolvemem.diagnosers.random_search import RandomDiagnoser
from evolvemem.diagnosers.rubric import RubricDiagnoser
from evolvemem.errors import ConfigError
from evolvemem.loop.emergence import emerge
from evolvemem.loop.evidence_check import flag_proposal
from evolvemem.space.action_space import files_space
from evolvemem.space.config import config_to_toml, load_config
from evolvemem.space.emerged import (
    RefusedDimension,
    build_dimension,
    materialise,
    read_run_dimensions,
    run_space,
)
from evolvemem.space.ops import action_space_text, perturb, suggest_config

WIDE = {"semantic_top_k": 12, "keyword_top_k": 12}


def lever(name: str = "wide_views", maps_to: dict | None = None, per_type: bool = False, space=None):
    return build_dimension(space or files_space(), name, "Both views a little wider.", dict(maps_to or WIDE), per_type)


def with_levers(*levers):
    """The files' space plus `levers` (what a run's space is after they emerged)."""
    return files_space().with_dimensions(levers)


@pytest.mark.parametrize(
    ("name", "maps_to", "per_type", "why"),
    [
        ("empty_one", {}, False, "empty bundle"),
        ("unknown_one", {"graph_hops": 2, "max_context": 10}, False, "unknown dimension 'graph_hops'"),
        ("too_far", {"max_context": 999, "keyword_top_k": 10}, False, "out-of-range value for max_context: 999"),
        ("wrong_type", {"max_context": "lots", "keyword_top_k": 10}, False, "invalid value for max_context"),
        ("fraction", {"max_context": 10.5, "keyword_top_k": 10}, False, "whole number"),
        ("single", {"max_context": 10}, False, "a bundle of one setting is max_context itself"),
        ("max_context", WIDE, False, "name clash: 'max_context' is already a dimension"),
        ("scenes", WIDE, False, "name clash: 'scenes' is already a group"),
        ("per_category_overrides", WIDE, False, "reserved"),
        ("Score", WIDE, False, "bad name"),
        ("x", WIDE, False, "bad name"),
        (
            "typed_scene",
            {"scene_similarity": 0.8, "scene_top_k": 10},
            True,
            "scene_similarity cannot be set per question type",
        ),
    ],
)
def test_an_invalid_bundle_is_refused_with_the_reason(name, maps_to, per_type, why) -> None:
    with pytest.raises(RefusedDimension, match=why.replace("(", r"\(").replace(")", r"\)")):
        build_dimension(files_space(), name, "A lever.", maps_to, per_type)


def test_a_duplicate_bundle_a_bundle_of_bundles_and_no_description_are_refused() -> None:
    space = with_levers(lever())
    with pytest.raises(RefusedDimension, match="duplicate of the existing bundle 'wide_views'"):
        build_dimension(space, "same_views", "The same.", {"keyword_top_k": 12, "semantic_top_k": 12})
    with pytest.raises(RefusedDimension, match="may not switch another bundle"):
        build_dimension(space, "nested", "Nested.", {"wide_views": True, "max_context": 10})
    with pytest.raises(RefusedDimension, match="no description"):
        build_dimension(space, "quiet_one", "  ", {"max_context": 10, "keyword_top_k": 8})
    assert build_dimension(files_space(), "same_views", "The same.", {"keyword_top_k": 12, "semantic_top_k": 12})


def test_a_valid_bundle_is_a_bool_lever_equal_to_its_file(tmp_path: Path) -> None:
    dim = lever(maps_to={"scene_top_k": 10, "max_context": 16, "cue_graph_mode": "llm"})
    assert dim.kind == "bool" and dim.default is False and dim.group == "emerged" and dim.mechanism_off is False
    assert dim.needs_model  # a member only acts with a model: so does the lever (offline runs leave it alone)
    assert dim.model_calls  # a member can ask the model again: so can the lever (explorations leave it alone)
    space, path = materialise(tmp_path, 3, dim, files_space())
    assert path == tmp_path / "rounds" / "round_03" / "new_dimensions" / "wide_views.toml"
    assert space["wide_views"] == dim and space.added() == (dim,) and "wide_views" not in files_space()
    assert read_run_dimensions(tmp_path) == [dim]
    assert run_space(tmp_path) == space  # what another process reads from the run's files
    assert "- wide_views (bool: true | false; default False)" in action_space_text(space)
    assert "true sets scene_top_k=10, max_context=16, cue_graph_mode='llm'" in action_space_text(space)
    assert "wide_views" not in action_space_text(files_space())


def test_a_damaged_lever_file_is_a_clear_error(tmp_path: Path) -> None:
    materialise(tmp_path, 1, lever(), files_space())
    path = tmp_path / "rounds" / "round_01" / "new_dimensions" / "wide_views.toml"
    path.write_text(path.read_text().replace("semantic_top_k = 12", "semantic_top_k = 400"))
    with pytest.raises(ConfigError, match="wide_views.toml: out-of-range value for semantic_top_k"):
        read_run_dimensions(tmp_path)


def test_a_config_that_uses_a_lever_carries_its_definition(tmp_path: Path) -> None:
    space = with_levers(lever())
    before = load_config("weak")[0]
    assert "wide_views" not in before.values()
    weak = load_config("weak", space=space)[0]
    assert weak.values()["wide_views"] is False and weak.fingerprint() == before.fingerprint()
    on, _ = weak.with_changes({"wide_views": True})
    off, _ = weak.with_changes({"wide_views": False})
    assert off.fingerprint() == weak.fingerprint() != on.fingerprint()
    effective = on.for_type("temporal")
    assert (effective.semantic_top_k, effective.keyword_top_k) == (12, 12)
    assert weak.for_type("temporal").semantic_top_k == 0
    path = tmp_path / "best_config.toml"
    path.write_text(config_to_toml(on))
    assert "[emerged_dimensions.wide_views]" in path.read_text()

    loaded, clamps = load_config(path)  # only the file: the files' space plus what it embeds
    assert not clamps and loaded.fingerprint() == on.fingerprint() and loaded.for_type(None).keyword_top_k == 12
    assert loaded.space == space and "wide_views" not in files_space()

    bare = tmp_path / "bare.toml"
    bare.write_text("wide_views = true\n")
    with pytest.raises(ConfigError, match="unknown config field 'wide_views'.*emerged_dimensions"):
        load_config(bare)
    assert load_config(bare, space=space)[0].values()["wide_views"] is True
    other = tmp_path / "other.toml"
    other.write_text(path.read_text().replace("keyword_top_k = 12 }", "keyword_top_k = 20 }"))
    assert load_config(other)[0].for_type(None).keyword_top_k == 20  # alone, its own definition
    with pytest.raises(ConfigError, match="'wide_views' is already defined differently"):
        load_config(other, space=loaded.space)  # read with another lever of the same name


def test_a_per_type_lever_changes_only_the_type_it_is_switched_on_for() -> None:
    space = with_levers(lever("deep_multi_hop", {"cue_graph_top_k": 10, "max_context": 20}, per_type=True))
    config, _ = load_config("default", space=space)[0].with_changes({"deep_multi_hop": True}, question_type="multi_hop")
    assert config.for_type("multi_hop").cue_graph_top_k == 10 and config.for_type("multi_hop").max_context == 20
    assert config.for_type("temporal").cue_graph_top_k == 0
    proposal = proposal_from_raw({"overrides": {"temporal": {"deep_multi_hop": True}}}, space)
    assert proposal.overrides == {"temporal": {"deep_multi_hop": True}}
    unknown = proposal_from_raw({"overrides": {"temporal": {"deep_multi_hop": True}}}, files_space())
    assert not unknown.overrides and unknown.new_dimensions[0].refused == UNKNOWN_SETTING


def test_the_reply_format_carries_a_definition_and_unknown_settings_are_refused() -> None:
    proposal = proposal_from_raw(
        {
            "changes": {"score": 3},
            "new_dimensions": [
                {
                    "name": "wide_views",
                    "description": "wider",
                    "maps_to": WIDE,
                    "per_type": False,
                    "rationale": "misses",
                },
                "just text",
                {"name": "odd", "maps_to": ["max_context"]},
            ],
        },
        files_space(),
    )
    unknown, first, text, odd = proposal.new_dimensions
    assert (first.name, first.maps_to, first.per_type, first.refused) == ("wide_views", WIDE, False, "")
    assert text.refused == "not a definition with a name"
    assert odd.refused == "maps_to must be an object of settings"
    assert unknown.name == "score" and unknown.refused == UNKNOWN_SETTING


def test_emergence_materialises_valid_proposals_once_and_records_every_refusal(tmp_path: Path) -> None:
    proposed = [
        NewDimension("wide_views", "Both views wider.", "misses", dict(WIDE)),
        NewDimension("wide_twice", "Same again.", "", dict(WIDE)),
        NewDimension("per_type_junk", "x", "", {"max_context": 10, "keyword_top_k": 8}, per_type="yes"),
        NewDimension("score", refused=UNKNOWN_SETTING),
    ]
    space, rows = emerge(tmp_path, 2, proposed, files_space())
    assert [d.name for d in space.added()] == ["wide_views"]
    assert [(r.name, r.status) for r in rows] == [
        ("wide_views", "materialised"),
        ("wide_twice", "refused"),
        ("per_type_junk", "refused"),
        ("score", "refused"),
    ]
    assert rows[0].file == "rounds/round_02/new_dimensions/wide_views.toml" and rows[0].reason is None
    assert "duplicate" in str(rows[1].reason) and "per_type must be true or false" in str(rows[2].reason)
    # a resumed round (its lever loaded from the file) asks again: the same lever, not a name clash
    same, again = emerge(tmp_path, 2, [NewDimension("wide_views", "Both views wider.", "misses", dict(WIDE))], space)
    assert same is space
    assert again[0].status == "materialised"
    assert len(list(tmp_path.glob("rounds/*/new_dimensions/*.toml"))) == 1


def diagnosis_input(config, taxonomy: dict[str, int]) -> DiagnosisInput:
    return DiagnosisInput(
        round=1,
        objective="all",
        score=0.3,
        overall=ScoreSummary(),
        by_type=[],
        by_category=[],
        taxonomy=taxonomy,
        taxonomy_by_type={},
        worst_cases=[],
        config=config.values(),
        overrides=config.overrides(),
        mean_context=8.0,
    )


def test_the_rubric_switches_on_a_lever_that_makes_the_moves_its_rules_ask_for() -> None:
    weak = load_config("weak")[0]
    misses = {"retrieval_miss": 12, "correct": 10, "answer_error": 2}
    before = RubricDiagnoser().diagnose(diagnosis_input(weak, misses), weak).proposal
    assert "wide_views" not in before.changes
    weak = weak.with_space(with_levers(lever()))  # dense view on and keyword view wider: two firing rules at once
    after = RubricDiagnoser().diagnose(diagnosis_input(weak, misses), weak).proposal
    assert after.changes == {"wide_views": True} and "switch on the lever wide_views" in after.rationale
    # a lever no rule asks for is tried last, and never once it is on
    on, _ = weak.with_changes({"wide_views": True})
    assert "wide_views" not in RubricDiagnoser().diagnose(diagnosis_input(on, misses), on).proposal.changes


def test_random_tpe_and_exploration_sample_a_lever_too() -> None:
    base = load_config("default", space=with_levers(lever()))[0]
    # a draw moves 3 of the space's ~55 dimensions: 200 seeds find the lever with room to spare
    # (40 did only by luck, and a new dimension could change that luck)
    assert any(perturb(base, random.Random(seed), 3)[0].values()["wide_views"] for seed in range(200))
    assert any(
        RandomDiagnoser(seed).diagnose(diagnosis_input(base, {}), base).proposal.changes.get("wide_views")
        for seed in range(200)
    )
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    assert {suggest_config(study.ask(), base).values()["wide_views"] for _ in range(12)} == {False, True}


def test_switching_on_a_lever_is_checked_against_the_evidence_like_its_settings() -> None:
    space = with_levers(lever("tight_views", {"max_context": 6, "keyword_top_k": 5}))
    config = load_config("default", space=space)[0]
    proposal = proposal_from_raw({"changes": {"tight_views": True}}, space)
    inp = diagnosis_input(config, {"retrieval_miss": 12, "correct": 5})
    flags = flag_proposal(proposal, inp, space, reject=True)
    assert flags and "switches on tight_views, which shrinks max_context (12 → 6)" in flags[0]
    assert proposal.changes == {} and proposal.rejected


def test_ablation_switches_a_lever_off_like_any_mechanism() -> None:
    from evolvemem.loop.ablate import ablation_variants

    before = load_config("default")[0]  # made before the lever existed
    on, _ = before.with_space(with_levers(lever())).with_changes({"wide_views": True})
    variants = {v.label: v for v in ablation_variants(on)}
    assert variants["wide_views"].config.values()["wide_views"] is False
    assert "wide_views" not in {v.label for v in ablation_variants(before)}


def test_a_new_run_inherits_the_levers_its_start_switches_on_and_nothing_else(tmp_path: Path) -> None:
    from evolvemem.space.emerged import begin_run_dimensions

    loaded = with_levers(lever(), lever("story_mode", {"context_order": "chronological", "answer_style": "detailed"}))
    start, _ = load_config("weak", space=loaded)[0].with_changes({"story_mode": True})
    space, stored = begin_run_dimensions(tmp_path, start.model_dump(), start.space)
    assert [p.name for p in (tmp_path / "inherited_dimensions").iterdir()] == ["story_mode.toml"]
    assert [d.name for d in space.added()] == ["story_mode"]
    assert "wide_views" not in space and "wide_views" not in stored and stored["story_mode"] is True
    assert run_space(tmp_path) == space  # what a resume reads
    from evolvemem.space.config import parse_config

    assert parse_config(stored, space=space)[0].for_type(None).context_order == "chronological"


def test_a_lever_defined_and_switched_on_in_one_reply_waits_for_the_next_round() -> None:
    proposal = proposal_from_raw(
        {
            "changes": {"wide_views": True, "max_context": 14},
            "new_dimensions": [{"name": "wide_views", "description": "wider", "maps_to": WIDE}],
        },
        files_space(),
    )
    assert proposal.changes == {"max_context": 14}
    assert [(d.name, d.refused) for d in proposal.new_dimensions] == [("wide_views", "")]
    assert any("switch it on in a later round" in r for r in proposal.rejected)


def test_only_the_example_lever_itself_counts_as_copied() -> None:
    from evolvemem.diagnosers.llm import EXAMPLE_MARKER, drop_echoes
    from evolvemem.contracts.diagnosis import Proposal

    prompt = f'rules about levers\n{EXAMPLE_MARKER}: {{"new_dimensions": [{{"name": "tight_recent_window"}}]}}'
    proposal = Proposal(
        new_dimensions=[
            NewDimension("tight_recent_window", "Small.", "", dict(WIDE)),
            NewDimension("recent", "Newest first.", "", dict(WIDE)),
        ]
    )
    drop_echoes(proposal, prompt)
    assert [d.refused for d in proposal.new_dimensions] == ["copied from the prompt's example", ""]

"""The action space: its dimensions, the generated config, strict parsing, clamping, diff, perturbation, Optuna."""

from __future__ import annotations

import json
import random

import pytest

from evolvemem.errors import ConfigError
from evolvemem.space.budget import TokenBudget
from evolvemem.space.config import RetrievalConfig, config_to_toml, load_config, parse_config
from evolvemem.space.ops import (
    action_space_text,
    config_to_trial_params,
    diff_configs,
    optuna_distributions,
    perturb,
    suggest_config,
)
from evolvemem.space.action_space import files_space

PAPER_DIMENSIONS = {
    "semantic_top_k",
    "keyword_top_k",
    "structured_top_k",
    "max_context",
    "fusion_mode",
    "rrf_k",
    "semantic_weight",
    "keyword_weight",
    "structured_weight",
    "importance_weight",
    "recency_weight",
    "time_decay_half_life_days",
    "enable_entity_swap",
    "entity_swap_semantic_top_k",
    "entity_swap_keyword_top_k",
    "enable_query_decomposition",
    "max_sub_queries",
    "decomposition_merge_top_k",
    "reflection_rounds",
    "answer_style",
    "enable_answer_verification",
    "verification_style",
}


def test_registry_has_every_paper_dimension_with_ranges():
    dims = files_space()
    assert PAPER_DIMENSIONS <= set(dims)
    assert (dims["semantic_top_k"].min, dims["semantic_top_k"].max, dims["semantic_top_k"].off) == (3, 200, 0)
    assert (dims["max_context"].min, dims["max_context"].max) == (6, 200)
    assert dims["fusion_mode"].choices == ("sum", "weighted_sum", "rrf")
    assert (dims["keyword_weight"].min, dims["keyword_weight"].max) == (0.1, 2.5)
    assert dims["time_decay_half_life_days"].optional and dims["time_decay_half_life_days"].default is None
    assert len(dims["answer_style"].choices) == 6
    assert dims["verification_style"].choices == ("strict", "multi_candidate")
    assert dims["reflection_rounds"].max == 3
    for dim in dims.dimensions():
        assert dim.description and dim.group


def test_model_fields_are_generated_from_the_files_space():
    assert set(RetrievalConfig.model_fields) == set(files_space()) | {"per_category_overrides"}
    schema = RetrievalConfig.model_json_schema()
    assert schema["properties"]["max_context"]["minimum"] == 6
    assert schema["properties"]["fusion_mode"]["enum"] == ["sum", "weighted_sum", "rrf"]


def test_weak_preset_is_the_paper_starting_point():
    weak, clamps = load_config("weak")
    assert clamps == []
    assert (weak.semantic_top_k, weak.keyword_top_k, weak.structured_top_k, weak.max_context) == (0, 5, 0, 8)
    assert not weak.enable_entity_swap and not weak.enable_query_decomposition
    assert weak.reflection_rounds == 0 and not weak.enable_answer_verification
    default, _ = load_config("default")
    assert default == RetrievalConfig()


def test_strict_parsing_bool_strings_unknown_fields_and_types():
    cfg, _ = parse_config({"enable_entity_swap": "false", "enable_query_decomposition": "true"})
    assert cfg.enable_entity_swap is False and cfg.enable_query_decomposition is True
    with pytest.raises(ConfigError, match="unknown config field 'semantic_topk'"):
        parse_config({"semantic_topk": 5})
    with pytest.raises(ConfigError, match="'max_context'.*number"):
        parse_config({"max_context": "lots"})
    with pytest.raises(ConfigError, match="fusion_mode"):
        parse_config({"fusion_mode": "max"})
    with pytest.raises(ConfigError, match="enable_entity_swap"):
        parse_config({"enable_entity_swap": "maybe"})
    with pytest.raises(ConfigError, match="unknown question type 'poetry'"):
        parse_config({"per_category_overrides": {"poetry": {"max_context": 10}}})
    with pytest.raises(ConfigError, match="rrf_k.*cannot be overridden"):
        parse_config({"per_category_overrides": {"temporal": {"rrf_k": 30}}})


def test_out_of_range_values_are_clamped_and_reported():
    cfg, clamps = parse_config(
        {
            "semantic_top_k": 500,
            "max_context": 2,
            "keyword_top_k": 0,
            "per_category_overrides": {"temporal": {"keyword_weight": 9}},
        }
    )
    assert (cfg.semantic_top_k, cfg.max_context, cfg.keyword_top_k) == (200, 6, 0)  # 0 = off is not clamped
    assert cfg.overrides()["temporal"]["keyword_weight"] == 2.5
    reported = {(c.field, c.scope, c.new) for c in clamps}
    assert reported == {
        ("semantic_top_k", "global", 200),
        ("max_context", "global", 6),
        ("keyword_weight", "temporal", 2.5),
    }
    assert "clamped to 200" in str(clamps[0])


def test_for_type_resolves_overrides_once():
    cfg, _ = parse_config({"max_context": 10, "per_category_overrides": {"temporal": {"max_context": 20}}})
    assert cfg.for_type("temporal").max_context == 20
    assert cfg.for_type("single_fact").max_context == 10
    assert cfg.for_type("temporal").overrides() == {}
    assert cfg.for_type("temporal").fingerprint() != cfg.for_type("multi_hop").fingerprint()


def test_toml_round_trip_and_json_configs(tmp_path):
    cfg, _ = parse_config(
        {"time_decay_half_life_days": 30, "per_category_overrides": {"multi_hop": {"enable_query_decomposition": True}}}
    )
    path = tmp_path / "c.toml"
    path.write_text(config_to_toml(cfg, header="test"))
    again, _ = load_config(str(path))
    assert again == cfg
    jpath = tmp_path / "c.json"
    jpath.write_text(json.dumps({"max_context": 14, "time_decay_half_life_days": None}))
    assert load_config(str(jpath))[0].max_context == 14
    bad = tmp_path / "bad.toml"
    bad.write_text("max_context = = 3")
    with pytest.raises(ConfigError, match="bad.toml: cannot parse"):
        load_config(str(bad))
    with pytest.raises(ConfigError, match="neither a preset"):
        load_config("no-such-preset")


def test_diff_lists_global_and_override_changes():
    a, _ = load_config("weak")
    b, _ = a.with_changes({"max_context": 12})
    b, _ = b.with_changes({"answer_style": "temporal"}, question_type="temporal")
    changes = {(c.field, c.scope, c.old, c.new) for c in diff_configs(a, b)}
    assert changes == {("max_context", "global", 8, 12), ("answer_style", "temporal", "(global)", "temporal")}


def test_perturbation_stays_in_range_and_is_seeded():
    base = RetrievalConfig()
    one, changes = perturb(base, random.Random(3), n_dims=4)
    two, _ = perturb(base, random.Random(3), n_dims=4)
    assert one == two and 1 <= len(changes) <= 4
    dims = files_space()
    for _ in range(50):
        cfg, _ = perturb(base, random.Random(_), n_dims=6)
        for name, value in cfg.values().items():
            d = dims[name]
            if d.kind in ("int", "float") and value is not None and value != d.off:
                assert d.min <= value <= d.max


def test_optuna_sampling_covers_the_files_space():
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=0))
    trial = study.ask()
    cfg = suggest_config(trial)
    assert isinstance(cfg, RetrievalConfig)
    params = config_to_trial_params(cfg)
    assert set(optuna_distributions(cfg.space)) >= {k for k in params if not k.endswith("__on")}


def test_prompt_text_is_generated_from_the_files_space():
    text = action_space_text(files_space())
    for name, dim in files_space().items():
        assert name in text
    assert "3..30 (or 0 = off)" in text and "(or null = off)" in text


def test_a_new_dimension_file_needs_no_code(tmp_path):
    """A lever built from existing mechanisms: a bool with maps_to, added by one file."""
    import os
    import subprocess
    import sys

    (tmp_path / "9_extra.toml").write_text(
        '[wide_recall]\ntype = "bool"\ndefault = false\nper_type = true\n'
        'description = "Wide recall: more candidates from both text views."\n'
        "maps_to = { semantic_top_k = 25, keyword_top_k = 25 }\n"
    )
    script = (
        "from evolvemem.space.config import parse_config\n"
        "from evolvemem.space.action_space import files_space\n"
        "assert files_space()['wide_recall'].group == 'extra'\n"
        "cfg, _ = parse_config({'per_category_overrides': {'multi_hop': {'wide_recall': 'true'}}})\n"
        "print(cfg.for_type('multi_hop').semantic_top_k, cfg.for_type('temporal').semantic_top_k)\n"
    )
    env = {**os.environ, "EVOLVEMEM_ACTION_SPACE": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, cwd=str(tmp_path.parent), check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["25", "10"]


def test_every_choice_the_registry_offers_has_an_implementation():
    """Choice lists live only in action_space/*.toml; each choice must reach code that handles it."""
    import numpy as np

    from evolvemem.prompts import load_prompt
    from evolvemem.retrieval.fusion import ViewHits, fuse

    dims = files_space()
    for style in dims["answer_style"].choices:
        assert load_prompt(f"answer_{style}").render(question="q", question_date="", context="c")
    for style in dims["verification_style"].choices:
        assert load_prompt(f"verify_{style}")
    hits = [ViewHits("semantic", np.array([0, 2]), np.array([0.9, 0.5]), 1.0)]
    for mode in dims["fusion_mode"].choices:
        rows, scores = fuse(hits, mode)
        assert rows.tolist() == [0, 2] and scores.max() == 1.0


def test_each_kind_of_dimension_is_a_class_picked_by_its_type(tmp_path):
    from evolvemem.space.dimensions import (
        BoolDimension,
        EnumDimension,
        FloatDimension,
        IntDimension,
        dimension_from_table,
        dimension_to_toml,
    )
    import tomllib

    dims = files_space()
    assert isinstance(dims["semantic_top_k"], IntDimension) and isinstance(dims["keyword_weight"], FloatDimension)
    assert isinstance(dims["fusion_mode"], EnumDimension) and isinstance(dims["enable_entity_swap"], BoolDimension)
    assert [dims[n].kind for n in ("semantic_top_k", "keyword_weight", "fusion_mode", "enable_entity_swap")] == [
        "int",
        "float",
        "enum",
        "bool",
    ]
    views = dims["semantic_top_k"]
    assert views.coerce("12") == 12 and views.clamp(900) == 200 and views.clamp(0) == 0  # 0 is its off value
    with pytest.raises(ValueError, match="whole number"):
        views.coerce(2.5)
    assert dims["keyword_weight"].clamp(9) == 2.5 and isinstance(dims["keyword_weight"].clamp(1), float)
    assert (
        dims["enable_entity_swap"].coerce("yes") is True and dims["enable_entity_swap"].range_text() == "true | false"
    )
    with pytest.raises(ValueError, match="expected one of sum, weighted_sum, rrf"):
        dims["fusion_mode"].coerce("max")
    rng = random.Random(5)
    assert all(dims["fusion_mode"].sample(rng, "rrf") in ("sum", "weighted_sum") for _ in range(20))
    # the TOML a run writes for a lever reads back into an equal dimension of the same class
    for name in ("semantic_top_k", "keyword_weight", "fusion_mode", "time_decay_half_life_days"):
        table = tomllib.loads(dimension_to_toml(dims[name]))[name]
        assert dimension_from_table(tmp_path / "x.toml", name, {**table, "group": dims[name].group}) == dims[name]
    with pytest.raises(ConfigError, match="type must be one of int, float, bool, enum"):
        dimension_from_table(tmp_path / "x.toml", "odd", {"type": "text", "default": "a", "description": "d"})
    with pytest.raises(ConfigError, match="numeric dimensions need min and max"):
        dimension_from_table(tmp_path / "x.toml", "odd", {"type": "int", "default": 1, "description": "d"})


def test_a_space_with_more_levers_is_a_new_value_and_the_files_space_is_unchanged():
    from evolvemem.space.dimensions import BoolDimension

    files = files_space()
    lever = BoolDimension(
        name="wide_pair",
        default=False,
        group="emerged",
        description="Both text views wider.",
        maps_to={"semantic_top_k": 25, "keyword_top_k": 25},
    )
    grown = files.with_dimensions([lever])
    assert grown is not files and "wide_pair" in grown and "wide_pair" not in files_space()
    assert grown.added() == (lever,) and files.added() == () and grown.base_names == files.base_names
    assert grown.with_dimensions([lever]) is grown  # the same definition again adds nothing
    assert grown.expand(["emerged", "max_context"]) == ["max_context", "wide_pair"]
    # a stage names every dimension of it: `--freeze retrieval` leaves the answer side free
    answer_side = set(files.answer_stage())
    assert {"answer_style", "context_layout", "context_order"} <= answer_side
    assert set(files.expand(["retrieval"])) == set(files) - answer_side and "max_context" not in answer_side
    assert files.expand(["answer"]) == list(files.answer_stage())
    with pytest.raises(ConfigError, match="unknown dimension, group or stage 'nope'"):
        grown.expand(["nope"])
    other = BoolDimension(name="wide_pair", default=False, group="emerged", description="Something else.")
    with pytest.raises(ConfigError, match="'wide_pair' is already defined differently"):
        grown.with_dimensions([other])
    with pytest.raises(ConfigError, match="'max_context' is already defined differently .in action_space/"):
        files.with_dimensions([BoolDimension(name="max_context", default=False, group="x", description="d")])
    # a config knows the space it was parsed with, and every config made from it keeps it
    config, _ = parse_config({"wide_pair": True}, space=grown)
    assert config.space is grown and config.for_type("temporal").semantic_top_k == 25
    assert (
        config.with_changes({"max_context": 20})[0].space is grown
        and config.with_budget(TokenBudget(500)).space is grown
    )
    with pytest.raises(ConfigError, match="unknown config field 'wide_pair'"):
        parse_config({"wide_pair": True})  # the files' space alone does not know it
    plain = load_config("weak")[0]
    assert plain.space == files and plain.with_space(grown).values()["wide_pair"] is False
    assert plain.with_space(grown).fingerprint() == plain.fingerprint()  # a lever at its default changes nothing


def _space_with(tmp_path, table: str):
    """The files' space plus one extra file holding `table` (read fresh, not from the cache)."""
    from evolvemem.paths import action_space_dir
    from evolvemem.space.action_space import _files_space

    (tmp_path / "9_extra.toml").write_text(table)
    return _files_space.__wrapped__((action_space_dir(), tmp_path))


def test_acts_when_is_read_checked_and_decides_whether_a_change_acts(tmp_path):
    from evolvemem.space.acting import acts, idle_changes

    dims = files_space()
    values = RetrievalConfig().values()
    # rrf by default: a view's weight acts once its view is on; under sum fusion no weight does
    assert not acts(dims, "late_weight", values) and acts(dims, "late_weight", {**values, "late_top_k": 10})
    assert not acts(dims, "late_weight", {**values, "late_top_k": 10, "fusion_mode": "sum"})
    assert acts(dims, "rrf_k", values) and not acts(dims, "rrf_k", {**values, "fusion_mode": "weighted_sum"})
    # any one alternative is enough: scenes read rrf_k whatever the fusion
    assert acts(dims, "rrf_k", {**values, "fusion_mode": "sum", "scene_top_k": 10})
    assert not acts(dims, "max_context", {**values, "context_token_budget": 800})
    assert acts(dims, "max_context", {**values, "context_token_budget": 800, "judge_retries": 1})
    assert not acts(dims, "recency_weight", values)  # no half-life: recency is off whatever its weight
    # a change acts under the config it makes: together with the view, the weight acts
    assert idle_changes(dims, values, {}, {"late_weight": 2.0}) == ["late_weight"]
    assert idle_changes(dims, values, {}, {"late_weight": 2.0, "late_top_k": 10}) == []
    # a global change acts where a type's override leaves it to the global value, not where it sets it
    overrides = {"temporal": {"late_top_k": 10}}
    assert idle_changes(dims, values, overrides, {"late_weight": 2.0}) == []
    assert idle_changes(dims, values, {"temporal": {"late_top_k": 10, "late_weight": 1.5}}, {"late_weight": 2.0}) == [
        "late_weight"
    ]
    assert idle_changes(dims, values, overrides, {"late_weight": 2.0}, "multi_hop") == ["late_weight"]

    good = '[odd]\ntype = "int"\nmin = 1\nmax = 5\ndefault = 2\ndescription = "d"\n'
    space = _space_with(tmp_path, good + 'acts_when = { fusion_mode = ["rrf"], enable_entity_swap = "on" }\n')
    assert acts(space, "odd", {"fusion_mode": "rrf", "enable_entity_swap": True})
    assert not acts(space, "odd", {"fusion_mode": "rrf", "enable_entity_swap": False})
    for bad, says in (
        ('acts_when = { nonesuch = "on" }', "unknown dimension 'nonesuch'"),
        ('acts_when = { fusion_mode = ["max"] }', "expected one of sum, weighted_sum, rrf"),
        ('acts_when = { fusion_mode = "on" }', "fusion_mode has no off state"),
        ('acts_when = { odd = "on" }', "names the dimension itself"),
        ('acts_when = { late_top_k = "sometimes" }', 'expected a list of values, "on" or "off"'),
        ("acts_when = []", "acts_when must be a table of conditions"),
    ):
        with pytest.raises(ConfigError, match="9_extra.toml") as error:
            _space_with(tmp_path, good + bad + "\n")
        assert says in str(error.value)


def test_the_typed_view_is_generated_from_the_files_and_up_to_date():
    """config_fields.py (what a type checker reads of RetrievalConfig) is what the generator writes
    from action_space/ now, with one attribute per field of the model, typed as the model types it."""
    import typing

    from evolvemem.space import config_fields, gen_typed
    from evolvemem.space.action_space import registry_space

    assert gen_typed.TARGET.read_text(encoding="utf-8") == gen_typed.render(registry_space())
    annotations = typing.get_type_hints(config_fields.ConfigFields)
    fields = {k: f.annotation for k, f in RetrievalConfig.model_fields.items() if k != "per_category_overrides"}
    assert annotations == fields
    assert gen_typed.type_text(annotations["fusion_mode"]) == 'Literal["sum", "weighted_sum", "rrf"]'
    assert gen_typed.type_text(annotations["time_decay_half_life_days"]) == "float | None"


def test_value_reads_any_dimension_of_the_configs_space_a_runs_lever_included():
    from evolvemem.space.dimensions import dimension_from_table
    from pathlib import Path

    lever = dimension_from_table(
        Path("lever.toml"),
        "wide_recall",
        {"type": "bool", "default": False, "description": "d", "maps_to": {"semantic_top_k": 25, "keyword_top_k": 25}},
    )
    config, _ = parse_config({"wide_recall": True}, space=files_space().with_dimensions([lever]))
    assert config.value("wide_recall") is True and config.value("max_context") == config.max_context
    with pytest.raises(KeyError, match="nonesuch"):
        config.value("nonesuch")


def test_a_types_effective_config_is_made_once_and_a_copy_at_another_budget_resolves_its_own():
    at_600 = load_config("default")[0].with_budget(TokenBudget(600))
    temporal = at_600.for_type("temporal")
    assert at_600.for_type("temporal") is temporal  # an evaluation asks once per question: made once
    at_1500 = at_600.with_budget(TokenBudget(1500))
    assert at_1500.for_type("temporal").budget == TokenBudget(1500)
    assert at_1500.for_type("temporal").token_limit != temporal.token_limit
    assert at_600.for_type("temporal").budget == TokenBudget(600)

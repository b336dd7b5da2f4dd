"""A run's rules live in the library: `RunSpec` checks itself, so `Session.create(RunSpec(...))` from a
script is refused with the very line `evolve run` prints for the same setting, before any file is
written; `RunSpec.for_models` fills the defaults that hang on which roles a model plays."""

from __future__ import annotations

import subprocess
import sys

import pytest

from evolvemem.errors import EvolveMemError
from evolvemem.loop.spec import GuardSettings, RunSpec

EVOLVE = [sys.executable, "-m", "evolvemem.cli.main"]

# (the options `evolve run` is given, the same settings given to the library)
BAD = [
    (["--objective", "fastest"], {"objective": "fastest"}),
    (["--screen-fraction", "1.5"], {"screen_fraction": 1.5}),
    (["--alpha", "1.2"], {"guard": {"alpha": 1.2}}),
    (["--screen-alpha", "0"], {"screen_alpha": 0.0}),
    (["--candidates", "3", "--objective", "evidence"], {"candidates": 3, "objective": "evidence"}),
    (["--diagnoser", "oracle"], {"diagnoser": "oracle"}),
    (["--rounds", "-1"], {"rounds": -1}),
]


def library_error(settings: dict[str, object]) -> str:
    given: dict[str, object] = {"benchmark": "synth", "data": None, "diagnoser": "rubric", **settings}
    with pytest.raises(EvolveMemError) as caught:
        if isinstance(given.get("guard"), dict):
            given["guard"] = GuardSettings(**given["guard"])  # type: ignore[arg-type]
        RunSpec(**given)  # type: ignore[arg-type]
    return str(caught.value)


@pytest.mark.parametrize(("options", "settings"), BAD, ids=[" ".join(o) for o, _ in BAD])
def test_a_bad_setting_is_the_same_one_line_error_from_a_script_and_from_the_cli(options, settings, tmp_path):
    message = library_error(settings)
    assert "\n" not in message
    out = tmp_path / "run"
    done = subprocess.run(
        [*EVOLVE, "run", "--benchmark", "synth", "--out", str(out), *options],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == f"error: {message}"
    assert not out.exists()  # refused before anything was written


def test_session_create_refuses_a_spec_the_cli_would_refuse(tmp_path):
    from evolvemem.session import Session
    from evolvemem.space.config import load_config

    spec = RunSpec(benchmark="synth", data=None, diagnoser="rubric", rounds=0)
    with pytest.raises(EvolveMemError, match=r"--screen-fraction must be between 0 and 1, not 2"):
        Session.create(RunSpec(**{**spec.__dict__, "screen_fraction": 2.0}), tmp_path / "run", load_config("weak")[0])
    assert not (tmp_path / "run").exists()


def test_defaults_follow_the_models():
    offline = RunSpec.for_models(benchmark="synth", data=None)
    assert (offline.objective, offline.diagnoser, offline.screen_fraction) == ("evidence", "rubric", 0.0)
    answered = RunSpec.for_models(benchmark="synth", data=None, models={"model": "openai/m"})
    assert (answered.objective, answered.diagnoser, answered.screen_fraction) == ("balanced", "llm", 0.25)
    # several candidates are compared on a minibatch, offline too; what is given stays
    compared = RunSpec.for_models(benchmark="synth", data=None, objective="balanced", candidates=2)
    assert compared.screen_fraction == 0.25
    assert RunSpec.for_models(benchmark="synth", data=None, diagnoser="tpe").diagnoser == "tpe"

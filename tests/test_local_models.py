"""The local (sentence-transformers) models travel as one value: a run's manifest keeps them as three
flat keys (old manifests read the same), and `evolve transfer` and a served run directory use the
embedding model the run evolved with when none is given (a config's dense weights were tuned on it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dataclasses import replace

from evolvemem.contracts.local_models import ENCODER_ENV, Encoder, LocalModels, default_encoder
from evolvemem.errors import ConfigError
from evolvemem.loop.spec import RunSpec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_second_embedder import tiny_embedding_model  # noqa: E402,F401  (a module-scoped fixture)

EVOLVE = [sys.executable, "-m", "evolvemem.cli.main"]


def test_a_run_spec_keeps_its_local_models_as_three_flat_manifest_keys():
    spec = RunSpec(benchmark="synth", data=None, diagnoser="rubric", local_models=LocalModels("e", "r", "s"))
    stored = json.loads(json.dumps(spec.as_dict()))
    assert "local_models" not in stored
    assert (stored["embedding_model"], stored["rerank_model"], stored["second_embedding_model"]) == ("e", "r", "s")
    resolved = replace(spec.local_models, encoder=default_encoder())  # a run records the backend it used
    assert stored["encoder"] == resolved.encoder.value
    assert RunSpec.from_dict(stored) == replace(spec, local_models=resolved)
    older = {k: v for k, v in stored.items() if k not in ("rerank_model", "second_embedding_model", "encoder")}
    assert RunSpec.from_dict(older).local_models == LocalModels("e", encoder=Encoder.TORCH)  # torch was all there was


def test_the_encoder_is_chosen_by_option_then_environment_and_a_wrong_name_is_one_line(monkeypatch):
    monkeypatch.setenv(ENCODER_ENV, "onnx-int8")
    assert default_encoder() is Encoder.ONNX_INT8
    assert LocalModels().as_spec()["encoder"] == "onnx-int8"
    assert LocalModels(encoder=Encoder.TORCH).as_spec()["encoder"] == "torch"  # the option wins
    assert LocalModels().or_else(LocalModels.from_spec({"encoder": "onnx"})).encoder is Encoder.ONNX  # the run's own
    monkeypatch.setenv(ENCODER_ENV, "tensorflow")
    with pytest.raises(ConfigError) as err:
        default_encoder()
    assert ENCODER_ENV in str(err.value) and "onnx-int8" in str(err.value) and "\n" not in str(err.value)


def test_a_model_given_wins_over_the_runs_own_and_default_means_none():
    runs_own = LocalModels.from_spec({"embedding_model": "run-e", "rerank_model": "run-r"})  # before --encoder: torch
    assert LocalModels(rerank="mine").or_else(runs_own) == LocalModels("run-e", "mine", None, Encoder.TORCH)
    assert LocalModels.from_spec({"embedding_model": "default", "rerank_model": ""}) == LocalModels(
        encoder=Encoder.TORCH
    )


def evolve(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*EVOLVE, *args, "--quiet"], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


@pytest.mark.slow
def test_commands_started_from_a_run_use_the_embedding_model_it_evolved_with(tiny_embedding_model, tmp_path):  # noqa: F811
    """transfer, eval --config RUN, run --init RUN and serving a run directory: the run's model and
    its encoder backend (int8 here, which no default picks)."""
    from evolvemem.store.run_store import RunStore

    run_dir, model = tmp_path / "run", str(tiny_embedding_model)
    evolve(
        "run", "--benchmark", "synth", "--rounds", "0", "--embedding-model", model, "--encoder", "onnx-int8",
        "--out", str(run_dir),
    )  # fmt: skip
    evolve("transfer", str(run_dir), "--benchmark", "synth", "--out", str(tmp_path / "transfer"))
    evolve("eval", "--benchmark", "synth", "--config", str(run_dir), "--out", str(tmp_path / "eval"))
    evolve("run", "--benchmark", "synth", "--rounds", "0", "--init", str(run_dir), "--out", str(tmp_path / "again"))
    for started in ("transfer", "eval", "again"):
        with RunStore(tmp_path / started, read_only=True) as store:
            manifest = store.manifest()
        recorded = LocalModels.from_spec(manifest.get("spec") or manifest)
        assert (recorded.embedding, recorded.encoder) == (model, Encoder.ONNX_INT8), started
    pytest.importorskip("duckdb")
    from evolvemem.serving import Memory

    with Memory.open(tmp_path / "memory.duckdb", run_dir) as memory:
        assert memory.embedder.model_name == model and memory.embedder.inner.backend is Encoder.ONNX_INT8
    with Memory.open(tmp_path / "memory.duckdb", run_dir, local_models=LocalModels(embedding="other")) as memory:
        assert memory.embedder.model_name == "other" and memory.embedder.inner.backend is Encoder.ONNX_INT8
    with Memory.open(tmp_path / "memory.duckdb", run_dir, local_models=LocalModels(encoder=Encoder.TORCH)) as memory:
        assert memory.embedder.inner.backend is Encoder.TORCH  # an explicit --encoder wins over the run's


@pytest.mark.parametrize("how", ["option", "environment"])
def test_a_wrong_encoder_is_one_line_before_any_directory_is_made(tmp_path, how):
    import os

    out = tmp_path / "eval"
    args = [*EVOLVE, "eval", "--benchmark", "synth", "--out", str(out), "--quiet"]
    env = dict(os.environ)
    if how == "option":
        args += ["--encoder", "tensorflow"]
    else:
        env[ENCODER_ENV] = "tensorflow"
    done = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 2 and "unknown encoder 'tensorflow'" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not out.exists()

"""Which config a served memory uses: a preset, a config file, or a run directory's best round.

A run directory also says which models its rounds were scored with (its manifest): a memory
serving that run's best config answers with the same roles unless told otherwise. `signature`
changes when the source's files change, so a server can swap a newly evolved config in without
a restart.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from evolvemem.contracts.local_models import LocalModels
from evolvemem.contracts.vocab import Phase
from evolvemem.errors import ConfigError
from evolvemem.roles.factory import ModelSettings
from evolvemem.loop.frontier import point_config_file
from evolvemem.loop.snapshots import frontier_config_name
from evolvemem.loop.spec import manifest_budget
from evolvemem.space.config import RetrievalConfig, load_config, parse_config

BEST_CONFIG = "best_config.toml"


@dataclass(frozen=True)
class RunPoint:
    """A run's point at one token budget (`--config RUN --budget N`): its best config there."""

    run_dir: Path
    tokens: int

    def __str__(self) -> str:
        return f"{self.run_dir} at {self.tokens} tokens"


ConfigSpec = str | Path | RunPoint  # what a served memory is told to load


def spec_at(config: str | Path, budget: int | None) -> ConfigSpec:
    """`--config` with an optional `--budget`, which picks a point of a run directory."""
    if budget is None:
        return config
    if not Path(config).is_dir():
        raise ConfigError(f"--budget picks a point of a run directory; {config} is not one")
    return RunPoint(Path(config), budget)


@dataclass(frozen=True)
class LoadedConfig:
    config: RetrievalConfig
    source: str  # what was loaded, for messages ("preset default", "runs/x round 3")
    models: ModelSettings | None  # the run's models, for a run directory
    warnings: tuple[str, ...] = ()
    local_models: LocalModels = LocalModels()  # a run directory's own


def load_serving_config(spec: ConfigSpec) -> LoadedConfig:
    """A preset name, a TOML/JSON config file, a run directory (its best round's config), or a
    run's point at one budget."""
    if isinstance(spec, RunPoint):
        return _from_run(spec.run_dir, spec.tokens)
    path = Path(spec)
    if path.is_dir():
        return _from_run(path)
    config, clamps = load_config(spec)
    label = f"preset {spec}" if not path.exists() else str(path)
    return LoadedConfig(config, label, None, tuple(str(c) for c in clamps))


def _from_run(run_dir: Path, tokens: int | None = None) -> LoadedConfig:
    from evolvemem.space.emerged import run_space
    from evolvemem.store.run_store import DB_NAME, RunStore

    if not (run_dir / DB_NAME).is_file():
        raise ConfigError(f"{run_dir}: a directory but not a run (no {DB_NAME})")
    space = run_space(run_dir)  # with the levers that emerged in the run
    with RunStore(run_dir, read_only=True) as store:
        best = store.best_round()
        row = store.round_row(best, Phase.TEST_BEST) or store.round_row(best, Phase.DEV)
        manifest = store.manifest()
        spec = manifest.get("spec") or {}
        budget = manifest_budget(manifest)
    if row is None:
        raise ConfigError(f"{run_dir}: the run has no scored round yet")
    config, clamps = parse_config(row.config or {}, source=f"{run_dir} round {best}", space=space)
    config = config.with_budget(budget)  # the budget the run measured it at: served contexts are the measured ones
    label = f"{run_dir} round {best}"
    if tokens is not None:  # a point of the run's frontier: its exported file, with its budget
        config, clamps = load_config(point_config_file(run_dir, tokens), space)
        label = str(RunPoint(run_dir, tokens))
    if not isinstance(spec, dict):
        spec = {}
    models = spec.get("models")
    settings = ModelSettings(**models) if isinstance(models, dict) else None
    return LoadedConfig(
        config,
        label,
        settings,
        tuple(str(c) for c in clamps),
        LocalModels.from_spec(spec),
    )


# What `source_signature` compares: (file, modification time in ns, size) per file, None when unreadable.
SourceSignature = tuple[tuple[str, int | None, int | None], ...]


def source_signature(spec: ConfigSpec) -> SourceSignature:
    """Changes when the files a config comes from change (modification time and size). For a run
    directory that is its exported best config, written when the run finishes: a run still writing
    its store is not reloaded at every round."""
    if isinstance(spec, RunPoint):
        files = [spec.run_dir / frontier_config_name(spec.tokens), spec.run_dir / BEST_CONFIG]
    else:
        path = Path(spec)
        files = [path / BEST_CONFIG] if path.is_dir() else [path]
    out: list[tuple[str, int | None, int | None]] = []
    for file in files:
        try:
            stat = file.stat()
            out.append((str(file), stat.st_mtime_ns, stat.st_size))
        except OSError:
            out.append((str(file), None, None))
    return tuple(out)

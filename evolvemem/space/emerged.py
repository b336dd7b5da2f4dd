"""Dimensions that emerge from a run's diagnoses: a new bool lever that switches on a bundle of
existing settings (`maps_to`), checked as strictly as any change, written as a file in the
action-space format and part of the run's space from the next round on.

Where they live:
    runs/<id>/rounds/round_NN/new_dimensions/<name>.toml   emerged from round NN's diagnosis
    runs/<id>/inherited_dimensions/<name>.toml             came with the run's starting config
A config file that uses one carries its definition in an `[emerged_dimensions.<name>]` table
(`config_to_toml` writes it, `load_config` reads it), so the file alone can be evaluated.

Nothing here changes a space in place: reading a run's levers, starting a run and materialising a
lever each return the `ActionSpace` to use from then on."""

from __future__ import annotations

from typing import Any

import re
import tomllib
from pathlib import Path

from evolvemem.errors import ConfigError
from evolvemem.space.action_space import ActionSpace, files_space
from evolvemem.space.dimensions import BoolDimension, Dimension, dimension_from_table, dimension_to_toml

EMERGED_GROUP = "emerged"
EMBEDDED_SECTION = "emerged_dimensions"  # the table of a config file that carries definitions
RESERVED_NAMES = frozenset({"per_category_overrides", EMBEDDED_SECTION})
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]{2,47}$")
MAX_DESCRIPTION = 300
NEW_DIMENSIONS = "new_dimensions"
INHERITED = "inherited_dimensions"

SettingValue = bool | int | float | str | None


class RefusedDimension(ValueError):
    """A proposed dimension that cannot become a lever; the message says why."""


def _checked_members(maps_to: object, per_type: bool, dims: ActionSpace) -> dict[str, SettingValue]:
    """The bundle's settings validated by the space's own rules: every member known, not a
    bundle itself, its value of the right type and inside the range (never clamped: a proposal
    that needs clamping is refused)."""
    if not isinstance(maps_to, dict) or not maps_to:
        raise RefusedDimension("empty bundle: maps_to names no existing setting")
    clean: dict[str, SettingValue] = {}
    for key, value in maps_to.items():
        dim = dims.get(str(key))
        if dim is None:
            raise RefusedDimension(f"unknown dimension {key!r} in maps_to (`evolve space` lists them)")
        if dim.maps_to:
            raise RefusedDimension(f"maps_to may not switch another bundle ({key})")
        try:
            coerced = dim.coerce(value)
        except ValueError as exc:
            raise RefusedDimension(f"invalid value for {key}: {exc}") from None
        if dim.clamp(coerced) != coerced:
            raise RefusedDimension(f"out-of-range value for {key}: {value!r} (range {dim.range_text()})")
        if per_type and not dim.per_type:
            raise RefusedDimension(f"{key} cannot be set per question type, so a per-type bundle cannot hold it")
        clean[dim.name] = coerced
    return clean


def build_dimension(
    space: ActionSpace, name: object, description: object, maps_to: object, per_type: object = False
) -> Dimension:
    """A proposed lever of `space` as a Dimension, or RefusedDimension saying why not: a bad or
    clashing name, no description, an empty bundle, an unknown member, a value out of range, a
    single setting (that is the setting itself) or the same bundle as an existing lever."""
    text = str(name or "").strip()
    if not NAME_PATTERN.match(text):
        raise RefusedDimension(f"bad name {text!r}: use 3-48 lower-case letters, digits and _, starting with a letter")
    dims = space
    groups = dims.groups()
    if text in dims or text in RESERVED_NAMES or text in groups:
        raise RefusedDimension(
            f"name clash: {text!r} is already "
            + ("a dimension" if text in dims else "a group" if text in groups else "reserved")
        )
    about = " ".join(str(description or "").split())
    if not about:
        raise RefusedDimension("no description: say what the lever does")
    if not isinstance(per_type, bool):
        raise RefusedDimension(f"per_type must be true or false, got {per_type!r}")
    members = _checked_members(maps_to, per_type, dims)
    if len(members) < 2:
        only = next(iter(members))
        raise RefusedDimension(f"a bundle of one setting is {only} itself: propose it as a change instead")
    for other in dims.dimensions():
        if other.maps_to and dict(other.maps_to) == members:
            raise RefusedDimension(f"duplicate of the existing bundle {other.name!r}")
    spec = {
        "type": "bool",
        "default": False,
        "group": EMERGED_GROUP,
        "per_type": per_type,
        "needs_model": any(dims[k].needs_model for k in members),
        "model_calls": any(dims[k].model_calls for k in members),
        "needs_reranker": any(dims[k].needs_reranker for k in members),
        "needs_second_embedder": any(dims[k].needs_second_embedder for k in members),
        "mechanism": {"off": False},
        "description": about[:MAX_DESCRIPTION],
        "maps_to": members,
    }
    return dimension_from_table(Path(f"{text}.toml"), text, spec)


def check_definition(dim: Dimension, where: str, space: ActionSpace) -> Dimension:
    """A definition read back from a file is a bool bundle of valid settings of `space` (a
    hand-edited or damaged file is a ConfigError naming it)."""
    if not isinstance(dim, BoolDimension) or not dim.maps_to:
        raise ConfigError(f"{where}: an emerged dimension must be a bool with maps_to")
    try:
        _checked_members(dim.maps_to, dim.per_type, space)
    except RefusedDimension as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return dim


def dimensions_from_tables(tables: object, where: str, space: ActionSpace) -> list[Dimension]:
    """Definitions embedded in a config file (`[emerged_dimensions.<name>]`), checked against `space`."""
    if not isinstance(tables, dict):
        raise ConfigError(f"{where}: {EMBEDDED_SECTION} must be a table of dimensions")
    dims = []
    for name, spec in tables.items():
        if not isinstance(spec, dict):
            raise ConfigError(f"{where}: [{EMBEDDED_SECTION}.{name}] must be a table")
        dims.append(
            check_definition(
                dimension_from_table(Path(where), str(name), spec), f"{where}: [{EMBEDDED_SECTION}.{name}]", space
            )
        )
    return dims


def embedded_toml(space: ActionSpace, names: list[str]) -> str:
    """The `[emerged_dimensions.<name>]` tables of `space`'s added dimensions among `names`."""
    return "\n".join(dimension_to_toml(space[n], f"{EMBEDDED_SECTION}.{n}") for n in names if space.is_added(n))


# ---- a run's files ------------------------------------------------------------------------
def round_dimensions_dir(run_dir: Path, round_no: int) -> Path:
    return Path(run_dir) / "rounds" / f"round_{round_no:02d}" / NEW_DIMENSIONS


def _write(folder: Path, dim: Dimension, header: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{dim.name}.toml"
    path.write_text(f"# {header}\n{dimension_to_toml(dim)}", encoding="utf-8")
    return path


def materialise(run_dir: Path, round_no: int, dim: Dimension, space: ActionSpace) -> tuple[ActionSpace, Path]:
    """Write a lever that emerged from round `round_no`'s diagnosis; returns `space` with it, and
    the file."""
    grown = space.with_dimensions([dim])  # a clash is an error before anything is written
    path = _write(
        round_dimensions_dir(run_dir, round_no),
        dim,
        f"emerged from the diagnosis of round {round_no}; switch it on with {dim.name} = true",
    )
    return grown, path


def inherit(run_dir: Path, dims: list[Dimension]) -> list[Path]:
    """Write the levers a run's starting config came with (an --init from another run)."""
    return [_write(Path(run_dir) / INHERITED, dim, "came with the starting config") for dim in dims]


def _round_number(path: Path) -> int:
    digits = path.parent.parent.name.removeprefix("round_")
    return int(digits) if digits.isdigit() else -1


def run_dimension_files(run_dir: Path) -> list[Path]:
    """Inherited levers first, then those that emerged, by round."""
    run_dir = Path(run_dir)
    emerged = sorted(run_dir.glob(f"rounds/round_*/{NEW_DIMENSIONS}/*.toml"), key=lambda p: (_round_number(p), p.name))
    return sorted((run_dir / INHERITED).glob("*.toml")) + emerged


def read_run_dimensions(run_dir: Path, space: ActionSpace | None = None) -> list[Dimension]:
    """A run's inherited and emerged levers, read from its files (each checked against the files'
    space and the levers before it)."""
    space = space or files_space()
    dims: list[Dimension] = []
    for path in run_dimension_files(run_dir):
        try:
            tables = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: not valid TOML ({exc})") from None
        for name, spec in tables.items():
            if not isinstance(spec, dict):
                raise ConfigError(f"{path}: [{name}] must be a table")
            dim = check_definition(dimension_from_table(path, name, spec), str(path), space)
            space = space.with_dimensions([dim])
            dims.append(dim)
    return dims


def run_space(run_dir: Path, space: ActionSpace | None = None) -> ActionSpace:
    """The space of one run: `space` (default: the action-space files') plus that run's levers."""
    base = space or files_space()
    return base.with_dimensions(read_run_dimensions(run_dir, base))


def begin_run_dimensions(
    run_dir: Path, start: dict[str, Any], space: ActionSpace
) -> tuple[ActionSpace, dict[str, Any]]:
    """A new run's space: the action-space files plus the added levers of `space` (the starting
    config's) that its starting config (as stored) switches on, written to the run's
    inherited_dimensions/ so that a resume, a transfer or an --init from this run reads that config
    again. Returns that space and the starting config to store: without the added levers it leaves
    off (a lever loaded but unused does not become part of the run)."""
    added = {dim.name: dim for dim in space.added()}
    used = set(switched_on(start, set(added)))
    inherit(run_dir, [added[name] for name in sorted(used)])
    unused = set(added) - used
    kept = {k: v for k, v in start.items() if k not in unused}
    overrides = start.get("per_category_overrides")
    if isinstance(overrides, dict):
        kept["per_category_overrides"] = {
            t: {k: v for k, v in o.items() if k not in unused} for t, o in overrides.items() if isinstance(o, dict)
        }
    return run_space(run_dir), kept


def switched_on(config: dict[str, Any], names: set[str]) -> list[str]:
    """Which of the levers `names` a config (as stored: values plus per_category_overrides)
    switches on, globally or for a question type."""
    overrides = config.get("per_category_overrides") or {}
    on = {n for n in names if config.get(n)}
    on |= {n for settings in overrides.values() if isinstance(settings, dict) for n in names if settings.get(n)}
    return sorted(on)

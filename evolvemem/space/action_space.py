"""`ActionSpace`: the dimensions a config may set — those of the action-space files, then the levers
a run added (emerged from its diagnoses, or embedded in a loaded config) — as one immutable value.

Nothing here is process-global: the files' space is read once per folder set (`files_space`,
cached because it never changes), and a space with more levers is a new value
(`with_dimensions`). A config carries the space it was parsed with (space/config.py); the
session owns a run's space and replaces it when a lever emerges."""

from __future__ import annotations

import functools
import os
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from evolvemem.errors import ConfigError
from evolvemem.paths import action_space_dir
from evolvemem.space.dimensions import (
    STAGES,
    Condition,
    Dimension,
    EnumDimension,
    NumericDimension,
    dimension_from_table,
)


@dataclass(frozen=True)
class ActionSpace:
    """The files' dimensions (`base`), then the added ones (`extra`), in order."""

    base: tuple[Dimension, ...]
    extra: tuple[Dimension, ...] = ()
    _by_name: dict[str, Dimension] = field(init=False, repr=False, compare=False)
    _base_names: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {d.name: d for d in (*self.base, *self.extra)})
        object.__setattr__(self, "_base_names", frozenset(d.name for d in self.base))

    # ---- reads -------------------------------------------------------------------------------
    def __getitem__(self, name: str) -> Dimension:
        return self._by_name[name]

    def get(self, name: str) -> Dimension | None:
        return self._by_name.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)

    def items(self) -> Iterable[tuple[str, Dimension]]:
        return self._by_name.items()

    def dimensions(self) -> Iterable[Dimension]:
        return self._by_name.values()

    def added(self) -> tuple[Dimension, ...]:
        """The dimensions beyond the action-space files (a run's levers), in the order added."""
        return self.extra

    @property
    def base_names(self) -> frozenset[str]:
        """The names of the action-space files' dimensions."""
        return self._base_names

    def is_added(self, name: str) -> bool:
        return name in self._by_name and name not in self.base_names

    def groups(self) -> set[str]:
        return {d.group for d in self._by_name.values()}

    def numeric(self, name: str) -> NumericDimension:
        """A number dimension (its range is read), or TypeError naming what it is instead."""
        dim = self._by_name[name]
        if not isinstance(dim, NumericDimension):
            raise TypeError(f"{name} is {dim.kind}: it has choices or true/false, not a range")
        return dim

    def enum(self, name: str) -> EnumDimension:
        """A choice dimension (its choices are read), or TypeError naming what it is instead."""
        dim = self._by_name[name]
        if not isinstance(dim, EnumDimension):
            raise TypeError(f"{name} is {dim.kind}: it has no choices")
        return dim

    def in_stage(self, stage: str) -> tuple[str, ...]:
        """The dimensions of one stage (`retrieval`: what builds a context, `answer`: what acts on a
        built one), in order."""
        return tuple(name for name, dim in self._by_name.items() if dim.stage == stage)

    def answer_stage(self) -> tuple[str, ...]:
        """The dimensions that act on a built context (`stage = "answer"`), in order."""
        return self.in_stage("answer")

    def expand(self, names: Iterable[str]) -> list[str]:
        """Dimension names from names of dimensions, of groups (an action_space file's stem, e.g.
        `scenes` for 6_scenes.toml) or of stages (`in_stage`), in order. An unknown name is a ConfigError."""
        groups = self.groups()
        wanted: set[str] = set()
        for raw in names:
            name = raw.strip()
            if name in self._by_name:
                wanted.add(name)
            elif name in groups:
                wanted.update(n for n, d in self._by_name.items() if d.group == name)
            elif name in STAGES:
                wanted.update(self.in_stage(name))
            elif name:
                raise ConfigError(
                    f"unknown dimension, group or stage {name!r} (groups: {', '.join(sorted(groups))}; "
                    f"stages: {', '.join(STAGES)}; `evolve space` lists the dimensions)"
                )
        return [n for n in self._by_name if n in wanted]

    # ---- a larger space ----------------------------------------------------------------------
    def with_dimensions(self, dims: Iterable[Dimension]) -> ActionSpace:
        """This space plus `dims` (in order). One already here with the same definition is kept
        once; a different definition under a known name is a ConfigError (a config must never be
        read with another lever than the one it was tuned with)."""
        extra = list(self.extra)
        known = dict(self._by_name)
        for dim in dims:
            existing = known.get(dim.name)
            if existing is None:
                extra.append(dim)
                known[dim.name] = dim
            elif existing != dim:
                where = "in action_space/" if dim.name in self.base_names else "by another run or config"
                raise ConfigError(f"dimension {dim.name!r} is already defined differently ({where})")
        return self if len(extra) == len(self.extra) else ActionSpace(self.base, tuple(extra))


def _checked_condition(where: str, condition: Condition, dims: dict[str, Dimension]) -> Condition:
    """A condition of `acts_when` whose dimension exists and whose values are values of it (read
    into its type), or a ConfigError naming the file and the table."""
    other = dims.get(condition.dimension)
    if other is None:
        raise ConfigError(f"{where}: acts_when names an unknown dimension {condition.dimension!r}")
    if condition.switched:
        if not other.has_off_state():
            raise ConfigError(
                f"{where}: acts_when {condition.dimension} = {condition.switched!r}, but {condition.dimension} "
                "has no off state (no off value, null or mechanism): name its values instead"
            )
        return condition
    values: list[Any] = []
    for raw in condition.values:
        try:
            values.append(other.coerce(raw))
        except ValueError as exc:
            raise ConfigError(f"{where}: acts_when {condition.dimension}: {exc}") from None
    return replace(condition, values=tuple(values))


def _with_checked_conditions(path: Path, dim: Dimension, dims: dict[str, Dimension]) -> Dimension:
    if not dim.acts_when:
        return dim
    where = f"{path}: [{dim.name}]"
    if any(c.dimension == dim.name for alternative in dim.acts_when for c in alternative):
        raise ConfigError(f"{where}: acts_when names the dimension itself")
    checked = tuple(tuple(_checked_condition(where, c, dims) for c in alt) for alt in dim.acts_when)
    return replace(dim, acts_when=checked)


@functools.lru_cache(maxsize=None)
def _files_space(folders: tuple[Path, ...]) -> ActionSpace:
    dims: dict[str, Dimension] = {}
    paths: dict[str, Path] = {}
    for folder in folders:
        for path in sorted(folder.glob("*.toml")):
            try:
                tables = tomllib.loads(path.read_text(encoding="utf-8"))
            except tomllib.TOMLDecodeError as exc:
                raise ConfigError(f"{path}: not valid TOML ({exc})") from None
            for name, spec in tables.items():
                if name in dims:
                    raise ConfigError(f"{path}: dimension {name!r} is defined twice")
                dims[name] = dimension_from_table(path, name, spec)
                paths[name] = path
    # `acts_when` names other dimensions: checked once all are read (any file may name any other)
    return ActionSpace(tuple(_with_checked_conditions(paths[name], dim, dims) for name, dim in dims.items()))


def registry_space() -> ActionSpace:
    """The dimensions of `action_space/` alone (no EVOLVEMEM_ACTION_SPACE folders): what the
    typed view of the config is generated from (space/gen_typed.py)."""
    return _files_space((action_space_dir(),))


def files_space() -> ActionSpace:
    """The dimensions of the action-space files, in file order (read once per folder set).
    `EVOLVEMEM_ACTION_SPACE` adds folders (os.pathsep-separated)."""
    extra = tuple(Path(p) for p in os.environ.get("EVOLVEMEM_ACTION_SPACE", "").split(os.pathsep) if p)
    return _files_space((action_space_dir(),) + extra)

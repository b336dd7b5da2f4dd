"""Load the action-space dimensions from `action_space/*.toml` (the one place they are defined)."""

from __future__ import annotations

import functools
import json
import math
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evolvemem.errors import ConfigError
from evolvemem.paths import action_space_dir

KINDS = ("int", "float", "bool", "enum")
# Where a dimension acts: "retrieval" settings decide which memories reach the answer context;
# "answer" settings act on a context once it is built (the answer prompt and its check), so two
# configs that build the same context and agree on these give the same answer.
STAGES = ("retrieval", "answer")
NULL_WORDS = ("null", "none", "off", "")


@dataclass(frozen=True)
class Dimension:
    """One tunable setting: its type, safe range or choices, default and description."""

    name: str
    kind: str
    default: Any
    group: str
    description: str
    per_type: bool = False
    min: float | None = None
    max: float | None = None
    off: Any = None
    optional: bool = False
    choices: tuple[Any, ...] = ()
    maps_to: dict[str, Any] = field(default_factory=dict)
    # for `evolve ablate`: the value that switches this mechanism off (None: not a mechanism)
    mechanism_off: Any = None
    # only has an effect with an answer-side model (question-time mechanisms ask it): runs that
    # answer offline never change it
    needs_model: bool = False
    # can ask a model again for a question (a decomposition, a verification pass, an LLM walk, a
    # judge): with a model answering, a random exploration leaves it alone (loop/runner.py)
    model_calls: bool = False
    # only has an effect with a cross-encoder (--rerank-model): runs without one never change it
    needs_reranker: bool = False
    # only has an effect with a second embedding model (--second-embedding-model): runs without one never change it
    needs_second_embedder: bool = False
    stage: str = "retrieval"

    # ---- value handling -------------------------------------------------------------------
    def coerce(self, value: Any) -> Any:
        """Turn a raw value (JSON, TOML, CLI string) into this dimension's type, or raise ValueError."""
        if self.optional and (value is None or (isinstance(value, str) and value.strip().lower() in NULL_WORDS)):
            return None
        if value is None:
            raise ValueError("null is not allowed here")
        if self.kind == "bool":
            if isinstance(value, bool):
                return value
            if isinstance(value, (int, float)) and value in (0, 1):
                return bool(value)
            if isinstance(value, str) and value.strip().lower() in ("true", "yes", "on", "1"):
                return True
            if isinstance(value, str) and value.strip().lower() in ("false", "no", "off", "0"):
                return False
            raise ValueError(f"expected true or false, got {value!r}")
        if self.kind == "enum":
            text = str(value).strip()
            if text not in self.choices:
                raise ValueError(f"expected one of {', '.join(map(str, self.choices))}, got {value!r}")
            return text
        if isinstance(value, bool):
            raise ValueError(f"expected a number, got {value!r}")
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"expected a number, got {value!r}") from None
        if math.isnan(number):
            raise ValueError("expected a number, got NaN")
        if self.kind == "int":
            if not math.isinf(number) and number != int(number):  # never rounded silently
                raise ValueError(f"expected a whole number, got {value!r}")
            return int(number) if not math.isinf(number) else number
        return number

    def clamp(self, value: Any) -> Any:
        """Clamp a coerced value into the safe range; the `off` value and null pass through."""
        if value is None or self.kind in ("bool", "enum"):
            return value
        if self.off is not None and value == self.off:
            return value
        clamped = min(max(value, self.min), self.max)
        return int(clamped) if self.kind == "int" else float(clamped)

    def step(self, value: Any, delta: float) -> Any:
        """`value` moved by `delta` and kept in range; a switched-off setting moved up is switched
        on at its default (down, it stays off). What a rule-based diagnoser uses to widen or
        shrink a setting without restating its range."""
        if self.off is not None and value == self.off:
            return self.default if delta > 0 else value
        return self.clamp(self.coerce(value + delta))

    def range_text(self) -> str:
        if self.kind == "bool":
            text = "true | false"
        elif self.kind == "enum":
            text = " | ".join(self.choices)
        else:
            fmt = "{:g}"
            text = f"{fmt.format(self.min)}..{fmt.format(self.max)}"
            if self.off is not None:
                text += f" (or {self.off} = off)"
        if self.optional:
            text += " (or null = off)"
        return text


@functools.lru_cache(maxsize=None)
def _load(folders: tuple[Path, ...]) -> dict[str, Dimension]:
    dims: dict[str, Dimension] = {}
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
    return dims


def dimension_from_table(path: Path, name: str, spec: dict[str, Any]) -> Dimension:
    """One dimension from its TOML table (`path` names it in errors and gives its default group)."""
    where = f"{path.name}: [{name}]"
    if not isinstance(spec, dict):
        raise ConfigError(f"{where} must be a table")
    known = {
        "type",
        "min",
        "max",
        "off",
        "optional",
        "choices",
        "default",
        "per_type",
        "description",
        "group",
        "maps_to",
        "mechanism",
        "needs_model",
        "model_calls",
        "needs_reranker",
        "needs_second_embedder",
        "stage",
    }
    unknown = set(spec) - known
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    kind = spec.get("type")
    if kind not in KINDS:
        raise ConfigError(f"{where}: type must be one of {', '.join(KINDS)}")
    if kind in ("int", "float") and ("min" not in spec or "max" not in spec):
        raise ConfigError(f"{where}: numeric dimensions need min and max")
    if kind == "enum" and not spec.get("choices"):
        raise ConfigError(f"{where}: enum dimensions need choices")
    if not spec.get("description"):
        raise ConfigError(f"{where}: description is required")
    if spec.get("stage", "retrieval") not in STAGES:
        raise ConfigError(f"{where}: stage must be one of {', '.join(STAGES)}")
    optional = bool(spec.get("optional", False))
    if "default" not in spec and not optional:
        raise ConfigError(f"{where}: default is required")
    dim = Dimension(
        name=name,
        kind=kind,
        default=None,
        group=spec.get("group", path.stem.lstrip("0123456789_")),
        description=spec["description"],
        per_type=bool(spec.get("per_type", False)),
        min=spec.get("min"),
        max=spec.get("max"),
        off=spec.get("off"),
        optional=optional,
        choices=tuple(spec.get("choices", ())),
        maps_to=dict(spec.get("maps_to", {})),
        needs_model=bool(spec.get("needs_model", False)),
        model_calls=bool(spec.get("model_calls", False)),
        needs_reranker=bool(spec.get("needs_reranker", False)),
        needs_second_embedder=bool(spec.get("needs_second_embedder", False)),
        stage=spec.get("stage", "retrieval"),
    )
    if "mechanism" in spec:
        mech = spec["mechanism"]
        if not isinstance(mech, dict) or "off" not in mech:
            raise ConfigError(f"{where}: mechanism must be a table with an 'off' value, e.g. mechanism = {{ off = 0 }}")
        try:
            dim = Dimension(**{**dim.__dict__, "mechanism_off": dim.coerce(mech["off"])})
        except ValueError as exc:
            raise ConfigError(f"{where}: bad mechanism off value ({exc})") from None
    try:
        default = dim.clamp(dim.coerce(spec.get("default")))
    except ValueError as exc:
        raise ConfigError(f"{where}: bad default ({exc})") from None
    return Dimension(**{**dim.__dict__, "default": default})


def toml_value(value: Any) -> str:
    """One value as TOML (null written as \"null\", which optional dimensions read as off)."""
    if value is None:
        return '"null"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value))


def dimension_to_toml(dim: Dimension, table: str | None = None) -> str:
    """The TOML table `dimension_from_table` reads back into an equal Dimension (for levers made
    at run time; the action-space files are written by people)."""
    lines = [f"[{table or dim.name}]", f'type = "{dim.kind}"']
    for key in ("min", "max", "off"):
        if getattr(dim, key) is not None:
            lines.append(f"{key} = {toml_value(getattr(dim, key))}")
    if dim.optional:
        lines.append("optional = true")
    if dim.choices:
        lines.append(f"choices = [{', '.join(toml_value(c) for c in dim.choices)}]")
    lines += [
        f"default = {toml_value(dim.default)}",
        f"group = {toml_value(dim.group)}",
        f"per_type = {toml_value(dim.per_type)}",
        f"needs_model = {toml_value(dim.needs_model)}",
    ]
    if dim.model_calls:
        lines.append("model_calls = true")
    if dim.needs_reranker:
        lines.append("needs_reranker = true")
    if dim.needs_second_embedder:
        lines.append("needs_second_embedder = true")
    if dim.mechanism_off is not None:
        lines.append(f"mechanism = {{ off = {toml_value(dim.mechanism_off)} }}")
    lines.append(f"description = {toml_value(dim.description)}")
    if dim.maps_to:
        lines.append(f"maps_to = {{ {', '.join(f'{k} = {toml_value(v)}' for k, v in dim.maps_to.items())} }}")
    return "\n".join(lines) + "\n"


# Dimensions a run added while it ran (emerged from its diagnoses, evolvemem/space/emerged.py) or
# that a loaded config carries: process-wide, because the configs parsed after them may use them.
_added: dict[str, Dimension] = {}
_merged: dict[int, dict[str, Dimension]] = {}  # id of the (cached, long-lived) base -> base + added


def base_registry() -> dict[str, Dimension]:
    """The dimensions of the action-space files, in file order. `EVOLVEMEM_ACTION_SPACE` adds
    folders (os.pathsep-separated)."""
    extra = tuple(Path(p) for p in os.environ.get("EVOLVEMEM_ACTION_SPACE", "").split(os.pathsep) if p)
    return _load((action_space_dir(),) + extra)


def registry() -> dict[str, Dimension]:
    """All dimensions: the action-space files', then those added since (`add_dimensions`)."""
    base = base_registry()
    if not _added:
        return base
    if id(base) not in _merged:
        _merged.clear()
        _merged[id(base)] = {**base, **_added}
    return _merged[id(base)]


def add_dimensions(dims: "list[Dimension] | tuple[Dimension, ...]") -> None:
    """Make `dims` part of the registry for the rest of the process. Adding one that is already
    there with the same definition does nothing; a different definition under a known name is a
    ConfigError (a config must never be read with another lever than the one it was tuned with)."""
    known = registry()
    for dim in dims:
        existing = known.get(dim.name) or _added.get(dim.name)
        if existing is not None and existing != dim:
            raise ConfigError(
                f"dimension {dim.name!r} is already defined differently "
                f"({'in action_space/' if dim.name in base_registry() else 'by another run or config'})"
            )
        if existing is None:
            _added[dim.name] = dim
            _merged.clear()


def added_dimensions() -> dict[str, Dimension]:
    """The dimensions added since the process started (not in the action-space files)."""
    return dict(_added)


def forget_added_dimensions() -> None:
    """Back to the action-space files' dimensions only (a new run starts from them)."""
    _added.clear()
    _merged.clear()


def answer_stage_dimensions() -> tuple[str, ...]:
    """The dimensions that act on a built context (`stage = "answer"`), in registry order."""
    return tuple(name for name, dim in registry().items() if dim.stage == "answer")


def expand_dimension_names(names: "list[str] | tuple[str, ...]") -> list[str]:
    """Dimension names from names of dimensions or of groups (an action_space file's stem, e.g.
    `scenes` for 6_scenes.toml), in registry order. An unknown name is a ConfigError."""
    dims = registry()
    groups = {d.group for d in dims.values()}
    wanted: set[str] = set()
    for raw in names:
        name = raw.strip()
        if name in dims:
            wanted.add(name)
        elif name in groups:
            wanted.update(n for n, d in dims.items() if d.group == name)
        elif name:
            raise ConfigError(
                f"unknown dimension or group {name!r} (groups: {', '.join(sorted(groups))}; "
                "`evolve space` lists the dimensions)"
            )
    return [n for n in dims if n in wanted]

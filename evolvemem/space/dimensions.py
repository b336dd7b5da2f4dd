"""One tunable setting per kind of value: `BoolDimension`, `IntDimension`, `FloatDimension`,
`EnumDimension`. Each kind knows how to read a raw value (`coerce`), keep it in range (`clamp`),
say its range (`range_text`), type a pydantic field (`annotation`), draw a random value
(`sample`) and be searched by Optuna (`suggest`, `optuna_distribution`), so nothing else
branches on the kind. `dimension_from_table` reads one from its TOML
table (the action-space files, a run's lever files) and `dimension_to_toml` writes it back."""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, Literal, Optional

from evolvemem.errors import ConfigError

# Where a dimension acts: "retrieval" settings decide which memories reach the answer context;
# "answer" settings act on a context once it is built (the answer prompt and its check), so two
# configs that build the same context and agree on these give the same answer.
STAGES = ("retrieval", "answer")
NULL_WORDS = ("null", "none", "off", "")
# `acts_when` words: the other dimension is switched on (not at its off value) / off (at it)
ON, OFF = "on", "off"


@dataclass(frozen=True)
class Condition:
    """What another dimension must hold for a dimension to act: one of `values`, or switched
    `switched` ("on" / "off"; see `Dimension.is_off`). Written in `acts_when` as
    `fusion_mode = ["weighted_sum", "rrf"]` or `late_top_k = "on"`."""

    dimension: str
    values: tuple[Any, ...] = ()
    switched: str = ""

    def holds(self, value: Any, dim: Dimension) -> bool:
        """Whether `value` of `dim` (the dimension this condition names) meets it."""
        if not self.switched:
            return value in self.values
        return dim.is_off(value) == (self.switched == OFF)

    def toml(self) -> str:
        return f"{self.dimension} = {toml_value(self.switched or list(self.values))}"


@dataclass(frozen=True, kw_only=True)
class Dimension:
    """What every kind of setting has: its name, default, group, description and how the loop
    may use it. A kind adds its range and its value rules."""

    kind: ClassVar[str] = ""  # the word the TOML files and the prompt text use

    name: str
    default: Any
    group: str
    description: str
    per_type: bool = False
    optional: bool = False  # null (off) is a value too
    # a value that switches a numeric setting off, inside or outside its range (None: none)
    off: Any = None
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
    # when it acts at all: any one of these alternatives, each a set of conditions on other
    # dimensions that all hold (empty: always). Outside them the code ignores its value, so a
    # change to it alters nothing (space/acting.py)
    acts_when: tuple[tuple[Condition, ...], ...] = ()

    # ---- value handling -------------------------------------------------------------------
    def coerce(self, value: Any) -> Any:
        """Turn a raw value (JSON, TOML, CLI string) into this dimension's type, or raise ValueError."""
        if self.optional and (value is None or (isinstance(value, str) and value.strip().lower() in NULL_WORDS)):
            return None
        if value is None:
            raise ValueError("null is not allowed here")
        return self._coerce(value)

    def clamp(self, value: Any) -> Any:
        """Clamp a coerced value into the safe range; null passes through."""
        return value

    def step(self, value: Any, delta: float) -> Any:
        """`value` moved by `delta` and kept in range; a switched-off setting moved up is switched
        on at its default (down, it stays off). What a rule-based diagnoser uses to widen or
        shrink a setting without restating its range."""
        if self.off is not None and value == self.off:
            return self.default if delta > 0 else value
        return self.clamp(self.coerce(value + delta))

    def range_text(self) -> str:
        """The range as the prompt and `evolve space` show it."""
        return self._range() + (" (or null = off)" if self.optional else "")

    def annotation(self) -> Any:
        """The type of this dimension's field in the generated pydantic config."""
        return Optional[self._annotation()] if self.optional else self._annotation()

    def sample(self, rng: random.Random, current: Any = None) -> Any:
        """A random value, different from `current` where the range allows (8 tries)."""
        value: Any = current
        for _ in range(8):
            value = self._draw(rng)
            if value != current:
                return value
        return value

    def can_switch_off(self) -> bool:
        """Whether a value outside the range means off (an `off` value, or null)."""
        return self.off is not None or self.optional

    def has_off_state(self) -> bool:
        """Whether `is_off` means something: a bool, a setting with an off value or null, or a
        mechanism with the value `evolve ablate` switches it off with."""
        return isinstance(self, BoolDimension) or self.can_switch_off() or self.mechanism_off is not None

    def is_off(self, value: Any) -> bool:
        """Whether `value` switches this setting off: false for a bool, its off value (null when
        optional), else its mechanism's off value."""
        if isinstance(self, BoolDimension):
            return not value
        if self.can_switch_off():
            return value == self.off_value or value is None
        return self.mechanism_off is not None and value == self.mechanism_off

    def switched_off(self) -> Any:
        """The value that switches this setting off (`is_off` holds for it): false for a bool, its
        off value (or null), else its mechanism's off value."""
        if isinstance(self, BoolDimension):
            return False
        return self.off_value if self.can_switch_off() else self.mechanism_off

    @property
    def off_value(self) -> Any:
        """The value that switches it off: null for an optional one, else `off`."""
        return None if self.optional else self.off

    def toml_fields(self) -> list[tuple[str, Any]]:
        """The kind's own fields of its TOML table (range, off value, choices)."""
        return [("off", self.off)] if self.off is not None else []

    # ---- what each kind defines --------------------------------------------------------------
    def _coerce(self, value: Any) -> Any:
        raise NotImplementedError

    def _range(self) -> str:
        raise NotImplementedError

    def _annotation(self) -> Any:
        raise NotImplementedError

    def _draw(self, rng: random.Random) -> Any:
        raise NotImplementedError

    def suggest(self, trial: Any) -> Any:
        """Its value from an Optuna trial (define-by-run: a number's off switch is asked first)."""
        raise NotImplementedError

    def optuna_distribution(self) -> Any:
        """Its Optuna distribution over the range (a number's off switch is the `<name>__on` param)."""
        raise NotImplementedError


@dataclass(frozen=True, kw_only=True)
class BoolDimension(Dimension):
    kind: ClassVar[str] = "bool"

    def _coerce(self, value: Any) -> bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, (int, float)) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in ("true", "yes", "on", "1"):
            return True
        if isinstance(value, str) and value.strip().lower() in ("false", "no", "off", "0"):
            return False
        raise ValueError(f"expected true or false, got {value!r}")

    def _range(self) -> str:
        return "true | false"

    def _annotation(self) -> Any:
        return bool

    def suggest(self, trial: Any) -> Any:
        return trial.suggest_categorical(self.name, [False, True])

    def optuna_distribution(self) -> Any:
        import optuna.distributions as od

        return od.CategoricalDistribution([False, True])

    def _draw(self, rng: random.Random) -> bool:
        return rng.random() < 0.5


@dataclass(frozen=True, kw_only=True)
class EnumDimension(Dimension):
    kind: ClassVar[str] = "enum"
    choices: tuple[str, ...]

    def _coerce(self, value: Any) -> str:
        text = str(value).strip()
        if text not in self.choices:
            raise ValueError(f"expected one of {', '.join(map(str, self.choices))}, got {value!r}")
        return text

    def _range(self) -> str:
        return " | ".join(self.choices)

    def _annotation(self) -> Any:
        return Literal[self.choices]

    def suggest(self, trial: Any) -> Any:
        return trial.suggest_categorical(self.name, list(self.choices))

    def optuna_distribution(self) -> Any:
        import optuna.distributions as od

        return od.CategoricalDistribution(list(self.choices))

    def _draw(self, rng: random.Random) -> str:
        return rng.choice(self.choices)

    def toml_fields(self) -> list[tuple[str, Any]]:
        return super().toml_fields() + [("choices", list(self.choices))]


@dataclass(frozen=True, kw_only=True)
class NumericDimension(Dimension):
    """A number in [min, max]; `off` (or null, when optional) switches it off."""

    min: float
    max: float

    def _number(self, value: Any) -> float:
        if isinstance(value, bool):
            raise ValueError(f"expected a number, got {value!r}")
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"expected a number, got {value!r}") from None
        if math.isnan(number):
            raise ValueError("expected a number, got NaN")
        return number

    def clamp(self, value: Any) -> Any:
        """Clamp into [min, max]; the `off` value and null pass through."""
        if value is None or (self.off is not None and value == self.off):
            return value
        return self._typed(min(max(value, self.min), self.max))

    def _typed(self, number: float) -> Any:
        raise NotImplementedError

    def _range(self) -> str:
        text = f"{self.min:g}..{self.max:g}"
        return text + (f" (or {self.off} = off)" if self.off is not None else "")

    def _draw(self, rng: random.Random) -> Any:
        if self.can_switch_off() and rng.random() < 0.2:
            return self.off_value
        return self._draw_in_range(rng)

    def _draw_in_range(self, rng: random.Random) -> Any:
        raise NotImplementedError

    def suggest(self, trial: Any) -> Any:
        if self.can_switch_off() and not trial.suggest_categorical(f"{self.name}__on", [True, False]):
            return self.off_value
        return self._suggest_in_range(trial)

    def _suggest_in_range(self, trial: Any) -> Any:
        raise NotImplementedError

    def toml_fields(self) -> list[tuple[str, Any]]:
        return [("min", self.min), ("max", self.max), *super().toml_fields()]


@dataclass(frozen=True, kw_only=True)
class IntDimension(NumericDimension):
    kind: ClassVar[str] = "int"

    def _coerce(self, value: Any) -> Any:
        number = self._number(value)
        if math.isinf(number):
            return number
        if number != int(number):  # never rounded silently
            raise ValueError(f"expected a whole number, got {value!r}")
        return int(number)

    def _typed(self, number: float) -> int:
        return int(number)

    def _annotation(self) -> Any:
        return int

    def _draw_in_range(self, rng: random.Random) -> int:
        return rng.randint(int(self.min), int(self.max))

    def _suggest_in_range(self, trial: Any) -> Any:
        return trial.suggest_int(self.name, int(self.min), int(self.max))

    def optuna_distribution(self) -> Any:
        import optuna.distributions as od

        return od.IntDistribution(int(self.min), int(self.max))


@dataclass(frozen=True, kw_only=True)
class FloatDimension(NumericDimension):
    kind: ClassVar[str] = "float"

    def _coerce(self, value: Any) -> float:
        return self._number(value)

    def _typed(self, number: float) -> float:
        return float(number)

    def _annotation(self) -> Any:
        return float

    def _draw_in_range(self, rng: random.Random) -> float:
        return round(rng.uniform(float(self.min), float(self.max)), 3)

    def _suggest_in_range(self, trial: Any) -> Any:
        return trial.suggest_float(self.name, float(self.min), float(self.max))

    def optuna_distribution(self) -> Any:
        import optuna.distributions as od

        return od.FloatDistribution(float(self.min), float(self.max))


KINDS: dict[str, type[Dimension]] = {
    cls.kind: cls for cls in (IntDimension, FloatDimension, BoolDimension, EnumDimension)
}

_KNOWN_FIELDS = frozenset(
    {
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
        "acts_when",
    }
)


def _acts_when(where: str, raw: Any) -> tuple[tuple[Condition, ...], ...]:
    """`acts_when` read: one table of conditions (all hold), or an array of them (any one holds).
    Which dimensions and values it names is checked once the whole space is read (action_space.py)."""
    alternatives = raw if isinstance(raw, list) else [raw]
    shape = (
        f'{where}: acts_when must be a table of conditions, e.g. {{ fusion_mode = ["rrf"] }} or '
        f'{{ late_top_k = "{ON}" }}, or an array of such tables (any one holding)'
    )
    if not alternatives or not all(isinstance(a, dict) and a for a in alternatives):
        raise ConfigError(shape)
    out = []
    for alternative in alternatives:
        conditions = []
        for name, wanted in alternative.items():
            if wanted in (ON, OFF):
                conditions.append(Condition(name, switched=wanted))
            elif isinstance(wanted, list) and wanted:
                conditions.append(Condition(name, values=tuple(wanted)))
            else:
                raise ConfigError(f'{where}: acts_when {name}: expected a list of values, "{ON}" or "{OFF}"')
        out.append(tuple(conditions))
    return tuple(out)


def _kind_fields(where: str, cls: type[Dimension], spec: dict[str, Any]) -> dict[str, Any]:
    """The fields only the kind `cls` has, checked (a range for numbers, choices for an enum)."""
    if issubclass(cls, NumericDimension):
        if "min" not in spec or "max" not in spec:
            raise ConfigError(f"{where}: numeric dimensions need min and max")
        return {"min": spec["min"], "max": spec["max"]}
    if issubclass(cls, EnumDimension):
        if not spec.get("choices"):
            raise ConfigError(f"{where}: enum dimensions need choices")
        return {"choices": tuple(spec["choices"])}
    return {}


def dimension_from_table(path: Path, name: str, spec: dict[str, Any]) -> Dimension:
    """One dimension from its TOML table (`path` names it in errors and gives its default group);
    its `type` picks the class."""
    where = f"{path.name}: [{name}]"
    if not isinstance(spec, dict):
        raise ConfigError(f"{where} must be a table")
    unknown = set(spec) - _KNOWN_FIELDS
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    cls = KINDS.get(str(spec.get("type")))
    if cls is None:
        raise ConfigError(f"{where}: type must be one of {', '.join(KINDS)}")
    kind_fields = _kind_fields(where, cls, spec)
    if not spec.get("description"):
        raise ConfigError(f"{where}: description is required")
    if spec.get("stage", "retrieval") not in STAGES:
        raise ConfigError(f"{where}: stage must be one of {', '.join(STAGES)}")
    optional = bool(spec.get("optional", False))
    if "default" not in spec and not optional:
        raise ConfigError(f"{where}: default is required")
    dim = cls(
        name=name,
        default=None,
        group=spec.get("group", path.stem.lstrip("0123456789_")),
        description=spec["description"],
        per_type=bool(spec.get("per_type", False)),
        off=spec.get("off"),
        optional=optional,
        maps_to=dict(spec.get("maps_to", {})),
        needs_model=bool(spec.get("needs_model", False)),
        model_calls=bool(spec.get("model_calls", False)),
        needs_reranker=bool(spec.get("needs_reranker", False)),
        needs_second_embedder=bool(spec.get("needs_second_embedder", False)),
        stage=spec.get("stage", "retrieval"),
        acts_when=_acts_when(where, spec["acts_when"]) if "acts_when" in spec else (),
        **kind_fields,
    )
    if "mechanism" in spec:
        mech = spec["mechanism"]
        if not isinstance(mech, dict) or "off" not in mech:
            raise ConfigError(f"{where}: mechanism must be a table with an 'off' value, e.g. mechanism = {{ off = 0 }}")
        try:
            dim = replace(dim, mechanism_off=dim.coerce(mech["off"]))
        except ValueError as exc:
            raise ConfigError(f"{where}: bad mechanism off value ({exc})") from None
    try:
        default = dim.clamp(dim.coerce(spec.get("default")))
    except ValueError as exc:
        raise ConfigError(f"{where}: bad default ({exc})") from None
    return replace(dim, default=default)


def toml_value(value: Any) -> str:
    """One value as TOML (null written as \"null\", which optional dimensions read as off)."""
    if value is None:
        return '"null"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return f"[{', '.join(toml_value(v) for v in value)}]"
    return json.dumps(str(value))


def dimension_to_toml(dim: Dimension, table: str | None = None) -> str:
    """The TOML table `dimension_from_table` reads back into an equal Dimension (for levers made
    at run time; the action-space files are written by people)."""
    lines = [f"[{table or dim.name}]", f'type = "{dim.kind}"']
    lines += [f"{key} = {toml_value(value)}" for key, value in dim.toml_fields() if key != "choices"]
    if dim.optional:
        lines.append("optional = true")
    lines += [f"{key} = {toml_value(value)}" for key, value in dim.toml_fields() if key == "choices"]
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
    if dim.acts_when:
        tables = [f"{{ {', '.join(c.toml() for c in alternative)} }}" for alternative in dim.acts_when]
        lines.append(f"acts_when = [{', '.join(tables)}]")
    return "\n".join(lines) + "\n"

"""`RetrievalConfig`: a frozen pydantic model generated from the action-space files, plus strict parsing.

Parsing is strict about names and types (an unknown field or a wrong type is an error naming
it) and lenient about ranges (an out-of-range value is clamped and the clamp is reported).
A config carries the `ActionSpace` it was parsed with (`config.space`): a lever that emerged in a
run is one of its values (a pydantic extra, having no field of its own) only in that space, and
every config made from it (`with_changes`, `for_type`, `with_space`) keeps it, and so it keeps
the run's token budget (`config.budget`, space/budget.py), which `token_limit` applies.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    create_model,
    model_validator,
)

from evolvemem.errors import ConfigError
from evolvemem.paths import action_space_dir
from evolvemem.qtypes import QUESTION_TYPES
from evolvemem.space.action_space import ActionSpace, files_space
from evolvemem.space.budget import BUDGET_SECTION, TokenBudget
from evolvemem.space.dimensions import Dimension, NumericDimension, toml_value
from evolvemem.space.changes import ClampReport
from evolvemem.space.emerged import EMBEDDED_SECTION, dimensions_from_tables, embedded_toml

OVERRIDES = "per_category_overrides"


def _clean_values(
    raw: dict[str, Any],
    dims: ActionSpace,
    source: str,
    scope: str,
    clamps: list[ClampReport] | None,
    per_type_only: bool,
) -> dict[str, Any]:
    cleaned = {}
    for key, value in raw.items():
        dim = dims.get(key)
        if dim is None:
            raise ConfigError(
                f"{source}: unknown config field {key!r}"
                + (f" in override for {scope}" if scope != "global" else "")
                + " (a lever that emerged in a run needs its definition: an [emerged_dimensions] table in "
                "the config file, or the run's dimension files)"
            )
        if per_type_only and not dim.per_type:
            raise ConfigError(f"{source}: {key!r} cannot be overridden per question type")
        try:
            coerced = dim.coerce(value)
        except ValueError as exc:
            raise ConfigError(f"{source}: field {key!r}: {exc}") from None
        used = dim.clamp(coerced)
        if clamps is not None and used != coerced:
            clamps.append(ClampReport(key, value, used, scope))
        cleaned[key] = used
    return cleaned


def _clean(raw: Any, source: str, clamps: list[ClampReport] | None, dims: ActionSpace) -> dict[str, Any]:
    if isinstance(raw, BaseModel):
        return raw.model_dump()
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: a config must be a mapping of field names to values")
    flat = {k: v for k, v in raw.items() if k != OVERRIDES}
    cleaned = _clean_values(flat, dims, source, "global", clamps, per_type_only=False)
    for dim in dims.added():  # a lever added at run time has no field default
        cleaned.setdefault(dim.name, dim.default)
    overrides_raw = raw.get(OVERRIDES) or {}
    if not isinstance(overrides_raw, dict):
        raise ConfigError(f"{source}: {OVERRIDES} must map question types to settings")
    overrides = {}
    for qtype, settings in overrides_raw.items():
        if qtype not in QUESTION_TYPES:
            raise ConfigError(
                f"{source}: unknown question type {qtype!r} in {OVERRIDES} (known: {', '.join(QUESTION_TYPES)})"
            )
        if not isinstance(settings, dict):
            raise ConfigError(f"{source}: override for {qtype} must be a mapping")
        values = _clean_values(settings, dims, source, qtype, clamps, per_type_only=True)
        if values:
            overrides[qtype] = values
    cleaned[OVERRIDES] = overrides
    return cleaned


def _space_of(info: ValidationInfo | None) -> ActionSpace:
    """The space a validation was asked to use (`parse_config` passes it), else the files'."""
    context = info.context if info is not None else None
    space = context.get("space") if isinstance(context, dict) else None
    return space if isinstance(space, ActionSpace) else files_space()


class _ConfigBase(BaseModel):
    # levers a run added to its space (space/emerged.py) have no field of their own: they are
    # kept as extra values, which `_clean` validated against the config's space like any field
    model_config = ConfigDict(extra="allow", frozen=True)
    _space: ActionSpace = PrivateAttr(default_factory=files_space)
    # the budget a run measured this config at: a measurement setting, not a value, so it is in
    # neither `values()` nor the fingerprint (a run's budget is the same for all its configs)
    _budget: TokenBudget = PrivateAttr(default_factory=TokenBudget)
    # `for_type`'s configs, made once: a config is frozen, and an evaluation asks for one per question
    _effective: dict[str, RetrievalConfig] = PrivateAttr(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _coerce_and_clamp(cls, data: Any, info: ValidationInfo) -> Any:
        return _clean(data, "config", None, _space_of(info)) if isinstance(data, dict) else data

    @classmethod
    def _in_space(
        cls, cleaned: dict[str, Any], space: ActionSpace, budget: TokenBudget = TokenBudget()
    ) -> RetrievalConfig:
        """A config of validated values that knows `space` and carries `budget`."""
        config = cls.model_validate(cleaned, context={"space": space})
        config._space = space
        config._budget = budget
        return cast("RetrievalConfig", config)

    # ---- behaviour shared by every generated config -----------------------------------------
    @property
    def space(self) -> ActionSpace:
        """The action space this config was parsed with (the files' plus the run's levers)."""
        return self._space

    @property
    def budget(self) -> TokenBudget:
        """The token budget of the run this config was measured in (empty: none)."""
        return self._budget

    @property
    def token_limit(self) -> int:
        """The estimated tokens a context may hold under this config: its own
        `context_token_budget` under the run's budget (0: no token limit, `max_context` alone)."""
        return self._budget.limit(int(getattr(self, "context_token_budget") or 0))  # a field of the generated model

    @property
    def ranking_limit(self) -> int:
        """The token limit a retriever sizes its candidate depth for: `token_limit`, or a frontier
        run's largest budget (`TokenBudget.ranked_at`), so one ranking serves every cut."""
        return self._budget.rank_limit(int(getattr(self, "context_token_budget") or 0))

    def with_budget(self, budget: TokenBudget) -> RetrievalConfig:
        """The same values, measured at `budget` (replacing the one it carried)."""
        config = self.model_copy()
        config._budget = budget
        config._effective = {}  # they carry the budget: not shared with the copy
        return cast("RetrievalConfig", config)

    def fingerprint(self) -> str:
        """Stable short hash of every value: equal configs, equal fingerprints. The budget is not a
        value (compare `budget` too where configs from different runs meet)."""
        data = self.model_dump()
        dims = self._space
        for name in self.model_extra or {}:  # an added lever at its default changes nothing
            dim = dims.get(name)
            if dim is not None and data[name] == dim.default:
                del data[name]
        blob = json.dumps(data, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def value(self, name: str) -> object:
        """The value of any dimension of this config's space, a lever that emerged in a run
        included (the typed attributes name only the files' dimensions); KeyError for another name."""
        if name not in self._space:
            raise KeyError(f"{name!r} is not a dimension of this config's action space")
        return getattr(self, name)

    def values(self) -> dict[str, Any]:
        """Global values without the overrides (the space's added levers included)."""
        return {k: v for k, v in self.model_dump().items() if k != OVERRIDES}

    def overrides(self) -> dict[str, dict[str, Any]]:
        return {k: dict(v) for k, v in getattr(self, OVERRIDES).items()}

    def for_type(self, question_type: str | None) -> RetrievalConfig:
        """The effective config for one question: global values, then its type's override,
        then the settings of any enabled `maps_to` dimension. Has no overrides of its own."""
        key = question_type or ""
        if (made := self._effective.get(key)) is None:
            made = self._effective[key] = self._resolved(key)
        return made

    def _resolved(self, question_type: str) -> RetrievalConfig:
        """`for_type`'s config, validated anew."""
        values = self.values()
        values.update(getattr(self, OVERRIDES).get(question_type, {}))
        dims = self._space
        for name, dim in dims.items():
            if dim.maps_to and values.get(name):
                values.update(_clean_values(dim.maps_to, dims, f"maps_to of {name}", "global", None, False))
        values[OVERRIDES] = {}
        return self._in_space(values, dims, self._budget)

    def with_changes(
        self, changes: dict[str, Any], question_type: str | None = None
    ) -> tuple[RetrievalConfig, list[ClampReport]]:
        """A new config with `changes` applied globally or to one type's override (clamped)."""
        data = self.model_dump()
        if question_type is None:
            data.update(changes)
        else:
            merged = dict(data[OVERRIDES].get(question_type, {}))
            merged.update(changes)
            data[OVERRIDES] = {**data[OVERRIDES], question_type: merged}
        config, clamps = parse_config(data, source="proposal", space=self._space)
        return config.with_budget(self._budget), clamps

    def with_space(self, space: ActionSpace) -> RetrievalConfig:
        """The same values in a larger space (a lever emerged since this config was made): the
        new levers read as their defaults, so the fingerprint stays."""
        return parse_config(self.model_dump(), source="config", space=space)[0].with_budget(self._budget)


def _field_for(dim: Dimension) -> tuple[Any, Any]:
    extra: dict[str, Any] = {"group": dim.group, "per_type": dim.per_type}
    if isinstance(dim, NumericDimension):
        extra.update(minimum=dim.min, maximum=dim.max)
    if dim.off is not None:
        extra["off_value"] = dim.off
    return (dim.annotation(), Field(default=dim.default, description=dim.description, json_schema_extra=extra))


def _build_model() -> type[_ConfigBase]:
    fields: dict[str, Any] = {name: _field_for(dim) for name, dim in files_space().items()}
    fields[OVERRIDES] = (
        dict[str, dict[str, Any]],
        Field(default_factory=dict, description="Per-question-type overrides: {type: {field: value}}."),
    )
    return create_model("RetrievalConfig", __base__=_ConfigBase, **fields)


if TYPE_CHECKING:
    from evolvemem.space.config_fields import ConfigFields

    class RetrievalConfig(ConfigFields, _ConfigBase):
        """The static face of the generated model: the files' dimensions as typed attributes
        (space/config_fields.py, generated from the files); a run's levers through `value`."""

else:
    RetrievalConfig = _build_model()


def parse_config(
    raw: Any, source: str = "config", space: ActionSpace | None = None
) -> tuple[RetrievalConfig, list[ClampReport]]:
    """Validate a raw mapping into a `RetrievalConfig` of `space` (default: the files'), returning
    it with the clamps applied."""
    space = space or files_space()
    clamps: list[ClampReport] = []
    cleaned = _clean(raw, source, clamps, space)
    try:
        return RetrievalConfig._in_space(cleaned, space), clamps
    except ValidationError as exc:  # pragma: no cover - _clean already checked every field
        first = exc.errors()[0]
        raise ConfigError(f"{source}: field {'.'.join(map(str, first['loc']))}: {first['msg']}") from None


def preset_names() -> list[str]:
    return sorted(p.stem for p in (action_space_dir() / "presets").glob("*.toml"))


def _toml_setting(value: Any) -> str:
    """A setting's TOML value; off (None) as "off", which every optional dimension reads as off."""
    return '"off"' if value is None else toml_value(value)


def load_config(
    name_or_path: str | Path, space: ActionSpace | None = None
) -> tuple[RetrievalConfig, list[ClampReport]]:
    """Load a config from a preset name (`weak`, `default`) or a TOML/JSON file, in `space`
    (default: the files') plus the levers the file embeds, with the token budget it carries.

    A run's exported config (`best_config.toml`) loads the same way."""
    space = space or files_space()
    text = str(name_or_path)
    preset = action_space_dir() / "presets" / f"{text}.toml"
    path = preset if ("/" not in text and preset.is_file()) else Path(text)
    if not path.is_file():
        raise ConfigError(f"config {text!r} is neither a preset ({', '.join(preset_names())}) nor a file")
    try:
        if path.suffix == ".json":
            raw = json.loads(path.read_text(encoding="utf-8"))
        else:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot parse config ({exc})") from None
    if isinstance(raw, dict) and "config" in raw and isinstance(raw["config"], dict):
        raw = raw["config"]  # snapshots wrap the config with metadata
    if isinstance(raw, dict) and EMBEDDED_SECTION in raw:  # levers that emerged in a run travel with it
        raw = dict(raw)
        space = space.with_dimensions(dimensions_from_tables(raw.pop(EMBEDDED_SECTION), str(path), space))
    budget = TokenBudget()
    if isinstance(raw, dict) and BUDGET_SECTION in raw:  # the budget the run measured it at
        raw = dict(raw)
        budget = TokenBudget.from_table(raw.pop(BUDGET_SECTION), str(path))
    config, clamps = parse_config(raw, source=str(path), space=space)
    return config.with_budget(budget), clamps


def config_to_toml(config: RetrievalConfig, header: str = "") -> str:
    """Readable TOML of a config; `load_config` reads it back to an equal config. TOML has no null:
    an optional setting that is off is left out (as a comment) where off is its default, and written
    as "off" where leaving it out would mean something else (a per-type override would inherit the
    global value). A lever that emerged in a run is written with its definition, so the file is
    readable on its own, and so is the token budget the run measured it at."""
    dims = config.space
    lines = [f"# {line}" for line in header.splitlines()] if header else []
    for key, value in config.values().items():
        dim = dims.get(key)
        if value is None and dim is not None and dim.default is None:
            lines.append(f"# {key}: off (the default; TOML has no null, so it is left out)")
        else:
            lines.append(f"{key} = {_toml_setting(value)}")
    for qtype, settings in config.overrides().items():
        lines.append("")
        lines.append(f"[{OVERRIDES}.{qtype}]")
        for key, value in settings.items():
            lines.append(f"{key} = {_toml_setting(value)}")
    definitions = embedded_toml(dims, list(config.values()))
    if definitions:
        lines += ["", definitions.rstrip("\n")]
    if config.budget:
        lines += ["", config.budget.as_toml().rstrip("\n")]
    return "\n".join(lines) + "\n"

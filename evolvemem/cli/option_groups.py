"""Options several commands take together, declared once as the fields of a frozen dataclass whose
defaults are typer options, and handed to a command as one typed object.

A command names the group as one parameter (`models: ScoringModels = option_group(ScoringModels)`);
`with_option_groups` puts the group's fields in that parameter's place in the signature typer reads
(so `--help` lists them there, in field order) and calls the command with the object built from their
values."""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

D = TypeVar("D", bound="DataclassInstance")


@dataclass(frozen=True)
class OptionGroup(Generic[D]):
    options: type[D]

    def parameters(self, kind: inspect._ParameterKind) -> list[inspect.Parameter]:
        types = typing.get_type_hints(self.options)
        return [
            inspect.Parameter(f.name, kind, default=f.default, annotation=types[f.name]) for f in fields(self.options)
        ]

    def take(self, values: dict[str, Any]) -> D:
        """The group's object, its values taken out of a command's keyword arguments."""
        return self.options(**{f.name: values.pop(f.name) for f in fields(self.options)})


def option_group(options: type[D]) -> Any:
    """The default of a parameter that stands for a group's options (typed Any, as typer's options are)."""
    return OptionGroup(options)


def with_option_groups(command: Callable[..., Any]) -> Callable[..., Any]:
    """Spell out every option group of `command`; call it with each group's object."""
    signature = inspect.signature(command, eval_str=True)
    groups = {p.name: p.default for p in signature.parameters.values() if isinstance(p.default, OptionGroup)}
    parameters: list[inspect.Parameter] = []
    for p in signature.parameters.values():
        parameters += groups[p.name].parameters(p.kind) if p.name in groups else [p]

    @functools.wraps(command)
    def grouped(*args: Any, **kwargs: Any) -> Any:
        for name, group in groups.items():
            kwargs[name] = group.take(kwargs)
        return command(*args, **kwargs)

    grouped.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    grouped.__annotations__ = {p.name: p.annotation for p in parameters}  # what get_type_hints reads
    return grouped

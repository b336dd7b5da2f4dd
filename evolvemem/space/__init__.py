"""The action space: dimensions declared in `action_space/*.toml` and everything generated from them."""

from evolvemem.space.action_space import ActionSpace, files_space
from evolvemem.space.changes import Change, ClampReport
from evolvemem.space.config import (
    RetrievalConfig,
    config_to_toml,
    load_config,
    parse_config,
)
from evolvemem.space.dimensions import (
    BoolDimension,
    Dimension,
    EnumDimension,
    FloatDimension,
    IntDimension,
    NumericDimension,
)

__all__ = [
    "ActionSpace",
    "BoolDimension",
    "Change",
    "ClampReport",
    "Dimension",
    "EnumDimension",
    "FloatDimension",
    "IntDimension",
    "NumericDimension",
    "RetrievalConfig",
    "config_to_toml",
    "files_space",
    "load_config",
    "parse_config",
]

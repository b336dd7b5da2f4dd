"""The action space: dimensions declared in `action_space/*.toml` and everything generated from them."""

from evolvemem.space.config import (
    ClampReport,
    RetrievalConfig,
    config_to_toml,
    load_config,
    parse_config,
)
from evolvemem.space.registry import Dimension, registry

__all__ = [
    "ClampReport",
    "Dimension",
    "RetrievalConfig",
    "config_to_toml",
    "load_config",
    "parse_config",
    "registry",
]

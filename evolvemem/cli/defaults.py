"""Defaults of a run, read off `RunSpec` and `GuardSettings`, the benchmark names and the config
presets (action_space/presets/), so the CLI never restates them."""

from __future__ import annotations

from evolvemem.benchmarks import benchmark_help
from evolvemem.loop.spec import GuardSettings, RunSpec
from evolvemem.space.config import preset_names

RUN_DEFAULTS = RunSpec(benchmark="locomo", data=None, diagnoser="rubric")
GUARD_DEFAULTS = GuardSettings()
BENCHMARK_HELP = benchmark_help()
PRESETS = ", ".join(preset_names())  # the presets folder's files, for help texts

"""The held-out verdict: the best config against the start on the same test questions, paired.

`evolve run` computes it once at the end; `evolve show` and the report recompute it from the stored
test records with the run's own objective and seed, so every place quotes the same interval and p."""

from __future__ import annotations

from evolvemem.contracts.vocab import Phase
from evolvemem.loop.paired import Comparison, compare
from evolvemem.loop.spec import RunSpec
from evolvemem.store.run_store import RunStore


def held_out(store: RunStore, best_round: int, objective: str, seed: int) -> Comparison:
    """test_best (scored at `best_round`) − test_start (round 0), per group."""
    return compare(
        store.round_records(best_round, Phase.TEST_BEST),
        store.round_records(0, Phase.TEST_START),
        best_round,
        0,
        objective,
        seed=seed,
    )


def stored_held_out(store: RunStore) -> Comparison | None:
    """The held-out verdict of a finished run (None before its test scores, or for an eval directory)."""
    stored = store.manifest().get("spec")
    finals = store.test_scores()
    best = finals.get(Phase.TEST_BEST)
    if not stored or best is None or Phase.TEST_START not in finals:
        return None
    spec = RunSpec.from_dict(stored)
    return held_out(store, best.round, spec.objective, spec.seed)

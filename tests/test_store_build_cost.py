"""A store that a round's config makes the run build is named in that round's line with its time,
and built once: the next round reading it builds nothing (issue 45: no silent minutes in a round).
It is built for the conversations the round asks about: the held-out ones get it only when their
evaluation reads it."""

from __future__ import annotations

from pathlib import Path

from evolvemem.cli.run_cmd import round_line
from evolvemem.loop.outcome import RoundOutcome
from evolvemem.loop.spec import RunSpec


def test_a_round_that_builds_a_store_says_so_and_the_next_builds_nothing(tmp_path: Path) -> None:
    from evolvemem.cli.ui import UI
    from evolvemem.session import Hooks, Session, open_run
    from evolvemem.space.config import load_config

    start = load_config("weak")[0].with_changes({"memory_granularity": "raw"})[0]
    spec = RunSpec(benchmark="synth", data=None, rounds=1, diagnoser="rubric", init="weak", seed=0)
    told: list[RoundOutcome] = []
    with Session.create(spec, tmp_path / "run", start, UI(quiet=True)) as session:
        ws = session.workspace
        session.run(Hooks(round_done=told.append))
        dev = {r.conversation_id for r in session.store.round_records(0, "dev")}
        held_out = {r.conversation_id for r in session.store.round_records(0, "test_start")}
        assert dev and held_out and not dev & held_out
        assert all(ws.has_store(c, "raw") for c in dev | held_out)  # the held-out ones when scored
    first, second = told
    assert len(first.stores_built) == 1
    assert first.stores_built[0].startswith(f"raw store built ({len(dev)} conversations, ")
    assert first.stores_built[0] in round_line(first)
    assert second.stores_built == () and "store built" not in round_line(second)
    with open_run(str(tmp_path / "run")) as store:
        dev_built, held_out_built = store.stores_built()[0]  # round 0's dev, then its held-out score
    assert dev_built == first.stores_built[0]
    assert held_out_built.startswith(f"raw store built ({len(held_out)} conversations, ")

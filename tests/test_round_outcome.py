"""One read model of a round (loop/outcome.py): what the loop hands the console as a round ends is
what `evolve show`, `show --json` and the report read back from the finished store."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evolvemem.cli.main import app
from evolvemem.contracts.vocab import Phase
from evolvemem.loop.outcome import RoundOutcome, round_outcomes
from evolvemem.loop.spec import RunSpec


@pytest.fixture(scope="module")
def screened_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[RoundOutcome]]:
    """An offline run whose rounds screen two candidates each: the outcomes its hook received."""
    from evolvemem.cli.ui import UI
    from evolvemem.session import Hooks, Session
    from evolvemem.space.config import load_config

    spec = RunSpec(
        benchmark="synth",
        data=None,
        rounds=2,
        diagnoser="rubric",
        init="weak",
        seed=0,
        objective="balanced",
        screen_fraction=0.5,
        candidates=2,
    )
    out = tmp_path_factory.mktemp("outcome") / "run"
    told: list[RoundOutcome] = []
    with Session.create(spec, out, load_config("weak")[0], UI(quiet=True)) as session:
        result = session.run(Hooks(round_done=told.append))
    assert [o.round for o in result.rounds] == [0, 1, 2] and result.rounds == told
    return out, told


def test_the_loop_hands_on_the_outcome_a_reader_of_the_store_builds(screened_run) -> None:
    from evolvemem.session import open_run

    run, told = screened_run
    with open_run(str(run)) as store:
        read = round_outcomes(store, (Phase.DEV,), "balanced", set())
    assert all(o.seconds is not None and o.seconds > 0 for o in told)  # only the loop times a round
    assert [dataclasses.replace(o, seconds=None) for o in told] == read
    later = read[1:]
    assert all(o.screenings and o.cost is not None and o.decision is not None for o in later)
    assert all(o.paired is not None and o.paired.incumbent_round == 0 for o in later)
    assert read[0].accepted is True and read[0].paired is None and read[0].next_step is not None


def test_show_json_and_the_report_render_the_same_outcomes(screened_run) -> None:
    from evolvemem.report.data import gather
    from evolvemem.session import open_run

    run, told = screened_run
    shown = CliRunner().invoke(app, ["show", str(run), "--json"])
    assert shown.exit_code == 0, shown.output
    rounds = json.loads(shown.stdout.strip().splitlines()[-1])["rounds"]
    for entry, o in zip(rounds, told, strict=True):
        assert entry["round"] == o.round and entry["dev_score"] == o.score and entry["decision"] == o.next_step
        assert entry["accepted"] == o.accepted and entry["flags"] == o.flags
        assert entry["changes"] == [c.as_dict() for c in o.changes]
        assert [s["attempt"] for s in entry["screenings"]] == [s.attempt for s in o.screenings]
        assert entry["cost"] == (o.cost.as_dict() if o.cost else None)
    with open_run(str(run)) as store:
        data = gather(store)
    assert [dataclasses.replace(v.outcome, seconds=o.seconds) for v, o in zip(data.rounds, told, strict=True)] == told
    assert [v.decision for v in data.rounds] == [o.next_step for o in told]

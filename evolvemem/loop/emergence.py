"""Turn the new dimensions a diagnosis proposed into levers of the run, or record why not.

A valid proposal (space/emerged.py decides) is written to rounds/round_NN/new_dimensions/ and
joins the run's action space at once (`emerge` returns the grown space, which the runner keeps),
so every diagnoser can switch it on from the next round's diagnosis on; switching it on is an ordinary change that the guard judges on paired evidence.
Every proposal, materialised or refused, becomes one row of `proposed_dimensions`."""

from __future__ import annotations

from pathlib import Path

from evolvemem.contracts.diagnosis import NewDimension
from evolvemem.space.action_space import ActionSpace
from evolvemem.space.emerged import RefusedDimension, build_dimension, materialise, round_dimensions_dir
from evolvemem.store.rows import ProposedDimension

MATERIALISED, REFUSED = "materialised", "refused"


def emerge(
    run_dir: Path, round_no: int, proposed: list[NewDimension], space: ActionSpace
) -> tuple[ActionSpace, list[ProposedDimension]]:
    """Materialise the valid proposals of round `round_no` as levers of `space`; returns the space
    with them and the `proposed_dimensions` rows (status and reason for each)."""
    rows = []
    for item in proposed:
        path: Path | None = None
        done = round_dimensions_dir(run_dir, round_no) / f"{item.name}.toml"
        if not item.refused and done.is_file():
            path = done  # a resumed round that already materialised it (and loaded it on resume)
        elif not item.refused:
            try:
                lever = build_dimension(space, item.name, item.description, item.maps_to, item.per_type)
                space, path = materialise(run_dir, round_no, lever, space)
            except RefusedDimension as exc:
                item.refused = str(exc)
        rows.append(
            ProposedDimension(
                round=round_no,
                name=item.name,
                description=item.description,
                rationale=item.rationale,
                maps_to=item.maps_to,
                per_type=item.per_type if isinstance(item.per_type, bool) else None,
                status=REFUSED if path is None else MATERIALISED,
                reason=item.refused or None,
                file=None if path is None else str(path.relative_to(run_dir)),
            )
        )
    return space, rows

"""Cut the development copy of LoCoMo-10 out of the official `locomo10.json`.

    python benchmarks/cut_locomo.py locomo10.json --out locomo10_dev8.json [--keep conv-26,conv-30,...]

The project's figures (README, docs/results.md, the benchmarks) were printed on eight of the ten
conversations — the ones named in DEV8 below, 1,586 questions — because that is the copy of LoCoMo
the development machines hold. This script makes the same file from the one users download
(https://github.com/snap-research/locomo, data/locomo10.json): it keeps the named samples in file
order, unchanged, and writes them as one line of JSON. It prints the conversations, questions and
the sha256 of what it wrote; the project's copy has sha256 DEV8_SHA256.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

# The conversations of the development copy (the file's `sample_id`s).
DEV8 = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43", "conv-44", "conv-47", "conv-48")
DEV8_SHA256 = "5c389cf079ef3712b7ef1e57e3d445908448c071966a7e1f67ccea2ad9d20b9b"


def cut(samples: list[dict], keep: list[str]) -> list[dict]:
    """The samples whose `sample_id` is in `keep`, in file order; every id in `keep` must be there."""
    found = {s.get("sample_id") for s in samples}
    missing = [k for k in keep if k not in found]
    if missing:
        raise ValueError(f"not in the file: {', '.join(missing)} (it has {', '.join(sorted(map(str, found)))})")
    wanted = set(keep)
    return [s for s in samples if s.get("sample_id") in wanted]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help="the official locomo10.json")
    parser.add_argument(
        "--keep",
        default=",".join(DEV8),
        help="comma-separated sample ids to keep [default: the development copy's eight]",
    )
    parser.add_argument("--out", type=Path, default=Path("locomo10_dev8.json"), help="file to write")
    args = parser.parse_args(argv)
    try:
        samples = json.loads(args.source.read_text(encoding="utf-8"))
        kept = cut(samples, [k.strip() for k in args.keep.split(",") if k.strip()])
    except (OSError, ValueError) as exc:  # json.JSONDecodeError is a ValueError
        print(f"error: {args.source}: {exc}", file=sys.stderr)
        return 2
    text = json.dumps(kept)
    args.out.write_text(text, encoding="utf-8")
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    print(
        f"wrote {args.out}: {len(kept)} conversations ({', '.join(s['sample_id'] for s in kept)}), "
        f"{sum(len(s.get('qa', [])) for s in kept)} questions, sha256 {digest}"
    )
    if [s["sample_id"] for s in kept] == list(DEV8):
        print(
            "the project's development copy: "
            + (
                "identical"
                if digest == DEV8_SHA256
                else f"same conversations, different bytes (its sha256 is {DEV8_SHA256})"
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

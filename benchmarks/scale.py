"""Past one machine: sharded rounds on Ray against the in-process run, how a worker gets its
workspace, and what a LongMemEval-sized round would take on N workers.

    python benchmarks/scale.py [--data ../shared/data/locomo10_dev8.json] [--rounds 7] [--workers 2]
        [--projection-workers 1 2 4 8 16 32 64] [--latency 0.5] [--candidate-rounds 3] [--skip-candidates]

(a) The same offline run twice — `--rounds` rounds from `weak`, rubric, seed 0, `--objective balanced`
    (the offline default, `evidence`, answers nothing: nothing to shard), patience off — in this
    process and with the ray executor on a local cluster of `--workers` CPUs (one worker process
    per CPU). Printed: whether every per-question record is identical (every column but the
    question's latency), each run's wall (the cluster's start timed apart) and the ratio.
(ship) A worker's workspace for one conversation: made from the pack the driver puts in Ray's
    object store (memories and built indexes, embeddings included) vs rebuilt on the worker from
    the content-addressed caches (memories from the memory cache, consolidation, embeddings from
    the embedding cache, indexing). Median of 3 per conversation, in warm workers.
(c) A projection, from (a)'s shards and (ship)'s figures, of one LongMemEval-sized round (500
    questions, each over its own ~115k-token history: 500 one-question shards) on N workers; the
    formulas are printed with the figures.
(b) Candidates screened per wall-minute with `--candidates 1` vs `4`, in process and on the ray
    executor, answers from the fake OpenAI server of the tests (benchmarks/cost.py's word-overlap
    reader) at `--latency` s per call: `--candidate-rounds` rounds, reply cache off, the settings
    that add calls to a question frozen (every candidate costs one answer call a question).
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import pickle
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from evolvemem.answering.shards import ShardResult, ShardTask  # noqa: E402
from evolvemem.executor.ray_executor import RayExecutor  # noqa: E402
from evolvemem.loop.spec import RunSpec  # noqa: E402
from evolvemem.session import Session  # noqa: E402
from evolvemem.space.config import load_config  # noqa: E402
from evolvemem.store.run_store import RunStore  # noqa: E402
from evolvemem.contracts.records import QuestionRecord  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo10_dev8.json"
LONGMEMEVAL_QUESTIONS = 500
LONGMEMEVAL_HISTORY_TOKENS = 115_000
VOLATILE = ("latency_ms",)
CALL_ADDING_GROUPS = ("granularity", "augmentation", "answering")  # action_space groups frozen in (b)


# ---- an executor that remembers its shards ------------------------------------------------------
@dataclass
class Batch:
    wall: float = 0.0
    shards: list[tuple[ShardTask, ShardResult]] = field(default_factory=list)
    handled: list[tuple[int, float]] = field(default_factory=list)  # (records, driver seconds) per result


class Recording:
    """The ray executor, keeping every shard it ran with its result (the projection reads them)."""

    def __init__(self, inner: RayExecutor):
        self.inner = inner
        self.name, self.remote = inner.name, inner.remote
        self.batches: list[Batch] = []

    @property
    def workers(self) -> int:
        return self.inner.workers

    def share(self, value: Any, key: str) -> Any:
        return self.inner.share(value, key)

    def map(self, fn: Callable, items: Sequence, cpus: float = 1.0) -> Iterator[tuple[int, Any]]:
        batch = Batch()
        self.batches.append(batch)
        started = time.perf_counter()
        for index, result in self.inner.map(fn, items, cpus):
            batch.shards.append((items[index], result))
            handed = time.perf_counter()
            yield index, result  # the driver writes the shard's records before asking for the next
            batch.handled.append((len(result.records), time.perf_counter() - handed))
        batch.wall = time.perf_counter() - started

    def close(self) -> None:
        self.inner.close()


# ---- (a) ---------------------------------------------------------------------------------------
def offline_run(data: Path, out: Path, rounds: int, executor: Any = None) -> tuple[float, Session | None]:
    spec = RunSpec(
        benchmark="locomo",
        data=str(data),
        diagnoser="rubric",
        rounds=rounds,
        seed=0,
        patience=0,
        objective="balanced",
        screen_fraction=0.0,
    )
    session = Session.create(spec, out, load_config("weak")[0], executor=executor)
    with session:
        started = time.perf_counter()
        session.run()
        return time.perf_counter() - started, session


def records(run_dir: Path) -> list[dict]:
    with RunStore(run_dir, read_only=True) as store:
        rows = store.query("SELECT * FROM question_records ORDER BY round, phase, question_id")
    return [{k: v for k, v in row.items() if k not in VOLATILE} for row in rows]


# ---- (ship) ------------------------------------------------------------------------------------
def from_pack(item: tuple) -> tuple[float, float, int]:
    """In a worker: (seconds fetching the pack, seconds making the workspace, pid)."""
    from evolvemem.answering.shards import worker_embedder, worker_roles
    from evolvemem.workspace import workspace_from_pack

    shared, setup = item
    roles, embedder = worker_roles(setup), worker_embedder(setup)
    started = time.perf_counter()
    pack = shared.get()
    fetched = time.perf_counter()
    workspace_from_pack(pack, roles, embedder)
    return fetched - started, time.perf_counter() - fetched, os.getpid()


def rebuilt(item: tuple) -> tuple[float, int]:
    """In a worker: seconds rebuilding one conversation's workspace from the caches, pid (with
    the worker's one embedder, its vector cache read from disk once, as shards use it)."""
    from evolvemem.answering.shards import worker_embedder, worker_roles
    from evolvemem.workspace import Workspace

    dataset, setup = item
    roles, embedder = worker_roles(setup), worker_embedder(setup)
    started = time.perf_counter()
    Workspace(dataset, roles, embedder=embedder).build()
    return time.perf_counter() - started, os.getpid()


def ship_vs_rebuild(executor: RayExecutor, data: Path) -> dict:
    from evolvemem.answering.shards import WorkerSetup
    from evolvemem.benchmarks import load_benchmark
    from evolvemem.roles.factory import ModelSettings, build_roles
    from evolvemem.workspace import Workspace, pack_conversation

    dataset = load_benchmark("locomo", str(data))
    ws = Workspace(dataset, build_roles(ModelSettings()))
    ws.build()
    setup = WorkerSetup(ModelSettings(), True, ws.local_models)
    ids = sorted(dataset.conversations)
    list(executor.map(rebuilt, [(dataset.subset({ids[0]}), setup)] * 2))  # warm both workers (imports, caches)
    rows = []
    for cid in ids:
        started = time.perf_counter()
        pack = pack_conversation(ws, cid)
        blob = len(pickle.dumps(pack, protocol=5))
        shared = executor.share(pack, f"scale-{pack.key}")
        put = time.perf_counter() - started
        # three fresh fetches: share() keeps one ref, so each get reads the object store again
        unpacked = [result for _, result in executor.map(from_pack, [(shared, setup)] * 3)]
        rebuilds = [result for _, result in executor.map(rebuilt, [(dataset.subset({cid}), setup)] * 3)]
        rows.append(
            {
                "conversation": cid,
                "memories": len(ws.memories[cid]),
                "bytes": blob,
                "put": put,
                "fetch": statistics.median(f for f, _, _ in unpacked),
                "unpack": statistics.median(b for _, b, _ in unpacked),
                "rebuild": statistics.median(r for r, _ in rebuilds),
            }
        )
    print("\n(ship) a worker's workspace for one conversation, median of 3 in warm workers")
    print(
        f"{'conversation':<14}{'memories':>9}{'pack MB':>9}{'driver put s':>13}{'fetch s':>9}{'from pack s':>12}"
        f"{'rebuild s':>11}{'rebuild/pack':>13}"
    )
    for r in rows:
        shipped = r["fetch"] + r["unpack"]
        print(
            f"{r['conversation']:<14}{r['memories']:>9}{r['bytes'] / 1e6:>9.2f}{r['put']:>13.3f}{r['fetch']:>9.3f}"
            f"{r['unpack']:>12.3f}{r['rebuild']:>11.3f}{r['rebuild'] / shipped:>12.1f}×"
        )
    memories = sum(r["memories"] for r in rows)
    # medians over conversations: one slow fetch on a busy machine should not set the rate
    per_memory = {
        k: statistics.median(r[k] / r["memories"] for r in rows) for k in ("fetch", "unpack", "rebuild", "bytes")
    }
    print(
        f"per memory, median over conversations: from a pack {1e3 * (per_memory['fetch'] + per_memory['unpack']):.3f} "
        f"ms ({per_memory['bytes']:.0f} bytes shipped), rebuilt from the caches {1e3 * per_memory['rebuild']:.3f} ms"
    )
    tokens = sum(len(t.text.split()) for c in dataset.conversations.values() for t in c.turns())
    return {"rows": rows, "per_memory": per_memory, "tokens_per_memory": tokens / memories}


# ---- (c) ---------------------------------------------------------------------------------------
def noop(item: int) -> int:
    return item


def task_overhead(executor: RayExecutor, tasks: int = 200) -> float:
    """Seconds per task of a cluster kept busy with tasks that do nothing (submit, schedule, return)."""
    list(executor.map(noop, range(20)))
    started = time.perf_counter()
    list(executor.map(noop, range(tasks)))
    return (time.perf_counter() - started) / tasks


def store_writes(run_dir: Path, scratch: Path) -> tuple[float, float]:
    """(seconds per write of one record, seconds per record in writes of 200): the driver writing
    a shard's records to a run store, measured on a copy of (a)'s records."""
    with RunStore(run_dir, read_only=True) as store:
        sample = store.query("SELECT * FROM question_records WHERE phase = 'dev' LIMIT 200")
    with RunStore(scratch) as store:
        started = time.perf_counter()
        for i in range(50):
            store.record_questions([QuestionRecord.from_row({**sample[0], "round": 1000 + i})])
        single = (time.perf_counter() - started) / 50
        started = time.perf_counter()
        for i in range(10):
            store.record_questions([QuestionRecord.from_row({**row, "round": 2000 + i}) for row in sample])
        bulk = (time.perf_counter() - started) / (10 * len(sample))
    return single, bulk


def makespan(durations: list[float], workers: int) -> float:
    """Longest-first list scheduling of `durations` on `workers` (what Ray's queue does to shards
    submitted longest first)."""
    loads = [0.0] * workers
    for d in sorted(durations, reverse=True):
        loads[loads.index(min(loads))] += d
    return max(loads)


def fit_line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    mx, my = statistics.mean(xs), statistics.mean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    return my - slope * mx, slope


def projection(
    recording: Recording,
    memories_of: dict[str, int],
    local_per_question: float,
    ship: dict,
    per_task: float,
    writes: tuple[float, float],
    counts: list[int],
    latency: float,
) -> None:
    shards = [(task, result) for batch in recording.batches for task, result in batch.shards]
    xs = [float(memories_of[task.questions[0].conversation_id]) for task, _ in shards]
    ys = [(result.seconds - result.setup_seconds) / len(task.questions) for task, result in shards]
    a, b = fit_line(xs, ys)
    handled = [h for batch in recording.batches for h in batch.handled]
    per_record = sum(t for _, t in handled) / max(1, sum(n for n, _ in handled))
    m_long = LONGMEMEVAL_HISTORY_TOKENS / ship["tokens_per_memory"]
    per_q = a + b * m_long
    setup = m_long * (ship["per_memory"]["fetch"] + ship["per_memory"]["unpack"])
    single_write, bulk_write = writes
    # per one-question shard: its record written in a batch (session/sharded.py), its task handled
    driver = bulk_write + per_task
    n = LONGMEMEVAL_QUESTIONS
    print(
        f"\n(c) one LongMemEval-sized round: {n} questions, each its own history of ~{LONGMEMEVAL_HISTORY_TOKENS:,} "
        f"words: {n} one-question shards"
    )
    print(
        f"measured, worker side, on (a)'s {len(shards)} shards: seconds per question = {a * 1e3:.2f} ms + "
        f"{b * 1e6:.2f} µs × memories (least squares over conversations of {min(xs):.0f}–{max(xs):.0f} memories)"
    )
    print(
        f"measured, driver side: in (a) {per_record * 1e3:.3f} ms a record handled (its shard's records written "
        f"to the run store, {sum(n for n, _ in handled)} records); into a run store, a write of 1 record "
        f"{single_write * 1e3:.2f} ms, of 200 {bulk_write * 1e3:.3f} ms a record (the driver writes in batches of "
        f"64 records or 2 s); a task that does nothing costs the cluster {per_task * 1e3:.2f} ms (200 no-op tasks, "
        f"kept busy)"
    )
    print(
        f"LoCoMo dev: {ship['tokens_per_memory']:.1f} history words per memory → ~{m_long:,.0f} memories per "
        f"LongMemEval history (past the measured range: an extrapolation); a pack that size ships "
        f"{ship['per_memory']['bytes'] * m_long / 1e6:.1f} MB ({n * m_long * ship['per_memory']['bytes'] / 1e9:.1f} GB "
        f"for the round's {n}) and takes ~{setup:.2f} s to fetch and unpack"
    )
    in_process = n * per_q
    print(
        f"per shard on a worker: unpack {setup:.3f} s (first round) + answer {per_q:.3f} s; on the driver "
        f"{driver * 1e3:.1f} ms, one shard after another. In process (workspace built): {n} × {per_q:.3f} s = "
        f"{in_process:.1f} s"
    )
    print(
        f"round wall on N workers = max(ceil({n} / N) × worker seconds per shard, {n} × driver seconds per shard); "
        f"later rounds unpack again only when a worker gets more than 32 shards (the workspaces it keeps)"
    )
    header = f"{'N':>5}{'first round s':>15}{'later rounds s':>16}{'in process / later':>20}"
    if latency:
        header += f"{f'with a model at {latency:g} s/call: later rounds s':>48}"
    print(header)
    for count in counts:
        waves = math.ceil(n / count)
        first = max(waves * (setup + per_q), n * driver)
        later = max(waves * ((setup if waves > 32 else 0.0) + per_q), n * driver)
        line = f"{count:>5}{first:>15.1f}{later:>16.1f}{in_process / later:>19.1f}×"
        if latency:  # a shard that waits on a model asks a quarter CPU: four run per worker CPU
            waves = math.ceil(n / (4 * count))
            model = max(waves * ((setup if waves > 32 else 0.0) + per_q + latency), n * driver)
            line += f"{model:>48.1f}"
        print(line)
    if latency:
        print(
            f"(with a model: one answer call of {latency:g} s per question; in process, --concurrency 8 answers 8 at "
            f"once: ~{n} × {latency:g} / 8 + {in_process:.0f} = {n * latency / 8 + in_process:.0f} s a round)"
        )
    print(f"(for comparison: in process, (a)'s answered questions took {local_per_question * 1e3:.2f} ms each)")


# ---- (b) ---------------------------------------------------------------------------------------
def candidates_run(data: Path, out: Path, rounds: int, k: int, api_base: str, executor: Any = None) -> dict:
    """A `rounds`-round run answered by the fake model, K candidates a round; what rounds 1..N
    screened and how long they took (round 0 and the held-out test scoring left out)."""
    from benchmarks.cost import MODEL
    from evolvemem.space.action_space import files_space

    # every candidate costs one answer call a question: the settings that add calls (judge retries,
    # routing, decomposition, reflection, verification; model-only mechanisms) stay at the start's
    # values — the fake reader can neither judge, decompose nor verify, so they would only add calls
    space = files_space()
    frozen = space.expand([*CALL_ADDING_GROUPS, *(n for n, d in space.items() if d.needs_model)])
    spec = RunSpec(
        benchmark="locomo",
        data=str(data),
        diagnoser="rubric",
        rounds=rounds,
        seed=0,
        patience=0,
        objective="balanced",
        screen_fraction=0.25,
        candidates=k,
        cache_enabled=False,
        frozen=frozen,
        models={"answer_model": MODEL, "api_base": api_base},
    )
    with Session.create(spec, out, load_config("weak")[0], executor=executor) as session:
        result = session.run()
    later = [r for r in result.rounds if r.round > 0]
    return {
        "screened": sum(len(r.screenings) for r in later),
        "wall": sum(r.seconds for r in later),
        "passed": sum(1 for r in later for s in r.screenings if s.outcome == "passed"),
        "accepted": sum(1 for r in later if r.accepted),
    }


def candidates_per_minute(data: Path, folder: Path, rounds: int, latency: float, executor: Any, workers: int) -> None:
    from benchmarks.cost import overlap_reader
    from tests.fake_llm_server import FakeLLMServer

    os.environ.setdefault("OPENAI_API_KEY", "not-needed-here")
    print(
        f"\n(b) candidates screened per wall-minute, rounds 1..{rounds} of a run on {data.name} (rubric, seed 0, "
        f"from weak, objective balanced, minibatch 0.25, groups {', '.join(CALL_ADDING_GROUPS)} and model-only "
        f"settings frozen: one answer call a question), answers from the fake model at {latency:g} s a call "
        f"(--concurrency 8 a process; on ray a shard that waits on a model asks 0.25 CPU)"
    )
    print(
        f"{'executor':<22}{'K':>3}{'candidates':>12}{'wall s':>9}{'per minute':>12}{'passed':>8}{'accepted':>10}"
        f"{'answer calls':>14}"
    )
    baseline = None
    for name, k in (("local", 1), ("local", 4), ("ray", 1), ("ray", 4)):
        with FakeLLMServer(overlap_reader, latency=latency) as server:
            run = candidates_run(
                data, folder / f"{name}-{k}", rounds, k, server.url, executor if name == "ray" else None
            )
            calls = len(server.requests)
        rate = 60 * run["screened"] / run["wall"] if run["wall"] else 0.0
        baseline = baseline or rate
        label = name if name == "local" else f"ray, {workers} CPUs"
        print(
            f"{label:<22}{k:>3}{run['screened']:>12}{run['wall']:>9.1f}{rate:>12.2f}{run['passed']:>8}"
            f"{run['accepted']:>10}{calls:>14}   ({rate / baseline:.2f}× local K=1)"
        )


# ---- main --------------------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--projection-workers", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64])
    parser.add_argument("--latency", type=float, default=0.5, help="fake model's seconds per call for (b) and (c)")
    parser.add_argument("--skip-candidates", action="store_true", help="leave out (b)")
    parser.add_argument("--candidate-rounds", type=int, default=3, help="rounds of each (b) run")
    args = parser.parse_args()
    if not args.data.is_file():
        raise SystemExit(f"no LoCoMo file at {args.data}")
    logging.getLogger("bm25s").setLevel(logging.WARNING)
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start (other jobs share it)")
    with tempfile.TemporaryDirectory() as tmp:
        local_wall, _ = offline_run(args.data, Path(tmp) / "local", args.rounds)
        started = time.perf_counter()
        executor = Recording(RayExecutor(workers=args.workers))
        cluster_start = time.perf_counter() - started
        try:
            ray_wall, session = offline_run(args.data, Path(tmp) / "ray", args.rounds, executor)
            mine, theirs = records(Path(tmp) / "ray"), records(Path(tmp) / "local")
            same = mine == theirs
            differing = sum(1 for x, y in zip(mine, theirs) if x != y) + abs(len(mine) - len(theirs))
            with RunStore(Path(tmp) / "local", read_only=True) as store:
                per_question = store.query(
                    "SELECT avg(latency_ms) / 1000 AS s FROM question_records WHERE reused IS NULL"
                )[0]["s"]
            print(
                f"(a) {args.rounds}-round offline run on {args.data.name} (rubric, seed 0, from weak, objective "
                f"balanced, patience off)"
            )
            print(
                f"per-question records: {len(mine)} (ray) vs {len(theirs)} (local): "
                + ("identical in every column but latency" if same else f"{differing} DIFFER")
            )
            print(
                f"wall: local {local_wall:.1f} s; ray on {args.workers} worker processes {ray_wall:.1f} s "
                f"(+ {cluster_start:.1f} s starting the local cluster); local / ray = {local_wall / ray_wall:.2f}×"
            )
            assert session is not None
            memories_of = {cid: len(units) for cid, units in session.workspace.memories.items()}
            ship = ship_vs_rebuild(executor.inner, args.data)
            writes = store_writes(Path(tmp) / "local", Path(tmp) / "writes")
            projection(
                executor,
                memories_of,
                per_question,
                ship,
                task_overhead(executor.inner),
                writes,
                args.projection_workers,
                args.latency,
            )
            if not args.skip_candidates:
                candidates_per_minute(
                    args.data,
                    Path(tmp) / "candidates",
                    args.candidate_rounds,
                    args.latency,
                    executor.inner,
                    args.workers,
                )
            print(f"load average {os.getloadavg()[0]:.1f} at the end")
        finally:
            executor.close()


if __name__ == "__main__":
    main()

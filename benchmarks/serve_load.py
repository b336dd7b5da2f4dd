"""Load on a real `evolve serve`: search latency and throughput, add throughput, memory, server overhead.

    python benchmarks/serve_load.py [--data locomo10_dev8.json] [--sizes 1000,10000,100000] [--seconds 8]
        [--config default] [--encoder torch|onnx|onnx-int8] [--fresh-queries]

A server on 127.0.0.1 (offline roles, the `default` preset unless `--config` names another: no
cross-encoder, no LLM) with LoCoMo conversations as users:

- **add throughput**: every conversation added over HTTP one session per request, into a fresh
  embedding cache (so every turn is extracted and embedded), in turns a second.
- **growing the store past LoCoMo**: each conversation is added again, whole, under new user names
  (`<conversation>-copy<k>`) until the store holds the next size. The copies' turns are the same, so
  their embeddings come from the store and the cache: growth is not what the add figure measures.
  Every user keeps a LoCoMo-sized index (~400-700 memories); a search reads its own user's index.
- **search at each size**, two workloads of random (user, LoCoMo question of that user's
  conversation) pairs, each for `--seconds` with one client, then with `--clients` concurrent
  clients; p50 / p95 / p99 latency measured by the client, and searches a second:
  - *repeated*: every question was asked once before the clock starts (untimed), so its query
    vector comes from the server's query cache: the cost of a search beyond embedding its query;
  - *new*: every query made new by a numbered suffix, so each needs one pass of the embedding
    model: what an agent's fresh question costs.
  (Before, one mix was measured, whose share of new queries grew the slower the machine was: its
  figures moved with this VM's speed.) Query embeddings the server computed are counted from /metrics.
  `--fresh-queries` measures the *new* workload alone (what the issue 45 targets read).
  `--encoder` picks the server's embedding backend (retrieval/encoder.py; default: evolve's own).
- **resident memory** of the server process (VmRSS) at each size, and per 10k memories.
- **server overhead**: after the server stops, the same store opened in-process and the same
  one-client query sequence run through `Memory.search`; the ratio of the p50s.

The targets of issue 33 (10k memories): p95 <= 20 ms with one client, >= 200 searches/s with 8.
Anchor: Mem0's published search latency, p50 0.148 s and p95 0.20 s.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.serve_server import ServeProcess  # noqa: E402

DEFAULT_DATA = REPO.parent / "shared" / "data" / "locomo10_dev8.json"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def turns_of(session) -> list[dict]:
    return [
        {
            "speaker": t.speaker,
            "text": t.text,
            "id": t.turn_id,
            "image_caption": t.image_caption,
            "session": session.session_id,
            "at": session.timestamp.isoformat() if session.timestamp else None,
        }
        for t in session.turns
    ]


def memories(client: httpx.Client) -> int:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith("evolvemem_memories_indexed "):
            return int(float(line.split()[1]))
    return 0


def metric(client: httpx.Client, name: str) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(f"evolvemem_{name} "):
            return float(line.split()[1])
    return 0.0


def search_load(
    url: str, pairs: list[tuple[str, str]], seconds: float, clients: int, seed: int, fresh: bool = False
) -> tuple[list[float], float, int]:
    """(latencies in ms, searches a second, errors) of `clients` clients for `seconds`; with
    `fresh`, every query is made new by a numbered suffix, so none is answered from a cache."""
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    stop = time.perf_counter() + seconds

    def client_loop(k: int) -> None:
        rng = random.Random(seed * 100 + k)
        mine: list[float] = []
        with httpx.Client(base_url=url, timeout=60) as client:
            while time.perf_counter() < stop:
                user, query = rng.choice(pairs)
                if fresh:
                    query = f"{query} (ask {seed}-{k}-{len(mine)})"
                started = time.perf_counter()
                response = client.post("/v1/search", json={"user": user, "query": query})
                mine.append((time.perf_counter() - started) * 1000)
                if response.status_code != 200:
                    errors[0] += 1
        with lock:
            latencies.extend(mine)

    started = time.perf_counter()
    threads = [threading.Thread(target=client_loop, args=(k,)) for k in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return latencies, len(latencies) / (time.perf_counter() - started), errors[0]


def warm(url: str, pairs: list[tuple[str, str]], asked: set[str], clients: int) -> None:
    """Ask every question text not asked yet once (any user of its conversation: the query cache is
    shared by text), untimed, so the repeated workload finds every query vector cached."""
    todo = list({query: (user, query) for user, query in pairs if query not in asked}.values())
    asked.update(query for _, query in todo)

    def worker(part: list[tuple[str, str]]) -> None:
        with httpx.Client(base_url=url, timeout=120) as client:
            for user, query in part:
                client.post("/v1/search", json={"user": user, "query": query}).raise_for_status()

    threads = [threading.Thread(target=worker, args=(todo[k::clients],)) for k in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def describe(label: str, latencies: list[float], qps: float, errors: int) -> str:
    return (
        f"{label}: p50 {percentile(latencies, 0.5):.1f} ms  p95 {percentile(latencies, 0.95):.1f} ms  "
        f"p99 {percentile(latencies, 0.99):.1f} ms  {qps:.0f} searches/s  ({len(latencies)} searches, "
        f"{errors} errors)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--sizes", default="1000,10000,100000", help="store sizes (memories) to measure at")
    parser.add_argument("--seconds", type=float, default=8.0, help="seconds of load per measurement")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--config", default="default", help="what the server serves: a preset, a config file or a run directory"
    )
    parser.add_argument("--encoder", choices=("torch", "onnx", "onnx-int8"), help="the server's embedding backend")
    parser.add_argument("--fresh-queries", action="store_true", help="measure only new (never seen) queries")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

    from evolvemem.benchmarks import load_benchmark

    if not Path(args.data).is_file():
        sys.exit(f"error: no LoCoMo file at {args.data} (pass --data)")
    dataset = load_benchmark("locomo", args.data)
    conversations = list(dataset.conversations.values())
    questions: dict[str, list[str]] = {}
    for q in dataset.questions:
        questions.setdefault(q.conversation_id, []).append(q.text)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    folder = Path(tempfile.mkdtemp(prefix="serve-load-"))
    store = folder / "memory.duckdb"
    env = {"EVOLVEMEM_CACHE_DIR": str(folder / "cache")}  # a fresh embedding cache: adds embed for real
    if args.encoder:
        env["EVOLVEMEM_ENCODER"] = args.encoder
    print(
        f"serve_load: {len(conversations)} LoCoMo conversations, {sum(len(c.turns()) for c in conversations)} "
        f"turns; store {store}; {os.cpu_count()} CPUs; {args.seconds:g} s per measurement; "
        f"encoder {args.encoder or os.environ.get('EVOLVEMEM_ENCODER') or 'default'}"
    )

    users: dict[str, str] = {}  # user -> its conversation id
    server = ServeProcess(store, args.config, log_path=folder / "serve.log", env=env, extra=["--no-mcp"]).wait_ready()
    one_client_pairs: list[tuple[str, str]] = []
    asked: set[str] = set()  # question texts the server has embedded (the repeated workload's warm-up)
    served: list[float] = []
    overhead_size = 0

    def plan():
        """Users to add, in order: the LoCoMo conversations, then whole copies of them."""
        for conversation in conversations:
            yield conversation.conversation_id, conversation, False
        copy = 0
        while True:
            copy += 1
            for conversation in conversations:
                yield f"{conversation.conversation_id}-copy{copy}", conversation, True

    try:
        client = httpx.Client(base_url=server.url, timeout=600)
        upcoming = plan()
        add_turns, add_seconds, rss_before = 0, 0.0, None
        previous: tuple[int, float] | None = None
        for size in sizes:
            while memories(client) < size:
                user, conversation, is_copy = next(upcoming)
                if is_copy:  # growth: the whole conversation in requests of at most 1,000 turns
                    turns = [t for s in conversation.sessions for t in turns_of(s)]
                    for start in range(0, len(turns), 1000):
                        client.post(
                            "/v1/memories", json={"user": user, "turns": turns[start : start + 1000]}
                        ).raise_for_status()
                else:  # add throughput: one session per request, as an agent would add them
                    for session in conversation.sessions:
                        started = time.perf_counter()
                        response = client.post("/v1/memories", json={"user": user, "turns": turns_of(session)})
                        response.raise_for_status()
                        add_seconds += time.perf_counter() - started
                        add_turns += len(response.json()["turn_ids"])
                users[user] = conversation.conversation_id
                if rss_before is None:
                    rss_before = rss_mb(server.proc.pid)  # the embedding model is loaded by now
            held = memories(client)
            pairs = [(user, q) for user, conv in users.items() for q in questions.get(conv, [])]
            workloads = (("new", True),) if args.fresh_queries else (("repeated", False), ("new", True))
            if not args.fresh_queries:
                warm(server.url, pairs, asked, args.clients)
            measured = []
            for workload, fresh in workloads:
                before = metric(client, "query_embeddings_total")
                one = search_load(server.url, pairs, args.seconds, 1, args.seed, fresh)
                many = search_load(server.url, pairs, args.seconds, args.clients, args.seed + 1, fresh)
                embedded = metric(client, "query_embeddings_total") - before
                measured += [
                    f"  {workload} queries: {embedded:.0f} of {len(one[0]) + len(many[0])} embedded by the server",
                    "    " + describe("1 client ", *one),
                    "    " + describe(f"{args.clients} clients", *many),
                ]
            rss = rss_mb(server.proc.pid)
            slope = ""
            if previous is not None:
                slope = f", {(rss - previous[1]) / (held - previous[0]) * 10_000:.0f} MB per 10k memories since the last size"
            previous = (held, rss)
            lines = [
                f"size {held} memories ({len(users)} users, {sum(1 for u in users if '-copy' in u)} of them copies)",
                f"  server RSS {rss:.0f} MB{slope}",
                *measured,
            ]
            for text in lines:
                print(text, flush=True)
            if not one_client_pairs and held >= 10_000 or size == sizes[-1] and not one_client_pairs:
                rng = random.Random(args.seed + 7)
                one_client_pairs = [rng.choice(pairs) for _ in range(300)]
                for user, query in one_client_pairs * 2:  # the second pass is measured: warm, as in-process
                    t = time.perf_counter()
                    client.post("/v1/search", json={"user": user, "query": query}).raise_for_status()
                    served.append((time.perf_counter() - t) * 1000)
                served = served[len(one_client_pairs) :]
                overhead_size = held
        line = (
            f"add: {add_turns} turns of {sum(1 for u in users if '-copy' not in u)} conversations in "
            f"{add_seconds:.1f} s = {add_turns / max(add_seconds, 1e-9):.1f} turns/s (one session per request, "
            f"offline extraction, embeddings computed); server RSS with the model loaded and one "
            f"conversation: {rss_before:.0f} MB"
        )
        print(line, flush=True)
        client.close()
    finally:
        server.stop()

    # ---- the same sequence in-process (the server's store, now free)
    from evolvemem import Memory

    if one_client_pairs:
        os.environ.update(env)
        with Memory.open(store, args.config) as memory:
            for user, query in one_client_pairs:  # warm: load every user's index and its query vectors
                memory.search(user, query)
            inproc = []
            for user, query in one_client_pairs:
                t = time.perf_counter()
                memory.search(user, query)
                inproc.append((time.perf_counter() - t) * 1000)
        line = (
            f"overhead at {overhead_size} memories: the same 300 searches (warm: queries seen before) over HTTP "
            f"p50 {statistics.median(served):.2f} ms vs in-process Memory.search p50 {statistics.median(inproc):.2f} "
            f"ms = {statistics.median(served) / statistics.median(inproc):.2f}x"
        )
        print(line)
    print(
        "targets (issue 33, 10k memories): p95 <= 20 ms with 1 client, >= 200 searches/s with 8 clients; "
        "issue 45, new queries at 10k: p95 <= 10 ms with 1 client, >= 300 searches/s with 8; "
        "Mem0's published search latency: p50 148 ms, p95 200 ms"
    )


if __name__ == "__main__":
    main()

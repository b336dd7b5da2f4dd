"""LLM-path throughput: concurrent answering, cache replay, fault tolerance, extraction prompt size.

    python benchmarks/llm_throughput.py [--data PATH] [--questions 200] [--latency 0.2] [--concurrency 16]

Everything runs against the fake OpenAI-compatible server the tests use (tests/fake_llm_server.py)
on 127.0.0.1, through the real litellm → openai SDK → httpx path; memories come from the offline
extractor, answers from the LLM answerer (one call per question with the default config). For the
timed parts the server runs in a child process, as a real server would: its request handling
then does not compete with the evaluation for this process's GIL. One warm-up call and one
scoring call run before the clock starts, so one-off imports (openai's resources, nltk) are not
counted as throughput.

Prints, for the first `--questions` LoCoMo dev questions:
1. a fresh cache: calls, wall time, the ideal (calls × latency / concurrency) and wall / ideal
   (target ≤ 1.3×);
2. the same round again on that cache: calls (target 0) and wall time;
3. a fresh cache with a 20% injected fault rate (429 / 500 / a 3 s hang against a 2 s client
   timeout; "malformed" replies only hit JSON-mode calls, which the answerer does not make):
   requests, retries, wall time, and how many predictions differ from the fault-free run (target 0);
4. LLM-extraction prompt tokens per conversation (the extractor against a server that always
   replies with an empty JSON list), counted as the fake server counts them: whitespace-separated
   words of every message of every request. Real tokenizers give more tokens than words (roughly
   1.3× for English), so read these as a lower bound that is exactly reproducible.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from fake_llm_server import FakeLLMServer, count_tokens, last_user_message, message_text  # noqa: E402

DEFAULT_DATA = REPO.parent / "shared" / "data" / "locomo10_dev8.json"
MODEL = "openai/fake-model"
FAULT_RATE = 0.2


def first_memory_word(body: dict) -> str:
    """A deterministic "answer": the last word of the first memory in the prompt's context."""
    prompt = last_user_message(body).split("Now the real case.", 1)[-1]
    for line in prompt.splitlines():
        if line.startswith("1. "):
            return line.split()[-1].strip(".,!?;:\"'()")
    return "Not mentioned in the conversation."


def empty_memories(body: dict) -> str:
    return "[]"


RESPONDERS = {"first_memory_word": first_memory_word, "empty_memories": empty_memories}


def serve(responder: str, latency: float) -> None:
    """Child-process mode: run a FakeLLMServer and answer one-line commands on stdin."""
    with FakeLLMServer(RESPONDERS[responder], latency=latency, hang_seconds=3.0) as server:
        print(server.url, flush=True)
        for line in sys.stdin:
            command, *args = line.split()
            if command == "count":
                print(server.request_count, flush=True)
            elif command == "fault":
                server.set_fault_rate(float(args[0]), seed=int(args[1]))
                print("ok", flush=True)
            else:
                print("bye", flush=True)
                return


class ServerProcess:
    """The parent's handle on a `serve` child: its url, request count and fault rate."""

    def __init__(self, responder: str, latency: float):
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--serve", responder, "--latency", str(latency)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.url = self.process.stdout.readline().strip()
        if not self.url.startswith("http"):
            raise RuntimeError("the fake server process did not start")

    def _ask(self, line: str) -> str:
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        return self.process.stdout.readline().strip()

    @property
    def request_count(self) -> int:
        return int(self._ask("count"))

    def set_fault_rate(self, rate: float, seed: int = 0) -> None:
        self._ask(f"fault {rate} {seed}")

    def __enter__(self) -> "ServerProcess":
        return self

    def __exit__(self, *exc: object) -> None:
        self._ask("stop")
        self.process.wait(timeout=10)


@contextmanager
def fresh_cache() -> Iterator[Path]:
    """Point every on-disk cache (LLM replies, memories, embeddings) at a new temporary folder."""
    previous = os.environ.get("EVOLVEMEM_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="evolvemem-bench-") as folder:
        os.environ["EVOLVEMEM_CACHE_DIR"] = folder
        try:
            yield Path(folder)
        finally:
            if previous is None:
                os.environ.pop("EVOLVEMEM_CACHE_DIR", None)
            else:
                os.environ["EVOLVEMEM_CACHE_DIR"] = previous


def warm_up(url: str) -> None:
    """Pay one-off imports before any clock starts: litellm, openai's resources, the scorer's stemmer."""
    from evolvemem.llm.client import LLMClient
    from evolvemem.scoring.metrics import answer_tokens

    LLMClient(MODEL, api_base=url, cache=None).complete([{"role": "user", "content": "warm up"}], role="warmup")
    answer_tokens("warming up")


def one_round(dataset: Any, questions: list, server: ServerProcess, concurrency: int) -> dict:
    """Build roles and a workspace for the current cache dir, answer `questions`, and report."""
    from evolvemem.session import ModelSettings, QuietReporter, evaluate, open_workspace
    from evolvemem.space.config import load_config

    settings = ModelSettings(model=MODEL, extract_model="offline", api_base=server.url)
    workspace = open_workspace(QuietReporter(), dataset, settings, cache_enabled=True)
    roles = workspace.roles
    workspace.prepare(questions)  # question embeddings are retrieval set-up, not LLM throughput
    config = load_config("default")[0]
    requests_before = server.request_count
    started, cpu_started = time.perf_counter(), time.process_time()
    outcome = evaluate(workspace, config, questions, concurrency=concurrency)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    from evolvemem.contracts.usage import Usage

    usage = roles.ledger.total() if roles.ledger is not None else Usage()
    return {
        "wall": wall,
        "cpu": cpu,
        "requests": server.request_count - requests_before,
        "calls": usage.calls,
        "cache_hits": usage.cache_hits,
        "retries": usage.retries,
        "failed_questions": sum(1 for r in outcome.records if r.get("failed")),
        "predictions": {r["question_id"]: r["prediction"] for r in outcome.records},
    }


def extraction_prompt_tokens(dataset: Any, server: FakeLLMServer) -> list[tuple[str, int, int, int]]:
    """(conversation, turns, requests, prompt tokens) of LLM extraction, per conversation."""
    from evolvemem.llm.cache import ResponseCache
    from evolvemem.llm.client import LLMClient
    from evolvemem.memory.llm_extract import LLMExtractor

    rows = []
    for conversation_id, conversation in dataset.conversations.items():
        client = LLMClient(MODEL, api_base=server.url, cache=ResponseCache(enabled=False))
        extractor = LLMExtractor(client)
        first = server.request_count
        extractor.extract(conversation)
        bodies = server.requests[first:]
        tokens = sum(count_tokens(message_text(m)) for body in bodies for m in body.get("messages", []))
        rows.append((conversation_id, len(conversation.turns()), len(bodies), tokens))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.2, help="seconds the server takes per call")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--serve", choices=sorted(RESPONDERS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.latency)
        return
    if not args.data.is_file():
        sys.exit(f"LoCoMo file not found: {args.data}")
    os.environ.setdefault("OPENAI_API_KEY", "sk-benchmark-dummy")
    # retries must not dominate the fault run: short backoff, and a timeout below the server's hang
    os.environ.setdefault("EVOLVEMEM_LLM_BACKOFF_BASE", "0.05")
    os.environ.setdefault("EVOLVEMEM_LLM_TIMEOUT", "2")

    from evolvemem.data.locomo import load_locomo

    full = load_locomo(args.data)
    questions = full.questions[: args.questions]
    dataset = full.subset({q.conversation_id for q in questions})
    n, lat, conc = len(questions), args.latency, args.concurrency
    print(
        f"data: first {n} questions of {args.data.name} ({len(dataset.conversations)} conversations); "
        f"server latency {lat * 1000:.0f} ms per call; concurrency {conc}; model {MODEL} (fake server)"
    )

    with ServerProcess("first_memory_word", lat) as server:
        warm_up(server.url)
        with fresh_cache():
            clean = one_round(dataset, questions, server, conc)
            ideal = clean["calls"] * lat / conc
            print(
                f"[1] fresh cache : calls {clean['calls']}, wall {clean['wall']:.2f} s, ideal "
                f"{clean['calls']} × {lat:g} s / {conc} = {ideal:.2f} s, ratio {clean['wall'] / ideal:.2f}× "
                f"(target ≤ 1.3×); CPU of this process {clean['cpu']:.2f} s = "
                f"{clean['cpu'] / max(1, clean['calls']) * 1000:.1f} ms per call, mostly GIL-bound"
            )
            again = one_round(dataset, questions, server, conc)
            same = sum(1 for q, p in again["predictions"].items() if clean["predictions"].get(q) != p)
            print(
                f"[2] same round  : calls {again['calls']} (target 0), server requests {again['requests']}, "
                f"cache hits {again['cache_hits']}, wall {again['wall']:.2f} s, predictions differing {same}"
            )
        server.set_fault_rate(FAULT_RATE, seed=7)
        with fresh_cache():
            faulty = one_round(dataset, questions, server, conc)
        differ = sum(1 for q, p in faulty["predictions"].items() if clean["predictions"].get(q) != p)
        print(
            f"[3] {FAULT_RATE:.0%} faults  : server requests {faulty['requests']}, calls {faulty['calls']}, "
            f"retries {faulty['retries']}, failed questions {faulty['failed_questions']}, wall "
            f"{faulty['wall']:.2f} s; predictions differing from the fault-free run: {differ} of {n}"
        )

    print(
        "[4] LLM-extraction prompt tokens per conversation (whitespace words of every message the fake "
        "server received;\n    an empty reply leaves every turn uncovered, so each window also makes its one "
        "coverage re-extraction call):"
    )
    with FakeLLMServer(empty_memories) as server, fresh_cache():
        rows = extraction_prompt_tokens(full, server)
    for conversation_id, turns, requests, tokens in rows:
        print(f"    {conversation_id}: {turns} turns, {requests} requests, {tokens:,} prompt tokens")
    total = sum(r[3] for r in rows)
    print(
        f"    total {total:,} prompt tokens over {len(rows)} conversations "
        f"(mean {total / len(rows):,.0f} per conversation)"
    )
    print(
        json.dumps(
            {
                "ratio_to_ideal": round(clean["wall"] / ideal, 3),
                "replay_calls": again["calls"],
                "fault_differences": differ,
                "extract_prompt_tokens": total,
            }
        )
    )


if __name__ == "__main__":
    main()

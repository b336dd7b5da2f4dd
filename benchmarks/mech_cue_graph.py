"""Cue graph on LoCoMo, offline: the `default` preset vs default + the cue-graph view.

Prints per-category F1 and evidence recall for both configs, the deltas, the evaluation time per
question and the retrieval-only time per question (the graph's own cost).

Then the cost of `cue_graph_mode = "llm"` (an LLM walks the graph, cue_graph_llm.py) per
question, for each step cap T in --llm-steps, against tests/fake_llm_server.py on 127.0.0.1:
calls, prompt and completion tokens, time. The fake model follows a fixed script (keep the two
first memories shown, follow the strongest frontier cue, list the cues of the first memory,
stop at step T), so these are the costs of a model that never stops on its own; the walk still
ends once it has kept `--top-k` memories (five steps here), which caps the calls for T = 8. Tokens are
the fake server's whitespace tokens; "~tok" is prompt characters / 4, closer to a BPE count.
"ms/q" is the whole retrieval; "own ms/q" leaves out the time inside model calls (litellm + HTTP
to the local server), i.e. the walk's own graph tools and prompts.
The walk's *quality* cannot be measured offline: a scripted model says nothing about what a
real one would keep, so no F1 is reported for it.

    python benchmarks/mech_cue_graph.py [--data ../shared/data/locomo10_dev8.json] [--top-k 10]
        [--steps 2] [--beam 20] [--decay 0.5] [--llm-questions 200] [--llm-steps 2,4,8]
        [--llm-calls 4]
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # also serves tests.fake_llm_server

from benchmarks._mechanisms import (
    argument_parser,
    load_locomo_file,
    offline_workspace,  # noqa: E402
    print_comparison,
    run_variants,
)
from evolvemem.space.config import load_config  # noqa: E402


class ScriptedWalker:
    """The fake model's policy, read off the prompt our code rendered (see the module docstring)."""

    def __init__(self) -> None:
        self.tool_calls = 0

    def __call__(self, body: dict) -> str:
        from tests.fake_llm_server import last_user_message

        prompt = last_user_message(body)
        step, steps = map(int, re.search(r"this is step (\d+) of (\d+)", prompt).groups())
        kept_part, rest = prompt.split("Kept so far:", 1)[1].split("Results of the last step:", 1)
        kept = set(re.findall(r"^(m\d+) ", kept_part, re.M))
        results, cues = rest.split("Cues and tags those memories lead to", 1)
        shown = [m for m in dict.fromkeys(re.findall(r"^  (m\d+) ", results, re.M)) if m not in kept]
        calls: list[dict] = [{"tool": "keep", "ids": shown[:2]}] if shown else []
        strongest = re.search(r":\n([^\[\n]+?) \[\d+\]", cues)
        if step < steps and strongest:
            calls.append({"tool": "memories", "cue": strongest.group(1).strip()})
        if step < steps and shown:
            calls.append({"tool": "cues", "ids": shown[:1]})
        self.tool_calls += len(calls)
        return json.dumps({"calls": calls, "stop": step == steps or not calls})


class TimedClient:
    """Wraps the LLMClient to sum the time spent inside model calls, so the walk's own work
    (graph tools, prompt rendering) can be told apart from litellm + HTTP."""

    def __init__(self, client) -> None:
        self.client = client
        self.seconds = 0.0

    def complete_json(self, *args, **kwargs):
        started = time.perf_counter()
        try:
            return self.client.complete_json(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - started


def llm_config(base, args, steps: int):
    cfg, clamps = base.with_changes(
        {
            "cue_graph_top_k": args.top_k,
            "cue_graph_beam": args.beam,
            "cue_graph_decay": args.decay,
            "cue_graph_mode": "llm",
            "cue_graph_steps": steps,
            "cue_graph_llm_calls": args.llm_calls,
        }
    )
    if clamps:
        print("clamped:", clamps)
    return cfg


def llm_retrievers(ws, client) -> dict:
    from evolvemem.mechanisms import candidate_sources
    from evolvemem.retrieval.retriever import Retriever

    return {
        cid: Retriever(
            index,
            ws.embedder,
            known_persons=ws.dataset.conversations[cid].speakers,
            llm=client,
            sources=candidate_sources(),
        )
        for cid, index in ws.indexes.items()
    }


def warm_up(ws, base, question, args) -> None:
    """One walk before timing: litellm's import and first connection are not a question's cost."""
    from evolvemem.llm.client import LLMClient
    from tests.fake_llm_server import FakeLLMServer

    with FakeLLMServer(ScriptedWalker()) as server:
        client = LLMClient("openai/fake-model", api_base=server.url, cache=None, max_retries=0)
        llm_retrievers(ws, client)[question.conversation_id].retrieve(question, llm_config(base, args, 2))


def llm_walk_costs(ws, base, questions, args) -> None:
    """Retrieval in llm mode over the workspace's indexes, for each step cap T."""
    from evolvemem.llm.client import LLMClient
    from evolvemem.mechanisms.cue_graph import SOURCE
    from evolvemem.contracts.usage import Usage
    from tests.fake_llm_server import FakeLLMServer, last_user_message

    from benchmarks.local_llm_server import placeholder_api_key

    placeholder_api_key()
    stride = max(1, len(questions) // args.llm_questions)
    sample = questions[::stride][: args.llm_questions]
    print(
        f"\nllm mode against the fake server: {len(sample)} questions (every {stride}th), "
        f"K = {args.llm_calls} calls per step, a scripted model that keeps 2 memories a step and never stops"
    )
    warm_up(ws, base, sample[0], args)
    print(
        f"{'T':>3s} {'calls/q':>8s} {'prompt tok/q':>13s} {'~tok/q':>8s} {'compl tok/q':>12s} "
        f"{'tool calls/q':>13s} {'ms/q':>8s} {'own ms/q':>9s} {'failures':>9s}"
    )
    for steps in args.llm_steps:
        cfg = llm_config(base, args, steps)
        walker = ScriptedWalker()
        with FakeLLMServer(walker) as server:
            client = TimedClient(LLMClient("openai/fake-model", api_base=server.url, cache=None, max_retries=0))
            retrievers = llm_retrievers(ws, client)
            failures = len(SOURCE.llm_failures)
            cost = Usage()
            started = time.perf_counter()
            for q in sample:
                cost = cost + retrievers[q.conversation_id].retrieve(q, cfg.for_type(q.question_type)).cost
            seconds = time.perf_counter() - started
            chars = sum(len(last_user_message(body)) for body in server.requests)
        n = len(sample)
        print(
            f"{steps:3d} {cost.calls / n:8.2f} {cost.prompt_tokens / n:13.1f} {chars / 4 / n:8.1f} "
            f"{cost.completion_tokens / n:12.1f} {walker.tool_calls / n:13.2f} {seconds / n * 1000:8.2f} "
            f"{(seconds - client.seconds) / n * 1000:9.2f} "
            f"{len(SOURCE.llm_failures) - failures:9d}"
        )


def main() -> None:
    parser = argument_parser(__doc__, top_k=True)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--beam", type=int, default=20)
    parser.add_argument("--decay", type=float, default=0.5)
    parser.add_argument("--llm-questions", type=int, default=200, help="questions for the llm-mode costs (0: skip)")
    parser.add_argument(
        "--llm-steps",
        type=lambda text: [int(t) for t in text.split(",")],
        default=[2, 4, 8],
        help="step caps T to measure, comma-separated",
    )
    parser.add_argument("--llm-calls", type=int, default=4, help="tool calls per step K")
    args = parser.parse_args()
    dataset = load_locomo_file(args.data)
    questions = list(dataset.questions)
    started = time.perf_counter()
    ws = offline_workspace(dataset)
    print(
        f"workspace: {ws.stats.memories} memories in {time.perf_counter() - started:.1f}s; {len(questions)} questions"
    )

    base, _ = load_config("default")
    on, clamps = base.with_changes(
        {
            "cue_graph_top_k": args.top_k,
            "cue_graph_steps": args.steps,
            "cue_graph_beam": args.beam,
            "cue_graph_decay": args.decay,
        }
    )
    if clamps:
        print("clamped:", clamps)
    print(f"cue graph: top_k={args.top_k} steps={args.steps} beam={args.beam} decay={args.decay}")
    print_comparison(run_variants(ws, questions, {"default": base, "cue_graph": on}))
    if args.llm_questions > 0:
        llm_walk_costs(ws, base, questions, args)


if __name__ == "__main__":
    main()

"""LLM-driven walk over the cue graph: MRAgent's active reconstruction.

Spreading activation follows every shared cue with the same fixed rule; a model can instead
read what it has found so far and decide which cue is worth following ("the architect is
Agnieszka, so look at Agnieszka's memories"). The walk is a small agent loop:

- step 1 shows the question and the memories the offline activation ranks highest (so the model
  starts from the question's own cues), with the cues and tags they lead on to;
- each step is one LLM call (prompts/cue_traverse.md). The reply is JSON with up to
  `cue_graph_llm_calls` tool calls — `cues(ids)`, `memories(cue)`, `search(text)`, `keep(ids)`,
  `stop` — which run against the graph; their results are the next step's frontier;
- at most `cue_graph_steps` steps. The walk ends early on `stop` or once `cue_graph_top_k`
  memories are kept, since nothing more could enter the view.

Any call that fails or a reply that is not a usable tool call ends the walk with a failure: the
caller then uses the offline activation alone. The cost of every call made is returned either
way. Memories are shown to the model as `m<row>` (their row in this index state), which keeps
prompts short and ids unambiguous.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from evolvemem.mechanisms.cue_graph_activation import CueGraph
from evolvemem.prompts import load_prompt
from evolvemem.retrieval.fusion import ViewHits, fuse, rank_order, top_k
from evolvemem.contracts.usage import Usage

PROMPT = "cue_traverse"
ROLE = "cue_graph"  # the usage ledger's name for these calls
SEED_MEMORIES = 8  # offline-activation memories shown at step 1
RESULT_MEMORIES = 5  # memories one memories()/search() call returns
IDS_PER_CALL = 5  # memories one cues() call may list
CUES_PER_MEMORY = 8  # cues listed per memory by cues()
FRONTIER_CUES = 12  # cues/tags shown per step, by activation
SEARCH_DEPTH = 20  # BM25 and dense candidates fused by search()
SNIPPET_CHARS = 160
REPLY_TOKENS = 400
_ID = re.compile(r"^\s*m?(\d+)\s*$", re.IGNORECASE)
_LISTED = re.compile(r"^  m(\d+)[ :]")  # a result line that shows one memory (snippet or its cues)


class GraphTools:
    """The read-only tool side of one index state's cue graph (kept in the source's cache)."""

    def __init__(self, graph: CueGraph, state: Any):
        self.graph = graph
        self.state = state
        self.by_node = graph.to_memories.tocsc()  # column = a node's memories
        self.linked = np.diff(self.by_node.indptr)  # how many memories share each node
        self.names = tuple(key[2:] for key in graph.node_keys)
        self.nodes_named: dict[str, list[int]] = {}
        for node, name in enumerate(self.names):
            self.nodes_named.setdefault(name, []).append(node)

    def resolve(self, cue: str) -> list[int]:
        """Nodes for a cue the model names: the exact cue or tag, else its words as cues."""
        text = " ".join(cue.lower().split())
        if text in self.nodes_named:
            return self.nodes_named[text]
        from evolvemem.memory.nlp import tokenize

        return sorted({node for token in tokenize(text) for node in self.nodes_named.get(token, ())})

    def memory_scores(self, nodes: Sequence[int]) -> np.ndarray:
        """Every memory's link strength to the nodes (the same weights spreading activation uses)."""
        active = np.zeros(self.by_node.shape[1], dtype=np.float64)
        active[list(nodes)] = 1.0
        scores: np.ndarray = self.graph.to_memories @ active
        return scores

    def cues_of(self, row: int, limit: int = CUES_PER_MEMORY) -> list[int]:
        """A memory's nodes that lead to another memory, rarest (most specific) first."""
        matrix = self.graph.to_memories
        nodes = matrix.indices[matrix.indptr[row] : matrix.indptr[row + 1]]
        nodes = nodes[self.linked[nodes] >= 2]
        rarest_first: list[int] = nodes[rank_order(-self.linked[nodes].astype(np.float64), nodes)][:limit].tolist()
        return rarest_first

    def cue_label(self, node: int) -> str:
        return f"{self.names[node]} [{self.linked[node]}]"

    def snippet(self, row: int) -> str:
        unit = self.state.memories[row]
        text = " ".join(unit.content.split())
        if len(text) > SNIPPET_CHARS:
            text = text[: SNIPPET_CHARS - 1].rstrip() + "…"
        date = f"[{unit.timestamp:%Y-%m-%d}] " if unit.timestamp is not None else ""
        return f"m{row} {date}{text}"


@dataclass(frozen=True)
class Traversal:
    """The outcome of one walk: kept rows in keep order, what it cost, why it failed ("" = it did not)."""

    kept: tuple[int, ...]
    cost: Usage
    steps: int  # LLM steps taken
    tool_calls: int  # tool calls run
    failure: str = ""


@dataclass
class _Walk:
    """Mutable state of one walk."""

    tools: GraphTools
    request: Any
    keep_limit: int
    kept: list[int] = field(default_factory=list)
    followed: list[str] = field(default_factory=list)
    results: list[str] = field(default_factory=list)
    frontier: dict[int, float] = field(default_factory=dict)  # memories shown last step -> activation
    seen_nodes: set[int] = field(default_factory=set)  # cues already followed with memories()
    stop: bool = False

    # ------------------------------------------------------------------ showing memories
    def show(self, heading: str, scores: np.ndarray, limit: int) -> None:
        """List the best `limit` not-yet-kept memories by `scores` and make them the frontier."""
        scores = scores.astype(np.float64, copy=True)
        if self.kept:
            scores[self.kept] = 0.0
        hits = top_k("", scores, limit, positive_only=True)
        self.results.append(heading if len(hits) else f"{heading} (nothing new)")
        for row, score in zip(hits.rows.tolist(), hits.scores.tolist()):
            self.frontier[row] = max(self.frontier.get(row, 0.0), score / hits.scores[0])
            self.results.append(f"  {self.tools.snippet(row)}")

    def frontier_cues(self) -> str:
        if not self.frontier:
            return "(none)"
        memories = np.zeros(self.tools.graph.n_memories, dtype=np.float64)
        memories[list(self.frontier)] = list(self.frontier.values())
        lifted = self.tools.graph.to_cues @ memories
        if self.seen_nodes:
            lifted[list(self.seen_nodes)] = 0.0
        hits = top_k("", lifted, FRONTIER_CUES * 2, positive_only=True)
        shown: dict[str, str] = {}
        for node, value in zip(hits.rows.tolist(), hits.scores.tolist()):
            name = self.tools.names[node]
            if name not in shown and len(shown) < FRONTIER_CUES:
                shown[name] = f"{self.tools.cue_label(node)} {value / hits.scores[0]:.2f}"
        return ", ".join(shown.values()) or "(none)"

    def run_step(self, calls: list[Any], max_calls: int) -> tuple[int, int]:
        """Run the first `max_calls` calls (up to a `stop`); returns (valid calls, calls run).

        The results become the next step's view. A step that shows no new memory (only keeps,
        say) leaves the previous results' memories open, so the model can still keep them."""
        shown, open_frontier = self.results, self.frontier
        self.results, self.frontier = [], {}
        if len(calls) > max_calls:
            self.results.append(f"(only the first {max_calls} of your {len(calls)} calls were run)")
        valid = ran = 0
        for call in calls[:max_calls]:
            valid += self.run(call)
            ran += 1
            if self.stop:
                break
        if not self.frontier:
            self.frontier = {row: value for row, value in open_frontier.items() if row not in self.kept}
            still_open = [line for line in shown if (m := _LISTED.match(line)) and int(m.group(1)) not in self.kept]
            if still_open:
                self.results += ["Still open from before:", *dict.fromkeys(still_open)]
        return valid, ran

    # ------------------------------------------------------------------ tools
    def run(self, call: Any) -> bool:
        """Run one tool call; report its result (or why it was not run). True if it was valid."""
        if not isinstance(call, dict):
            self.results.append(f'- {str(call)[:60]!r}: not a tool call (expected an object with "tool")')
            return False
        tool = str(call.get("tool", "")).strip().lower()
        if tool == "stop":
            self.stop = True
            return True
        if tool == "keep":
            return self.keep(call)
        if tool == "cues":
            return self.cues(call)
        if tool in ("memories", "search"):
            text = _first_text(call, ("cue", "tag", "text", "query", "arg"))
            if not text:
                self.results.append(f"- {tool}: missing its text")
                return False
            return self.memories(text) if tool == "memories" else self.search(text)
        self.results.append(f"- {tool or '(no tool)'}: unknown tool (use cues, memories, search, keep, stop)")
        return False

    def rows_of(self, call: Mapping[str, object], tool: str) -> list[int] | None:
        rows, bad = parse_ids(call.get("ids", call.get("arg")), self.tools.graph.n_memories)
        if bad:
            self.results.append(f"- {tool}: not memory ids: {', '.join(bad[:5])}")
        return rows or None

    def cues(self, call: Mapping[str, object]) -> bool:
        rows = self.rows_of(call, "cues")
        if rows is None:
            return False
        rows = rows[:IDS_PER_CALL]
        self.followed.append(f"cues({', '.join(f'm{r}' for r in rows)})")
        self.results.append(f"- cues({', '.join(f'm{r}' for r in rows)}):")
        for row in rows:
            nodes = self.tools.cues_of(row)
            listed = ", ".join(self.tools.cue_label(n) for n in nodes) or "(no cue shared with another memory)"
            self.results.append(f"  m{row}: {listed}")
            self.frontier[row] = max(self.frontier.get(row, 0.0), 1.0)
        return True

    def memories(self, cue: str) -> bool:
        nodes = self.tools.resolve(cue)
        self.followed.append(f"memories({cue})")
        if not nodes:
            self.results.append(f"- memories({cue}): no memory has this cue or tag")
            return True
        self.seen_nodes.update(nodes)
        self.show(f"- memories({cue}):", self.tools.memory_scores(nodes), RESULT_MEMORIES)
        return True

    def search(self, text: str) -> bool:
        from evolvemem.memory.nlp import tokenize

        self.followed.append(f"search({text})")
        state = self.request.state
        dense = state.embeddings @ self.request.embed([text])[0]
        lists = [
            top_k("semantic", dense, SEARCH_DEPTH),
            top_k("keyword", self.request.keyword_scores(tokenize(text)), SEARCH_DEPTH, positive_only=True),
        ]
        rows, fused = fuse(lists, "rrf")
        scores = np.zeros(len(state.memories), dtype=np.float64)
        scores[rows] = fused
        self.show(f"- search({text}):", scores, RESULT_MEMORIES)
        return True

    def keep(self, call: Mapping[str, object]) -> bool:
        rows = self.rows_of(call, "keep")
        if rows is None:
            return False
        added, full = [], False
        for row in rows:
            if row in self.kept:
                continue
            if len(self.kept) >= self.keep_limit:
                full = True
                break
            self.kept.append(row)
            added.append(f"m{row}")
        note = f" (the limit of {self.keep_limit} kept memories is reached)" if full else ""
        self.results.append(f"- keep: {', '.join(added) or 'nothing new'}{note}")
        return True


def _first_text(call: Mapping[str, object], names: Sequence[str]) -> str:
    for name in names:
        value = call.get(name)
        if isinstance(value, (str, int, float)) and str(value).strip():
            return str(value).strip()[:120]
    return ""


def parse_ids(value: Any, n_memories: int) -> tuple[list[int], list[str]]:
    """Rows named by "m12" / "12" / 12, one or a list; out-of-range or malformed ids are returned as bad."""
    items = value if isinstance(value, list) else [] if value is None else [value]
    rows: list[int] = []
    bad: list[str] = []
    for item in items:
        match = _ID.match(str(item)) if isinstance(item, (str, int)) and not isinstance(item, bool) else None
        row = int(match.group(1)) if match else -1
        if 0 <= row < n_memories:
            if row not in rows:
                rows.append(row)
        else:
            bad.append(str(item)[:20])
    return rows, bad


def parse_reply(parsed: Any) -> tuple[list[Any], bool]:
    """(tool calls, stop) of a reply {"calls": [...], "stop": bool}; ValueError if it is neither."""
    if not isinstance(parsed, dict):
        raise ValueError("the reply is not a JSON object")
    calls = parsed.get("calls", parsed.get("tool_calls", []))
    if not isinstance(calls, list):
        raise ValueError('"calls" is not a list')
    return calls, parsed.get("stop") is True


def traverse(request: Any, tools: GraphTools, activation: np.ndarray) -> Traversal:
    """Walk the graph with `request.llm` under `request.config`; `activation` is the offline
    spreading activation of every memory (the first step's seed)."""
    from evolvemem.llm.client import LLMCallFailed, LLMJSONError

    config = request.config
    steps, max_calls = config.cue_graph_steps, config.cue_graph_llm_calls
    walk = _Walk(tools, request, keep_limit=config.cue_graph_top_k)
    walk.show(
        "Start: the memories the question's own cues activate (offline spreading activation):",
        activation,
        SEED_MEMORIES,
    )
    prompt = load_prompt(PROMPT)
    cost = Usage()
    executed = 0
    for step in range(1, steps + 1):
        message = prompt.render(
            question=request.question.text,
            step=step,
            steps=steps,
            max_calls=max_calls,
            keep_limit=walk.keep_limit,
            kept="\n".join(tools.snippet(r) for r in walk.kept) or "(nothing yet)",
            results="\n".join(walk.results),
            cues=walk.frontier_cues(),
            followed="; ".join(walk.followed) or "(nothing yet)",
        )
        failure = ""
        try:
            parsed, reply = request.llm.complete_json(
                [{"role": "user", "content": message}], role=ROLE, max_tokens=REPLY_TOKENS
            )
            cost = cost + reply.as_cost()
            calls, stop_after = parse_reply(parsed)
        except LLMJSONError as exc:
            cost = cost + exc.reply.as_cost()
            failure = str(exc)
        except LLMCallFailed as exc:
            failure = str(exc)
        except ValueError as exc:
            failure = f"unusable reply: {exc}"
        if failure:
            return Traversal((), cost, step, executed, f"cue graph walk, step {step}: {failure}")

        valid, ran = walk.run_step(calls, max_calls)
        executed += ran
        if not valid and not (stop_after or walk.stop):
            return Traversal(
                (), cost, step, executed, f"cue graph walk, step {step}: unusable reply: no valid tool call and no stop"
            )
        if stop_after or walk.stop or len(walk.kept) >= walk.keep_limit:
            return Traversal(tuple(walk.kept), cost, step, executed)
    return Traversal(tuple(walk.kept), cost, steps, executed)


def kept_first(label: str, kept: Sequence[int], activation: np.ndarray, k: int) -> ViewHits:
    """The view: kept rows in keep order, then the activation ranking, `k` rows in all.

    Kept rows score in (1, 2], the fill its activation scaled into (0, 1], so under every fusion
    mode the view ranks the model's choices first, each part in its own order."""
    rows = list(dict.fromkeys(kept))[:k]
    taken = set(rows)
    fill = top_k(label, activation, k + len(rows), positive_only=True)
    extra = [(r, s) for r, s in zip(fill.rows.tolist(), fill.scores.tolist()) if r not in taken][: k - len(rows)]
    top = extra[0][1] if extra else 1.0
    scores = [1.0 + (len(rows) - i) / len(rows) for i in range(len(rows))] + [s / top for _, s in extra]
    return ViewHits(label, np.array(rows + [r for r, _ in extra], dtype=np.int64), np.array(scores, dtype=np.float64))

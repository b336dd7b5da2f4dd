"""The cue graph as a candidate view (an offline take on MRAgent's active reconstruction of
memories from cues).

The graph and spreading activation over it are cue_graph_activation.py; this module turns them
into the `cue_graph` view: the `cue_graph_top_k` most activated memories. `cue_graph_mode = "llm"`
replaces the fixed spreading rule by MRAgent's active reconstruction: an LLM chooses which cues to
follow (cue_graph_llm.py). The activation seeds it and fills the view behind what it kept, and is
the whole view whenever it fails.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from evolvemem.contracts.usage import Usage
from evolvemem.mechanisms.cue_graph_activation import build_graph, spread
from evolvemem.retrieval.source_cache import SourceCache, cached
from evolvemem.retrieval.extensions import ViewRequest
from evolvemem.retrieval.fusion import ViewHits, top_k

if TYPE_CHECKING:
    from evolvemem.space.config import RetrievalConfig

LABEL = "cue_graph"


class CueGraphSource:
    """Candidate source: the cue graph's `cue_graph_top_k` most activated memories, or, in
    `cue_graph_mode = "llm"` with a model at hand, the memories an LLM agent kept while walking
    the graph (evolvemem/mechanisms/cue_graph_llm.py) followed by the activation ranking.

    A traversal that fails (call error, unusable reply) falls back to the activation ranking;
    its cost is still returned and the reason is appended to `llm_failures`."""

    name = LABEL

    def __init__(self) -> None:
        self.llm_failures: list[str] = []
        self._lock = threading.Lock()

    def enabled(self, config: RetrievalConfig) -> bool:
        return config.cue_graph_top_k > 0

    def hits(self, request: ViewRequest, cache: SourceCache) -> tuple[list[ViewHits], Usage]:
        graph = cached(cache, "graph", lambda: build_graph(request.state))
        config = request.config
        seeds = graph.seeds(request.tokens, request.terms)
        activation = spread(graph, seeds, config.cue_graph_steps, config.cue_graph_beam, config.cue_graph_decay)
        if config.cue_graph_mode != "llm" or request.llm is None:
            return [top_k(LABEL, activation, config.cue_graph_top_k, positive_only=True)], Usage()

        from evolvemem.mechanisms.cue_graph_llm import GraphTools, kept_first, traverse

        tools = cached(cache, "tools", lambda: GraphTools(graph, request.state))
        walk = traverse(request, tools, activation)
        if walk.failure:
            with self._lock:
                self.llm_failures.append(walk.failure)
            return [top_k(LABEL, activation, config.cue_graph_top_k, positive_only=True)], walk.cost
        return [kept_first(LABEL, walk.kept, activation, config.cue_graph_top_k)], walk.cost


SOURCE = CueGraphSource()

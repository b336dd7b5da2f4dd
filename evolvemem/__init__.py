"""evolvemem: tune the retrieval side of LLM-agent memory with an AutoResearch loop."""

__version__ = "0.1.0"

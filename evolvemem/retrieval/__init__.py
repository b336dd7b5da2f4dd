"""Multi-view retrieval: per-conversation indexes, fusion, ranking and query decomposition.

Import the submodules directly (`evolvemem.retrieval.retriever`, `.index`, `.embeddings`,
`.fusion`, `.decompose`); this package imports nothing heavy on its own.
"""

"""Retrieval mechanisms that plug into the retriever as candidate sources (see retrieval/extensions.py)."""

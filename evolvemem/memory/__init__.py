"""Memories: what the extractor writes and the retriever reads."""

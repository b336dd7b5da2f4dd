"""Roles (extract, decompose, answer, verify, judge, diagnose): each a small Protocol with an
`llm` implementation (prompt file + litellm) and an `offline` one (no model needed)."""

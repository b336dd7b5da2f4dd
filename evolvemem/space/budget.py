"""`TokenBudget`: the context size a run measured its configs at, carried by every config it hands on.

Why a value of its own: a run compares configs at one context size (`--context-tokens`, or the
answer model's window share under `--objective evidence`), otherwise "more memories" always wins
on recall. That size is a setting of the measurement, not a tuned lever — the
`context_token_budget` dimension is the config's own budget beneath it, which the loop may move.
A config that forgot the run's budget would hand a served agent contexts the run never measured,
so the budget travels with the config (`RetrievalConfig.budget`): through `for_type` and
`with_changes`, into `best_config.toml` and each round's snapshot (a `[token_budget]` table), and
back out of `load_config`. It is applied in one place, `RetrievalConfig.token_limit`, which is
what a retriever cuts a context at. The measured size of a context is `context_tokens`.

A run that scores several budgets at once (`--budgets`) ranks each question once and cuts that one
ranking at every budget; the ranking's candidate depth grows with the budget (the retriever's
`_depth`), so every point of such a run is ranked as for its largest budget (`ranked_at`), and the
config it hands on carries that too — a served context is the one the run measured.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from evolvemem.errors import ConfigError

BUDGET_SECTION = "token_budget"  # the TOML table a config file carries its budget in


@dataclass(frozen=True)
class TokenBudget:
    """At most `tokens` estimated tokens a context (None: no run-wide budget; the config's own
    `context_token_budget` and `max_context` alone decide)."""

    tokens: int | None = None
    # the budget the ranking's candidate depth is sized for (None: `tokens`): a frontier run's
    # largest budget, so that one ranking serves every budget's cut
    ranked_at: int | None = None

    def __post_init__(self) -> None:
        if self.tokens is not None and (isinstance(self.tokens, bool) or not isinstance(self.tokens, int)):
            raise ConfigError(f"a token budget is a whole number of tokens, not {self.tokens!r}")
        if self.tokens is not None and self.tokens < 1:
            raise ConfigError(f"a token budget must be 1 or more tokens, not {self.tokens}")
        if self.ranked_at is not None and (
            self.tokens is None or isinstance(self.ranked_at, bool) or not isinstance(self.ranked_at, int)
        ):
            raise ConfigError(f"a ranking depth needs a token budget and a whole number, not {self.ranked_at!r}")
        if self.ranked_at is not None and self.tokens is not None and self.ranked_at < self.tokens:
            raise ConfigError(f"a ranking depth ({self.ranked_at}) is at least the budget ({self.tokens})")
        if self.ranked_at == self.tokens:  # ranked as for its own budget: the plain case
            object.__setattr__(self, "ranked_at", None)

    def __bool__(self) -> bool:
        return self.tokens is not None

    def limit(self, own: int) -> int:
        """The token limit of a context whose config's own budget is `own` (0: none): the smaller
        of the two; 0 when neither is set (memories are counted by `max_context` alone)."""
        if self.tokens is None:
            return own
        return min(own, self.tokens) if own else self.tokens

    def rank_limit(self, own: int) -> int:
        """The token limit the ranking's candidate depth is sized for: `limit`, with `ranked_at`
        in place of `tokens` where set."""
        if self.ranked_at is None:
            return self.limit(own)
        return min(own, self.ranked_at) if own else self.ranked_at

    def cut_at(self, tokens: int) -> TokenBudget:
        """The same ranking cut at `tokens` (a frontier run's other budgets)."""
        return TokenBudget(tokens, self.ranked_at if self.ranked_at is not None else self.tokens)

    def describe(self) -> str:
        if self.tokens is None:
            return "no token budget"
        ranked = f" (ranked as for {self.ranked_at})" if self.ranked_at not in (None, self.tokens) else ""
        return f"contexts cut at {self.tokens} tokens{ranked}"

    # ---- files ------------------------------------------------------------------------------
    def as_toml(self) -> str:
        """The `[token_budget]` table a config file carries ("" without a budget)."""
        if self.tokens is None:
            return ""
        return (
            f"[{BUDGET_SECTION}]\n"
            "# the budget the run measured its contexts at: every context is cut at this many estimated\n"
            "# tokens (the config's own context_token_budget where smaller); --context-tokens replaces it\n"
            f"tokens = {self.tokens}\n"
            + (
                f"ranked_at = {self.ranked_at}  # ranked as for this budget (a frontier run's largest)\n"
                if self.ranked_at is not None
                else ""
            )
        )

    @classmethod
    def from_table(cls, table: object, source: str) -> TokenBudget:
        """A config file's `[token_budget]` table; anything else there is an error naming it."""
        if not isinstance(table, Mapping) or set(table) - {"tokens", "ranked_at"}:
            raise ConfigError(f"{source}: [{BUDGET_SECTION}] holds tokens = <whole number> (and ranked_at)")
        tokens, ranked_at = table.get("tokens"), table.get("ranked_at")
        if not isinstance(tokens, int) or isinstance(tokens, bool):
            raise ConfigError(f"{source}: [{BUDGET_SECTION}] tokens must be a whole number, not {tokens!r}")
        try:
            return cls(tokens, ranked_at)
        except ConfigError as exc:
            raise ConfigError(f"{source}: {exc}") from None

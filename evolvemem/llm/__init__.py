"""The LLM layer every role goes through: litellm + our reply cache, retries and usage ledger.

Importing this package does not import litellm; the first call does.
"""

from evolvemem.llm.cache import ResponseCache, make_cache_key
from evolvemem.llm.client import LLMCallFailed, LLMClient, LLMJSONError, LLMReply, scrub_secrets
from evolvemem.llm.json_repair import parse_json_lenient
from evolvemem.llm.usage import UsageLedger

__all__ = [
    "LLMCallFailed",
    "LLMClient",
    "LLMJSONError",
    "LLMReply",
    "ResponseCache",
    "UsageLedger",
    "make_cache_key",
    "parse_json_lenient",
    "scrub_secrets",
]

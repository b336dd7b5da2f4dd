"""Prompt files in `prompts/`: plain text with `$placeholders` (string.Template).

Each prompt's version is a hash of its text, so caches keyed by prompt version refresh by
themselves when a prompt file is edited. A leading `<!-- ... -->` comment (where a prompt cites the
protocol it follows) is for readers of the file and is not part of the prompt."""

from __future__ import annotations

import functools
import hashlib
import re
import string
from dataclasses import dataclass

from evolvemem.paths import prompts_dir

_HEADER_COMMENT = re.compile(r"\A<!--.*?-->\n", re.DOTALL)


@dataclass(frozen=True)
class Prompt:
    name: str
    text: str

    @property
    def version(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()[:12]

    def render(self, **values: object) -> str:
        """Fill `$name` placeholders; a missing value is an error, literal `$$` is a dollar."""
        return string.Template(self.text).substitute({k: str(v) for k, v in values.items()})


@functools.lru_cache(maxsize=None)
def load_prompt(name: str) -> Prompt:
    path = prompts_dir() / f"{name}.md"
    if not path.is_file():
        raise FileNotFoundError(f"prompt {name!r} not found in {prompts_dir()}")
    return Prompt(name=name, text=_HEADER_COMMENT.sub("", path.read_text(encoding="utf-8"), count=1))

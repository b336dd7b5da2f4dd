"""What the README and the docs show a user to type: their bash blocks, the `evolve` commands in them,
whether each parses with the real CLI, and the custom-data example a guide asks them to save."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"
_BASH = re.compile(r"```bash\n(.*?)```", re.S)
_ENV = re.compile(r"^[A-Z_][A-Z0-9_]*=")


def bash_blocks(markdown: str) -> list[str]:
    return _BASH.findall(markdown)


def evolve_commands(blocks: list[str]) -> list[list[str]]:
    """Every `evolve …` line of the blocks as its arguments after `evolve` (comments, line
    continuations and leading VAR=value assignments handled as a shell would)."""
    commands = []
    for block in blocks:
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            while words and _ENV.match(words[0]):
                words.pop(0)
            if words and words[0] == "evolve":
                commands.append(words[1:])
    return commands


def parse_error(args: list[str]) -> str | None:
    """Why `evolve <args>` would not parse (unknown command or option, a value of the wrong type), or None.
    Parsing only: nothing runs."""
    import typer.main

    from evolvemem.cli.main import app

    group = typer.main.get_command(app)
    if not args or args[0] not in group.commands:  # type: ignore[attr-defined]
        return f"no command {args[:1]}"
    try:
        group.commands[args[0]].make_context(args[0], list(args[1:]))  # type: ignore[attr-defined]
    except Exception as exc:  # click's UsageError family, whichever click typer carries
        return f"{type(exc).__name__}: {exc}"
    return None


def custom_example() -> str:
    """The custom-data JSON block of docs/guides/custom-data.md, as a user would copy it."""
    guide = (DOCS / "guides" / "custom-data.md").read_text(encoding="utf-8")
    block = re.search(r"```json\n(\{\n  \"name\": .*?)```", guide, re.S)
    assert block, "docs/guides/custom-data.md lost its custom-data example"
    return block.group(1)

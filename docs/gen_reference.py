r"""The docs' reference pages, generated from the code, and the mkdocs hook that keeps them honest.

    python docs/gen_reference.py            rewrite docs/reference/{cli,action-space,run-store,prompts,http}.md
    python docs/gen_reference.py --check    exit 1 naming every reference page that is out of date

The pages are read off the code, never typed: the `evolve` typer app (every command, argument and
option, and the EVOLVEMEM_LLM_* variables), the action space (`action_space/*.toml` and its
presets), the run store's tables (`evolvemem/store/schema.py`), the prompt files (`prompts/*.md`) and the
OpenAPI schema of `evolve serve` (`evolvemem/serving/http_app.py`).

mkdocs loads this file as a hook (`hooks:` in mkdocs.yml): the build fails when a reference page is
out of date, and hand-written pages name values instead of copying them — `{{ option run --alpha }}`,
`{{ range max_context }}`, `{{ default max_context }}`, `{{ choices fusion_mode }}`,
`{{ spec screen_fraction }}`, `{{ env EVOLVEMEM_LLM_BREAKER }}`, `{{ names evolvemem.qtypes.QUESTION_TYPES }}`
— which the build fills from the code (an unknown name fails the build; `\{{` writes a literal `{{`).
"""

from __future__ import annotations

import inspect
import os
import re
import string
import sys
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

DOCS = Path(__file__).resolve().parent
REPO = DOCS.parent
if str(REPO) not in sys.path:  # the checkout's package, also when mkdocs imports this file as a hook
    sys.path.insert(0, str(REPO))

REGENERATE = "python docs/gen_reference.py"
NOTICE = (
    f"<!-- Generated from the code by `{REGENERATE}`: do not edit by hand. -->\n\n"
    f'!!! note "Generated from the code"\n'
    f"    This page is written by `{REGENERATE}` from {{source}}; a test and the docs build fail when it\n"
    f"    is out of date.\n"
)


# ----------------------------------------------------------------------------- shared formatting
def cell(text: Any) -> str:
    """Text for one Markdown table cell (pipes escaped, one line)."""
    return " ".join(str(text).split()).replace("|", "\\|")


def plain(value: Any) -> str:
    """A default as prose writes it: 0.05, 4, true, none, rrf."""
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "none"}[value]
    return f"{value:g}" if isinstance(value, float) else str(value)


def code(value: Any) -> str:
    """A value as a user types it, in backticks (`true`, `none`, `0.5`)."""
    if isinstance(value, (list, tuple)):
        return ", ".join(code(v) for v in value) if value else "—"
    text = plain(value)
    return f"`{text}`" if text else '`""`'


def anchor(heading: str) -> str:
    """The id the Markdown toc gives a plain heading ("evolve run" -> "evolve-run", "question_records" stays)."""
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", heading).strip().lower())


def table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- the CLI
@dataclass(frozen=True)
class CliParam:
    """One argument or option of a command, as typer declares it."""

    names: tuple[str, ...]  # ("--png", "--no-png") / ("--benchmark", "-b") / ("RUN",) for an argument
    takes: str
    default: Any  # REQUIRED when it must be given
    help: str
    argument: bool


REQUIRED = object()


@dataclass(frozen=True)
class CliCommand:
    name: str
    help: str
    params: tuple[CliParam, ...]


def cli_commands() -> list[CliCommand]:
    """Every `evolve` command with its arguments and options, read off the typer app's declarations
    (typer's own OptionInfo / ArgumentInfo defaults and the functions' type hints)."""
    from typer.models import ArgumentInfo, OptionInfo

    from evolvemem.cli.main import app

    commands = []
    registered = [(info, "") for info in app.registered_commands]
    for group in app.registered_groups:  # `evolve traces export`: a command of a sub-app
        sub = group.typer_instance
        assert sub is not None
        registered += [(info, f"{group.name} ") for info in sub.registered_commands]
    for info, prefix in registered:
        func = info.callback
        assert func is not None
        hints = typing.get_type_hints(func)
        params = []
        for name, parameter in inspect.signature(func).parameters.items():
            declared = parameter.default
            if not isinstance(declared, (OptionInfo, ArgumentInfo)) or getattr(declared, "hidden", False):
                continue  # typer.Context and the like
            argument = isinstance(declared, ArgumentInfo)
            if argument:
                names: tuple[str, ...] = (declared.metavar or name.upper(),)
            else:
                flag = name.replace("_", "-")  # typer's own names when an option declares none
                decls = declared.param_decls or ((f"--{flag}/--no-{flag}",) if hints[name] is bool else (f"--{flag}",))
                names = tuple(n for decl in decls for n in decl.split("/"))
                names = tuple(sorted(names, key=lambda n: not n.startswith("--")))
            default = REQUIRED if declared.default is ... else declared.default
            params.append(CliParam(names, type_text(hints[name], declared), default, declared.help or "", argument))
        commands.append(
            CliCommand(
                prefix + (info.name or func.__name__.lower().replace("_", "-")),
                info.help or inspect.getdoc(func) or "",
                tuple(params),
            )
        )
    return commands


def type_text(hint: Any, declared: Any) -> str:
    """What a parameter takes, in words, from its type hint and typer's min / max."""
    repeatable = False
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(args) == 1:
        hint = args[0]
    if typing.get_origin(hint) is list:
        hint, repeatable = typing.get_args(hint)[0], True
    if hint is bool:
        return "flag"
    text = {int: "integer", float: "number", str: "text"}.get(hint, getattr(hint, "__name__", str(hint)))
    bounds = [
        f"≥ {declared.min:g}" if getattr(declared, "min", None) is not None else "",
        f"≤ {declared.max:g}" if getattr(declared, "max", None) is not None else "",
    ]
    text = " ".join([text, *[b for b in bounds if b]])
    return f"{text}, repeatable" if repeatable else text


def param_default(param: CliParam) -> str:
    if param.default is REQUIRED:
        return "required"
    if param.takes == "flag" and len([n for n in param.names if n.startswith("--")]) == 2:
        return code(param.names[0] if param.default else param.names[1])  # --png / --no-png
    if param.takes == "flag":
        return "on" if param.default else "off"
    if param.default is None or param.default == []:
        said = DEFAULT_IN_HELP.search(param.help or "")  # a default that depends on other options, in words
        return cell(said.group(1)) if said else "—"
    return code(param.default)


DEFAULT_IN_HELP = re.compile(r"\[default: ([^\]]+)\]")


def command_usage(command: CliCommand) -> str:
    arguments = " ".join(
        p.names[0] if p.default is REQUIRED else f"[{p.names[0]}]" for p in command.params if p.argument
    )
    return f"evolve {command.name} [OPTIONS]{' ' + arguments if arguments else ''}"


def cli_page() -> str:
    from evolvemem.cli.main import app

    commands = cli_commands()
    parts = [
        "# CLI reference",
        "",
        NOTICE.format(source="the `evolve` typer app (`evolvemem/cli/main.py`)"),
        "",
        f"`evolve`: {app.info.help}",
        "",
        "Every command takes `--help`; `evolve --version` prints the version. With `--json`, a command ends "
        "stdout with one JSON object.",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    parts += [f"| [`evolve {c.name}`](#{anchor('evolve ' + c.name)}) | {cell(first_line(c.help))} |" for c in commands]
    for command in commands:
        parts += [
            "",
            f"## evolve {command.name}",
            "",
            command.help.strip(),
            "",
            "```text",
            command_usage(command),
            "```",
            "",
        ]
        for argument, header in ((True, "argument"), (False, "option")):
            rows = [
                (" / ".join(f"`{n}`" for n in p.names), p.takes, param_default(p), p.help or "—")
                for p in command.params
                if p.argument == argument
            ]
            if rows:
                parts += [table((header, "takes", "default", "meaning"), rows), ""]
    parts += [
        "## Environment variables",
        "",
        "LLM client tuning, read when a model is called (a bad value is one line naming it):",
        "",
        table(("variable", "takes", "default", "at least"), env_rows()),
        "",
    ]
    return "\n".join(parts).rstrip() + "\n"


def first_line(text: str | None) -> str:
    return (text or "").strip().split("\n")[0]


def client_defaults() -> dict[str, Any]:
    """LLMClient's keyword defaults (what an unset EVOLVEMEM_LLM_* variable leaves)."""
    from evolvemem.llm.client import LLMClient

    return {
        name: p.default
        for name, p in inspect.signature(LLMClient.__init__).parameters.items()
        if p.default is not inspect.Parameter.empty
    }


def env_rows() -> list[tuple[str, ...]]:
    from evolvemem.roles.factory import CLIENT_ENV

    defaults = client_defaults()
    return [
        (f"`{variable}`", kind.__name__, code(kind(defaults[keyword])), code(minimum))
        for variable, (keyword, kind, minimum) in CLIENT_ENV.items()
    ]


# ----------------------------------------------------------------------------- the action space
def base_dimensions() -> Any:
    """The action-space files' dimensions only (not EVOLVEMEM_ACTION_SPACE folders or a run's levers)."""
    from evolvemem.space.action_space import files_space

    extra = os.environ.pop("EVOLVEMEM_ACTION_SPACE", None)
    try:
        return files_space()
    finally:
        if extra is not None:
            os.environ["EVOLVEMEM_ACTION_SPACE"] = extra


def dimension_notes(dim: Any) -> str:
    notes = []
    if dim.off is not None:
        notes.append(f"{code(dim.off)} = off")
    if dim.optional:
        notes.append("`null` = off")
    if dim.mechanism_off is not None:
        notes.append(f"mechanism (ablate sets {code(dim.mechanism_off)})")
    if dim.needs_model:
        notes.append("needs a model")
    if dim.model_calls:
        notes.append("can ask the model again")
    if dim.maps_to:
        notes.append("true sets " + ", ".join(f"`{k} = {v}`" for k, v in dim.maps_to.items()))
    if dim.acts_when:
        notes.append("acts only when " + ", or ".join(acts_when_text(alternative) for alternative in dim.acts_when))
    return "; ".join(notes)


def acts_when_text(conditions: Any) -> str:
    """One alternative of a dimension's `acts_when` as prose: `fusion_mode` in {`weighted_sum`, `rrf`} and `late_top_k` on."""
    return " and ".join(
        f"`{c.dimension}` {c.switched}" if c.switched else f"`{c.dimension}` in {{{code(c.values)}}}"
        for c in conditions
    )


def dimension_range(dim: Any) -> str:
    from evolvemem.space.dimensions import EnumDimension, NumericDimension

    if isinstance(dim, EnumDimension):
        return " | ".join(f"`{c}`" for c in dim.choices)
    if isinstance(dim, NumericDimension):
        return f"`{dim.min:g}` – `{dim.max:g}`"
    return "`true` | `false`"


def action_space_page() -> str:
    from evolvemem.paths import action_space_dir
    from evolvemem.space.config import load_config, preset_names
    from evolvemem.space.dimensions import STAGES

    dims = base_dimensions()
    groups: dict[str, list[Any]] = {}
    for dim in dims.dimensions():
        groups.setdefault(dim.group, []).append(dim)
    files = {
        g: sorted(p.name for p in action_space_dir().glob("*.toml") if p.stem.lstrip("0123456789_") == g)
        for g in groups
    }
    parts = [
        "# Action-space reference",
        "",
        NOTICE.format(source="the action-space registry (`action_space/*.toml`, `action_space/presets/`)"),
        "",
        f"{len(dims)} dimensions in {len(groups)} groups. **range / choices** is the safe range: a value "
        "outside it is clamped (and the clamp reported); **per type** means `per_category_overrides` may set "
        f"it for one question type; **stage** is {' or '.join(f'`{s}`' for s in STAGES)} (two configs that "
        "build the same answer context and agree on the `answer`-stage settings give the same answer, so it "
        "is reused). What the fields mean: [The action space](../concepts/action-space.md).",
        "",
        "| group | file | dimensions |",
        "|---|---|---|",
    ]
    for group, members in groups.items():
        parts.append(f"| [{group}](#{anchor(group)}) | {', '.join(f'`{f}`' for f in files[group])} | {len(members)} |")
    for group, members in groups.items():
        parts += [
            "",
            f"## {group}",
            "",
            table(
                ("dimension", "type", "range / choices", "default", "per type", "stage", "notes", "description"),
                [
                    (
                        f"`{d.name}`",
                        d.kind,
                        dimension_range(d),
                        code(d.default),
                        "yes" if d.per_type else "",
                        d.stage,
                        dimension_notes(d),
                        d.description,
                    )
                    for d in members
                ],
            ),
        ]
    parts += [
        "",
        "## Presets",
        "",
        "`--config` and `--init` take a preset name or a file. `default` is every dimension at its default; "
        "the others set only what differs (files in `action_space/presets/`).",
        "",
    ]
    default = load_config("default")[0].values()
    for name in preset_names():
        values = load_config(name)[0].values()
        changed = [(f"`{k}`", code(v), code(default[k])) for k, v in values.items() if v != default[k]]
        parts += [f"### `{name}`", ""]
        parts += [
            table(("dimension", "value", "default"), changed) if changed else "Every dimension at its default.",
            "",
        ]
    return "\n".join(parts).rstrip() + "\n"


# ----------------------------------------------------------------------------- the run store
def run_store_page() -> str:
    from evolvemem.store.schema import FAILURE_VIEW, TABLES

    parts = [
        "# Run-store reference",
        "",
        NOTICE.format(source="`evolvemem/store/schema.py` (`question_records` from the `QuestionRecord` contract)"),
        "",
        "Every run directory holds `run.duckdb`; open it with `duckdb runs/<run>/run.duckdb` (examples: "
        "[Inspect a run](../guides/inspect.md#query-the-run-store-with-sql)). Beside it, `usage.jsonl` "
        "journals each LLM call, cache hit, retry and failure the moment it happens (one JSON line: round, "
        "phase, role, the non-zero `usage` counters, and a call's id, sent to the server as "
        "`X-Evolvemem-Call-Id`); the `usage` table is its sum, folded in with each batch of records and, "
        "after a kill, when the run is next opened for writing ([Resume and faults]"
        "(../guides/resume-and-faults.md#a-kill)).",
        "",
        "| table | columns |",
        "|---|---|",
    ]
    parts += [f"| [`{name}`](#{anchor(name)}) | {len(columns)} |" for name, columns in TABLES.items()]
    for name, columns in TABLES.items():
        parts += ["", f"## {name}", "", table(("column", "type", "meaning"), [(f"`{n}`", t, d) for n, t, d in columns])]
    parts += [
        "",
        "## question_failures (view)",
        "",
        "Every `question_records` column plus `failure`: why each answer went wrong, from the gold evidence "
        "(the failure taxonomy of [The loop](../concepts/loop.md#the-failure-taxonomy)).",
        "",
        "```sql",
        FAILURE_VIEW.strip(),
        "```",
    ]
    return "\n".join(parts).rstrip() + "\n"


# ----------------------------------------------------------------------------- prompts
def prompt_placeholders(text: str) -> list[str]:
    names = []
    for match in string.Template.pattern.finditer(text):
        name = match.group("named") or match.group("braced")
        if name and name not in names:
            names.append(name)
    return names


def prompts_page() -> str:
    from evolvemem.paths import prompts_dir
    from evolvemem.prompts import load_prompt

    names = sorted(p.stem for p in prompts_dir().glob("*.md"))
    parts = [
        "# Prompt reference",
        "",
        NOTICE.format(source="the prompt files (`prompts/*.md`)"),
        "",
        "Every prompt is a file in `prompts/`: plain text with `$placeholders` filled when it is sent. Its "
        "version (a hash of its text) is part of the LLM and memory cache keys, so editing a prompt refreshes "
        "what was cached with it.",
        "",
        "| prompt | placeholders | version |",
        "|---|---|---|",
    ]
    prompts = [load_prompt(name) for name in names]
    for prompt in prompts:
        holes = ", ".join(f"`${h}`" for h in prompt_placeholders(prompt.text)) or "—"
        parts.append(f"| [`{prompt.name}.md`](#{anchor(prompt.name)}) | {holes} | `{prompt.version}` |")
    for prompt in prompts:
        parts += [
            "",
            f"## {prompt.name}",
            "",
            f"`prompts/{prompt.name}.md`",
            "",
            "````text",
            prompt.text.rstrip("\n"),
            "````",
        ]
    return "\n".join(parts).rstrip() + "\n"


# ----------------------------------------------------------------------------- the HTTP API
def openapi_schema() -> dict:
    """`evolve serve`'s OpenAPI schema, from the app itself (over a throwaway store, offline roles)."""
    import tempfile

    from evolvemem.serving.http_app import build_api
    from evolvemem.serving.keys import key_ring
    from evolvemem.serving.memory import Memory

    with tempfile.TemporaryDirectory() as folder:
        with Memory.open(Path(folder) / "schema.duckdb") as memory:
            return build_api(memory, key_ring([]), with_mcp=False).openapi()


def schema_type(spec: dict, components: dict) -> str:
    """A JSON-schema type in words: string, integer ≥ 1, list of TurnIn, one of: ..."""
    if "$ref" in spec:
        name = spec["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{anchor(name)})" if name in components else name
    if "anyOf" in spec:
        kinds = [schema_type(s, components) for s in spec["anyOf"] if s.get("type") != "null"]
        return " or ".join(kinds) + (" or null" if any(s.get("type") == "null" for s in spec["anyOf"]) else "")
    if "enum" in spec:
        return "one of " + ", ".join(f"`{v}`" for v in spec["enum"])
    kind = spec.get("type", "any")
    if kind == "array":
        return f"list of {schema_type(spec.get('items', {}), components)}"
    if kind == "object" and "additionalProperties" in spec:
        return f"object of {schema_type(spec['additionalProperties'], components)}"
    bounds = [f"{label} {spec[key]:g}" for key, label in (("minimum", "≥"), ("maximum", "≤")) if key in spec]
    bounds += [
        f"{label} {spec[key]}"
        for key, label in (
            ("minLength", "length ≥"),
            ("maxLength", "length ≤"),
            ("minItems", "items ≥"),
            ("maxItems", "items ≤"),
        )
        if key in spec
    ]
    text = f"{kind}, {spec['format']}" if "format" in spec else kind
    return f"{text} ({', '.join(bounds)})" if bounds else text


def http_page() -> str:
    schema = openapi_schema()
    components = schema.get("components", {}).get("schemas", {})
    parts = [
        "# HTTP API reference",
        "",
        NOTICE.format(source="the OpenAPI schema of `evolve serve` (`evolvemem/serving/http_app.py`)"),
        "",
        f"{schema['info']['description']}",
        "",
        "A running server shows the same schema at `/openapi.json` and interactive docs at `/docs`. Requests "
        "carry `Authorization: Bearer KEY` when the server has API keys (`EVOLVEMEM_API_KEYS`); every error is "
        '`{"error": "<one message>"}`; every response has the config\'s hash in the `X-Evolvemem-Config` '
        "header. The MCP tools (`remember`, `recall`, `answer`, `forget`) are served at `/mcp` (streamable HTTP).",
        "",
        "| method | path | what it does |",
        "|---|---|---|",
    ]
    operations = [(path, method, op) for path, methods in schema["paths"].items() for method, op in methods.items()]
    for path, method, op in operations:
        title = f"{method.upper()} {path}"
        parts.append(f"| `{method.upper()}` | [`{path}`](#{anchor(title)}) | {cell(op.get('summary', ''))} |")
    for path, method, op in operations:
        parts += ["", f"## {method.upper()} {path}", "", op.get("summary", "") + "."]
        params = op.get("parameters", [])
        if params:
            parts += [
                "",
                table(
                    ("parameter", "in", "takes", "required"),
                    [
                        (
                            f"`{p['name']}`",
                            p["in"],
                            schema_type(p.get("schema", {}), components),
                            "yes" if p.get("required") else "no",
                        )
                        for p in params
                    ],
                ),
            ]
        body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
        if body:
            parts += ["", f"Body: {schema_type(body, components)}."]
        statuses = [f"`{code}`" for code in op.get("responses", {})]
        ok = op.get("responses", {}).get("200", {}).get("content", {})
        returned = next(iter(ok.values()), {}).get("schema") if ok else None
        parts += [
            "",
            f"Responses: {', '.join(statuses)}"
            + (f"; 200 returns {schema_type(returned, components)}." if returned and returned.get("$ref") else "."),
        ]
    parts += ["", "## Schemas"]
    for name, spec in sorted(components.items()):
        if name in ("HTTPValidationError", "ValidationError"):
            continue  # FastAPI's defaults; this API answers errors with ErrorBody
        required = set(spec.get("required", []))
        rows = [
            (
                f"`{field}`",
                schema_type(fspec, components),
                "yes" if field in required else "no",
                fspec.get("description", "—"),
            )
            for field, fspec in spec.get("properties", {}).items()
        ]
        parts += ["", f"### {name}", "", spec.get("description", "").strip()]
        if rows:
            parts += ["", table(("field", "takes", "required", "meaning"), rows)]
    return "\n".join(line for line in "\n".join(parts).split("\n")).replace("\n\n\n", "\n\n").rstrip() + "\n"


# ----------------------------------------------------------------------------- pages and checks
PAGES: dict[str, Callable[[], str]] = {
    "reference/cli.md": cli_page,
    "reference/action-space.md": action_space_page,
    "reference/run-store.md": run_store_page,
    "reference/prompts.md": prompts_page,
    "reference/http.md": http_page,
}


def generated_pages() -> dict[str, str]:
    return {path: make() for path, make in PAGES.items()}


def stale_pages(docs: Path = DOCS) -> list[str]:
    """The reference pages whose file differs from what the code generates now."""
    stale = []
    for path, text in generated_pages().items():
        target = docs / path
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            stale.append(f"docs/{path}")
    return stale


def out_of_date_message(stale: list[str]) -> str:
    return f"{', '.join(stale)} out of date with the code: regenerate with `{REGENERATE}`"


# ----------------------------------------------------------------------------- references in hand-written pages
REFERENCE = re.compile(r"(?<!\\)\{\{\s*(option|range|default|choices|spec|env|names)\s+([^{}]+?)\s*\}\}")


def resolve(kind: str, args: str) -> str:
    """The text a `{{ kind args }}` reference stands for; ValueError when it names nothing."""
    words = args.split()
    if kind == "option":
        if len(words) != 2:
            raise ValueError("option references read {{ option COMMAND --name }}")
        return option_default(*words)
    if kind == "spec":
        return spec_default(args.strip())
    if kind == "names":
        return ", ".join(f"`{name}`" for name in named_constant(args.strip()))
    if kind == "env":
        from evolvemem.roles.factory import CLIENT_ENV

        if args.strip() not in CLIENT_ENV:
            raise ValueError(f"unknown variable {args.strip()!r}")
        return str(client_defaults()[CLIENT_ENV[args.strip()][0]])
    dims = base_dimensions()
    if args.strip() not in dims:
        raise ValueError(f"unknown dimension {args.strip()!r}")
    dim = dims[args.strip()]
    try:
        if kind == "range":
            numeric = dims.numeric(dim.name)
            return f"{numeric.min:g}–{numeric.max:g}"
        if kind == "choices":
            return " / ".join(dims.enum(dim.name).choices)
    except TypeError as exc:
        raise ValueError(str(exc)) from None
    return plain(dim.default)


def option_default(command_name: str, option: str) -> str:
    command = next((c for c in cli_commands() if c.name == command_name), None)
    if command is None:
        raise ValueError(f"no command {command_name!r}")
    param = next((p for p in command.params if option in p.names and not p.argument), None)
    if param is None:
        raise ValueError(f"evolve {command_name} has no option {option!r}")
    if param.default is None or param.default is REQUIRED:
        raise ValueError(f"evolve {command_name} {option} has no fixed default")
    return plain(param.default)


def named_constant(dotted: str) -> list[str]:
    """The names a tuple, list or dict of the code holds (`evolvemem.qtypes.QUESTION_TYPES`)."""
    import importlib

    module_name, _, attribute = dotted.rpartition(".")
    try:
        value = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError, ValueError):
        raise ValueError(f"no constant {dotted!r}") from None
    if not isinstance(value, (tuple, list, dict)):
        raise ValueError(f"{dotted} is not a tuple, list or dict")
    return [str(v) for v in value]


def spec_default(field: str) -> str:
    """A default of `RunSpec` (`screen_fraction`) or of its `GuardSettings` (`guard.alpha`)."""
    from evolvemem.cli.defaults import GUARD_DEFAULTS, RUN_DEFAULTS

    owner: Any = GUARD_DEFAULTS if field.startswith("guard.") else RUN_DEFAULTS
    name = field.removeprefix("guard.")
    if name not in type(owner).__dataclass_fields__:
        raise ValueError(f"no run setting {field!r}")
    return plain(getattr(owner, name))


def expand_references(markdown: str, where: str = "page") -> str:
    def fill(match: re.Match) -> str:
        try:
            return resolve(match.group(1), match.group(2))
        except ValueError as exc:
            raise ValueError(f"{where}: {match.group(0)}: {exc}") from None

    return REFERENCE.sub(fill, markdown)


# ----------------------------------------------------------------------------- the mkdocs hook
def on_pre_build(config: Any) -> None:
    from mkdocs.exceptions import PluginError

    stale = stale_pages(Path(config["docs_dir"]))
    if stale:
        raise PluginError(out_of_date_message(stale))


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    from mkdocs.exceptions import PluginError

    if page.file.src_uri in PAGES:  # generated: prompt texts are shown as they are
        return markdown
    try:
        return expand_references(markdown, page.file.src_uri)
    except ValueError as exc:
        raise PluginError(str(exc)) from None


def main(argv: list[str]) -> int:
    if argv[1:] == ["--check"]:
        stale = stale_pages()
        if stale:
            print(out_of_date_message(stale), file=sys.stderr)
            return 1
        print(f"{len(PAGES)} reference pages up to date")
        return 0
    if argv[1:]:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    for path, text in generated_pages().items():
        target = DOCS / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
            print(f"wrote docs/{path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

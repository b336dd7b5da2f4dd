"""The docs site against the code: the generated reference pages are current and complete, the
hand-written pages name values instead of copying them, and what the guides show runs."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from evolvemem.cli.main import app
from tests.docs_commands import bash_blocks, custom_example, evolve_commands, parse_error

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"


def _load_generator():
    spec = importlib.util.spec_from_file_location("gen_reference", DOCS / "gen_reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_reference"] = module
    spec.loader.exec_module(module)
    return module


gen = _load_generator()
GENERATED = {DOCS / path for path in gen.PAGES}
HAND_WRITTEN = sorted(p for p in DOCS.rglob("*.md") if p not in GENERATED)


def page(path: str) -> str:
    return (DOCS / path).read_text(encoding="utf-8")


# ----------------------------------------------------------------------------- generated reference pages
def test_reference_pages_are_up_to_date():
    stale = gen.stale_pages()
    assert not stale, gen.out_of_date_message(stale)


def test_out_of_date_message_names_the_regeneration_command(tmp_path):
    (tmp_path / "reference").mkdir()
    for path, text in gen.generated_pages().items():
        (tmp_path / path).write_text(text, encoding="utf-8")
    (tmp_path / "reference" / "cli.md").write_text("# CLI reference\n\nold\n", encoding="utf-8")
    stale = gen.stale_pages(tmp_path)
    assert stale == ["docs/reference/cli.md"]
    assert "python docs/gen_reference.py" in gen.out_of_date_message(stale)


def test_cli_reference_lists_every_command_and_option():
    """Against the click command typer builds (what the shell parses), not the generator's reading."""
    import typer.main

    text = page("reference/cli.md")
    group = typer.main.get_command(app)
    commands = []
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        if hasattr(command, "commands"):  # `evolve traces export`: the commands of a sub-app
            commands += [(f"{name} {sub}", subcommand) for sub, subcommand in command.commands.items()]
        else:
            commands.append((name, command))
    for name, command in commands:
        section = text.split(f"\n## evolve {name}\n", 1)
        assert len(section) == 2, f"no section for evolve {name}"
        body = section[1].split("\n## ", 1)[0]
        for param in command.params:
            for opt in [*getattr(param, "opts", []), *getattr(param, "secondary_opts", [])]:
                if opt.startswith("-"):
                    assert f"`{opt}`" in body, f"evolve {name} {opt} missing from docs/reference/cli.md"


def test_cli_reference_shows_option_defaults():
    rows = {line.split(" | ")[0]: line for line in page("reference/cli.md").splitlines() if line.startswith("| `--")}
    assert "`0.005`" in rows["| `--min-effect`"] and "`4`" in rows["| `--patience`"]


def test_action_space_reference_lists_every_dimension_with_its_range_and_default():
    text = page("reference/action-space.md").split("\n## Presets\n")[0]
    rows = {line.split(" | ")[0].strip("| `"): line for line in text.splitlines() if line.startswith("| `")}
    dims = gen.base_dimensions()
    assert dims
    for name, dim in dims.items():
        assert name in rows, f"dimension {name} missing from docs/reference/action-space.md"
        row = rows[name]
        if dim.kind in ("int", "float"):
            assert f"`{dim.min:g}` – `{dim.max:g}`" in row, row
        for choice in getattr(dim, "choices", ()):  # an enum's
            assert f"`{choice}`" in row, row
        assert f"| {gen.code(dim.default)} |" in row, row
        assert ("| yes |" in row) == dim.per_type and f"| {dim.stage} |" in row, row


def test_run_store_reference_lists_every_table_and_column(tmp_path):
    """Against a real run store's catalogue, not the schema module's table."""
    from evolvemem.store.run_store import RunStore

    with RunStore(tmp_path / "run"):
        pass
    con = duckdb.connect(str(tmp_path / "run" / "run.duckdb"), read_only=True)
    columns = con.execute("""SELECT c.table_name, c.column_name FROM information_schema.columns c
                             JOIN information_schema.tables t USING (table_name)
                             WHERE t.table_type = 'BASE TABLE'""").fetchall()
    con.close()
    sections = dict(re.findall(r"\n## (\w+)\n\n(.*?)(?=\n## |\Z)", page("reference/run-store.md"), re.S))
    assert {t for t, _ in columns} == set(sections), "tables differ from docs/reference/run-store.md"
    for table, column in columns:
        assert f"| `{column}` |" in sections[table], f"{table}.{column} missing from docs/reference/run-store.md"


def test_prompt_reference_lists_every_prompt():
    from evolvemem.paths import prompts_dir
    from evolvemem.prompts import load_prompt

    text = page("reference/prompts.md")
    for path in prompts_dir().glob("*.md"):  # as the model reads it (a leading <!-- --> comment is not sent)
        assert f"\n## {path.stem}\n" in text and load_prompt(path.stem).text.strip() in text, path.name


# ----------------------------------------------------------------------------- hand-written pages
def test_every_value_reference_resolves():
    found = 0
    for path in HAND_WRITTEN:
        text = path.read_text(encoding="utf-8")
        found += len(gen.REFERENCE.findall(text))
        gen.expand_references(text, str(path.relative_to(REPO)))  # raises on an unknown name
    assert found >= 10


@pytest.mark.parametrize(
    "reference",
    [
        "{{ option run --no-such }}",
        "{{ range no_such_dim }}",
        "{{ choices max_context }}",
        "{{ spec guard.nope }}",
        "{{ option run --rounds }}",
    ],
)
def test_a_reference_to_nothing_fails(reference):
    with pytest.raises(ValueError):
        gen.expand_references(reference)


def test_references_render_the_code_values():
    dims = gen.base_dimensions()
    assert (
        gen.expand_references("{{ range max_context }}") == f"{dims['max_context'].min:g}–{dims['max_context'].max:g}"
    )
    assert gen.expand_references("{{ choices fusion_mode }}") == " / ".join(dims["fusion_mode"].choices)
    assert gen.expand_references("\\{{ range max_context }}") == "\\{{ range max_context }}"


def _option_defaults() -> dict[str, set[str]]:
    """--option -> the fixed defaults it has in any command."""
    out: dict[str, set[str]] = {}
    for command in gen.cli_commands():
        for param in command.params:
            if not param.argument and isinstance(param.default, (int, float)) and not isinstance(param.default, bool):
                for name in param.names:
                    out.setdefault(name, set()).add(f"{param.default:g}")
    return out


def _prose(path: Path) -> list[str]:
    """The lines of a page outside code blocks (a command in a block sets a value, it does not document one)."""
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    return text.splitlines()


HAND_COPY_CHECKED = [REPO / "README.md", *HAND_WRITTEN]


def hand_copies(lines: list[str]) -> list[str]:
    defaults = _option_defaults()
    dims = gen.base_dimensions()
    found = []
    for line in lines:
        plain = line.replace("`", "")
        for option, value in re.findall(r"(--[a-z][a-z-]+)[ ,(]+(?:default:? )?(-?\d+(?:\.\d+)?)\b", plain):
            if value in {f"{float(v):g}" for v in defaults.get(option, ())} | defaults.get(option, set()):
                found.append(f"{option} {value}: {line.strip()}")
        for name, dim in dims.items():
            if dim.kind in ("int", "float") and name in plain:
                for sep in ("–", "-", "..", " to "):
                    if f"{dim.min:g}{sep}{dim.max:g}" in plain.replace(" – ", "–"):
                        found.append(f"{name} range: {line.strip()}")
            if dim.kind == "enum" and len(dim.choices) >= 3:
                for sep in (" / ", ", ", " | "):
                    if sep.join(dim.choices) in plain:
                        found.append(f"{name} choices: {line.strip()}")
    return found


def test_no_page_hand_copies_an_option_default_a_range_or_a_choice_list():
    found = [f"{path.relative_to(REPO)}: {hit}" for path in HAND_COPY_CHECKED for hit in hand_copies(_prose(path))]
    assert not found, (
        "write {{ option … }} / {{ range … }} / {{ choices … }} instead (docs/development.md): " + "; ".join(found)
    )


def test_the_hand_copy_check_can_fail():
    hits = hand_copies(
        [
            "a gain of at least `--min-effect` (default 0.005)",
            "views take 3–200 candidates (`semantic_top_k`)",
            "fusion is sum / weighted_sum / rrf",
        ]
    )
    assert len(hits) == 3, hits


def test_every_command_in_the_docs_parses():
    commands = [
        (path, args) for path in HAND_WRITTEN for args in evolve_commands(bash_blocks(path.read_text(encoding="utf-8")))
    ]
    assert len(commands) >= 20
    problems = [
        f"{path.relative_to(REPO)}: evolve {' '.join(args)}: {error}"
        for path, args in commands
        if (error := parse_error(args))
    ]
    assert not problems, problems


@pytest.mark.parametrize("config", ["default", "weak"])
def test_custom_data_example_answers_with_offline_roles(tmp_path, config):
    """The first example a user copies must answer its own question, offline, as written."""
    data = tmp_path / "support.json"
    data.write_text(custom_example(), encoding="utf-8")
    out = tmp_path / f"eval-{config}"
    result = CliRunner().invoke(
        app,
        ["eval", "--benchmark", "custom", "--data", str(data), "--config", config, "--out", str(out), "--quiet"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    con = duckdb.connect(str(out / "run.duckdb"), read_only=True)
    question, gold, prediction, f1 = con.execute(
        "SELECT question, gold, prediction, f1 FROM question_records"
    ).fetchone()
    con.close()
    assert gold.lower() in prediction.lower() and f1 == 1.0, (question, prediction)


def test_inspect_guide_sql_runs_on_a_run_store(tmp_path):
    """Every query of the SQL block in guides/inspect.md runs on a real (synth, one-round) run store."""
    out = tmp_path / "run"
    result = CliRunner().invoke(
        app, ["run", "--benchmark", "synth", "--rounds", "1", "--out", str(out), "--quiet"], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    block = re.search(r"```sql\n(.*?)```", page("guides/inspect.md"), re.S)
    assert block
    queries = [q.strip() for q in re.sub(r"--[^\n]*", "", block.group(1)).split(";") if q.strip()]
    assert len(queries) >= 5
    con = duckdb.connect(str(out / "run.duckdb"), read_only=True)
    try:
        for query in queries:
            con.execute(query).fetchall()
        assert con.execute(queries[0]).fetchall(), "the first example returned no rows"
    finally:
        con.close()

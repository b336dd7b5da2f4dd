"""`evolve`: the command-line entry point. Heavy libraries are imported inside commands so that
`evolve --help` starts fast."""
from __future__ import annotations

import functools
import sys
from typing import Optional

import typer

from evolvemem.cli.ui import UI

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Tune the retrieval side of LLM-agent memory with an AutoResearch loop.")

ModelOpt = typer.Option(None, "--model", help="litellm model for every role (e.g. openai/gpt-4o-mini); default: offline roles.")
ExtractOpt = typer.Option(None, "--extract-model", help="Model for memory extraction (or 'offline').")
AnswerOpt = typer.Option(None, "--answer-model", help="Model for decomposition, answering and verification (or 'offline').")
DiagnosisOpt = typer.Option(None, "--diagnosis-model", help="Model for diagnosis (or 'offline').")
JudgeOpt = typer.Option(None, "--judge-model", help="Model for the LLM-judge metric (off unless set).")
ApiBaseOpt = typer.Option(None, "--api-base", help="Base URL of an OpenAI-compatible server (vLLM, Ollama, ...).")


def user_errors(func):
    """Print a user-facing error as one line and exit non-zero; never a traceback."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        from evolvemem.errors import EvolveMemError

        try:
            return func(*args, **kwargs)
        except EvolveMemError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2)
        except KeyboardInterrupt:
            typer.echo("interrupted: finished work is saved; rerun the same command with --resume to continue", err=True)
            raise typer.Exit(130)
    return wrapper


@app.command()
@user_errors
def space(json_out: bool = typer.Option(False, "--json", help="Print the action space as JSON (with the JSON schema).")):
    """Print the action space: every tunable dimension, its range and default."""
    from rich.table import Table

    from evolvemem.space.config import RetrievalConfig
    from evolvemem.space.registry import registry

    ui = UI(json_mode=json_out)
    dims = registry()
    if json_out:
        ui.emit_json({
            "dimensions": [
                {"name": d.name, "type": d.kind, "group": d.group, "min": d.min, "max": d.max, "off": d.off,
                 "optional": d.optional, "choices": list(d.choices), "default": d.default,
                 "per_type": d.per_type, "description": d.description}
                for d in dims.values()
            ],
            "schema": RetrievalConfig.model_json_schema(),
        })
        return
    table = Table(title=f"Action space ({len(dims)} dimensions)", title_justify="left")
    for col in ("group", "dimension", "type", "range / choices", "default", "per type"):
        table.add_column(col, no_wrap=True)
    table.add_column("description", overflow="fold", min_width=30)
    for d in dims.values():
        table.add_row(d.group, d.name, d.kind, d.range_text(), repr(d.default), "yes" if d.per_type else "",
                      d.description)
    ui.print(table)


@app.command("eval")
@user_errors
def eval_command(
    benchmark: str = typer.Option("locomo", "--benchmark", "-b", help="locomo, synth, custom, membench or longmemeval."),
    data: Optional[str] = typer.Option(None, "--data", help="Path to the benchmark file (LoCoMo: locomo10.json)."),
    config: str = typer.Option("default", "--config", "-c", help="Preset name (weak, default) or a config file."),
    split: str = typer.Option("all", "--split", help="dev, test or all (split by conversation)."),
    model: Optional[str] = ModelOpt,
    extract_model: Optional[str] = ExtractOpt,
    answer_model: Optional[str] = AnswerOpt,
    judge_model: Optional[str] = JudgeOpt,
    api_base: Optional[str] = ApiBaseOpt,
    out: Optional[str] = typer.Option(None, "--out", "-o", help="Output directory (default runs/eval-<benchmark>-<time>)."),
    adversarial_protocol: str = typer.Option("official", "--adversarial-protocol",
                                             help="official (abstention = correct) or paper (F1 against the trap answer)."),
    concurrency: int = typer.Option(8, "--concurrency", help="Questions answered at once when an LLM is used."),
    embedding_model: Optional[str] = typer.Option(None, "--embedding-model", help="sentence-transformers model name."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Do not read or write the LLM response cache."),
    json_out: bool = typer.Option(False, "--json", help="End stdout with one JSON object (overall, by_category)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
):
    """Score one retrieval config on a benchmark; every question's record goes to DuckDB."""
    from evolvemem.cli.common import ADVERSARIAL_PROTOCOLS, model_settings
    from evolvemem.cli.eval_cmd import run_eval
    from evolvemem.errors import EvolveMemError

    if adversarial_protocol not in ADVERSARIAL_PROTOCOLS:
        raise EvolveMemError(f"--adversarial-protocol must be official or paper, not {adversarial_protocol!r}")
    ui = UI(json_mode=json_out, quiet=quiet)
    settings = model_settings(model, extract_model, answer_model, None, judge_model, api_base)
    result = run_eval(ui, benchmark=benchmark, data=data, config_name=config, settings=settings, split=split,
                      out=out, protocol=adversarial_protocol, concurrency=concurrency,
                      embedding_model=embedding_model, cache_enabled=not no_cache)
    if json_out:
        ui.emit_json(result)


def main() -> None:  # pragma: no cover - console script entry
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

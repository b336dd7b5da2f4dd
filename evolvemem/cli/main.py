"""`evolve`: the command-line entry point. Heavy libraries are imported inside commands so that
`evolve --help` starts fast."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Optional, ParamSpec, TypeVar

import typer

from evolvemem.cli.defaults import PRESETS, RUN_DEFAULTS
from evolvemem.cli.option_groups import option_group, with_option_groups
from evolvemem.cli.options import (
    BenchmarkOpt,
    BudgetOpt,
    ConcurrencyOpt,
    JsonOpt,
    LabelOptions,
    LocalModelOptions,
    MetricOpt,
    NoCacheOpt,
    QuietOpt,
    RunOptions,
    ScoringModels,
    ServeConfigOpt,
    ServedModels,
    ServerLimits,
    SplitAllOpt,
    StoreOpt,
)
from evolvemem.cli.ui import UI

if TYPE_CHECKING:
    from evolvemem.space.dimensions import Dimension


app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="Tune the retrieval side of LLM-agent memory with an AutoResearch loop.",
)


def _print_version(value: bool) -> None:
    if value:
        from evolvemem import __version__

        typer.echo(f"evolvemem {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Tune the retrieval side of LLM-agent memory with an AutoResearch loop."""


def exit_now_if_calls_in_flight(code: int) -> None:
    """After Ctrl-C, LLM calls still in flight would keep the process alive until they time out
    (Python joins pool threads at exit): leave at once instead. Every finished answer is already in
    the run store; the unfinished ones are asked again on resume."""
    import os
    import threading

    from evolvemem.session import ANSWER_THREAD_PREFIX

    if any(t.is_alive() and t.name.startswith(ANSWER_THREAD_PREFIX) for t in threading.enumerate()):
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(code)


P = ParamSpec("P")
R = TypeVar("R")


def user_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Print a user-facing error as one line and exit non-zero; never a traceback."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        from evolvemem.errors import EvolveMemError

        try:
            return func(*args, **kwargs)
        except EvolveMemError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2)
        except KeyboardInterrupt:
            typer.echo("interrupted: finished work is saved (evolve run --resume RUN continues a run)", err=True)
            exit_now_if_calls_in_flight(130)
            raise typer.Exit(130)
        except (typer.Exit, typer.Abort, SystemExit):
            raise
        except Exception as exc:  # an internal bug: one line, traceback on request
            import os
            import traceback

            from evolvemem.errors import environment_problem

            problem = environment_problem(exc)
            if problem:  # the machine, not the code: a full disk, a read-only directory, a damaged file
                typer.echo(f"error: {problem}", err=True)
                exit_now_if_calls_in_flight(2)
                raise typer.Exit(2)

            if os.environ.get("EVOLVEMEM_DEBUG"):
                traceback.print_exc()
            typer.echo(
                f"error: unexpected {type(exc).__name__}: {exc} (set EVOLVEMEM_DEBUG=1 for the traceback)", err=True
            )
            raise typer.Exit(1)

    return wrapper


@app.command()
@user_errors
def space(
    json_out: bool = typer.Option(False, "--json", help="Print the action space as JSON (with the JSON schema)."),
    run_dir: Optional[str] = typer.Option(
        None, "--run", metavar="RUN", help="Also list the levers that emerged in (or came with) this run."
    ),
) -> None:
    """Print the action space: every tunable dimension, its range and default."""
    from rich.markup import escape
    from rich.table import Table

    from evolvemem.space.action_space import files_space
    from evolvemem.space.config import RetrievalConfig
    from evolvemem.space.dimensions import EnumDimension, NumericDimension

    ui = UI(json_mode=json_out)
    title = "Action space"
    dims = files_space()
    if run_dir:
        from evolvemem.session import open_run
        from evolvemem.space.emerged import run_space

        with open_run(run_dir) as store:
            dims = run_space(store.run_dir)
        title += f" of {run_dir}: {len(dims.base_names)} base + {len(dims.added())} emerged"
    title += f" ({len(dims)} dimensions)"
    if json_out:
        ui.emit_json(
            {
                "dimensions": [
                    {
                        "name": d.name,
                        "type": d.kind,
                        "group": d.group,
                        "min": d.min if isinstance(d, NumericDimension) else None,
                        "max": d.max if isinstance(d, NumericDimension) else None,
                        "off": d.off,
                        "optional": d.optional,
                        "choices": list(d.choices) if isinstance(d, EnumDimension) else [],
                        "default": d.default,
                        "per_type": d.per_type,
                        "stage": d.stage,
                        "description": d.description,
                        "maps_to": dict(d.maps_to),
                        "emerged": dims.is_added(d.name),
                    }
                    for d in dims.dimensions()
                ],
                "schema": RetrievalConfig.model_json_schema(),
            }
        )
        return
    if not ui.console.is_terminal or ui.console.width < WIDE_TABLE_COLUMNS:
        # piped or narrow: one block per dimension, nothing cut
        ui.console.print(title, markup=False)
        for d in dims.dimensions():
            per_type = "; per type" if d.per_type else ""
            ui.console.print(
                f"{d.group} · {d.name} ({d.kind}, {d.range_text()}; default {value_text(d.default)}{per_type}; "
                f"{d.stage} stage)",
                markup=False,
                soft_wrap=True,
            )
            ui.console.print(f"    {about_text(d)}", markup=False, soft_wrap=True)
        return
    table = Table(title=title, title_justify="left")
    for col in ("group", "dimension", "stage", "type", "range / choices", "default", "per type"):
        table.add_column(col, no_wrap=True)
    table.add_column("description", overflow="fold", min_width=30)
    for d in dims.dimensions():
        table.add_row(
            d.group,
            d.name,
            d.stage,
            d.kind,
            d.range_text(),
            value_text(d.default),
            "yes" if d.per_type else "",
            escape(about_text(d)),
        )
    ui.print(table)


def about_text(dim: Dimension) -> str:
    """A dimension's description, with the settings a bundle lever switches on."""
    if not dim.maps_to:
        return dim.description
    return f"{dim.description} (true sets {', '.join(f'{k} = {value_text(v)}' for k, v in dim.maps_to.items())})"


@app.command("eval")
@user_errors
@with_option_groups
def eval_command(
    benchmark: str = BenchmarkOpt,
    data: Optional[str] = typer.Option(None, "--data", help="Path to the benchmark file (LoCoMo: locomo10.json)."),
    config: str = typer.Option(
        "default",
        "--config",
        "-c",
        help=f"Preset name ({PRESETS}), a config file, or a run directory (its best config, scored with the run's local models unless given). eval scores what you would deploy untuned, so it defaults to `default` (every dimension at its default); `run` starts from `weak` (the EvolveMem paper's BM25-only start) to leave the loop room to climb, and `transfer` compares with the run's own start.",
    ),
    split: str = SplitAllOpt,
    models: ScoringModels = option_group(ScoringModels),
    out: Optional[str] = typer.Option(
        None, "--out", "-o", help="Output directory (default runs/eval-<benchmark>-<time>)."
    ),
    adversarial_protocol: str = typer.Option(
        RUN_DEFAULTS.protocol,
        "--adversarial-protocol",
        help="official (abstention = correct) or paper (F1 against the trap answer).",
    ),
    concurrency: int = ConcurrencyOpt,
    local: LocalModelOptions = option_group(LocalModelOptions),
    no_cache: bool = NoCacheOpt,
    context_tokens: Optional[int] = typer.Option(
        None,
        "--context-tokens",
        min=1,
        help="Cut every answer context at this many estimated tokens (the config's own budget where smaller), so configs are compared at an equal budget; the table's evidence recall is then recall at that budget [default: the budget the config carries: a run's best config was measured at its run's budget].",
    ),
    context: str = typer.Option(
        "retrieved",
        "--context",
        help="What the reader is handed: retrieved (the config's own retrieval), oracle (exactly each question's gold evidence turns, dated, in conversation order: the reader's ceiling) or oracle+distractors (those, topped up to the budget with the config's retrieved lines). Oracle modes skip questions without gold evidence turns and are never a config the loop can pick.",
    ),
    metric: str = MetricOpt,
    budget: Optional[int] = BudgetOpt,
    json_out: bool = typer.Option(False, "--json", help="End stdout with one JSON object (overall, by_category)."),
    quiet: bool = QuietOpt,
) -> None:
    """Score one retrieval config on a benchmark; every question's record goes to DuckDB."""
    from evolvemem.answering.oracle import context_mode
    from evolvemem.cli.eval_cmd import run_eval
    from evolvemem.session import check_protocol, run_local_models

    check_protocol(adversarial_protocol)
    mode = context_mode(context)
    ui = UI(json_mode=json_out, quiet=quiet)
    result = run_eval(
        ui,
        benchmark=benchmark,
        data=data,
        config_name=config,
        settings=models.settings(),
        split=split,
        out=out,
        protocol=adversarial_protocol,
        concurrency=concurrency,
        local_models=local.models().or_else(run_local_models(config)),
        cache_enabled=not no_cache,
        context_tokens=context_tokens,
        context=mode,
        metric=metric,
        budget=budget,
    )
    ui.emit_result(result)


WIDE_TABLE_COLUMNS = 160  # below this `evolve space` lists dimensions instead of drawing a table


def value_text(value: object) -> str:
    """A setting as a user writes it in a config file: true / false / none, strings unquoted."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "none" if value is None else str(value)


RESUME_OPTIONS = {"resume", "rounds", "data", "api_base", "json_out", "quiet", "ctx", "executor_name", "ray_address"}


def ignored_on_resume(ctx: typer.Context) -> list[str]:
    """The options given on the command line that a resumed run does not use (it keeps its own)."""

    def typed(name: str) -> bool:  # by name: typer may carry its own copy of click's enum
        source = ctx.get_parameter_source(name)
        return source is not None and source.name == "COMMANDLINE"

    return [f"--{name.replace('_', '-')}" for name in ctx.params if name not in RESUME_OPTIONS and typed(name)]


@app.command()
@user_errors
@with_option_groups
def run(
    ctx: typer.Context,
    opts: RunOptions = option_group(RunOptions),
    local: LocalModelOptions = option_group(LocalModelOptions),
) -> None:
    """Evolve the retrieval config: evaluate → diagnose → propose → guard, round by round."""
    import time

    from evolvemem.cli.run_cmd import check_executor, new_run_dir, new_run_spec, run_loop
    from evolvemem.session import Session, open_executor

    started = time.perf_counter()
    ui = UI(json_mode=opts.json_out, quiet=opts.quiet)
    check_executor(opts.executor_name, opts.ray_address)
    if opts.resume:
        ignored = ignored_on_resume(ctx)
        if ignored:
            ui.warn(f"--resume continues the run with the settings it started with; ignored: {', '.join(ignored)}")
        with open_executor(opts.executor_name, opts.ray_address) as executor:
            session = Session.resume(
                opts.resume, ui, rounds=opts.rounds, data=opts.data, api_base=opts.api_base, executor=executor
            )
            result = run_loop(ui, session, started, resumed=True)
    else:
        spec, init_config = new_run_spec(ui, opts, local.models())
        with open_executor(opts.executor_name, opts.ray_address) as executor:
            run_dir = new_run_dir(opts.out, opts.benchmark, spec.diagnoser)
            session = Session.create(spec, run_dir, init_config, ui, executor=executor)
            result = run_loop(ui, session, started)
    ui.emit_result(result)


@app.command("runs")
@user_errors
def runs_command(
    root: str = typer.Argument("runs", help="Folder holding run directories."),
    json_out: bool = JsonOpt,
) -> None:
    """List the runs in a folder."""
    from evolvemem.cli.inspect_cmd import list_runs

    ui = UI(json_mode=json_out)
    rows = list_runs(ui, root)
    ui.emit_result({"runs": rows})


@app.command()
@user_errors
def show(
    run_dir: str = typer.Argument(..., metavar="RUN"),
    frontier: bool = typer.Option(
        False,
        "--frontier",
        help="A --budgets run's frontier instead: per budget its best round and config, dev and held-out recall against the start, context tokens.",
    ),
    json_out: bool = JsonOpt,
) -> None:
    """Per round: dev score, per category, Δ, decision, changes, calls and tokens; dev vs test."""
    from evolvemem.cli.inspect_cmd import show_run

    ui = UI(json_mode=json_out)
    if frontier:
        from evolvemem.cli.frontier_cmd import show_frontier

        ui.emit_result(show_frontier(ui, run_dir))
        return
    ui.emit_result(show_run(ui, run_dir))


@app.command()
@user_errors
def diff(
    run_dir: str = typer.Argument(..., metavar="RUN"),
    a: int = typer.Argument(..., help="First round."),
    b: int = typer.Argument(..., help="Second round."),
    limit: int = typer.Option(20, "--limit", help="Flipped questions shown per direction."),
    json_out: bool = JsonOpt,
) -> None:
    """Config diff, score diff per category, and which questions flipped right↔wrong and why."""
    from evolvemem.cli.inspect_cmd import diff_rounds

    ui = UI(json_mode=json_out)
    ui.emit_result(diff_rounds(ui, run_dir, a, b, limit))


@app.command()
@user_errors
@with_option_groups
def transfer(
    run_dir: str = typer.Argument(..., metavar="RUN"),
    benchmark: str = typer.Option(..., "--benchmark", "-b", help="Benchmark or domain to score on."),
    data: Optional[str] = typer.Option(None, "--data", help="Its data file."),
    split: str = SplitAllOpt,
    models: ScoringModels = option_group(ScoringModels),
    out: Optional[str] = typer.Option(
        None, "--out", "-o", help="Output directory (default runs/transfer-<benchmark>-<time>)."
    ),
    concurrency: int = ConcurrencyOpt,
    local: LocalModelOptions = option_group(LocalModelOptions),
    budget: Optional[int] = BudgetOpt,
    json_out: bool = JsonOpt,
    quiet: bool = QuietOpt,
) -> None:
    """Score a run's evolved config zero-shot on another benchmark (overrides apply via question types)."""

    from evolvemem.cli.common import default_run_dir
    from evolvemem.cli.eval_cmd import run_eval
    from evolvemem.session import best_config_path, run_local_models, start_config

    best = best_config_path(run_dir, budget)
    start = start_config(run_dir, budget)
    ui = UI(json_mode=json_out, quiet=quiet)
    result = run_eval(
        ui,
        benchmark=benchmark,
        data=data,
        config_name=str(best),
        settings=models.settings(),
        split=split,
        out=out or str(default_run_dir("transfer", benchmark)),
        protocol="official",
        concurrency=concurrency,
        local_models=local.models().or_else(run_local_models(run_dir)),
        cache_enabled=True,
        kind="transfer",
        source_run=run_dir,
        baseline=("the run's start", start),
    )
    ui.emit_result(result)


@app.command()
@user_errors
def report(
    run_dir: str = typer.Argument(..., metavar="RUN"),
    out: Optional[str] = typer.Option(None, "--out", "-o", help="HTML file to write (default RUN/report.html)."),
    png: bool = typer.Option(
        True, "--png/--no-png", help="Also write the trajectory as a PNG beside the HTML (needs matplotlib)."
    ),
    json_out: bool = typer.Option(False, "--json", help="End stdout with one JSON object: the paths written."),
) -> None:
    """One self-contained HTML report (trajectory, categories, failures, every round's diff) and a PNG."""
    from evolvemem.cli.report_cmd import write_report

    ui = UI(json_mode=json_out)
    ui.emit_result(write_report(ui, run_dir, out, png))


@app.command()
@user_errors
def ablate(
    run_dir: str = typer.Argument(..., metavar="RUN"),
    split: str = typer.Option("test", "--split", help="Questions to score on: test (held out), dev or all."),
    json_out: bool = typer.Option(False, "--json", help="End stdout with one JSON object (the Δ table)."),
    quiet: bool = QuietOpt,
) -> None:
    """Re-score a run's best config with each enabled mechanism switched off in turn (Δ table)."""
    from evolvemem.cli.ablate_cmd import run_ablate

    ui = UI(json_mode=json_out, quiet=quiet)
    ui.emit_result(run_ablate(ui, run_dir, split))


@app.command()
@user_errors
@with_option_groups
def label(
    options: LabelOptions = option_group(LabelOptions),
    json_out: bool = JsonOpt,
    quiet: bool = QuietOpt,
) -> None:
    """Write a dev set from your own conversations: generated questions, each checked by independent model calls."""
    from evolvemem.cli.label_cmd import run_label

    ui = UI(json_mode=json_out, quiet=quiet)
    try:
        result = run_label(ui, options)
    except KeyboardInterrupt:
        typer.echo(
            "interrupted: every answered call is in the journal beside --out; run the same command again to continue",
            err=True,
        )
        exit_now_if_calls_in_flight(130)
        raise typer.Exit(130)
    ui.emit_result(result)


@app.command()
@user_errors
@with_option_groups
def serve(
    config: str = ServeConfigOpt,
    store: str = StoreOpt,
    host: str = typer.Option(
        "127.0.0.1", "--host", help="Address to listen on (anything but loopback needs API keys)."
    ),
    port: int = typer.Option(8000, "--port", min=0, max=65535, help="Port to listen on."),
    keys_file: Optional[str] = typer.Option(
        None, "--keys-file", help="File of API keys, one a line [default: EVOLVEMEM_API_KEYS, comma-separated]."
    ),
    models: ServedModels = option_group(ServedModels),
    local: LocalModelOptions = option_group(LocalModelOptions),
    limits: ServerLimits = option_group(ServerLimits),
    reload_config: float = typer.Option(
        2.0,
        "--reload-config",
        min=0.0,
        help="Seconds between checks of --config for a newly evolved config, swapped in without a restart (0: never).",
    ),
    no_mcp: bool = typer.Option(False, "--no-mcp", help="Do not serve the MCP tools at /mcp."),
    budget: Optional[int] = BudgetOpt,
) -> None:
    """Serve the memory over HTTP (JSON API, OpenAPI at /docs) and MCP (streamable HTTP at /mcp)."""
    from evolvemem.cli.serve_cmd import run_server

    run_server(
        UI(),
        config=config,
        store=store,
        host=host,
        port=port,
        keys_file=keys_file,
        models=models,
        local_models=local.models(),
        limits=limits,
        reload_seconds=reload_config,
        mcp=not no_mcp,
        budget=budget,
    )


@app.command("mcp")
@user_errors
@with_option_groups
def mcp_command(
    config: str = ServeConfigOpt,
    store: str = StoreOpt,
    models: ServedModels = option_group(ServedModels),
    local: LocalModelOptions = option_group(LocalModelOptions),
    budget: Optional[int] = BudgetOpt,
) -> None:
    """Serve the memory as MCP tools (remember, recall, answer, forget) over stdio."""
    from evolvemem.cli.serve_cmd import run_mcp_stdio

    run_mcp_stdio(UI(), config=config, store=store, models=models, local_models=local.models(), budget=budget)


traces_app = typer.Typer(no_args_is_help=True, help="Traces of served searches and answers.")
app.add_typer(traces_app, name="traces")


@traces_app.command("export")
@user_errors
def traces_export(
    store: str = StoreOpt,
    out: str = typer.Option(..., "--out", "-o", help="JSON file to write (custom benchmark format)."),
    namespace: Optional[str] = typer.Option(
        None, "--namespace", help="Namespace to export (needed when the store holds several API keys' users)."
    ),
    user: Optional[list[str]] = typer.Option(None, "--user", help="Only these users (repeat) [default: all]."),
    json_out: bool = JsonOpt,
) -> None:
    """Write the stored conversations with every traced query as an unlabelled question."""
    from evolvemem.cli.serve_cmd import export_traces

    ui = UI(json_mode=json_out)
    ui.emit_result(export_traces(ui, store=store, out=out, namespace=namespace, users=user))


@app.command("forget-audit")
@user_errors
def forget_audit_command(
    store: str = StoreOpt,
    text: str = typer.Option(..., "--text", "-t", help="The text to look for (e.g. a forgotten sentence)."),
    json_out: bool = JsonOpt,
) -> None:
    """Where TEXT is still found: the store file, its WAL, its tables and the cache directory (exit 1 if anywhere)."""
    from evolvemem.cli.serve_cmd import forget_audit

    ui = UI(json_mode=json_out)
    result = forget_audit(ui, store=store, text=text)
    ui.emit_result(result)
    if result["found"]:
        raise typer.Exit(1)


def main() -> None:  # pragma: no cover - console script entry
    app()


if __name__ == "__main__":  # pragma: no cover
    main()

"""The ``paperflows`` command: list, run, report, serve, and the local Prefect server."""

from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional

import typer

import tasks  # noqa: F401  (environment defaults before Prefect is imported)
from paperflows import server

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Reproduce ICML 2025 papers as Prefect flows; every claim checked against the paper's figure.")
server_app = typer.Typer(no_args_is_help=True, help="The shared local Prefect server (UI at http://127.0.0.1:4200).")
app.add_typer(server_app, name="server")


def _fail(err: BaseException) -> None:
    typer.echo(f"error: {type(err).__name__}: {err}".splitlines()[0], err=True)
    raise typer.Exit(1)


@app.command("list")
def list_papers() -> None:
    """Papers, their class, claims and last verdicts."""
    from tasks.pipeline import configured_slugs, load_flow
    from tasks.summary import load_metrics, verdict_line

    for slug in configured_slugs():
        paper = load_flow(slug).paper
        verdicts = verdict_line(load_metrics(Path("results"), slug))
        typer.echo(f"{slug:32s} class {paper.paper_class}  {len(paper.claims)} claims  {verdicts}")


@app.command()
def run(
    slug: str = typer.Argument(..., help="paper slug, e.g. lapsum"),
    smoke: bool = typer.Option(False, help="smoke scale (seconds); writes under .paperflows/smoke unless --out is given"),
    set_: List[str] = typer.Option([], "--set", help="override, e.g. --set k=200 or --set common.seed=3"),
    runner: str = typer.Option("threads", help="threads | processes | dask"),
    dask_address: Optional[str] = typer.Option(None, help="address of an existing Dask scheduler (with --runner dask)"),
    out: Optional[Path] = typer.Option(None, help="root for data/ and results/ (default: the repo)"),
    params_file: Path = typer.Option(Path("params.yaml"), help="params file"),
) -> None:
    """Run one paper's flow and check its claims."""
    from tasks.pipeline import run_paper

    out_root = out or (Path(".paperflows") / "smoke" if smoke else Path("."))
    try:
        summary = run_paper(slug, params_file=params_file, out_root=out_root, smoke=smoke, overrides=set_,
                            runner=runner, dask_address=dask_address)
    except Exception as err:  # one line with the cause, non-zero exit
        _fail(err)
    counts = summary["verdicts"]
    typer.echo(f"{slug}: {counts['reproduced']} reproduced, {counts['not reproduced']} not reproduced, "
               f"{counts['inconclusive']} inconclusive in {summary['wall_s']:.1f} s -> {summary['results_dir']}/report.md")


@app.command()
def report() -> None:
    """Write results/SUMMARY.md and the README's table from every results/<slug>/metrics.json."""
    from tasks.summary import write_summary

    try:
        typer.echo(f"wrote {write_summary()}")
    except Exception as err:
        _fail(err)


@app.command()
def serve(params_file: Path = typer.Option(Path("params.yaml"), help="params file")) -> None:
    """Serve every paper flow as a deployment (cron schedules from params.yaml's `schedules`)."""
    from prefect import serve as prefect_serve

    from paperflows.deployments import build_deployments

    if not os.environ.get("PREFECT_API_URL"):
        typer.echo(f"note: PREFECT_API_URL is unset; start a server (paperflows server up) and set it to {server.API_URL}",
                   err=True)
    try:
        deployments = build_deployments(params_file)
    except Exception as err:
        _fail(err)
    prefect_serve(*deployments)


@server_app.command("up")
def server_up() -> None:
    """Start the local Prefect server unless one is running; print the UI address."""
    try:
        typer.echo(f"Prefect UI: {server.start()}  (export PREFECT_API_URL={server.API_URL}; `make stop` ends it)")
    except Exception as err:
        _fail(err)


@server_app.command("down")
def server_down() -> None:
    """Stop the local Prefect server started by `server up`."""
    typer.echo("stopped" if server.stop() else "no server started by paperflows is running")


def main() -> None:
    app()

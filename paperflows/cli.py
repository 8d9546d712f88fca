"""The ``paperflows`` command: check, list, run, record, evaluate, extend, repro, fingerprint, report, robustness, new, dvc-yaml, split-params, recheck, serve, and the local Prefect server."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Annotated, List, Optional

import typer

from paperflows import server
from paperflows.settings import apply_environment_defaults

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Reproduce ICML 2025 papers as Prefect flows; every claim checked against the paper's figure.")
server_app = typer.Typer(no_args_is_help=True, help="The shared local Prefect server (UI at http://127.0.0.1:4200).")
app.add_typer(server_app, name="server")


ParamsFile = Annotated[Path, typer.Option(help="params file")]
Overrides = Annotated[List[str], typer.Option("--set", help="override, e.g. --set k=200 or --set common.seed=3")]
Runner = Annotated[str, typer.Option(help="threads | processes | dask")]
DaskAddress = Annotated[Optional[str], typer.Option(help="address of an existing Dask scheduler (with --runner dask)")]
OutRoot = Annotated[Optional[Path], typer.Option("--out", help="root for data/, records/ and results/ (default: the "
                                                 "repo, or .paperflows/smoke at smoke scale)")]
Slugs = Annotated[Optional[List[str]], typer.Argument(help="papers (default: all)")]
"""Options that several commands share, declared once."""


def _fail(err: BaseException) -> None:
    typer.echo(f"error: {type(err).__name__}: {err}".splitlines()[0], err=True)
    raise typer.Exit(1)


@contextlib.contextmanager
def _one_line_errors():
    """An error in the block ends the command with its type and first line on stderr and exit status 1."""
    try:
        yield
    except typer.Exit:
        raise
    except Exception as err:
        _fail(err)


def _first_look_at_other_seeds(overrides: List[str]) -> List[str]:
    """``overrides``, with ``extra_seeds=0`` added where they set the paper's ``seeds`` and not its ``extra_seeds``:
    params.yaml's ``extra_seeds`` is the second look that look 1 at *its* seed count asked for (`paperflows
    extend`); at another count there is no such look yet, and ``--set seeds=1`` runs one seed, not 1 + extra."""
    from paperflows.params import parse_override

    keys = {tuple(parse_override(text)[0]) for text in overrides}
    if ("seeds",) in keys and ("extra_seeds",) not in keys:
        return [*overrides, "extra_seeds=0"]
    return list(overrides)


def _out_root(out: Optional[Path], smoke: bool) -> Path:
    """Where a run writes: ``--out``, else the repo, or ``.paperflows/smoke`` at smoke scale."""
    return out or (Path(".paperflows") / "smoke" if smoke else Path("."))


@app.command("list")
def list_papers() -> None:
    """Papers, their class, claims and last verdicts."""
    from paperflows.params import configured_slugs
    from paperflows.summary import load_metrics, verdict_line

    for slug in configured_slugs():
        document = load_metrics(Path("results"), slug)
        claims = f"{len(document['claims'])} claims" if document else ""
        klass = f"class {document['paper_class']}" if document else ""
        typer.echo(f"{slug:32s} {klass:8s} {claims:10s} {verdict_line(document)}")


@app.command()
def run(
    slug: Annotated[str, typer.Argument(help="paper slug, e.g. lapsum")],
    smoke: Annotated[bool, typer.Option(help="smoke scale (seconds)")] = False,
    set_: Overrides = [],
    runner: Runner = "threads",
    dask_address: DaskAddress = None,
    out: OutRoot = None,
    params_file: ParamsFile = Path("params.yaml"),
) -> None:
    """Run one paper's flow and check its claims."""
    from paperflows.pipeline import run_paper
    from paperflows.summary import counts_text

    with _one_line_errors():
        summary = run_paper(slug, params_file=params_file, out_root=_out_root(out, smoke), smoke=smoke,
                            overrides=_first_look_at_other_seeds(set_), runner=runner, dask_address=dask_address)

    typer.echo(f"{slug}: {counts_text(summary)} in {summary['wall_s']:.1f} s -> {summary['results_dir']}/report.md")


@app.command()
def record(
    slug: Annotated[str, typer.Argument(help="paper slug, e.g. lapsum")],
    smoke: Annotated[bool, typer.Option(help="smoke scale")] = False,
    set_: Overrides = [],
    runner: Runner = "threads",
    dask_address: DaskAddress = None,
    out: OutRoot = None,
    params_file: ParamsFile = Path("params.yaml"),
) -> None:
    """Run a paper's experiment into records/<slug> (only the seeds the records lack)."""
    from paperflows.stages import record_paper

    with _one_line_errors():
        summary = record_paper(slug, params_file=params_file, out_root=_out_root(out, smoke), smoke=smoke,
                               overrides=_first_look_at_other_seeds(set_), runner=runner, dask_address=dask_address)
    typer.echo(f"{slug}: records for seeds {summary['seeds']} ({len(summary['seeds_run'])} run now) in "
               f"{summary['wall_s']:.1f} s -> {summary['records_dir']}")


@app.command()
def evaluate(
    slugs: Slugs = None,
    smoke: Annotated[bool, typer.Option(help="score the smoke-scale records")] = False,
    set_: Overrides = [],
    out: OutRoot = None,
    params_file: ParamsFile = Path("params.yaml"),
) -> None:
    """Score papers' stored records: estimates, claims, figure and report (no training). Outside DVC: `dvc repro
    <slug>-eval` (or `paperflows repro --rescore`) is the tracked way."""
    from paperflows.params import configured_slugs
    from paperflows.scoring import evaluate_paper
    from paperflows.summary import counts_text

    with _one_line_errors():
        for slug in slugs or configured_slugs(params_file):
            summary = evaluate_paper(slug, params_file=params_file, out_root=_out_root(out, smoke), smoke=smoke,
                                     overrides=_first_look_at_other_seeds(set_))
            typer.echo(f"{slug}: {counts_text(summary)} in {summary['wall_s']:.1f} s -> {summary['results_dir']}/report.md")


@app.command()
def extend(slugs: Slugs = None, params_file: ParamsFile = Path("params.yaml")) -> None:
    """Second looks: for each paper with a seed_cap whose committed look 1 left a claim undecided, set
    extra_seeds (up to the cap) in params.yaml; `dvc repro` then runs only the new seeds and re-scores."""
    from paperflows.params import configured_slugs, set_paper_value
    from paperflows.scoring import extension

    with _one_line_errors():
        for slug in slugs or configured_slugs(params_file):   # a paper without a seed_cap gives None: skipped
            extra = extension(slug, params_file=params_file)
            if extra is not None:
                set_paper_value(params_file, slug, "extra_seeds", extra)
                typer.echo(f"{slug}: extra_seeds = {extra}" + (" (look 1 left a claim undecided)" if extra else ""))


@app.command()
def check(params_file: ParamsFile = Path("params.yaml"),
          claims: Annotated[bool, typer.Option("--claims", help="also score each paper's committed records in "
                                               "memory and look up every path its claims name (seconds per paper)")]
          = False,
          records: Annotated[bool, typer.Option("--records", help="also name each paper whose committed records "
                                                "were made by other code or params than today's: `make repro` "
                                                "would retrain it rather than reuse them")] = False) -> None:
    """Validate params.yaml and the flow registry without starting Prefect or importing any method."""
    from paperflows.params import check_params_file, configured_slugs

    problems = check_params_file(params_file)
    if claims and not problems:
        from paperflows.scoring import claim_problems

        problems = [p for slug in configured_slugs(params_file) for p in claim_problems(slug, params_file=params_file)]
    if records and not problems:
        from paperflows.repro import records_made_otherwise

        problems = [f"{slug}: " + ("no records" if parts == ["no records"] else
                                   f"its records' key differs from today's in {', '.join(parts)}")
                    + f" (`paperflows repro --papers {slug}` makes them anew)" for slug, parts in
                    records_made_otherwise(configured_slugs(params_file), params_file=params_file).items()]
    for problem in problems:
        typer.echo(f"error: {problem}", err=True)
    if problems:
        raise typer.Exit(1)
    typer.echo(f"{params_file}: {len(configured_slugs(params_file))} papers, all params valid (default and smoke scale)")


@app.command()
def new(slug: Annotated[str, typer.Argument(help="the new paper's slug, e.g. my_paper")]) -> None:
    """Start a paper: flows/<slug>/ (params.py, method.py, flow.py), a test skeleton and a params section; regenerate
    dvc.yaml and params/<slug>.yaml."""
    from paperflows.dvcgen import dvc_yaml_text
    from paperflows.params import write_stage_params
    from paperflows.scaffold import new_paper
    from paperflows.core.io import atomic_write_text

    with _one_line_errors():
        written = new_paper(slug)
        write_stage_params()
        atomic_write_text(Path("dvc.yaml"), dvc_yaml_text())
    for path in written:
        typer.echo(f"wrote {path}")
    typer.echo(f"regenerated dvc.yaml; next: paperflows run {slug} --smoke")


@app.command("dvc-yaml")
def dvc_yaml(check_only: Annotated[bool, typer.Option("--check", help="exit 1 if dvc.yaml is not what would be "
                                                        "generated")] = False) -> None:
    """Write dvc.yaml: one stage per paper, deps = exactly the code that paper imports."""
    from paperflows.dvcgen import dvc_yaml_text
    from paperflows.core.io import atomic_write_text

    with _one_line_errors():
        text = dvc_yaml_text()
    current = Path("dvc.yaml").read_text() if Path("dvc.yaml").is_file() else ""
    if check_only:
        if current != text:
            typer.echo("error: dvc.yaml differs from the generated one; run `paperflows dvc-yaml`", err=True)
            raise typer.Exit(1)
        typer.echo("dvc.yaml is up to date")
        return
    if current != text:
        atomic_write_text(Path("dvc.yaml"), text)
    typer.echo("dvc.yaml " + ("written" if current != text else "unchanged"))


@app.command("split-params")
def split_params() -> None:
    """Write params/<slug>.yaml (a paper's section and common) from params.yaml: DVC stage `params` runs it."""
    from paperflows.params import write_stage_params

    with _one_line_errors():
        written = write_stage_params()
    typer.echo(f"params/: {len(written)} file(s) written" + (f" ({', '.join(written)})" if written else ""))


@app.command()
def repro(papers: Annotated[Optional[str], typer.Option(help="comma-separated slugs: rerun just these (forced)")]
          = None,
          rescore: Annotated[bool, typer.Option(help="only the evaluation stages, forced: re-score the committed "
                                                "records in one process (no training; about 1 s per paper)")] = False,
          dask_address: Annotated[Optional[str], typer.Option(
              help="run the papers on the Dask workers of this scheduler (one per machine, each in a clone with "
                   "the same code and params)")] = None,
          workers: Annotated[int, typer.Option(help="run the papers on this many local Dask worker processes")] = 0) -> None:
    """Run every changed paper through DVC (saying first how many and for how long), with each one's place in the
    queue and the elapsed time."""
    from paperflows.repro import repro as run_all

    chosen = [s.strip() for s in papers.split(",") if s.strip()] if papers else []
    with _one_line_errors():
        code = run_all(typer.echo, chosen, rescore=rescore, dask_address=dask_address, workers=workers)
    raise typer.Exit(code)


@app.command()
def fingerprint(check: Annotated[Optional[Path], typer.Option(
        help="compare with this fingerprint file, e.g. results/FINGERPRINT.txt; exit 1 on any difference")] = None) -> None:
    """Print an md5 prefix per numeric primitive (NumPy, SciPy, scikit-learn, torch); equal lines, equal bits."""
    from paperflows.core.fingerprint import fingerprint as primitive_hashes
    from paperflows.core.fingerprint import fingerprint_digest, fingerprint_text, parse_fingerprint
    from paperflows.repro import primitives_differing_from

    typer.echo(fingerprint_text() + f"# digest {fingerprint_digest()} (recorded in each metrics.json)")
    if check is not None:
        if not check.is_file():
            _fail(FileNotFoundError(f"no fingerprint file {check}"))
        ours, theirs = primitive_hashes(), parse_fingerprint(check.read_text())
        differing = primitives_differing_from(check)
        for name in differing:
            typer.echo(f"differs: {name} (here {ours.get(name)}, {check}: {theirs.get(name)})", err=True)
        if differing:
            raise typer.Exit(1)
        typer.echo(f"same bits as {check} on all {len(ours)} primitives")


@app.command()
def recheck(slug: Annotated[str, typer.Argument(help="paper slug")],
            smoke: Annotated[bool, typer.Option(help="smoke scale")] = False) -> None:
    """Rerun a paper into .paperflows/rechecks/<time>/ and compare its verdicts with the committed ones (what a schedule runs)."""
    from paperflows.recheck import recheck_paper

    with _one_line_errors():
        result = recheck_paper(slug, smoke=smoke)
    typer.echo(f"{slug}: no verdict changed ({len(result['rows'])} claims) -> {result['out_root']}")


@app.command()
def robustness(slugs: Slugs = None,
               offset: Annotated[Optional[int], typer.Option(help="seed offset (default: the one fixed in code)")]
               = None,
               rescore: Annotated[bool, typer.Option(help="re-score the stored records of the last robustness run "
                                                     "with today's evaluation code (no training)")] = False,
               workers: Annotated[int, typer.Option(help="papers run at a time, each in its own process")] = 1) -> None:
    """Rerun papers with common.seed shifted, compare verdicts claim by claim; writes results/ROBUSTNESS.md."""
    from paperflows import robustness as module
    from paperflows.summary import verdict_pairs

    with _one_line_errors():
        record = module.robustness(slugs or (), module.OFFSET if offset is None else offset, echo=typer.echo,
                                   rescore=rescore, workers=workers)
    flips = sum(committed != shifted for slug in record["papers"]
                for _, committed, shifted in verdict_pairs(record, Path("results"), slug).values())
    typer.echo(f"wrote results/ROBUSTNESS.md: {flips} verdicts flip at seed offset {record['offset']}")


@app.command()
def pretrained() -> None:
    """Convert the offline pretrained language models once into data/_pretrained (stage `pretrained`)."""
    from tasks.pretrained import prepare

    with _one_line_errors():
        for folder in prepare():
            typer.echo(f"ready: {folder}")


@app.command()
def report() -> None:
    """Write results/SUMMARY.md and the README's table from every results/<slug>/metrics.json."""
    from paperflows.summary import write_summary

    with _one_line_errors():
        typer.echo(f"wrote {write_summary()}")


@app.command()
def serve(params_file: ParamsFile = Path("params.yaml")) -> None:
    """Serve a re-check deployment per paper (cron schedules from params.yaml's `schedules`); runs land in .paperflows/rechecks/."""
    from prefect import serve as prefect_serve

    from paperflows.deployments import build_deployments

    if not os.environ.get("PREFECT_API_URL"):
        typer.echo(f"note: PREFECT_API_URL is unset; start a server (paperflows server up) and set it to {server.API_URL}",
                   err=True)
    with _one_line_errors():
        deployments = build_deployments(params_file)
    prefect_serve(*deployments)


@server_app.command("up")
def server_up() -> None:
    """Start the local Prefect server unless one is running; print the UI address."""
    with _one_line_errors():
        typer.echo(f"Prefect UI: {server.start()}  (export PREFECT_API_URL={server.API_URL}; `make stop` ends it)")


@server_app.command("down")
def server_down() -> None:
    """Stop the local Prefect server started by `server up`."""
    typer.echo("stopped" if server.stop() else "no server started by paperflows is running")


@app.callback()
def _entry() -> None:
    apply_environment_defaults()

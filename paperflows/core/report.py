"""Reporting: metrics.json, plot CSVs, the figure, report.md and the Prefect artifacts of one run.

Everything is written into a scratch folder beside ``results/<slug>/`` and swapped in at the end,
so an interrupted run leaves the previous results whole.
"""

from __future__ import annotations

import io
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

import matplotlib.pyplot as plt

from paperflows.core.claims import SEEDS_REASON, VERDICT_CODES, ClaimResult, count_verdicts
from paperflows.core.contract import Paper, RunContext, RunOutput
from paperflows.core.io import atomic_write_bytes, atomic_write_json, atomic_write_text, replace_dir

PLOT_COLUMNS = ("x", "y", "series")


def fmt(value: float | None) -> str:
    """A number for a table: 4 significant digits, scientific when very large or small."""
    if value is None:
        return "–"
    if value != value:
        return "nan"
    if value == 0 or 1e-3 <= abs(value) < 1e5:
        return f"{value:.4g}"
    return f"{value:.3e}"


ESTIMATE_KEYS = ("mean", "ratio", "slope", "median")


def fmt_estimate(estimate: dict[str, Any], key: str | None = None) -> str:
    """An estimate of :mod:`paperflows.core.stats` as ``value [low, high]``; ``key`` names the point estimate
    (default: the first of mean, ratio, slope, median that it has)."""
    key = key or next(k for k in ESTIMATE_KEYS if k in estimate)
    return f"{fmt(estimate[key])} [{fmt(estimate['ci_low'])}, {fmt(estimate['ci_high'])}]"


def observed_text(result: ClaimResult) -> str:
    if result.ci_low is None:
        return fmt(result.observed)
    return f"{fmt(result.observed)} [{fmt(result.ci_low)}, {fmt(result.ci_high)}]"


def verdict_text(result: ClaimResult | dict[str, Any]) -> str:
    """The verdict with why it is inconclusive, and any dataset or setting on which the effect reverses."""
    get = result.get if isinstance(result, dict) else lambda key: getattr(result, key)
    text = get("verdict") + (f" ({get('reason')})" if get("reason") else "")
    if get("reversed_settings"):
        text += f"; reverses on {', '.join(get('reversed_settings'))}"
    return text


def control_text(result: ClaimResult | dict[str, Any]) -> str:
    get = result.get if isinstance(result, dict) else lambda key: getattr(result, key)
    control = get("control")
    if control is None:
        return "none: " + (get("control_reason") or "")
    control = control if isinstance(control, dict) else control.model_dump()
    value = fmt(control["observed"])
    if control.get("ci_low") is not None:
        value += f" [{fmt(control['ci_low'])}, {fmt(control['ci_high'])}]"
    if control["failed"]:
        outcome = "fails strictly, as it should"
    elif control["separated"]:
        outcome = "the claim lies strictly beyond it"
    else:
        outcome = "passes too" if control["passed"] else "neither fails strictly nor separates: no power"
    return f"{control['name']}: {value} ({outcome})"


OPERATORS = {">=": "≥", "<=": "≤", ">": "\\>", "<": "<"}
"""Claim operators as markdown: a cell that starts with ``>`` renders as a blockquote (in Prefect's UI too)."""


def threshold_text(comparison: str, threshold: float) -> str:
    return f"{OPERATORS[comparison]} {fmt(threshold)}"


def claims_rows(paper: Paper, results: Sequence[ClaimResult], role: str = "claim") -> list[dict[str, str]]:
    """One row per claim of ``role``, the columns a reader scans first on the left: claim, verdict, ours,
    the paper's figure (and, for claims, the negative control)."""
    rows = []
    for claim, result in zip(paper.claims, results):
        if claim.role != role:
            continue
        row = {"claim": claim.id, "verdict": verdict_text(result), "ours": observed_text(result),
               "paper's figure": threshold_text(claim.comparison, claim.threshold)}
        if role == "claim":
            row["negative control"] = control_text(result)
            row["seeds"] = str(result.seeds) + ("" if result.seeds_reason == SEEDS_REASON else f": {result.seeds_reason}")
        row |= {"paper says": claim.text, "kind": claim.kind + (", scaled" if claim.scaled else ""),
                "metric": claim.metric}
        rows.append(row)
    return rows


def markdown_table(rows: list[dict[str, str]]) -> str:
    if not rows:
        return "(none)\n"
    header = list(rows[0])
    cell = lambda v: str(v).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(r[h]) for h in header) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def flatten(metrics: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in metrics.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, path + "."))
        else:
            flat[path] = value
    return flat


def render_report(paper: Paper, params: dict[str, Any], ctx: RunContext, output: RunOutput,
                  results: Sequence[ClaimResult]) -> str:
    scaled = [c for c in paper.claims if c.scaled]
    numbers = [{"metric": k, "value": fmt(v) if isinstance(v, (int, float)) else str(v)}
               for k, v in flatten(output.metrics).items() if not isinstance(v, list)]
    parts = [
        f"# {paper.title}\n",
        f"Method: **{paper.method}** · class {paper.paper_class} · source: {paper.source} · "
        f"official code: {paper.official_code or 'not found'}\n",
        f"Run: seeds {ctx.seeds}{' · **smoke scale**' if ctx.smoke else ''} · params `papers.{paper.slug}` = `{params}`\n",
        "## Setup\n", output.setup.strip() + "\n",
        "## Claims\n", markdown_table(claims_rows(paper, results, "claim")),
    ]
    no_control = [c for c in paper.claims if c.role == "claim" and c.control is None]
    if no_control:
        parts += ["Claims without a negative control, and why:\n"]
        parts += [f"- `{c.id}`: {c.control_reason}" for c in no_control] + [""]
    no_interval = [c for c in paper.claims if c.role == "claim" and c.no_interval_reason]
    if no_interval:
        parts += ["Claims without an interval or per-seed values, and why:\n"]
        parts += [f"- `{c.id}`: {c.no_interval_reason}" for c in no_interval] + [""]
    parts += ["## Sanity checks\n",
              "Checks of our own implementation, or that hold by construction: reported, never counted as "
              "reproduced claims.\n", markdown_table(claims_rows(paper, results, "sanity"))]
    if scaled:
        parts += ["Scaled thresholds:\n"] + [f"- `{c.id}`: {c.scaled}" for c in scaled] + [""]
    parts += ["## Figure\n", "![main figure](figure.png)\n",
              "## Metrics\n", markdown_table(numbers)]
    if output.notes.strip():
        parts += ["## Notes and deviations\n", output.notes.strip() + "\n"]
    parts += ["## What the scaled setup cannot show\n", paper.limitations.strip() + "\n"]
    return "\n".join(parts)


def metrics_document(paper: Paper, params: dict[str, Any], ctx: RunContext, output: RunOutput,
                     results: Sequence[ClaimResult], fingerprint: str | None = None) -> dict[str, Any]:
    """The content of ``metrics.json``, the full record of a run: the paper, params, the numeric kernels'
    fingerprint digest (:mod:`paperflows.core.fingerprint`: equal digests, equal bits; ``fingerprint`` when the
    measurements were made elsewhere, e.g. by a records stage, else this process's), every measurement, and each
    claim with its declaration, value and verdict (enough for the summary without the code)."""
    if fingerprint is None:
        from paperflows.core.fingerprint import fingerprint_digest  # imports torch: only where the digest is computed

        fingerprint = fingerprint_digest()
    declared = {c.id: c for c in paper.claims}
    return {
        "paper": paper.slug,
        "title": paper.title,
        "method": paper.method,
        "paper_class": paper.paper_class,
        "smoke": ctx.smoke,
        "seeds": ctx.seeds,
        "params": params,
        "fingerprint": fingerprint,
        "metrics": output.metrics,
        "claims": {r.id: {**r.model_dump(exclude={"id"}), "passed": int(r.verdict == "reproduced"),
                          "text": declared[r.id].text, "scaled": declared[r.id].scaled,
                          "knob": declared[r.id].knob} for r in results},
        "verdicts": count_verdicts(results, "claim"),
        "sanity": count_verdicts(results, "sanity"),
    }


def dvc_metrics_document(results: Sequence[ClaimResult]) -> dict[str, Any]:
    """The slim numeric file DVC tracks as metrics (``claims.json``): per claim, its observed value and
    verdict code (1 reproduced, 0 inconclusive, -1 not reproduced), so ``dvc exp show`` fits a screen."""
    return {r.id: {"observed": r.observed, "verdict": VERDICT_CODES[r.verdict]} for r in results}


def write_report(paper: Paper, params: dict[str, Any], ctx: RunContext, output: RunOutput,
                 results: Sequence[ClaimResult], fingerprint: str | None = None) -> dict[str, Any]:
    """Write the run's outputs into ``ctx.results_dir`` (atomically, as a whole) and, inside a Prefect flow run,
    publish the report and claims as artifacts. ``fingerprint``: see :func:`metrics_document`."""
    plot = output.tables.get("plot")
    if plot is None or not set(PLOT_COLUMNS) <= set(plot.columns):
        raise ValueError(f"{paper.slug}: RunOutput.tables['plot'] must have columns {PLOT_COLUMNS}")
    document = metrics_document(paper, params, ctx, output, results, fingerprint)
    report = render_report(paper, params, ctx, output, results)

    final = Path(ctx.results_dir)
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}.partial-"))
    staging.chmod(0o755)
    try:
        atomic_write_json(staging / "metrics.json", document)
        atomic_write_json(staging / "claims.json", dvc_metrics_document(results))
        for name, table in output.tables.items():
            atomic_write_text(staging / f"{name}.csv", table.to_csv(index=False, float_format="%.6g"))
        png = io.BytesIO()
        output.figure.savefig(png, format="png", dpi=110, bbox_inches="tight", metadata={"Software": None})
        plt.close(output.figure)
        atomic_write_bytes(staging / "figure.png", png.getvalue())
        atomic_write_text(staging / "report.md", report)
        replace_dir(staging, final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)

    if _in_flow_run():
        from prefect.artifacts import create_markdown_artifact, create_table_artifact

        create_markdown_artifact(key=f"{paper.artifact_prefix}-report", markdown=report,
                                 description=f"{paper.title}: report")
        create_table_artifact(key=f"{paper.artifact_prefix}-claims",
                              table=claims_rows(paper, results, "claim")
                              + [{**row, "negative control": "(sanity check)"} for row in claims_rows(paper, results, "sanity")],
                              description=f"{paper.title}: claims and verdicts")
    return {"paper": paper.slug, "results_dir": str(final), "verdicts": document["verdicts"], "sanity": document["sanity"]}


def _in_flow_run() -> bool:
    if "prefect" not in sys.modules:  # an evaluation stage runs without Prefect: importing it costs ~0.7 s
        return False
    from prefect.context import get_run_context

    try:
        get_run_context()
        return True
    except RuntimeError:
        return False

"""The evaluation half of a paper: records in, estimates, claims, tables, figure and report out.

It runs in its own DVC stage (``<slug>-eval``) without Prefect or training: editing a threshold, a note, the
figure or :mod:`tasks.stats` re-scores in seconds. The paper's fixed prose is ``flows/<slug>/NOTES.md``; the
``notes`` its ``evaluate`` returns hold only generated text (numbers), appended after it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from tasks.claims import check_claims
from tasks.contract import Paper, PaperParams, RunContext, RunOutput
from tasks.records import Records
from tasks.report import write_report

Evaluate = Callable[[PaperParams, Records], RunOutput]


def evaluate_records(paper: Paper, params: PaperParams, records: Records, evaluate: Evaluate, notes: str,
                     data_dir: Path, results_dir: Path, smoke: bool = False) -> dict[str, Any]:
    """Score ``records``: ``evaluate(params, records)``, the declared claims on its metrics, and the report
    in ``results_dir`` with ``notes`` (the paper's NOTES.md) before the generated notes. The report carries the
    fingerprint digest of the machine that made the records: their bits are what the kernels decide."""
    started = time.perf_counter()
    output = evaluate(params, records)
    timings = output.metrics.setdefault("timings", {})
    timings["flow_body_s"] = records.meta.get("experiment_s")
    timings["evaluation_s"] = time.perf_counter() - started
    output.notes = "\n\n".join(part.strip() for part in (notes, output.notes) if part.strip())
    results = check_claims(paper, output.metrics, len(records.seeds))
    ctx = RunContext(paper.slug, list(records.seeds), Path(data_dir), Path(results_dir), smoke)
    return write_report(paper, params.model_dump(mode="json"), ctx, output, results, records.meta["fingerprint"])

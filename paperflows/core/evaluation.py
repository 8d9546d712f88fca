"""The evaluation half of a paper: records in, estimates, claims, tables, figure and report out.

It runs in its own DVC stage (``<slug>-eval``) without Prefect or training: editing a threshold, a note, the
figure or :mod:`paperflows.core.stats` re-scores in seconds. The paper's fixed prose is ``flows/<slug>/NOTES.md``; the
``notes`` its ``evaluate`` returns hold only generated text (numbers), appended after it. A paper with a
``seed_cap`` is scored in up to two looks (:mod:`paperflows.core.sequential`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

import matplotlib.pyplot as plt

from paperflows.core import stats
from paperflows.core.claims import ClaimResult, check_claims
from paperflows.core.contract import Paper, PaperParams, RunContext, RunOutput
from paperflows.core.records import Records, select_seeds
from paperflows.core.report import write_report
from paperflows.core.sequential import LOOK_CONFIDENCE, combine_looks, undecided

Evaluate = Callable[[PaperParams, Records], RunOutput]


def score(paper: Paper, params: PaperParams, records: Records, evaluate: Evaluate) -> tuple[RunOutput, list[ClaimResult]]:
    """The evaluation's output and the claims' verdicts: one look at every seed, or, with a ``seed_cap``, look 1
    at the first ``params.seeds`` seeds and look 2 at all of them, each at :data:`LOOK_CONFIDENCE`. The output
    (metrics, figure, tables) is that of the last look."""
    if params.seed_cap is None:
        output = evaluate(params, records)
        return output, check_claims(paper, output.metrics, len(records.seeds))
    with stats.confidence_level(LOOK_CONFIDENCE):
        output = evaluate(params, select_seeds(records, records.seeds[:params.seeds]))
        first = check_claims(paper, output.metrics, params.seeds)
        second = None
        if params.extra_seeds:
            plt.close(output.figure)
            output = evaluate(params, records)
            second = check_claims(paper, output.metrics, len(records.seeds))
    output.metrics["looks"] = {"seed_cap": params.seed_cap, "confidence_per_look": LOOK_CONFIDENCE,
                               "look_1_seeds": params.seeds, "undecided_at_look_1": undecided(first),
                               "look_2_seeds": len(records.seeds) if second is not None else None}
    return output, combine_looks(first, second, params.seed_cap)


def evaluate_records(paper: Paper, params: PaperParams, records: Records, evaluate: Evaluate, notes: str,
                     data_dir: Path, results_dir: Path, smoke: bool = False) -> dict[str, Any]:
    """Score ``records`` (:func:`score`) and write the report in ``results_dir`` with ``notes`` (the paper's
    NOTES.md) before the generated notes. The report carries the fingerprint digest of the machine that made
    the records: their bits are what the kernels decide."""
    started = time.perf_counter()
    output, results = score(paper, params, records, evaluate)
    timings = output.metrics.setdefault("timings", {})
    timings["flow_body_s"] = records.meta.get("experiment_s")
    timings["evaluation_s"] = time.perf_counter() - started
    output.notes = "\n\n".join(part.strip() for part in (notes, output.notes) if part.strip())
    ctx = RunContext(paper.slug, list(records.seeds), Path(data_dir), Path(results_dir), smoke)
    return write_report(paper, params.model_dump(mode="json"), ctx, output, results, records.meta["fingerprint"])

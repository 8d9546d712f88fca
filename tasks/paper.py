"""The one-stage flow decorator, for papers not yet split into records and evaluation.

:func:`paper_flow` turns a paper's body into a Prefect flow that validates its params, runs the body,
checks the declared claims (:mod:`tasks.claims`) and writes the report (:mod:`tasks.report`). A split paper
uses :func:`tasks.experiment.paper_experiment` and ``flows/<slug>/evaluate.py`` instead. The Prefect task
helpers (:func:`over_seeds`, :func:`run_mapped`, :func:`run_task`, :func:`start_task`) live in
:mod:`tasks.experiment` and are re-exported here for the one-stage flows.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from prefect import flow

from tasks.claims import check_claims
from tasks.contract import Paper, PaperParams, RunContext, RunOutput
from tasks.experiment import over_seeds, paper_task, run_mapped, run_task, start_task
from tasks.report import write_report

__all__ = ["PaperFlow", "paper_flow", "over_seeds", "paper_task", "run_mapped", "run_task", "start_task"]


@dataclass(frozen=True)
class PaperFlow:
    """A paper's flow with everything needed to validate, run and report it."""

    paper: Paper
    params_model: type[PaperParams]
    smoke: dict[str, Any]
    body: Callable[[PaperParams, RunContext], RunOutput]
    flow: Any = field(repr=False)


def paper_flow(paper: Paper, params_model: type[PaperParams], smoke: dict[str, Any]):
    """Decorator: wrap a paper's body into a Prefect flow that also checks claims and reports."""
    check_claims_task = paper_task(check_claims, name="check-claims")
    write_report_task = paper_task(write_report, name="write-report")

    def decorate(body: Callable[[PaperParams, RunContext], RunOutput]) -> PaperFlow:
        def run(params: dict[str, Any], seeds: list[int], data_dir: str, results_dir: str,
                smoke_run: bool = False) -> dict[str, Any]:
            validated = params_model.model_validate(params)
            ctx = RunContext(paper.slug, list(seeds), Path(data_dir), Path(results_dir), smoke_run)
            ctx.data_dir.mkdir(parents=True, exist_ok=True)
            started = time.perf_counter()
            output = body(validated, ctx)
            output.metrics.setdefault("timings", {})["flow_body_s"] = time.perf_counter() - started
            claim_results = check_claims_task(paper, output.metrics, len(ctx.seeds))
            return write_report_task(paper, validated.model_dump(mode="json"), ctx, output, claim_results)

        run.__doc__ = body.__doc__ or paper.title
        prefect_flow = flow(run, name=paper.slug, description=f"{paper.title} ({paper.method})",
                            validate_parameters=False, log_prints=True)
        return PaperFlow(paper, params_model, dict(smoke), body, prefect_flow)

    return decorate

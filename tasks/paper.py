"""The flow decorator and Prefect tasks of the flow contract (the data classes are in :mod:`tasks.contract`).

:func:`paper_flow` turns a paper's body into a Prefect flow that validates its params, runs the body,
checks the declared claims (:mod:`tasks.claims`) and writes the report (:mod:`tasks.report`).
:func:`over_seeds` and :func:`run_mapped` run a method function as mapped tasks, so a flow needs no
one-line task wrappers: ``over_seeds(method.run_seed, ctx.seeds, p=params)``; :func:`run_task` and
:func:`start_task` run one function as a task, in the foreground or beside the seeds.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from prefect import flow, task, unmapped
from prefect.cache_policies import NO_CACHE

from tasks.claims import check_claims
from tasks.contract import Paper, PaperParams, RunContext, RunOutput
from tasks.report import write_report


def paper_task(fn: Callable | None = None, **options: Any):
    """A Prefect task with caching off: inside a DVC stage, DVC is the cache (see the README's design notes)."""
    options = {"cache_policy": NO_CACHE, "persist_result": False, **options}
    if fn is None:
        return lambda f: task(f, **options)
    return task(fn, **options)


@functools.cache
def _as_task(fn: Callable):
    return paper_task(fn)


def run_mapped(fn: Callable, mapped: Mapping[str, Sequence[Any]], **constants: Any) -> list[Any]:
    """``fn(**{name: values[i]}, **constants)`` for every i, as mapped Prefect tasks on the flow's task
    runner; the results in input order. Every sequence in ``mapped`` has the same length."""
    futures = _as_task(fn).map(**{name: list(values) for name, values in mapped.items()},
                               **{name: unmapped(value) for name, value in constants.items()})
    return futures.result()


def over_seeds(fn: Callable, seeds: Sequence[int], **constants: Any) -> list[Any]:
    """``fn(seed=s, **constants)`` for every seed, as mapped Prefect tasks; the results in seed order."""
    return run_mapped(fn, {"seed": seeds}, **constants)


def run_task(fn: Callable, **kwargs: Any) -> Any:
    """``fn(**kwargs)`` as one Prefect task (visible in the UI), e.g. a timing that must run alone."""
    return _as_task(fn)(**kwargs)


def start_task(fn: Callable, **kwargs: Any):
    """``fn(**kwargs)`` as one Prefect task started in the background, beside the seeds; ``.result()`` waits."""
    return _as_task(fn).submit(**kwargs)


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

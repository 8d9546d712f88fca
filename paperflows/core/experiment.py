"""The experiment half of a paper: Prefect tasks over seeds, and the flow that saves per-seed records.

A paper's ``flow.py`` runs its method and every baseline over the seeds and returns the measurements as
named tables with one row per (arm, seed, setting) (:class:`paperflows.core.records.Records`); it computes no
interval and checks no claim. Evaluation (``flows/<slug>/evaluate.py``, :mod:`paperflows.core.evaluation`) reads the
records in its own DVC stage, so re-scoring never retrains.

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

import pandas as pd
from prefect import flow, task, unmapped
from prefect.cache_policies import NO_CACHE

from paperflows.core.contract import PaperParams, RunContext
from paperflows.core.fingerprint import fingerprint_digest
from paperflows.core.records import Records, check_tables


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
class PaperExperiment:
    """A paper's experiment: its params model, smoke overrides, and the Prefect flow that writes its records.

    ``seed_separable``: each seed's rows depend on that seed alone (no data drawn once for all seeds, no
    timing over the first k seeds), so records can grow by running only new seeds
    (:func:`paperflows.core.records.grow_plan`). Declared by the paper, checked by its test.
    """

    slug: str
    params_model: type[PaperParams]
    smoke: dict[str, Any]
    body: Callable[[PaperParams, RunContext], Mapping[str, pd.DataFrame]]
    seed_separable: bool
    flow: Any = field(repr=False)


def paper_experiment(slug: str, params_model: type[PaperParams], smoke: dict[str, Any], *,
                     seed_separable: bool = False):
    """Decorator: wrap a paper's experiment body, ``body(params, ctx) -> {table name: DataFrame}``, into a
    Prefect flow that validates the params, runs the body for ``ctx.seeds`` and returns its :class:`Records`
    (the caller saves them: :func:`paperflows.core.records.save_records`). Every table has an integer ``seed``
    column."""

    def decorate(body: Callable[[PaperParams, RunContext], Mapping[str, pd.DataFrame]]) -> PaperExperiment:
        def run(params: dict[str, Any], seeds: list[int], data_dir: str, results_dir: str,
                smoke_run: bool = False) -> Records:
            validated = params_model.model_validate(params)
            ctx = RunContext(slug, list(seeds), Path(data_dir), Path(results_dir), smoke_run)
            ctx.data_dir.mkdir(parents=True, exist_ok=True)
            started = time.perf_counter()
            tables = dict(body(validated, ctx))
            check_tables(tables, ctx.seeds, slug)
            return Records(tables, list(ctx.seeds), {"experiment_s": time.perf_counter() - started,
                                                     "fingerprint": fingerprint_digest()})

        run.__doc__ = body.__doc__ or slug
        prefect_flow = flow(run, name=slug, description=body.__doc__ or slug, validate_parameters=False,
                            log_prints=True)
        return PaperExperiment(slug, params_model, dict(smoke), body, seed_separable, prefect_flow)

    return decorate

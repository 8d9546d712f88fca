"""The flow contract every paper follows.

A paper module (``flows/<slug>/flow.py``) declares:

* ``PAPER`` — a :class:`Paper`: metadata and the claims, fixed in code before any run;
* ``Params`` — a :class:`PaperParams` subclass: the typed, range-checked section ``papers.<slug>``
  of ``params.yaml`` (no defaults: the values live in ``params.yaml``);
* ``SMOKE`` — overrides that make the flow run in seconds (used by the tests);
* one function decorated with :func:`paper_flow`, which runs data -> methods -> evaluation over
  ``ctx.seeds`` and returns a :class:`RunOutput`.

:func:`paper_flow` turns that function into a Prefect flow that afterwards checks the claims and
writes the report (``tasks.claims``, ``tasks.report``); :mod:`tasks.pipeline` runs it.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal

import pandas as pd
from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from pydantic import BaseModel, ConfigDict, Field, model_validator

Comparison = Literal[">=", ">", "<=", "<"]
ClaimKind = Literal["exact", "direction", "magnitude"]


class Claim(BaseModel):
    """One checkable claim: ``metrics[metric] <comparison> threshold``.

    ``interval`` names the metrics holding a confidence interval of the observed value; when it
    straddles the threshold the verdict is *inconclusive*. ``scaled`` says why and how the
    threshold was scaled down from the paper's figure. ``by_construction`` marks a check that
    tests the pipeline rather than the paper (the report labels it so).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=r"^[a-z0-9_]+$")
    text: str
    source: str
    metric: str
    comparison: Comparison
    threshold: float
    kind: ClaimKind
    interval: tuple[str, str] | None = None
    scaled: str | None = None
    by_construction: bool = False


class Paper(BaseModel):
    """A paper's metadata and its claims."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    slug: str = Field(pattern=r"^[a-z0-9_]+$")
    title: str
    method: str
    paper_class: Literal["A", "B", "C"]
    source: str
    official_code: str | None
    claims: tuple[Claim, ...]
    limitations: str

    @model_validator(mode="after")
    def _claim_ids_unique(self) -> "Paper":
        ids = [c.id for c in self.claims]
        if len(ids) != len(set(ids)):
            raise ValueError(f"{self.slug}: duplicate claim ids in {ids}")
        return self

    @property
    def artifact_prefix(self) -> str:
        """Prefect artifact keys allow lowercase letters, digits and dashes only."""
        return re.sub(r"[^a-z0-9-]", "-", self.slug)


class PaperParams(BaseModel):
    """Base of every paper's params model: unknown keys, wrong types and bad ranges are errors."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    seeds: int = Field(ge=1, le=100, description="number of seeds (instances, repetitions)")


@dataclass(frozen=True)
class RunContext:
    """What a paper flow gets besides its params."""

    slug: str
    seeds: list[int]
    data_dir: Path
    results_dir: Path
    smoke: bool


@dataclass
class RunOutput:
    """What a paper flow returns; the framework checks claims on ``metrics`` and writes the rest.

    ``metrics``: nested dict of JSON numbers (runtimes under ``metrics["timings"]``, which the
    determinism check ignores). ``tables``: name -> DataFrame, written as ``<name>.csv``; the
    table ``"plot"`` (columns ``x``, ``y``, ``series``) is the data of the main figure.
    ``figure``: the main matplotlib figure. ``setup`` and ``notes``: markdown for ``report.md``.
    """

    metrics: dict[str, Any]
    tables: dict[str, pd.DataFrame]
    figure: Any
    setup: str
    notes: str = ""


def paper_task(fn: Callable | None = None, **options: Any):
    """A Prefect task with caching off: inside a DVC stage, DVC is the cache (see DESIGN.md)."""
    options = {"cache_policy": NO_CACHE, "persist_result": False, **options}
    if fn is None:
        return lambda f: task(f, **options)
    return task(fn, **options)


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

    def decorate(body: Callable[[PaperParams, RunContext], RunOutput]) -> PaperFlow:
        from tasks.claims import check_claims_task
        from tasks.report import write_report_task

        def run(params: dict[str, Any], seeds: list[int], data_dir: str, results_dir: str,
                smoke_run: bool = False) -> dict[str, Any]:
            validated = params_model.model_validate(params)
            ctx = RunContext(paper.slug, list(seeds), Path(data_dir), Path(results_dir), smoke_run)
            ctx.data_dir.mkdir(parents=True, exist_ok=True)
            started = time.perf_counter()
            output = body(validated, ctx)
            output.metrics.setdefault("timings", {})["flow_body_s"] = time.perf_counter() - started
            claim_results = check_claims_task(paper, output.metrics)
            return write_report_task(paper, validated.model_dump(mode="json"), ctx, output, claim_results)

        run.__doc__ = body.__doc__ or paper.title
        prefect_flow = flow(run, name=paper.slug, description=f"{paper.title} ({paper.method})",
                            validate_parameters=False, log_prints=True)
        return PaperFlow(paper, params_model, dict(smoke), body, prefect_flow)

    return decorate

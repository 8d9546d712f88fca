"""The flow contract's data: what a paper declares (``Paper``, ``Claim``, ``PaperParams``) and what a
run gets and returns (``RunContext``, ``RunOutput``).

This module imports neither Prefect nor the rest of the core: the experiment decorator, the claim
checker and the report writer all build on it, and a params model can be validated without starting Prefect.

A paper folder ``flows/<slug>/`` declares:

* ``params.py``: ``Params`` (a :class:`PaperParams` subclass, the typed section ``papers.<slug>`` of
  ``params.yaml``) and ``SMOKE`` (overrides that make the run take seconds). It imports no heavy
  library, so ``paperflows check`` validates every paper in well under a second;
* ``method.py``: the algorithm, no Prefect; its functions take the frozen ``Params``;
* ``flow.py``: the experiment, one function decorated with :func:`paperflows.core.experiment.paper_experiment`,
  returning per-seed records;
* ``claims.py``: ``PAPER`` (a :class:`Paper` with its claims, fixed before any run);
* ``evaluate.py``: ``evaluate(params, records)``, returning a :class:`RunOutput`; ``NOTES.md``: its fixed prose.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Sequence

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

Comparison = Literal[">=", ">", "<=", "<"]
ClaimKind = Literal["exact", "direction", "magnitude"]
Role = Literal["claim", "sanity"]


def ci(metric: str) -> tuple[str, str]:
    """The names of a metric's 95% interval as :mod:`paperflows.core.stats` writes them next to it:
    ``ci("speedup")`` is ``("speedup.ci_low", "speedup.ci_high")``, for ``Claim.interval`` and
    ``Control.interval``."""
    return (f"{metric}.ci_low", f"{metric}.ci_high")


class Control(BaseModel):
    """A negative control: something measured in the same run, by the same metric and under the same
    threshold, for which the claim should *not* hold (the ablated method, permuted labels, a random policy).
    If it passes too, the check has no power and the claim's verdict is inconclusive."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    metric: str
    interval: tuple[str, str] | None = None
    knob_at_null: str | None = None
    """The simulator parameter of ours that this control holds at its null (0, off), when the claim's effect is
    one that parameter could set (``Claim.knob``)."""


class Claim(BaseModel):
    """One checkable claim: ``metrics[metric] <comparison> threshold``, with the rules that make its
    verdict able to fail (see :mod:`paperflows.core.claims`).

    ``role``: ``"claim"`` (a claim of the paper; counted in "x/y reproduced") or ``"sanity"`` (a check of
    our own implementation, or one that holds by construction; reported apart, never counted).
    ``interval`` names the metrics holding a confidence interval of the observed value; the claim is
    reproduced only when the whole interval lies strictly on its side of the threshold. A claim without
    an interval names ``per_seed``, a list of per-seed values (at least 3, all agreeing), or says in
    ``no_interval_reason`` why it cannot. Every claim has a ``control`` or a ``control_reason``.
    ``censored`` names the fraction of seeds where the method or the baseline never reached its
    criterion: above one half the verdict is inconclusive, unless the claim is ``about_failure``.
    ``per_setting`` names a dict {setting: value} when ``metric`` aggregates over datasets or settings:
    each one's side of the threshold is recorded, and reversals are reported next to the verdict.
    ``scaled`` says why and how the threshold was scaled down from the paper's figure.
    ``every_instance``: the claim holds on every instance (a bound, a guarantee), so one seed in ``per_seed``
    that fails it is a counterexample and the verdict is not reproduced.
    ``requires`` names the paper's sanity checks that show the method (or the baseline it is compared with)
    learned its task; unless each is reproduced, the claim is inconclusive (implementation).
    ``knob`` names a parameter of our own simulator that could set the claimed effect by itself (a planted
    context effect, a trait-following rate). Such a claim needs a control with that knob at its null
    (``Control(knob_at_null=knob)``): an effect only the knob can produce is a sanity check of our pipeline.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=r"^[a-z0-9_]+$")
    text: str
    source: str
    metric: str
    comparison: Comparison
    threshold: float
    kind: ClaimKind
    role: Role
    interval: tuple[str, str] | None = None
    per_seed: str | None = None
    no_interval_reason: str | None = None
    control: Control | None = None
    control_reason: str | None = None
    censored: str | None = None
    about_failure: bool = False
    per_setting: str | None = None
    scaled: str | None = None
    every_instance: bool = False
    requires: tuple[str, ...] = ()
    knob: str | None = None

    @model_validator(mode="after")
    def _rules(self) -> "Claim":
        if self.every_instance and self.per_seed is None:
            raise ValueError(f"{self.id}: a claim about every instance names its per_seed values")
        if self.role == "sanity":
            if self.control is not None or self.control_reason is not None:
                raise ValueError(f"{self.id}: a sanity check takes no negative control")
            if self.requires:
                raise ValueError(f"{self.id}: a sanity check requires no other check")
            return self
        if (self.control is None) == (self.control_reason is None):
            raise ValueError(f"{self.id}: a claim needs exactly one of control and control_reason")
        if self.knob is not None and (self.control is None or self.control.knob_at_null != self.knob):
            raise ValueError(f"{self.id}: an effect the simulator knob '{self.knob}' could set needs a control with "
                             f"that knob at its null (Control(knob_at_null='{self.knob}')), or role='sanity'")
        if self.interval is None and self.per_seed is None and self.no_interval_reason is None:
            raise ValueError(f"{self.id}: a claim without an interval needs per_seed (>= 3 agreeing seeds) "
                             "or no_interval_reason")
        if self.interval is not None and (self.per_seed is not None or self.no_interval_reason is not None):
            raise ValueError(f"{self.id}: a claim with an interval takes neither per_seed nor no_interval_reason")
        return self


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
        sanity = {c.id for c in self.claims if c.role == "sanity"}
        for claim in self.claims:
            missing = set(claim.requires) - sanity
            if missing:
                raise ValueError(f"{self.slug}: {claim.id} requires {sorted(missing)}, which are not sanity checks "
                                 "of this paper")
        return self

    @property
    def artifact_prefix(self) -> str:
        """Prefect artifact keys allow lowercase letters, digits and dashes only."""
        return re.sub(r"[^a-z0-9-]", "-", self.slug)


class PaperParams(BaseModel):
    """Base of every paper's params model: unknown keys, wrong types and bad ranges are errors.

    Instances are frozen and passed as they are to a paper's method functions (``p.tau``), through
    threads, process pools and Dask workers alike (pydantic models pickle by class name).
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    seeds: int = Field(ge=1, le=100, description="number of seeds (instances, repetitions); with a seed_cap, the "
                                                 "seeds of the first look")
    seed_cap: int | None = Field(None, ge=2, le=100, description="two looks (paperflows.core.sequential): the most "
                                 "seeds a claim undecided at the first look may use; none: one look at `seeds`")
    extra_seeds: int = Field(0, ge=0, le=99, description="seeds added for the second look (written by "
                             "`paperflows extend` when a claim is undecided at the first)")

    @model_validator(mode="after")
    def _seed_cap(self) -> "PaperParams":
        if self.seed_cap is not None and self.seed_cap <= self.seeds:
            raise ValueError(f"seed_cap ({self.seed_cap}) must exceed seeds ({self.seeds})")
        if self.extra_seeds and (self.seed_cap is None or self.seeds + self.extra_seeds > self.seed_cap):
            raise ValueError(f"extra_seeds ({self.extra_seeds}) needs a seed_cap of at least seeds + extra_seeds")
        return self

    @property
    def all_seeds(self) -> int:
        """The seed count of the records: the first look's seeds and any added for the second."""
        return self.seeds + self.extra_seeds


def _distinct(values: Sequence[Any]) -> Sequence[Any]:
    repeated = sorted({str(v) for v in values if list(values).count(v) > 1})
    if repeated:
        raise ValueError(f"values must be distinct; repeated: {', '.join(repeated)}")
    return values


def _increasing(values: Sequence[Any]) -> Sequence[Any]:
    if any(b <= a for a, b in zip(values, values[1:])):
        raise ValueError(f"values must be strictly increasing, got {list(values)}")
    return values


Distinct = AfterValidator(_distinct)
"""List constraint for params models: ``methods: Annotated[list[str], Distinct]``."""
Increasing = AfterValidator(_increasing)
"""List constraint for params models: ``ns: Annotated[list[int], Increasing]`` (strictly)."""


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
    tables: dict[str, Any]
    figure: Any
    setup: str
    notes: str = ""

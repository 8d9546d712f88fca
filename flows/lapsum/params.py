"""Params of the LapSum flow (``papers.lapsum`` in ``params.yaml``): typed, range-checked, and light to import."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from paperflows.core.contract import Distinct, Increasing, PaperParams

SoftTopK = Literal["lapsum", "softmax", "sinkhorn", "neuralsort", "softsort"]


class Params(PaperParams):
    methods: Annotated[list[SoftTopK], Distinct] = Field(min_length=2, description="soft top-k methods; must include lapsum")
    tau: float = Field(gt=0, description="shared temperature: LapSum alpha, softmax/NeuralSort/SoftSort tau, Sinkhorn eps = 2 tau")
    correctness_n: int = Field(ge=20, description="items per row in the exactness checks")
    alpha_hard: float = Field(gt=0, description="alpha of the hard-limit check")
    scaling_ns: Annotated[list[int], Increasing] = Field(min_length=2, description="n of the runtime scaling (k = n/10); decades")
    scaling_batch: int = Field(ge=1)
    scaling_reps: int = Field(ge=1, description="timed calls per point (minimum reported)")
    timing_threads: int = Field(ge=1, description="torch threads while timing")
    quadratic_cap: int = Field(ge=10, description="largest n timed for NeuralSort/SoftSort")
    sinkhorn_cap: int = Field(ge=10, description="largest n timed for Sinkhorn")
    sinkhorn_iter_timing: int = Field(ge=1)
    n_compare: int = Field(ge=10, description="n of the 'faster than the baselines' comparison")
    select_n: int = Field(ge=20, description="items per learn-to-select instance")
    select_ks: Annotated[list[int], Increasing] = Field(min_length=1, description="k values; the largest is the 'large k' claim")
    select_steps: int = Field(ge=1, description="Adam steps per method (equal for all methods)")
    select_budget_s: float = Field(gt=0, description="CPU seconds (one thread) per method per seed at the largest k: "
                                                      "the 'large k' claim's equal-budget comparison")
    control_budget_frac: float = Field(gt=0, lt=1, description="LapSum's budget fraction in the claim's negative control")
    select_batch: int = Field(ge=1, description="instances per step")
    select_lr: float = Field(gt=0)
    select_hidden: int = Field(ge=1)
    select_noise: float = Field(ge=0, description="noise std added to the unit-std hidden score")
    sinkhorn_iter_train: int = Field(ge=1)
    digits_steps: int = Field(ge=1)
    digits_alpha: float = Field(gt=0)

    @model_validator(mode="after")
    def _consistent(self) -> "Params":
        if "lapsum" not in self.methods:
            raise ValueError(f"methods must include lapsum; got {self.methods}")
        if any(not 0 < k < self.select_n for k in self.select_ks):
            raise ValueError("select_ks must lie strictly between 0 and select_n")
        if self.scaling_ns[-1] != 10 * self.scaling_ns[-2]:
            raise ValueError("the two largest scaling_ns must be a decade apart (n_max = 10 * n_second)")
        if self.n_compare not in self.scaling_ns or self.n_compare > self.quadratic_cap:
            raise ValueError("n_compare must be one of scaling_ns and at most quadratic_cap")
        return self


SMOKE = {"seeds": 1, "correctness_n": 40, "scaling_ns": [100, 1000], "n_compare": 1000,
         "select_n": 200, "select_ks": [5, 50], "select_steps": 5, "select_budget_s": 0.05, "digits_steps": 10}

"""Params of the aleatoric/epistemic uncertainty flow (``papers.rethink_uncertainty`` in ``params.yaml``): typed, range-checked, and light to import."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from paperflows.core.contract import Increasing, PaperParams


class Params(PaperParams):
    n_examples: Annotated[list[Annotated[int, Field(ge=1)]], Increasing] = Field(
        min_length=2, description="training-set sizes n; the first and last are the claims' ratio, n = 1 and 10 are claim 2's")
    p_true: float = Field(gt=0, lt=1, description="discrete data ~ Bernoulli(p_true)")
    beta_prior: list[float] = Field(min_length=2, max_length=2, description="Beta prior (a0, b0)")
    mu_true: float = Field(description="continuous data mean")
    sigma_true: float = Field(gt=0, description="continuous data standard deviation")
    normal_gamma_prior: list[float] = Field(min_length=4, max_length=4,
                                            description="Normal-Gamma prior (a0, b0, k0, m0), b0 a rate")
    mc_samples: int = Field(ge=2, le=10_000, description="posterior draws of the Monte-Carlo BALD (an ensemble's size)")
    al_seeds: int = Field(ge=1, le=50, description="active learning: the first al_seeds seeds")
    al_test_size: float = Field(gt=0, lt=1, description="digits test fraction (stratified)")
    al_init_labels: int = Field(ge=10, description="initial labelled set (class-balanced)")
    al_rounds: int = Field(ge=1, description="acquisition rounds")
    al_batch: int = Field(ge=1, description="labels acquired per round")
    al_members: int = Field(ge=2, le=20, description="deep-ensemble members")
    al_hidden: list[Annotated[int, Field(ge=1)]] = Field(min_length=1, description="MLP hidden widths")
    al_steps: int = Field(ge=1, description="full-batch Adam steps per training")
    al_lr: float = Field(gt=0, description="Adam learning rate")
    al_weight_decay: float = Field(ge=0, description="Adam weight decay")

    @model_validator(mode="after")
    def _consistent(self) -> Params:
        if not {1, 10} <= set(self.n_examples):
            raise ValueError("n_examples must contain 1 and 10 (claim 2)")
        if self.al_seeds > self.seeds:
            raise ValueError("al_seeds must be <= seeds")
        if min(self.beta_prior) <= 0 or self.normal_gamma_prior[0] <= 0 or min(self.normal_gamma_prior[1:3]) <= 0:
            raise ValueError("prior parameters a0, b0 (and k0) must be positive")
        return self


SMOKE = {"seeds": 3, "al_seeds": 1, "al_rounds": 1, "al_members": 3, "al_hidden": [16], "al_steps": 20}

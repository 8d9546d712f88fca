"""Params of the proxy-preferences flow (``papers.proxy_pref_sample_complexity`` in ``params.yaml``): typed, range-checked, and light to import."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from paperflows.core.contract import Distinct, PaperParams


class Params(PaperParams):
    x_dim: int = Field(ge=1, description="prompt dimension (x ~ N(0, I))")
    latent_dim: int = Field(ge=2, description="D: dimension of the latent simplex tau(x)")
    n_responses: int = Field(ge=2, description="K = |Y|")
    latent_scale: float = Field(gt=0, description="A ~ N(0, latent_scale^2): how peaked tau(x) is")
    policy_scale: float = Field(gt=0, description="policy logits = policy_scale * Theta z")
    theta_noise: float = Field(ge=0, description="Theta = I + theta_noise * N(0, 1)")
    h_noise: float = Field(ge=0, lt=1, description="H = (1 - h_noise) derangement + h_noise Dirichlet(1) columns")
    n_proxy: int = Field(ge=10, description="proxy triples for stage one")
    n_true_grid: Annotated[list[Annotated[int, Field(ge=2)]], Distinct] = Field(
        min_length=2, description="expert-data sizes")
    n_ref: int = Field(ge=2, description="n_true of the claim checks (35 in the paper); must be in n_true_grid")
    n_test: int = Field(ge=10, description="test prompts for KL and agreement")
    hidden: int = Field(ge=1, description="hidden units of the tau~ network")
    lr: float = Field(gt=0, description="Adam learning rate (cosine decay to 0)")
    prior_precision: float = Field(ge=0, description="Gaussian prior precision of every learner (MAP)")
    baseline_prior_grid: Annotated[list[Annotated[float, Field(ge=0)]], Distinct] = Field(
        description="other prior precisions at which true-only is also run (sensitivity, not gated)")
    proxy_steps: int = Field(ge=1, description="Adam steps of stage one")
    proxy_batch: int = Field(ge=1, description="mini-batch of stage one")
    true_steps: int = Field(ge=1, description="Adam steps of every learner on the expert data")

    @model_validator(mode="after")
    def _consistent(self) -> "Params":
        if self.n_ref not in self.n_true_grid:
            raise ValueError("n_ref must be one of n_true_grid")
        if self.n_responses < self.latent_dim:
            raise ValueError("n_responses must be >= latent_dim")
        return self


SMOKE = {"seeds": 2, "n_proxy": 300, "n_true_grid": [10, 35, 100], "n_test": 200, "proxy_steps": 40,
         "proxy_batch": 128, "true_steps": 30, "baseline_prior_grid": [10.0]}

"""Params of the TabSDS flow (``papers.tabsds`` in ``params.yaml``): typed, range-checked, and light to import."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from paperflows.core.contract import Distinct, PaperParams

Table = Literal["breast_cancer", "wine", "diabetes", "fair"]
BaselineName = Literal["gaussian_copula", "ctgan", "tvae", "arf", "tabddpm", "marginals", "bootstrap"]


class Params(PaperParams):
    datasets: Annotated[list[Table], Distinct] = Field(min_length=1, description="tables")
    baseline_seeds: int = Field(ge=1, description="the first seeds on which the library baselines and TabDDPM run")
    n_levels: Annotated[list[Annotated[int, Field(ge=1)]], Distinct] = Field(
        min_length=1, description="TabSDS n_c values (equal-width bins per column)")
    claim_n_levels: int = Field(ge=1, description="the n_c whose TabSDS the claims use (one of n_levels)")
    n_prop: float = Field(gt=0, le=0.5, description="IOS subset fraction (official default 0.5)")
    baselines: Annotated[list[BaselineName], Distinct] = Field(description="generators besides TabSDS")
    copula_marginal: Literal["univariate", "truncated_gaussian", "beta"] = Field(description="copulas marginal family")
    gan_epochs: int = Field(ge=1, description="CTGAN / TVAE epochs")
    arf_trees: int = Field(ge=1, description="trees of the adversarial random forest")
    ddpm_steps: int = Field(ge=1, description="TabDDPM Adam steps (batch 256)")
    ddpm_timesteps: int = Field(ge=2, description="TabDDPM diffusion steps T")
    eval_trees: int = Field(ge=1, description="trees of the detection and utility random forests")
    max_eval_rows: int = Field(ge=50, description="rows per side in the energy distance")
    fair_rows: int = Field(ge=100, le=6366, description="rows of statsmodels' fair table kept")
    jitter_scale: float = Field(gt=0, description="noise of the jittered-copy control, in column standard deviations")

    @model_validator(mode="after")
    def _consistent(self) -> Params:
        if self.claim_n_levels not in self.n_levels:
            raise ValueError("claim_n_levels must be one of n_levels")
        if self.baseline_seeds > self.seeds:
            raise ValueError("baseline_seeds cannot exceed seeds")
        return self


SMOKE = {"seeds": 1, "baseline_seeds": 1, "datasets": ["wine"], "n_levels": [30], "claim_n_levels": 30,
         "baselines": ["gaussian_copula", "arf", "tabddpm", "marginals", "bootstrap"],
         "copula_marginal": "truncated_gaussian", "arf_trees": 3, "ddpm_steps": 30, "ddpm_timesteps": 10,
         "eval_trees": 10}

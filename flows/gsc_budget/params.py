"""Params of the gsc_budget flow (``papers.gsc_budget`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from paperflows.core.contract import Distinct, PaperParams

Mode = Literal["random", "worst"]


class ErrorCell(BaseModel):
    """One (beta, delta, mu, gamma) accuracy setting of the queries."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    beta: int = Field(ge=0, le=4, description="Disc error: |Disc(i, a) - u_i(a)| <= beta (integer)")
    delta: int = Field(ge=0, le=4, description="Gen level slack: support counted at level l - delta")
    mu: float = Field(gt=0, le=1, description="Gen compares with the best statement of cost <= ceil(mu x)")
    gamma: float = Field(gt=0, le=1, description="Gen returns support >= ceil(gamma * best support)")


class Params(PaperParams):
    issues: int = Field(ge=1, le=5, description="m: issues per agent (statement cost = issues it fixes)")
    options: int = Field(ge=2, le=7, description="o: options per issue; utility per issue floor(o/2) - |a - s|")
    agents: int = Field(ge=2, le=500, description="n: agents per instance")
    budgets: Annotated[list[Annotated[int, Field(ge=1, le=40)]], Distinct] = Field(
        min_length=1, description="B: slate budgets (total statement cost)")
    agent_types: Annotated[list[Literal["uniform", "gauss"]], Distinct] = Field(
        min_length=1, description="synthetic agents: uniform opinions, or Gaussian-skewed (mean option 1, std o/4)")
    instances_per_seed: int = Field(ge=1, le=100, description="random instances per (agent type, budget) cell per seed")
    error_cells: list[ErrorCell] = Field(min_length=1, description="approximate-query settings; exact (0,0,1,1) is always run")
    error_modes: Annotated[list[Mode], Distinct] = Field(
        min_length=1, description="Disc perturbation: uniform integer in [-beta, beta], or worst case +-beta; "
                                  "worst also makes Gen return a least-supported qualifying statement")
    cluster_share: int = Field(ge=1, le=5, description="cluster-then-summarize: cost of each cluster's statement "
                                                      "(k = B // share clusters)")


SMOKE = {"seeds": 3, "issues": 3, "options": 3, "agents": 24, "budgets": [3], "instances_per_seed": 2,
         "error_cells": [{"beta": 1, "delta": 1, "mu": 1.0, "gamma": 0.8}], "error_modes": ["random"]}

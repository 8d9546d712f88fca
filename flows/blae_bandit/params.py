"""Params of the BLAE flow (``papers.blae_bandit`` in ``params.yaml``): typed, range-checked, and light to import."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from paperflows.core.contract import Increasing, PaperParams


class Params(PaperParams):
    horizons: Annotated[list[Annotated[int, Field(ge=100)]], Increasing] = Field(
        min_length=2, description="horizons T (rounds), increasing; the largest is the claims' T")
    random_K: int = Field(ge=2, le=1000, description="arms of the random instance")
    random_d: int = Field(ge=2, le=100, description="dimension of the random instance")
    eoo_eps: float = Field(gt=0, lt=0.5, description="End-of-Optimism gap parameter of the headline instance")
    extra_eoo_eps: list[Annotated[float, Field(gt=0, lt=0.5)]] = Field(
        description="End-of-Optimism instances reported besides (no claims)")
    sigma: float = Field(gt=0, description="reward noise standard deviation")
    ridge_lambda: float = Field(gt=0, description="ridge regulariser of every estimator (BLAE's design uses lambda/T_l)")
    fw_tol: float = Field(gt=0, lt=0.5, description="Frank-Wolfe stop: max ||x||^2 <= (1 + tol) d_eff")
    e4_gamma: float = Field(ge=0, description="E4's batch-3 exploration (log T)^(1+gamma); official 10")
    rs_oful_C: float = Field(gt=0, description="rs-OFUL: a new batch when det(V) grew by (1 + C); official 0.5")
    linucb: bool = Field(description="run the sequential LinUCB reference")


SMOKE = {"seeds": 2, "horizons": [200, 600, 1500], "random_K": 10, "random_d": 5, "extra_eoo_eps": []}

"""Params of the FedDP-KMeans flow (``papers.feddp_kmeans`` in ``params.yaml``): typed, range-checked, and light to import."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from paperflows.core.contract import Distinct, PaperParams


class Params(PaperParams):
    datasets: Annotated[list[Literal["gaussian", "digits"]], Distinct] = Field(
        min_length=1, description="data sets; claims need gaussian")
    k: int = Field(ge=2, le=50, description="clusters / mixture components")
    dim: int = Field(ge=2, le=1000, description="Gaussian mixture dimension (official default 100)")
    variance: float = Field(gt=0, description="per-coordinate variance of each component (official 0.5)")
    n_clients: int = Field(ge=2, description="Gaussian-mixture clients")
    per_client: int = Field(ge=10, description="points per client")
    server_per_component: int = Field(ge=0, description="server points drawn from each component")
    server_uniform: int = Field(ge=0, description="out-of-distribution U[0,1]^d server points")
    client_components: int = Field(ge=0, description="components per client; 0 = all (official IID split)")
    digits_clients: int = Field(ge=2, description="digits clients (label skew)")
    digits_alpha: float = Field(gt=0, description="Dirichlet concentration of the digits label skew")
    digits_server: int = Field(ge=10, description="digits images held by the server (blurred + noisy)")
    digits_blur: float = Field(ge=0, description="Gaussian blur (pixels) of the server's digits")
    digits_server_noise: float = Field(ge=0, description="std of the noise added to the server's digits")
    digits_clip: float = Field(gt=0, description="Lambda for digits (pixels scaled to [0, 1])")
    eps_outer: float = Field(gt=0, description="step 1 eps (outer product)")
    eps_weight: float = Field(gt=0, description="step 2 eps (server point weights)")
    eps_init: float = Field(gt=0, description="step 3 eps (sums + counts)")
    init_split: float = Field(gt=0, lt=1, description="share of eps_init for the sums")
    eps_lloyd: float = Field(gt=0, description="eps of all DP-Lloyd rounds together (sums + counts)")
    lloyd_split: float = Field(gt=0, lt=1, description="share of eps_lloyd for the sums")
    delta: float = Field(gt=0, lt=1e-2, description="delta of each Gaussian calibration and of the total")
    clip: float = Field(gt=0, description="Lambda: client point norm bound, Gaussian mixture")
    min_server_weight: float = Field(ge=0, description="server points with noisy weight below this are dropped")
    margin: float = Field(gt=0, le=1, description="step-3 proximity margin (1 = assign every point)")
    lloyd_steps: Annotated[list[Annotated[int, Field(ge=1, le=50)]], Distinct] = Field(
        min_length=1, description="DP-Lloyd round counts T; the first is FedDP's headline T")
    kfed_k_client: int = Field(ge=1, description="local centres per client in k-FED")

    @model_validator(mode="after")
    def _consistent(self) -> Params:
        if "gaussian" not in self.datasets:
            raise ValueError("the claims are checked on the gaussian data set: keep it in datasets")
        return self


SMOKE = {"seeds": 2, "dim": 10, "n_clients": 8, "per_client": 150, "server_per_component": 5,
         "server_uniform": 10, "digits_clients": 10, "digits_server": 30, "lloyd_steps": [1]}

"""Params of the vi_net flow (``papers.vi_net`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from paperflows.core.contract import Distinct, PaperParams


class Params(PaperParams):
    test_fraction: float = Field(gt=0.05, lt=0.9, description="stratified share of the digits held out for testing")
    channels: list[Annotated[int, Field(ge=1, le=256)]] = Field(
        min_length=4, max_length=4, description="output channels of the CNN's 4 conv blocks")
    hidden: int = Field(ge=1, le=1024, description="width of the CNN's hidden dense layer")
    epochs: int = Field(ge=1, le=500, description="Adam epochs of the 'pretrained' CNN")
    batch_size: int = Field(ge=1, description="CNN mini-batch size")
    lr: float = Field(gt=0, description="Adam learning rate of the CNN")
    layers: Annotated[list[Annotated[int, Field(ge=1, le=3)]], Distinct] = Field(
        min_length=1, description="truncation points (after conv block L); the first is the headline, the claims' L")
    pca_dim: int = Field(ge=1, le=64, description="k: PCA dimension of the truncated latent before VCA")
    psi: float = Field(gt=0, lt=1, description="VCA tolerance: a polynomial vanishes if its RMS on the class's points <= psi")
    max_degree: int = Field(ge=1, le=2, description="VCA maximum degree (degree 3 needs >> 286 points per class in 10 dims)")
    head_c: float = Field(gt=0, description="inverse L2 strength of every logistic-regression head")
    throughput_batch: int = Field(ge=1, description="batch size of the throughput timing")
    throughput_reps: int = Field(ge=3, description="timed repetitions (median taken) per model")


SMOKE = {"seeds": 2, "epochs": 3, "layers": [2], "throughput_reps": 3}

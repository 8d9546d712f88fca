"""Params of the bronet_lipschitz flow (``papers.bronet_lipschitz`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from paperflows.core.contract import Increasing, PaperParams


class Params(PaperParams):
    test_fraction: float = Field(gt=0, lt=1, description="held-out share of the 1,797 digits (stratified split per seed)")
    channels: list[Annotated[int, Field(ge=2, le=256, multiple_of=2)]] = Field(
        min_length=1, max_length=3, description="channels of each LipConvNet stage (two conv layers each, MaxMin "
                                               "after each; invertible 2x2 downsampling between stages)")
    kernel_size: int = Field(ge=1, le=5, description="conv kernel size (odd)")
    bro_rank: float = Field(gt=0, le=1, description="BRO rank fraction of V for square conv layers (official --bro-rank 0.125)")
    bro_eps: float = Field(ge=0, description="BRO regulariser: eps = bro_eps * mean diag(V^H V) (official 1e-5)")
    soc_train_terms: int = Field(ge=2, le=20, description="SOC Taylor terms in training (official 6)")
    soc_eval_terms: int = Field(ge=2, le=30, description="SOC Taylor terms at evaluation (official 15)")
    epochs: int = Field(ge=1, description="training epochs (plan: 40)")
    batch_size: int = Field(ge=8, description="mini-batch size")
    lr: float = Field(gt=0, description="SGD peak learning rate (official 0.1), cosine decay to 0")
    momentum: float = Field(ge=0, lt=1, description="SGD momentum (official 0.9)")
    weight_decay: float = Field(ge=0, description="SGD weight decay (official 3e-4)")
    temperature: float = Field(gt=0, description="LA / offset-CE temperature (official 0.75)")
    offset: float = Field(ge=0, description="LA / offset-CE offset factor; the logit offset is offset * sqrt(2) (official 2.0)")
    la_alpha: float = Field(gt=0, description="LA focal alpha (official 0.25)")
    la_beta: float = Field(ge=0, description="LA focal exponent beta (official 5.0)")
    radii_255: Annotated[list[Annotated[int, Field(ge=0, le=255)]], Increasing] = Field(
        min_length=1, description="l2 radii in units of 1/255 (pixels in [0, 1]); claims use 36 and 108")
    pgd_steps: int = Field(ge=1, description="PGD-l2 steps of the soundness attack")
    pgd_restarts: int = Field(ge=1, description="PGD-l2 random restarts")
    power_iters: int = Field(ge=5, description="power-iteration steps per layer for the network's Lipschitz bound")
    timing_repeats: int = Field(ge=3, description="interleaved repeats of the per-step timing (each: timing_steps steps per layer)")
    timing_steps: int = Field(ge=1, description="training steps per timing repeat")

    @model_validator(mode="after")
    def _consistent(self) -> Params:
        if not {36, 108} <= set(self.radii_255):
            raise ValueError("the claims are checked at radii 36/255 and 108/255: keep both in radii_255")
        if self.kernel_size % 2 == 0:
            raise ValueError("kernel_size must be odd (same-size padding)")
        if self.soc_eval_terms < self.soc_train_terms:
            raise ValueError("soc_eval_terms must be >= soc_train_terms")
        return self


SMOKE = {"seeds": 2, "channels": [4], "epochs": 1, "pgd_steps": 2, "power_iters": 5, "soc_eval_terms": 6,
         "timing_repeats": 3, "timing_steps": 1}

"""Params of the UEFL flow (``papers.uefl`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from paperflows.core.contract import PaperParams


class Params(PaperParams):
    # federation: digit silos from three image distributions (0 = original, 1 = rotated + noise,
    # 2 = inverted + blurred); the number of silos per distribution, majority first
    silos_per_distribution: Annotated[list[Annotated[int, Field(ge=1, le=20)]], Field(min_length=2)] = Field(
        description="silos of each distribution; the first is the majority (the official unbalanced run: 3/1/1)")
    test_fraction: float = Field(gt=0, lt=1, description="share of each silo held out for its test set")
    noise_strength: float = Field(ge=0, description="strength of the Gaussian pixel noise of distribution 1")
    # model: CNN encoder -> extensible VQ -> MLP with dropout (official model/vqmodel.py, scaled to 8x8 inputs)
    width: int = Field(ge=4, le=256, description="channels of the first conv; the second has twice as many (= code dim)")
    hidden: int = Field(ge=8, le=1024, description="hidden units of the MLP classifier")
    dropout: float = Field(gt=0, lt=1, description="dropout of the MLP (official Mlp drop=0.1), kept on for MC dropout")
    num_codes: int = Field(ge=2, le=1024, description="codewords per codebook (official --num_codes)")
    commitment: float = Field(gt=0, description="weight of the encoder commitment term in the VQ loss (official 0.25)")
    kmeans_init_shared: bool = Field(description="start each silo's copy of codebook 0 from K-means on its features "
                                     "(False: the official N(0, 1) init)")
    vq_weight: float = Field(gt=0, description="weight of the VQ loss next to cross-entropy (official code: 1)")
    # federated training (official train.py)
    rounds: int = Field(ge=1, le=200, description="FedAvg rounds of UEFL's first iteration (official --round)")
    rounds_plus: int = Field(ge=1, le=200, description="rounds of each later iteration (official --round_plus)")
    max_iterations: int = Field(ge=1, le=10, description="cap on UEFL iterations (the official loop has none)")
    local_epochs: int = Field(ge=1, le=50, description="local epochs per round (official --epoch)")
    batch_size: int = Field(ge=1, le=4096, description="local mini-batch size")
    lr: float = Field(gt=0, le=1, description="Adam learning rate of local training")
    mc_passes: int = Field(ge=2, le=200, description="stochastic (dropout-on) inference passes for the entropy (--step)")
    threshold_margin: float = Field(ge=0, le=5, description="thd: a silo is uncertain above (1 + thd) x mean entropy")
    fedprox_mu: float = Field(gt=0, description="FedProx proximal weight")
    ece_bins: int = Field(ge=2, le=100, description="equal-width confidence bins of the expected calibration error")

    @model_validator(mode="after")
    def _consistent(self) -> Params:
        if self.silos_per_distribution[0] <= max(self.silos_per_distribution[1:]):
            raise ValueError("the first distribution must hold the most silos (the majority)")
        if len(self.silos_per_distribution) > 3:
            raise ValueError("three distributions at most (original, rotated + noise, inverted + blurred)")
        return self


SMOKE = {"seeds": 2, "silos_per_distribution": [2, 1, 1], "num_codes": 8, "width": 8, "hidden": 32,
         "rounds": 2, "rounds_plus": 1, "max_iterations": 2, "local_epochs": 1, "mc_passes": 3}

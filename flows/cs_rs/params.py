"""Params of the cs_rs flow (``papers.cs_rs`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from paperflows.core.contract import Increasing, PaperParams


class Params(PaperParams):
    test_size: int = Field(ge=50, le=900, description="test points of the stratified digits split (plan: 360)")
    hidden: list[Annotated[int, Field(ge=4, le=1024)]] = Field(min_length=1, description="MLP hidden widths (plan: 256, 256)")
    sigma: float = Field(gt=0, le=2, description="Gaussian noise std of training and smoothing (pixels in [0, 1])")
    epochs: int = Field(ge=1, le=500, description="training epochs of every method")
    batch_size: int = Field(ge=8, le=1024, description="training mini-batch size")
    lr: float = Field(gt=0, le=1, description="Adam learning rate")
    gauss_num: int = Field(ge=1, le=64, description="noisy copies per example in (CS-)MACER (official default 16; plan 8)")
    lbd: float = Field(ge=0, description="MACER / CS-MACER weight of the robustness term (lambda)")
    gamma1: float = Field(gt=0, description="CS-MACER hinge for seed examples (gamma_1)")
    gamma2: float = Field(gt=0, description="MACER hinge for all examples (gamma_2)")
    beta: float = Field(gt=0, description="logit scaling inside the robustness term")
    reweight: float = Field(ge=1, description="seed-class weight of the cost-sensitive reweighted Gaussian baseline")
    n0: int = Field(ge=1, description="selection draws of certify")
    n: int = Field(ge=10, description="estimation draws of certify")
    alpha: float = Field(gt=0, lt=0.5, description="failure probability of each certificate")
    cert_batch: int = Field(ge=100, description="noisy rows per forward pass in certification")
    tightness_radius: float = Field(gt=0, description="radius of the tightness claim (plan: 0.25)")
    training_radius: float = Field(gt=0, description="radius of the training claim (plan: 0.5)")
    curve_radii: Annotated[list[float], Increasing] = Field(min_length=2, description="radii of the certified-accuracy curves")
    pgd_points: int = Field(ge=1, description="seed examples attacked in the PGD sanity check (per seed)")
    pgd_steps: int = Field(ge=1, description="L2 PGD steps on the soft smoothed classifier")
    pgd_noise: int = Field(ge=1, description="noise draws per PGD step (expectation over transformation)")
    pgd_n: int = Field(ge=10, description="Monte-Carlo draws of predict on the adversarial points")


SMOKE = {"seeds": 2, "test_size": 100, "hidden": [32], "epochs": 2, "gauss_num": 2, "n0": 20, "n": 100,
         "pgd_points": 4, "pgd_steps": 3, "pgd_noise": 4, "pgd_n": 50}

"""Params of the minimalist sharpness flow (``papers.sharpness_minimalist``): typed, range-checked, light to import."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from paperflows.core.contract import Distinct, PaperParams


class Params(PaperParams):
    n: int = Field(ge=4, description="training examples of the synthetic regression")
    d: int = Field(ge=2, description="input dimension")
    spectrum_decay: float = Field(gt=0, le=4, description="input covariance diag(k^-decay), k = 1..d, of the "
                                  "secondary power-law inputs (the primary inputs are isotropic)")
    beta_norm: float = Field(gt=0, description="norm of the teacher vector beta (EoS, depth and SGD runs)")
    noise_levels: list[Annotated[float, Field(ge=0)]] = Field(
        min_length=3, description="label-noise std per difficulty level")
    level_beta_norms: list[Annotated[float, Field(gt=0)]] = Field(
        min_length=3, description="teacher norm per difficulty level (same length as noise_levels)")
    base_noise: float = Field(ge=0, description="label-noise std of the EoS, depth and SGD runs")
    depth_main: int = Field(ge=2, le=16, description="depth D of the EoS, difficulty and SGD runs")
    depths: Annotated[list[Annotated[int, Field(ge=2, le=16)]], Distinct] = Field(min_length=3, description="depth sweep")
    init_norm: float = Field(gt=0, lt=1, description="end-to-end norm alpha^D of the balanced initialisation")
    steps: int = Field(ge=10, description="GD/SGD updates per run")
    record_every: int = Field(ge=1, description="exact Hessian every this many steps (odd: both phases of a period-2 orbit)")
    eos_step_ratios: list[Annotated[float, Field(gt=0)]] = Field(min_length=2, description="r = eta S*/2 of the EoS runs")
    fixed_eta: float = Field(gt=0, description="the one step size of the difficulty and depth sweeps (all levels, depths, seeds)")
    fixed_eta_steps: int = Field(ge=10, description="GD steps of the fixed-eta difficulty and depth sweeps")
    sgd_step_ratios: list[Annotated[float, Field(gt=0)]] = Field(min_length=1, description="r of the SGD-vs-GD runs")
    sgd_batch_sizes: list[Annotated[int, Field(ge=1)]] = Field(min_length=1, description="SGD batch sizes; must include 1")
    tail_frac: float = Field(gt=0, le=1, description="'terminal' = mean over this last fraction of training")
    curve_points: int = Field(ge=10, description="points per stored sharpness curve")
    mlp_classes: Annotated[list[Annotated[int, Field(ge=0, le=9)]], Distinct] = Field(
        min_length=2, max_length=2, description="two different digit classes")
    mlp_n_train: int = Field(ge=10, description="training examples of the MLP")
    mlp_hidden: int = Field(ge=1, description="hidden width of the 3-layer tanh MLP")
    mlp_label_noise: list[Annotated[float, Field(ge=0, lt=0.5)]] = Field(min_length=3, description="label-flip fractions")
    mlp_lr: float = Field(gt=0, description="full-batch GD step size of the MLP")
    mlp_steps: int = Field(ge=1)
    mlp_record_every: int = Field(ge=1, description="power-iteration sharpness every this many steps")
    mlp_power_iters: int = Field(ge=1, description="Hessian-vector products per sharpness estimate (warm-started)")

    @model_validator(mode="after")
    def _consistent(self) -> "Params":
        if not any(r > 1 for r in self.eos_step_ratios) or not any(r < 1 for r in self.eos_step_ratios):
            raise ValueError("eos_step_ratios needs some r > 1 (S* > 2/eta: the edge of stability) and some r < 1 "
                             "(below the edge: the negative control)")
        if len(self.level_beta_norms) != len(self.noise_levels):
            raise ValueError("level_beta_norms and noise_levels must have the same length (one pair per level)")
        if len(set(zip(self.level_beta_norms, self.noise_levels))) != len(self.noise_levels):
            raise ValueError("difficulty levels (teacher norm, noise) must be distinct")
        if 1 not in self.sgd_batch_sizes or max(self.sgd_batch_sizes) >= self.n:
            raise ValueError("sgd_batch_sizes must include 1 and stay below n")
        if self.depth_main not in self.depths:
            raise ValueError("depth_main must be one of depths")
        return self


SMOKE = {"seeds": 1, "steps": 300, "fixed_eta_steps": 300, "depths": [2, 3, 4], "noise_levels": [0.0, 0.1, 0.3],
         "level_beta_norms": [1.0, 1.5, 2.0], "mlp_n_train": 40,
         "mlp_hidden": 8, "mlp_label_noise": [0.0, 0.2, 0.4], "mlp_steps": 30, "mlp_record_every": 15,
         "mlp_power_iters": 5}

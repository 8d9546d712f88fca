"""Params of the SFBD flow (``papers.sfbd_deconv`` in ``params.yaml``): typed, range-checked, and light to import."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from paperflows.core.contract import PaperParams


class Params(PaperParams):
    toy_name: Literal["moons", "eight_gaussians", "checkerboard", "swiss_roll"] = Field(
        description="2-D density of tasks.data.make_toy_2d")
    toy_n_train: int = Field(ge=50, description="2-D training points (clean fraction + noisy rest)")
    toy_n_test: int = Field(ge=50, description="held-out clean 2-D points for the metrics")
    toy_sigma_zeta: float = Field(gt=0, description="measurement noise sigma_zeta of the 2-D data (std ~ 1)")
    toy_sigma_data: float = Field(gt=0, description="EDM sigma_data of the 2-D denoiser")
    toy_width: int = Field(ge=4, description="hidden width of the 2-D MLP denoiser")
    toy_depth: int = Field(ge=1, description="hidden layers of the 2-D MLP denoiser")
    toy_base_steps: int = Field(ge=1, description="Adam steps of pretraining / noisy / oracle training (2-D)")
    toy_finetune_steps: int = Field(ge=1, description="Adam steps of each SFBD update (2-D)")
    toy_n_generate: int = Field(ge=10, description="generated 2-D samples per evaluation")
    digits_n_test: int = Field(ge=50, le=1000, description="held-out clean digits for the digits-FID")
    digits_sigma_zeta: float = Field(gt=0, description="measurement noise on pixels in [-1, 1]")
    digits_sigma_data: float = Field(gt=0, description="EDM sigma_data of the digits denoiser")
    digits_width: int = Field(ge=4)
    digits_depth: int = Field(ge=1)
    digits_base_steps: int = Field(ge=1)
    digits_finetune_steps: int = Field(ge=1)
    digits_n_generate: int = Field(ge=10, description="generated digits per evaluation")
    clean_fraction_low: float = Field(gt=0, lt=1, description="the small clean fraction (paper: 4%)")
    clean_fraction_high: float = Field(gt=0, lt=1, description="the larger clean fraction (paper: 10%)")
    rounds: int = Field(ge=1, description="SFBD denoise/update rounds K")
    denoise_steps: int = Field(ge=2, description="levels of the EDM grid truncated at sigma_zeta for denoising")
    sample_steps: int = Field(ge=2, description="Heun steps of the EDM sampler for evaluation")
    embedding_dim: int = Field(ge=2, description="sinusoidal c_noise embedding size (even)")
    batch_size: int = Field(ge=1)
    lr: float = Field(gt=0, description="Adam learning rate of every denoiser training")
    mmd_points: int = Field(ge=10, description="points per side of the RBF-MMD")
    sw_projections: int = Field(ge=1, description="random directions of the sliced Wasserstein distance")
    classifier_hidden: list[Annotated[int, Field(ge=2)]] = Field(min_length=1, description="digits-FID classifier")
    classifier_epochs: int = Field(ge=1)
    n_shown: int = Field(ge=1, description="2-D points per method in the figure")

    @model_validator(mode="after")
    def _consistent(self) -> Params:
        if self.clean_fraction_low >= self.clean_fraction_high:
            raise ValueError("clean_fraction_low must be below clean_fraction_high")
        if self.embedding_dim % 2:
            raise ValueError("embedding_dim must be even")
        return self


SMOKE = {"seeds": 1, "toy_n_train": 500, "toy_n_test": 200, "toy_base_steps": 20, "toy_finetune_steps": 5,
         "toy_n_generate": 200, "digits_n_test": 200, "digits_base_steps": 20, "digits_finetune_steps": 5,
         "digits_n_generate": 200, "rounds": 2, "toy_width": 32, "digits_width": 32, "mmd_points": 100,
         "classifier_epochs": 2, "n_shown": 100}

"""Params of the Longtail Guidance flow (``papers.longtail_guidance`` in ``params.yaml``): typed, range-checked, and light to import."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from paperflows.core.contract import Distinct, PaperParams


class Params(PaperParams):
    head_count: int = Field(ge=10, le=140, description="train images of the most frequent class")
    decay: float = Field(gt=0, le=1, description="n_c = head_count * decay^c")
    min_count: int = Field(ge=1, description="floor of n_c")
    n_tail: int = Field(ge=1, le=9, description="the n_tail rarest classes are 'tail'")
    val_per_class: int = Field(ge=1, description="balanced validation images per class (guidance-weight choice)")
    test_per_class: int = Field(ge=1, description="balanced test images per class")
    latent_dim: int = Field(ge=2, description="autoencoder latent dimension")
    ae_hidden: int = Field(ge=4)
    ae_epochs: int = Field(ge=1)
    diffusion_steps: int = Field(ge=25, description="T of the latent DDPM (linear schedule; beta_T = 20/T < 1 needs T >= 25)")
    diff_width: int = Field(ge=8)
    diff_depth: int = Field(ge=1)
    diff_train_steps: int = Field(ge=10)
    label_dropout: float = Field(ge=0, lt=1, description="classifier-free label dropout")
    cfg_scale: float = Field(ge=0, description="classifier-free guidance scale of the class conditioning")
    pred_hidden: list[Annotated[int, Field(ge=2)]] = Field(min_length=1, description="predictor MLP hidden widths")
    pred_epochs: int = Field(ge=1)
    lr: float = Field(gt=0, description="Adam step of autoencoder, DDPM and predictor")
    weight_decay: float = Field(ge=0)
    batch_size: int = Field(ge=2)
    n_heads: int = Field(ge=2, description="K heads of the epistemic head")
    head_steps: int = Field(ge=1, description="full-batch Adam steps of the heads")
    head_lr: float = Field(gt=0)
    n_generate: int = Field(ge=10, description="synthetic images per method (same count for all)")
    guidance_weights: Annotated[list[Annotated[float, Field(gt=0)]], Distinct] = Field(
        min_length=1, description="LTG weights w; one chosen on val")
    signal_floor: float = Field(gt=0, description="guidance uses log(f_lt + floor)")
    finetune_steps: int = Field(ge=1, description="Adam steps of fine-tuning (same for every method)")
    finetune_lr: float = Field(gt=0)


SMOKE = {"seeds": 1, "ae_epochs": 5, "diffusion_steps": 25, "diff_train_steps": 30, "pred_epochs": 5,
         "head_steps": 10, "n_generate": 40, "guidance_weights": [1.0], "finetune_steps": 10, "test_per_class": 10}

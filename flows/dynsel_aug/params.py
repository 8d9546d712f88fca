"""Params of the dynsel_aug flow (``papers.dynsel_aug`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from paperflows.core.contract import PaperParams


class Params(PaperParams):
    # data: scikit-learn digits, one stratified split per seed; the rest of the data after pool and reference is test
    pool_frac: float = Field(gt=0, lt=1, description="share of digits in the training pool (plan: 60%)")
    reference_frac: float = Field(gt=0, lt=1, description="share in the clean reference split that aligns the "
                                                          "image->text projection (plan: 10%)")
    noise_rate: float = Field(gt=0, lt=0.5, description="symmetric label-noise rate of the noisy setting "
                                                        "(the clean setting, rate 0, always runs too)")
    # training (identical for every method: only the policy differs)
    epochs: int = Field(ge=1, description="epochs per run (plan: 30)")
    batch_size: int = Field(ge=1)
    lr: float = Field(gt=0, description="Adam learning rate")
    conv_channels: int = Field(ge=1, description="channels of the first conv layer (the second has twice as many)")
    hidden: int = Field(ge=2, description="width of the penultimate layer: the image embedding")
    # selection
    fraction: float = Field(gt=0, lt=1, description="per-epoch budget: share of the pool trained on (paper: 50%)")
    reselect_every: int = Field(ge=1, description="epochs between rescorings of the pool (E_r)")
    density_k: int = Field(ge=1, description="neighbours of the kNN local density (unofficial code: 50)")
    selection_rule: Literal["sample", "topk"] = Field(
        description="per class, 'sample' draws without replacement with probability proportional to p_rho*p_c "
                    "(the plan); 'topk' keeps the highest scores (the unofficial reimplementation)")
    # the multimodal-consistency stand-in for CLIP
    text_template: str = Field(min_length=1, description="class prompt; '{name}' becomes the digit's English name")
    proj_steps: int = Field(ge=1, description="full-batch Adam steps aligning the image->text projection")
    proj_lr: float = Field(gt=0)
    proj_temperature: float = Field(gt=0, description="softmax temperature of the contrastive alignment (CLIP: 0.07)")
    # augmentation of the selected samples (plan: +-1 pixel shifts, +-10 degree rotations)
    max_shift: float = Field(ge=0, le=3, description="largest shift in pixels, drawn uniformly per axis")
    max_rotation: float = Field(ge=0, le=45, description="largest rotation in degrees, drawn uniformly")

    @model_validator(mode="after")
    def _consistent(self) -> "Params":
        if self.pool_frac + self.reference_frac >= 0.9:
            raise ValueError("pool_frac + reference_frac must leave at least 10% of digits for the test split")
        if "{name}" not in self.text_template:
            raise ValueError("text_template must contain '{name}'")
        return self


SMOKE = {"seeds": 2, "epochs": 2, "proj_steps": 10, "density_k": 10}

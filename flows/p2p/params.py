"""Params of the P2P flow (``papers.p2p`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from paperflows.core.contract import Increasing, PaperParams


class Params(PaperParams):
    n_train: int = Field(ge=50, description="train images per variant (clean, confounded)")
    n_test: int = Field(ge=50, description="test images per variant")
    stroke_threshold: float = Field(gt=0, lt=1, description="up-sampled digit intensity (0-1) above which a pixel is digit")
    confound_rate: float = Field(ge=0, le=1, description="P(confounder at the class position) in the confounded train split")
    n_segments: int = Field(ge=4, le=1024, description="SLIC target number of superpixels per 32x32 image")
    compactness: float = Field(gt=0, description="SLIC compactness (intensities in [0, 1])")
    epochs: int = Field(ge=1, description="training epochs of every model")
    batch_size: int = Field(ge=8, description="mini-batch size")
    lr: float = Field(gt=0, description="Adam learning rate (selector CNN, predictor, black box)")
    lr_global: float = Field(gt=0, description="Adam learning rate of the global mask's per-pixel logits")
    temperature: float = Field(gt=0, description="Gumbel-sigmoid temperature of the relaxed mask")
    r_min: float = Field(gt=0, le=1, description="smallest kept fraction drawn in training")
    r_max: float = Field(gt=0, le=1, description="largest kept fraction drawn in training")
    levels: Annotated[list[Annotated[float, Field(gt=0, le=1)]], Increasing] = Field(
        min_length=2, description="kept fractions of the test sweep (dynamic sparsity picks one per image)")
    r_eval: float = Field(gt=0, le=1, description="the fixed kept fraction of the accuracy / overlap claims (one of levels)")
    tau: float = Field(gt=0, lt=1, description="softmax confidence that stops P2P's dynamic sparsity")

    @model_validator(mode="after")
    def _consistent(self) -> Params:
        if self.r_min > self.r_max:
            raise ValueError("r_min must not exceed r_max")
        if self.r_eval not in self.levels:
            raise ValueError("r_eval must be one of levels")
        if self.levels[-1] != 1.0:
            raise ValueError("the sweep must end at 1.0 (the whole image), the dynamic rule's fallback")
        return self


SMOKE = {"seeds": 2, "n_train": 120, "n_test": 60, "epochs": 1, "levels": [0.1, 0.15, 0.5, 1.0]}

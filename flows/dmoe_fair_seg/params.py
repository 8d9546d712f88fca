"""Params of the dMoE flow (``papers.dmoe_fair_seg`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from paperflows.core.contract import Increasing, PaperParams


class Params(PaperParams):
    n_train: int = Field(ge=20, description="training images (groups drawn with group_probs)")
    n_test: int = Field(ge=20, description="test images (groups balanced in expectation)")
    image_size: int = Field(ge=16, le=64, description="image side in pixels (the plan: 32)")
    group_probs: list[Annotated[float, Field(gt=0, lt=1)]] = Field(
        min_length=2, description="training prevalence of each attribute group; the last is the minority")
    widths: Annotated[list[Annotated[int, Field(ge=2, le=128)]], Increasing] = Field(
        min_length=2, max_length=4, description="TinyUNet channels per encoder stage (the plan: 16-32-64)")
    n_experts: int = Field(ge=2, le=16, description="experts per MoE layer (official: 8)")
    top_k: int = Field(ge=1, le=16, description="experts per token (official: 2)")
    expansion: int = Field(ge=1, le=8, description="expert hidden width / channels (official: 4)")
    expert_dropout: float = Field(ge=0, lt=1, description="dropout after each expert (official: 0.1)")
    epochs: int = Field(ge=1, description="training epochs (Adam)")
    batch_size: int = Field(ge=1, description="mini-batch size")
    lr: float = Field(gt=0, description="Adam learning rate")

    @property
    def n_groups(self) -> int:
        return len(self.group_probs)

    @model_validator(mode="after")
    def _consistent(self) -> Params:
        if abs(sum(self.group_probs) - 1.0) > 1e-9:
            raise ValueError(f"group_probs must sum to 1, got {sum(self.group_probs)}")
        if self.top_k > self.n_experts:
            raise ValueError("top_k must not exceed n_experts")
        return self


SMOKE = {"seeds": 2, "n_train": 64, "n_test": 48, "image_size": 16, "widths": [4, 8], "n_experts": 4,
         "epochs": 1, "batch_size": 32}

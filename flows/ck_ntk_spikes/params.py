"""Params of the CK/NTK spikes flow (``papers.ck_ntk_spikes`` in ``params.yaml``): typed, range-checked, and light to import."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from paperflows.core.contract import Distinct, PaperParams

Activation = Literal["tanh", "relu", "sin", "cubic"]  # normalised activations of method.activation


class Params(PaperParams):
    n: int = Field(ge=30, description="samples, divisible by classes")
    p: int = Field(ge=8, description="input dimension")
    width: int = Field(ge=8, description="width d of every hidden layer")
    depth: int = Field(ge=1, le=6, description="hidden layers L")
    classes: int = Field(ge=2, le=10, description="mixture components K (planted spike rank K - 1)")
    snr_grid: Annotated[list[Annotated[float, Field(ge=0)]], Distinct] = Field(
        min_length=2, description="spike strengths theta^2; 0 and the top are checked")
    sweep_activations: list[Activation] = Field(min_length=1, description="activations run at every snr")
    top_activations: list[Activation] = Field(min_length=1, description="activations run at the top snr (includes the sweep ones)")
    null_draws: int = Field(ge=1, le=20, description="pure-noise inputs averaged for each null edge")
    edge_margin: float = Field(ge=0, le=1, description="an outlier exceeds the null edge by this fraction")
    theory_points: int = Field(ge=2, le=200, description="snr values of the predicted curves")
    digits_per_class: int = Field(ge=10, le=179, description="images of digit 1 and of digit 7")

    @model_validator(mode="after")
    def _consistent(self) -> "Params":
        if self.n % self.classes:
            raise ValueError("n must be divisible by classes")
        if 0.0 not in self.snr_grid:
            raise ValueError("snr_grid must hold 0")
        if not set(self.sweep_activations) <= set(self.top_activations):
            raise ValueError("top_activations must include every sweep activation")
        if self.classes > self.p:
            raise ValueError("classes cannot exceed p")
        return self


SMOKE = {"seeds": 1, "n": 150, "p": 75, "width": 120, "snr_grid": [0.0, 16.0, 64.0], "sweep_activations": ["tanh"],
         "top_activations": ["tanh", "relu"], "null_draws": 2, "theory_points": 3, "digits_per_class": 40}

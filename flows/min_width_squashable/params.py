"""Params of the minimum-width flow (``papers.min_width_squashable`` in ``params.yaml``): typed, range-checked, and light to import."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from paperflows.core.contract import Distinct, PaperParams

# The names of ``method.ACTIVATIONS``, in its order (a test checks that they agree).
Activation = Literal["sigmoid", "tanh", "softplus", "gelu", "sin", "exp", "square", "leaky_relu", "hardswish", "elu",
                     "relu", "relu6", "hardtanh", "identity", "affine", "step"]
# The activations that are monotone on [-8, 8]: what ``method.is_monotone`` finds numerically (a test checks
# that they agree); the lower bounds of width w* - 1 hold for monotone activations only.
MONOTONE = ("sigmoid", "tanh", "softplus", "exp", "leaky_relu", "elu", "relu", "relu6", "hardtanh", "identity",
            "affine", "step")
# Fixed from the plan before any run: the activations of its width experiments.
PLAN_ACTIVATIONS = ("tanh", "sigmoid")


class Params(PaperParams):
    activations: Annotated[list[Activation], Distinct] = Field(
        min_length=1, description="monotone activations trained on every target")
    nonmonotone_activation: Activation = Field(description="width-1 non-monotone activation on target (a)")
    width_offsets: list[Annotated[int, Field(ge=-1, le=3)]] = Field(min_length=2, description="widths w* + offset")
    depths: Annotated[list[Annotated[int, Field(ge=1, le=64)]], Distinct] = Field(min_length=1, description="hidden layers")
    n_points_1d: int = Field(ge=50, description="evaluation grid (1-D targets), midpoints")
    n_per_axis_2d: int = Field(ge=8, description="evaluation grid per axis (2-D target)")
    n_train_1d: int = Field(ge=20, description="training grid (1-D targets), midpoints")
    n_train_2d: int = Field(ge=5, description="training grid per axis (2-D target)")
    steps: int = Field(ge=1, description="full-batch Adam steps")
    lr: float = Field(gt=0, le=1, description="Adam learning rate (cosine decay to lr/100)")
    init: dict[Activation, Literal["identity", "glorot"]] = Field(description="hidden-layer initialisation per activation")
    init_noise: float = Field(ge=0, description="noise of the identity initialisation")
    lb_angles: int = Field(ge=4, description="directions of the ridge lower bound (target b)")
    demo_activations: list[Activation] = Field(min_length=1, description="activations of the squashability test")
    demo_epsilons: list[Annotated[float, Field(gt=0)]] = Field(min_length=1, description="identity scales")
    demo_iterations: list[Annotated[int, Field(ge=1)]] = Field(min_length=1, description="step compositions")

    @model_validator(mode="after")
    def _consistent(self) -> Params:
        missing = [a for a in PLAN_ACTIVATIONS if a not in self.activations]
        if missing:
            raise ValueError(f"activations must include the plan's {list(PLAN_ACTIVATIONS)} (missing {missing})")
        not_monotone = [a for a in self.activations if a not in MONOTONE]
        if not_monotone:
            raise ValueError(f"activations must be monotone (the lower bounds need it): {not_monotone}")
        if self.nonmonotone_activation in MONOTONE:
            raise ValueError(f"nonmonotone_activation '{self.nonmonotone_activation}' is monotone")
        uninitialised = [a for a in [*self.activations, self.nonmonotone_activation] if a not in self.init]
        if uninitialised:
            raise ValueError(f"init has no entry for {uninitialised}")
        if not {-1, 0} <= set(self.width_offsets):
            raise ValueError("width_offsets must include -1 and 0 (widths w* - 1 and w*)")
        return self


SMOKE = {"seeds": 1, "activations": ["tanh", "sigmoid", "relu"], "width_offsets": [-1, 0], "depths": [2],
         "n_points_1d": 200, "n_per_axis_2d": 12, "n_train_1d": 50, "n_train_2d": 7, "steps": 30,
         "lb_angles": 24, "demo_activations": ["sigmoid", "softplus", "relu"], "demo_epsilons": [0.1, 0.001],
         "demo_iterations": [2, 16]}

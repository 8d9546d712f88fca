"""Params of the speculative sampling flow (``papers.speculative_diffusion`` in ``params.yaml``): typed, light to import."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from paperflows.core.contract import Distinct, Increasing, PaperParams

TOY_2D = ("moons", "eight_gaussians", "checkerboard", "swiss_roll")  # tasks.data.TOY_2D_NAMES (checked in the tests)
Dataset = Literal["moons", "eight_gaussians", "checkerboard", "swiss_roll", "digits"]


class Params(PaperParams):
    datasets: Annotated[list[Dataset], Distinct] = Field(
        min_length=1, description="2-D densities of tasks.data.make_toy_2d, or digits")
    n_train: int = Field(ge=100, description="training points per 2-D data set")
    n_steps: int = Field(ge=30, description="T, diffusion steps (linear schedule; β_T = 20/T must stay well below 1)")
    width: int = Field(ge=8, description="target ε-MLP width")
    depth: int = Field(ge=1, description="target ε-MLP hidden layers")
    train_steps: int = Field(ge=1, description="Adam steps of the target")
    batch_size: int = Field(ge=8)
    lr: float = Field(gt=0)
    draft_width: int = Field(ge=4, description="independent draft ε-MLP width")
    draft_depth: int = Field(ge=1, description="independent draft ε-MLP hidden layers")
    draft_train_steps: int = Field(ge=1, description="Adam steps of the independent draft")
    n_samples: int = Field(ge=50, description="samples per sampler (and held-out data points)")
    lookaheads: Annotated[list[Annotated[int, Field(ge=1)]], Increasing] = Field(
        min_length=1, description="speculation windows L, increasing")
    n_permutations: int = Field(ge=19, description="permutations of each two-sample test")
    langevin_targets: Annotated[list[Literal["gmm4", "banana"]], Distinct] = Field(
        min_length=1, description="gmm4 and/or banana")
    langevin_step: float = Field(gt=0, description="ULA step size h")
    langevin_steps: int = Field(ge=2, description="ULA steps K")

    @model_validator(mode="after")
    def _consistent(self) -> Params:
        if not set(self.datasets) & set(TOY_2D):
            raise ValueError("at least one 2-D data set is needed (the speed-up claim is on 2-D data)")
        return self


SMOKE = {"seeds": 1, "datasets": ["moons"], "n_train": 500, "n_steps": 40, "width": 32, "depth": 2,
         "train_steps": 30, "draft_train_steps": 10, "n_samples": 200, "lookaheads": [2, 4],
         "n_permutations": 49, "langevin_targets": ["gmm4"], "langevin_steps": 20}

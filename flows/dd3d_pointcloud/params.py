"""Params of the dd3d_pointcloud flow (``papers.dd3d_pointcloud`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from paperflows.core.contract import Distinct, PaperParams


Shape = Literal["box", "sphere", "cylinder", "cone", "torus", "pyramid", "capsule", "wedge", "ring", "slab",
                "ellipsoid", "tetrahedron"]
"""The names of ``tasks.point_clouds.SHAPES`` (not imported: params stay free of NumPy)."""


class Params(PaperParams):
    # ---- data: procedural shapes (tasks.point_clouds.shape_classification_set) ----
    classes: Annotated[list[Shape], Distinct] = Field(min_length=2, description="shape classes (names of tasks.point_clouds.SHAPES)")
    train_per_class: int = Field(ge=2, description="real training clouds per class")
    test_per_class: int = Field(ge=2, description="test clouds per class")
    n_points: int = Field(ge=16, le=4096, description="points per real cloud, and the resolution of generated evaluation data")
    distill_points: int = Field(ge=16, le=4096, description="points per cloud during distillation (real subsampled, synthetic generated)")
    scale_min: float = Field(gt=0, description="smallest per-axis (anisotropic) scale factor")
    scale_max: float = Field(gt=0, description="largest per-axis (anisotropic) scale factor")
    jitter: float = Field(ge=0, le=0.2, description="std of the Gaussian jitter per coordinate")
    # ---- synthetic set ----
    ipc: int = Field(ge=1, le=100, description="synthetic clouds per class (IPC)")
    # ---- networks (PointNet with instance norm, as the official code; smaller widths) ----
    widths: list[Annotated[int, Field(ge=4, le=1024)]] = Field(min_length=1, description="shared point-MLP widths of PointNet")
    sign_w0: float = Field(gt=0, description="w0 of the rotator's sign rule: axis sign = sign(mean_points sin(w0 x))")
    # ---- DD3D generator (official SIREN wrapper: one sine layer modulated by a per-instance code) ----
    noise_dim: int = Field(ge=1, le=3, description="dimension of the per-point noise fed to the generator (official: 1, uniform)")
    gen_hidden: int = Field(ge=8, le=1024, description="hidden width of the point-wise generator")
    gen_w0: float = Field(gt=0, description="frequency w0 of the generator's first sine layer (official ModelNet: 100)")
    lr_generator: float = Field(gt=0, lt=1, description="Adam learning rate of the generator (official 1e-3)")
    # ---- gradient matching loop (official gm_inr.py structure) ----
    iterations: int = Field(ge=1, description="distillation iterations (a fresh randomly initialised network each)")
    outer_loop: int = Field(ge=1, description="matching steps per iteration")
    inner_loop: int = Field(ge=0, description="network training steps on the synthetic set between matching steps")
    batch_real: int = Field(ge=2, description="real clouds per class per matching step")
    lr_net: float = Field(gt=0, lt=1, description="SGD learning rate of the network trained inside the loop (official 1e-3)")
    lr_points: float = Field(gt=0, lt=1, description="Adam learning rate of directly optimised points (DM baseline)")
    dm_iterations: int = Field(ge=1, description="DM iterations (a fresh random embedding network each)")
    # ---- evaluation: a fresh PointNet trained on each (synthetic or real) set ----
    eval_steps: int = Field(ge=1, description="Adam steps of every evaluation training run")
    eval_batch: int = Field(ge=2, description="evaluation training batch size")
    eval_lr: float = Field(gt=0, lt=1, description="Adam learning rate of evaluation training")

    @model_validator(mode="after")
    def _consistent(self) -> Params:
        if self.scale_min > self.scale_max:
            raise ValueError("scale_min must not exceed scale_max")
        if self.distill_points > self.n_points:
            raise ValueError("distill_points must not exceed n_points (real clouds are subsampled)")
        if self.batch_real > self.train_per_class:
            raise ValueError("batch_real must not exceed train_per_class")
        return self


SMOKE = {"seeds": 2, "classes": ["box", "sphere", "cone", "torus"], "train_per_class": 12, "test_per_class": 6,
         "n_points": 96, "distill_points": 32, "ipc": 2, "widths": [8, 16], "gen_hidden": 16, "iterations": 2,
         "outer_loop": 2, "inner_loop": 1, "batch_real": 4, "dm_iterations": 3, "eval_steps": 4, "eval_batch": 8}

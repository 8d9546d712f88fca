"""Params of the dypolyseg_fewshot_pc flow (``papers.dypolyseg_fewshot_pc`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from pydantic import Field, model_validator

from paperflows.core.contract import PaperParams


class Params(PaperParams):
    n_points: int = Field(ge=32, le=4096, description="points per procedural scene")
    min_objects: int = Field(ge=1, le=9, description="fewest primitives per scene")
    max_objects: int = Field(ge=1, le=9, description="most primitives per scene")
    noise: float = Field(ge=0, le=0.2, description="std of the Gaussian jitter of every point (scene units before normalisation)")
    train_scenes: int = Field(ge=10, description="training scenes per seed (base classes labelled, others background)")
    test_scenes: int = Field(ge=10, description="test scenes per seed (novel classes)")
    n_base_classes: int = Field(ge=2, le=10, description="of the 12 shape classes, how many are base (training) classes; the rest are novel")
    n_way: int = Field(ge=1, le=5, description="N of N-way K-shot")
    k_shot: int = Field(ge=1, le=5, description="K of N-way K-shot")
    n_query: int = Field(ge=1, le=4, description="query scenes per way per episode")
    train_episodes: int = Field(ge=1, description="training episodes (Adam steps) per arm")
    test_episodes: int = Field(ge=1, description="test episodes per arm (the same ones for all arms of a seed)")
    k_neighbors: int = Field(ge=2, le=64, description="k of the kNN neighbourhoods of DyPolyConv")
    orders: int = Field(ge=1, le=6, description="number K of dynamic exponents in DyHoConv (initialised at 1..K)")
    width: int = Field(ge=4, le=256, description="base channel width of both encoders")
    feature_dim: int = Field(ge=4, le=512, description="dimension of the per-point embedding compared to prototypes")
    d_state: int = Field(ge=1, le=64, description="state size N of the selective SSM")
    ssm_heads: int = Field(ge=1, le=16, description="heads of the SSM (each with its own decay); divides 2 x width")
    cosine_scale: float = Field(gt=0, description="scale of the cosine-similarity logits")
    lr: float = Field(gt=0, lt=1, description="Adam learning rate")

    @model_validator(mode="after")
    def _consistent(self) -> Params:
        if self.min_objects > self.max_objects:
            raise ValueError("min_objects must not exceed max_objects")
        if (2 * self.width) % self.ssm_heads:
            raise ValueError("ssm_heads must divide 2 x width")
        if self.n_way > 12 - self.n_base_classes or self.n_way > self.n_base_classes:
            raise ValueError("n_way must fit in both the base and the novel classes")
        return self


SMOKE = {"seeds": 2, "n_points": 64, "train_scenes": 40, "test_scenes": 30, "train_episodes": 3,
         "test_episodes": 3, "k_neighbors": 8, "width": 8, "feature_dim": 16}

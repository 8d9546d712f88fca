"""Params of the bopo flow (``papers.bopo`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from paperflows.core.contract import Distinct, PaperParams

Method = Literal["bopo", "reinforce", "slim", "bopo_beta1", "bopo_allpairs"]


class Params(PaperParams):
    methods: Annotated[list[Method], Distinct] = Field(
        min_length=5, description="trained methods: all five, distinct (every one is in a claim: "
                                  "bopo, reinforce, slim and BOPO's two ablations)")
    n_nodes: int = Field(ge=5, le=14, description="TSP size (exact Held-Karp optima, O(2^n n^2))")
    n_test: int = Field(ge=10, description="fixed test instances (shared by all seeds)")
    steps: int = Field(ge=1, description="training steps, equal for every method")
    batch: int = Field(ge=1, description="fresh training instances per step")
    samples: int = Field(ge=2, description="B: solutions per instance per step (B - 1 sampled + 1 greedy)")
    keep: int = Field(ge=2, description="K: solutions kept by uniform filtering (BOPO)")
    lr: float = Field(gt=0, description="Adam learning rate (all methods)")
    d_model: int = Field(ge=8, description="embedding width")
    heads: int = Field(ge=1, description="attention heads")
    layers: int = Field(ge=1, description="encoder layers")
    eval_samples: int = Field(ge=1, description="sampled tours per test instance for the best-of-N gap")

    @model_validator(mode="after")
    def _consistent(self) -> "Params":
        if self.keep > self.samples:
            raise ValueError("keep (K) cannot exceed samples (B)")
        if self.d_model % self.heads:
            raise ValueError("d_model must be divisible by heads")
        return self


SMOKE = {"seeds": 2, "n_nodes": 7, "n_test": 20, "steps": 3, "batch": 4, "samples": 8, "keep": 4,
         "eval_samples": 4}

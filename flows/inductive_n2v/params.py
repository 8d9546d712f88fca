"""Params of the inductive_n2v flow (``papers.inductive_n2v`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from paperflows.core.contract import Distinct, Increasing, PaperParams


class Params(PaperParams):
    # graphs: equal-block SBMs, one per regime and seed
    n_nodes: int = Field(ge=20, description="nodes per SBM graph")
    n_classes: int = Field(ge=2, description="SBM blocks = node classes")
    mean_degree: float = Field(gt=0, description="expected mean degree of the SBM")
    regime_names: Annotated[list[str], Distinct] = Field(min_length=1, description="names of the homophily regimes")
    homophilies: list[Annotated[float, Field(ge=0, le=1)]] = Field(min_length=1, description="expected edge homophily per regime")
    train_fractions: Annotated[list[Annotated[float, Field(gt=0, lt=1)]], Increasing] = Field(
        min_length=2, description="share of train nodes; val and test halve the rest (first = most unseen nodes)")
    # node2vec (official defaults_n2v.yml unless noted)
    dim: int = Field(ge=2, description="embedding dimension (official searches 64, 256)")
    walk_length: int = Field(ge=2, description="nodes per random walk")
    context_size: int = Field(ge=2, description="PyG context size: pairs at most context_size - 1 apart")
    walks_per_node: int = Field(ge=1, description="walks started from each node per epoch")
    negatives: int = Field(ge=1, description="uniform negative nodes per positive pair")
    batch_size: int = Field(ge=1, description="start nodes per optimiser step")
    lr: float = Field(gt=0, description="SparseAdam learning rate (official searches 0.1, 0.01, 0.001)")
    steps: int = Field(ge=1, description="optimiser steps per training, fixed (the official code early-stops on val)")
    # iN2V
    prob_replace: float = Field(ge=0, le=1, description="r: replace-by-neighbour-mean probability, sampling variant")
    w_ms: float = Field(ge=0, description="alpha: weight of the mean-self loss, loss variant")
    w_ndiv: float = Field(ge=0, description="beta: weight of the neighbour-diversity loss (both variants)")
    alpha: float = Field(gt=0, lt=1, description="lambda of the updating extension (alpha = 1 is always a candidate)")
    delays: Annotated[list[Annotated[int, Field(ge=0)]], Distinct] = Field(min_length=1, description="delay candidates for alpha < 1")
    max_iter: int = Field(ge=1, description="rounds of the post-hoc extension at most")
    # baseline
    fp_iterations: Annotated[list[Annotated[int, Field(ge=1)]], Increasing] = Field(
        min_length=1, description="feature-propagation iteration counts searched on val (official 10, 20, 40, 60)")

    @model_validator(mode="after")
    def _consistent(self) -> "Params":
        if len(self.regime_names) != len(self.homophilies):
            raise ValueError("one homophily per regime name")
        if self.context_size > self.walk_length:
            raise ValueError("context_size must not exceed walk_length (as in PyG)")
        return self


SMOKE = {"seeds": 2, "n_nodes": 120, "dim": 16, "steps": 10, "walks_per_node": 2,
         "fp_iterations": [10], "delays": [0]}

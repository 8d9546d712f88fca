"""Params of the rings_graph_eval flow (``papers.rings_graph_eval`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from paperflows.core.contract import Distinct, Increasing, PaperParams

Mode = Literal["original", "empty_features", "random_features", "shuffled_features", "complete_features",
               "empty_graph", "complete_graph", "random_graph"]
Dataset = Literal["atlas", "feature_only", "structure_only", "both"]


class Params(PaperParams):
    # --- the graph-level datasets with a known answer (separability)
    datasets: Annotated[list[Dataset], Distinct] = Field(
        min_length=1, description="graph-classification sets: atlas (triangle label, noise features), and SBM sets "
                                  "whose label lives in the features, the structure, or both (XOR)")
    modes: Annotated[list[Mode], Distinct] = Field(
        min_length=2, description="perturbations compared (all pairs, Bonferroni over them); the first is 'original'")
    atlas_max_per_class: int = Field(ge=10, le=1000, description="balanced subsample of networkx's graph atlas: "
                                                                 "at most this many graphs per class")
    sbm_graphs: int = Field(ge=20, le=5000, description="graphs per SBM set")
    sbm_nodes: int = Field(ge=6, le=100, description="nodes per SBM graph (two blocks of half the nodes)")
    sbm_dense: float = Field(gt=0, le=1, description="within-block edge probability of the dense block")
    sbm_sparse: float = Field(ge=0, le=1, description="within-block edge probability of the sparse block and "
                                                      "between the blocks")
    n_features: int = Field(ge=1, le=64, description="node-feature dimension of the synthetic sets")
    feature_shift: float = Field(ge=0, description="per-node mean shift (first coordinate, +/-) that carries the "
                                                   "feature bit of a graph")
    # --- the model and its performance distribution
    hidden: int = Field(ge=2, le=256, description="GIN hidden width")
    layers: int = Field(ge=1, le=5, description="GIN layers (sum aggregation, sum readout)")
    epochs: int = Field(ge=1, le=500, description="training epochs per fold")
    batch_size: int = Field(ge=1, description="graphs per mini-batch")
    lr: float = Field(gt=0, description="Adam learning rate")
    folds: int = Field(ge=2, le=20, description="stratified CV folds: one accuracy per fold and repeat")
    repeats: int = Field(ge=1, le=20, description="CV repeats (new split, new init, new perturbation draw)")
    # --- separability
    n_permutations: int = Field(ge=10, description="permutations of the KS permutation test (official 10,000)")
    alpha: float = Field(gt=0, lt=1, description="family-wise level after Bonferroni (official 0.01)")
    # --- complementarity
    align_graphs: int = Field(ge=3, le=2000, description="graphs per seed in the alignment set (spectral features)")
    align_nodes: int = Field(ge=6, le=200, description="nodes per alignment graph")
    noise_levels: Annotated[list[Annotated[float, Field(ge=0)]], Increasing] = Field(
        min_length=3, description="std of the noise added to the standardised spectral coordinates")
    graph_metric: Literal["shortest_path", "resistance"] = Field(description="graph metric of the complementarity")
    shuffles: int = Field(ge=1, le=1000, description="feature shuffles per real graph (descriptive table)")


SMOKE = {"seeds": 3, "datasets": ["structure_only", "feature_only"], "modes": ["original", "random_features",
         "empty_graph"], "atlas_max_per_class": 40, "sbm_graphs": 60, "sbm_nodes": 10, "epochs": 3, "folds": 3,
         "repeats": 1, "n_permutations": 200, "align_graphs": 6, "align_nodes": 10, "shuffles": 3}

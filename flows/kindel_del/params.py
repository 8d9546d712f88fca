"""Params of the kindel_del flow (``papers.kindel_del`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from paperflows.core.contract import Distinct, Increasing, PaperParams

PositiveList = Annotated[list[Annotated[float, Field(gt=0)]], Distinct, Increasing]


class Params(PaperParams):
    # library
    synthons_per_cycle: int = Field(ge=4, le=20, description="synthons used per cycle (20 are written in method.py)")
    fingerprint_bits: int = Field(ge=64, description="Morgan fingerprint length (the official code: 2048, radius 2)")
    # ground truth (fixed structure of the simulated target, not noise)
    base_pkd: float = Field(description="pKd of the average compound before synthon terms")
    synthon_sd: float = Field(ge=0, description="spread of the additive per-synthon pKd terms")
    interaction_fraction: float = Field(ge=0, le=1, description="share of A-B and of B-C synthon pairs with an interaction term")
    interaction_strength: float = Field(ge=0, description="mean pKd gain of an interacting disynthon")
    logp_penalty: float = Field(ge=0, description="pKd lost per Crippen logP unit above 3")
    compound_noise_sd: float = Field(ge=0, description="per-compound pKd noise")
    # count simulator
    abundance_sd: float = Field(ge=0, description="log-normal spread of the compounds' abundance in the library")
    load_depth: float = Field(gt=0, description="mean pre-selection (seq_load) reads per compound")
    replicates: int = Field(ge=1, description="target and matrix replicates (KinDEL: 3)")
    protein_p: float = Field(description="-log10 of the protein concentration in the selection (M)")
    nonspecific_base: float = Field(gt=0, description="matrix binding of a compound of average logP (fraction-bound units)")
    depth: PositiveList = Field(min_length=1, description="SIMULATOR KNOB, swept: mean target/matrix reads per compound and replicate")
    nonspecific: Annotated[list[Annotated[float, Field(ge=0)]], Distinct, Increasing] = Field(
        min_length=1, description="SIMULATOR KNOB, swept: log-slope of matrix binding on standardised logP")
    linker_penalty: PositiveList = Field(min_length=1, description="SIMULATOR KNOB, swept: on-DNA pKd loss of a cycle-A synthon at full linker proximity")
    # benchmark protocol
    heldout_size: int = Field(ge=5, description="compounds in each held-out Kd set (on-DNA, off-DNA)")
    assay_noise_sd: float = Field(ge=0, description="noise of a held-out pKd measurement")
    test_fraction: float = Field(gt=0, lt=0.5, description="share of compounds (random) or of B-C pairs (disynthon) in test")
    # models
    knn_neighbors: int = Field(ge=1, description="neighbours of the kNN regressor")
    trees: int = Field(ge=1, description="trees of the random forest and of XGBoost")
    mlp_hidden: int = Field(ge=1, description="hidden width of the fingerprint MLP and of DEL-Compose's heads")
    gin_hidden: int = Field(ge=1, description="GIN hidden width")
    gin_layers: int = Field(ge=1, description="GIN message-passing layers")
    compose_embedding: int = Field(ge=1, description="DEL-Compose synthon embedding width")
    epochs: int = Field(ge=1, description="epochs of the MLP, the GIN and DEL-Compose")
    batch_size: int = Field(ge=1, description="mini-batch size of the torch models")
    learning_rate: float = Field(gt=0, description="Adam learning rate of the torch models")
    weight_decay: float = Field(ge=0, description="Adam weight decay of the MLP and DEL-Compose")


SMOKE = {"seeds": 2, "synthons_per_cycle": 6, "fingerprint_bits": 256, "depth": [10.0], "nonspecific": [0.5],
         "linker_penalty": [1.0], "heldout_size": 10, "trees": 10, "epochs": 2, "mlp_hidden": 16, "gin_hidden": 8}

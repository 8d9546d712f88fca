"""Params of the info_coevolution flow (``papers.info_coevolution`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from paperflows.core.contract import Distinct, PaperParams


class Params(PaperParams):
    datasets: Annotated[list[Literal["digits", "synthetic"]], Distinct] = Field(
        min_length=1, description="pools; the claims are checked on digits (the plan's main data set)")
    test_fraction: float = Field(gt=0, lt=1, description="stratified share of each data set held out for test accuracy")
    synthetic_samples: int = Field(ge=200, description="make_classification samples (pool + test)")
    synthetic_features: int = Field(ge=4, description="make_classification features")
    synthetic_informative: int = Field(ge=2, description="make_classification informative features")
    synthetic_class_sep: float = Field(gt=0, description="make_classification class_sep (plan: 1.0)")
    initial_fraction: float = Field(gt=0, lt=1, description="share of the pool labelled at the start (plan: 10%)")
    round_fraction: float = Field(gt=0, le=1, description="labels bought between two model updates, share of the pool (plan: 5%)")
    draw_fraction: float = Field(gt=0, le=1, description="labels per draw inside a round, with rechecking between draws (share of the pool)")
    knn_k: int = Field(ge=1, description="neighbours of the kNN prediction (official notebook: submodular_k = 16)")
    knn_max_distance: float = Field(gt=0, le=2, description="cosine distance cut of kNN votes (official d_threshold 0.15)")
    recheck_k: int = Field(ge=1, description="neighbours rechecked after an annotation (official 8)")
    recheck_max_distance: float = Field(gt=0, le=2, description="cosine distance cut of rechecked neighbours (official 0.1)")
    recheck_min_similarity: float = Field(ge=-1, le=1, description="similarity above which a neighbour is rechecked (official 0.85)")
    target_confidence: float = Field(gt=0, le=1, description="gain = max(0, target - fused confidence) (official 1.0)")
    stop_criterion: float = Field(ge=0, description="auto-stop when the pool's total gain is at most this (official 1)")
    pseudo_threshold: float = Field(gt=0, le=1, description="fused confidence at which the semi-supervised variant pseudo-labels (plan 0.95)")
    ssl_max_ratio: float = Field(gt=0, le=1, description="annotation cap of the semi-supervised variant, share of the pool (plan 50%)")
    equal_accuracy_tolerance: float = Field(ge=0, description="'equal accuracy' = test accuracy >= full annotation's minus this (plan 0.5 pp)")
    hidden: list[Annotated[int, Field(ge=2)]] = Field(min_length=1, description="MLP hidden widths; the last is the embedding")
    epochs: int = Field(ge=1, description="epochs per model fit (training cost grows with the labelled set, as in the paper)")
    min_steps: int = Field(ge=1, description="at least this many Adam steps per fit (whole epochs), so small sets converge too")
    batch_size: int = Field(ge=1, description="mini-batch size")
    lr: float = Field(gt=0, description="Adam learning rate")

    @model_validator(mode="after")
    def _consistent(self) -> Params:
        if "digits" not in self.datasets:
            raise ValueError("the claims are checked on digits: keep it in datasets")
        if self.draw_fraction > self.round_fraction:
            raise ValueError("draw_fraction must not exceed round_fraction")
        if self.initial_fraction >= self.ssl_max_ratio:
            raise ValueError("initial_fraction must be below ssl_max_ratio")
        if self.synthetic_informative > self.synthetic_features:
            raise ValueError("synthetic_informative must not exceed synthetic_features")
        return self


SMOKE = {"seeds": 2, "datasets": ["digits"], "epochs": 8, "min_steps": 40, "round_fraction": 0.2, "draw_fraction": 0.1}

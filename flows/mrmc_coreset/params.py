"""Params of the MRMC core-set flow (``papers.mrmc_coreset`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from paperflows.core.contract import Distinct, Increasing, PaperParams

CLAIM_RATIOS = (0.1, 0.3, 0.5)  # the plan's selection ratios; the claims read all three


class Params(PaperParams):
    datasets: Annotated[list[Literal["digits", "synthetic"]], Distinct] = Field(
        min_length=1, description="pools: scikit-learn digits and make_classification (10 classes, label noise)")
    test_fraction: float = Field(gt=0, lt=1, description="held-out share of each data set (stratified split per seed)")
    synthetic_n: int = Field(ge=200, description="make_classification samples (pool + test)")
    synthetic_features: int = Field(ge=4, description="make_classification features")
    synthetic_informative: int = Field(ge=2, description="informative features of make_classification")
    synthetic_flip: float = Field(ge=0, lt=1, description="make_classification flip_y (share of labels assigned at random)")
    synthetic_class_sep: float = Field(gt=0, description="make_classification class_sep")
    hidden: list[Annotated[int, Field(ge=1)]] = Field(min_length=1, description="MLP hidden widths (proxy and final models)")
    lr: float = Field(gt=0, description="Adam learning rate (proxy and final models)")
    batch_size: int = Field(ge=1)
    early_epochs: int = Field(ge=1, description="E_early: proxy epochs MRMC, EL2N and herding score from")
    full_epochs: int = Field(ge=2, description="proxy epochs of the full trajectory Forgetting counts events over "
                                                "(also the full-data reference's epochs)")
    train_epochs: int = Field(ge=1, description="epochs of every final model on its core-set (equal size = equal samples seen)")
    ratios: Annotated[list[Annotated[float, Field(gt=0, lt=1)]], Increasing] = Field(
        min_length=1, description="core-set sizes as fractions of the pool")
    n_strata: int = Field(ge=2, description="quantile strata of the contribution in the MRMC-strata variant")
    timing_repeats: int = Field(ge=3, description="interleaved repeats of the scorer timing (the cost sanity check)")
    timing_dataset: Literal["digits", "synthetic"] = Field(description="pool the scorers are timed on")

    @model_validator(mode="after")
    def _consistent(self) -> "Params":
        if self.early_epochs >= self.full_epochs:
            raise ValueError("early_epochs must be below full_epochs (Forgetting needs the longer trajectory)")
        if any(r not in self.ratios for r in CLAIM_RATIOS):
            raise ValueError(f"ratios must include the plan's {CLAIM_RATIOS}; the claims read them")
        if self.timing_dataset not in self.datasets:
            raise ValueError("timing_dataset must be one of datasets")
        if self.synthetic_informative > self.synthetic_features:
            raise ValueError("synthetic_informative cannot exceed synthetic_features")
        return self


SMOKE = {"seeds": 2, "synthetic_n": 600, "hidden": [32], "early_epochs": 2, "full_epochs": 4, "train_epochs": 3,
         "timing_repeats": 3, "n_strata": 4}

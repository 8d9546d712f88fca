"""Params of the X-hacking flow (``papers.x_hacking`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from paperflows.core.contract import Distinct, PaperParams

BundledTable = Literal["breast_cancer", "wine", "diabetes"]   # scikit-learn bundled; wine and diabetes binarised


class Params(PaperParams):
    datasets: Annotated[list[BundledTable], Distinct] = Field(min_length=1, description="bundled tables")
    n_targets: int = Field(ge=1, le=5, description="target features per table: the baseline's top-k SHAP features")
    n_trials: int = Field(ge=2, le=500, description="budget B of each search")
    tpe_startup_trials: int = Field(ge=1, description="random trials before TPE models")
    share_factor: float = Field(gt=0, lt=1, description="success: target share <= share_factor * baseline share")
    min_success_rate: float = Field(ge=0, le=1, description="susceptible pair: either searcher succeeds in this "
                                                            "fraction of seeds")
    test_size: float = Field(gt=0, lt=1, description="stratified holdout fraction (paper: 0.2)")
    val_fraction: float = Field(gt=0, lt=1, description="validation fraction of the training part")
    shap_rows: int = Field(ge=10, description="holdout rows explained")
    baseline_trees: int = Field(ge=1, description="trees of the common baseline random forest")
    rf_max_trees: int = Field(ge=5, description="largest random forest in the search space")
    gb_max_trees: int = Field(ge=10, description="largest gradient boosting in the search space")
    allow_drop_target: bool = Field(description="may feature selection drop the target feature (trivial hack)")
    # 12 features of which 4 informative: at most 8 redundant ones
    synth_n_redundant: list[Annotated[int, Field(ge=0, le=8)]] = Field(
        description="make_classification n_redundant values (BO only)")
    synth_seeds: int = Field(ge=0, description="seeds of the synthetic sweep (the first ones of the run)")
    synth_n_samples: int = Field(ge=50, description="rows of each synthetic dataset")
    redundancy_trees: int = Field(ge=5, description="trees of the redundancy regressor")

    @model_validator(mode="after")
    def _consistent(self) -> "Params":
        if self.synth_seeds > self.seeds:
            raise ValueError("synth_seeds cannot exceed seeds")
        return self


SMOKE = {"seeds": 1, "datasets": ["breast_cancer"], "n_targets": 1, "n_trials": 8, "tpe_startup_trials": 4,
         "synth_seeds": 0}

"""Params of the predictive-equivalence flow (``papers.pred_equiv_trees`` in ``params.yaml``): typed, range-checked, and light to import."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field, model_validator

from paperflows.core.contract import PaperParams

Dataset = Literal["breast_cancer", "wine", "planted_dnf"]
DATASETS: tuple[str, ...] = get_args(Dataset)  # a dataset's index here seeds its units: never reorder
CLAIM_P = 0.2  # the plan's missingness level for claim 2


class Params(PaperParams):
    datasets: list[Dataset] = Field(min_length=1)
    planted_n: int = Field(ge=100, description="rows of the planted-DNF task")
    test_size: float = Field(gt=0, lt=1, description="stratified test fraction")
    n_top_features: int = Field(ge=1, le=30, description="raw features kept (ANOVA F on the train split)")
    quantiles: list[float] = Field(min_length=1, description="train-set quantile thresholds per raw feature")
    cart_depth: int = Field(ge=1, le=6, description="CART depth (faithfulness, missingness)")
    n_random_inputs: int = Field(ge=10, description="random binary inputs for the faithfulness check")
    rset_depth: int = Field(ge=1, le=4, description="TreeFARMS maximum depth")
    rset_regularization: float = Field(gt=0, lt=1, description="TreeFARMS per-leaf penalty")
    rset_epsilon: float = Field(gt=0, lt=1, description="Rashomon bound: optimum objective + epsilon")
    rset_max_trees: int = Field(ge=2, description="cap on trees taken from a Rashomon set")
    rset_missing_p: float = Field(gt=0, lt=1, description="MCAR level for the Rashomon-set missingness summary")
    missing_ps: list[float] = Field(min_length=1, description="MCAR levels")
    missing_repeats: int = Field(ge=1, description="masks per level")
    knn_repeats: int = Field(ge=1, description="repeats that also run the (slow) k-NN imputation baseline")
    knn_neighbors: int = Field(ge=1)
    cost_depth: int = Field(ge=1, le=3, description="CART depth of the cost experiment (official code: 3; "
                                                       "3^(used features) states are enumerated)")
    cost_low: int = Field(ge=0, description="feature costs are integers in [cost_low, cost_high]")
    cost_high: int = Field(ge=1)
    q_episodes: int = Field(ge=1, description="Q-learning episodes (official: 10000)")
    q_alpha: float = Field(gt=0, le=1)
    q_gamma: float = Field(gt=0, le=1)
    q_exploration: float = Field(ge=0, le=1)

    @model_validator(mode="after")
    def _consistent(self) -> Params:
        if CLAIM_P not in self.missing_ps:
            raise ValueError(f"missing_ps must contain the claim's level {CLAIM_P}")
        if any(not 0 < p < 1 for p in self.missing_ps) or any(not 0 < q < 1 for q in self.quantiles):
            raise ValueError("missing_ps and quantiles must lie in (0, 1)")
        if self.cost_high < self.cost_low:
            raise ValueError("cost_high must be >= cost_low")
        if self.knn_repeats > self.missing_repeats:
            raise ValueError("knn_repeats cannot exceed missing_repeats")
        return self


SMOKE = {"seeds": 1, "datasets": ["wine"], "n_random_inputs": 200, "rset_max_trees": 60, "missing_ps": [0.2],
         "missing_repeats": 2, "knn_repeats": 1, "q_episodes": 300}

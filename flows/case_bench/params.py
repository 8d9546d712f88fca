"""Params of the CASE-Bench flow (``papers.case_bench`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from paperflows.core.contract import Distinct, Increasing, PaperParams


class Params(PaperParams):
    n_categories: int = Field(ge=2, le=45, description="query categories (SORRY-Bench's taxonomy; the paper uses all 45)")
    queries_per_category: int = Field(ge=2, description="benchmark queries per category; each gets a safe and an unsafe context")
    train_queries_per_category: int = Field(ge=2, description="queries per category of the judges' separate training set")
    intensity_step: float = Field(ge=0, description="harm logit added per step of the query's wording (3 intensity levels)")
    harm_sd: float = Field(ge=0, description="spread of the category harm logits")
    query_noise: float = Field(ge=0, description="per-query harm logit noise")
    annotator_pool: int = Field(ge=3, description="annotators available per seed; each item gets distinct ones")
    annotator_bias_sd: Annotated[list[Annotated[float, Field(ge=0)]], Distinct, Increasing] = Field(
        min_length=1, description="SIMULATOR KNOB, swept: std of each annotator's unsafe-leaning logit bias")
    context_effect: Annotated[list[Annotated[float, Field(gt=0)]], Distinct, Increasing] = Field(
        min_length=1, description="SIMULATOR KNOB, swept: logit shift of a fully safe-intended context (negative for unsafe)")
    pilot_queries: int = Field(ge=2, description="queries in the power-analysis pilot (each in both contexts)")
    pilot_annotators: int = Field(ge=2, description="annotators per pilot item")
    target_power: float = Field(gt=0.5, lt=1, description="power the annotator count is chosen for (the paper: 0.8)")
    alpha: float = Field(gt=0, lt=0.5, description="significance level of the per-item z-test")
    max_annotators: int = Field(ge=3, description="cap on the annotators per item the power analysis may ask for")
    common_design_annotators: int = Field(ge=1, description="the common design the paper argues against: this many annotators + majority vote")
    power_items: int = Field(ge=10, description="fresh query pairs per seed and setting for the empirical power and type-I rate")
    conservative_threshold: float = Field(gt=0.5, lt=1, description="J3 says safe only above this P(safe): the over-refusing judge")
    judge_c: float = Field(gt=0, description="inverse L2 strength of the judges' logistic heads")
    casebench_json: str | None = Field(default=None, description="path of the real CASEBench_data.json, if you have it; "
                                       "its pooled context z-test is then reported (never needed, never in CI)")


SMOKE = {"seeds": 2, "n_categories": 6, "queries_per_category": 4, "train_queries_per_category": 6,
         "annotator_bias_sd": [0.5], "context_effect": [1.0], "power_items": 40, "annotator_pool": 40}

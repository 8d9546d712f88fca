"""Params of the OR-Bench flow (``papers.or_bench`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from paperflows.core.contract import Distinct, Increasing, PaperParams


class Params(PaperParams):
    categories: int = Field(ge=1, le=10, description="the first this many of moderator/config.py's 10 categories")
    seeds_per_category: int = Field(ge=4, description="toxic seed prompts generated per category (one action pair "
                                                      "each in turn, 4 pairs)")
    retained_harm_share: Annotated[list[Annotated[float, Field(ge=0, lt=1)]], Distinct, Increasing] = Field(
        min_length=1, description="DATA KNOB, swept: share of rewrites that keep the harmful request under a benign frame")
    random_sample_size: int = Field(ge=5, description="over-refusal prompts in the random comparison sample")
    hard_votes: int = Field(ge=1, le=3, description="a prompt is hard for a configuration when at least this many of "
                                                    "the 3 other configurations refuse it")
    max_new_tokens: int = Field(ge=4, description="greedy reply length: the official checkers read only its opening")
    fact_tokens: int = Field(ge=4, description="greedy reply length for the capability gate's factual questions "
                                               "(long enough for a sentence that names the answer)")
    batch_size: int = Field(ge=1, description="prompts per batched generation")
    judge_c: float = Field(gt=0, description="inverse L2 strength of the MiniLM moderator's logistic head")


SMOKE = {"seeds": 1, "categories": 2, "seeds_per_category": 4, "retained_harm_share": [0.35], "random_sample_size": 5,
         "max_new_tokens": 6, "fact_tokens": 8}

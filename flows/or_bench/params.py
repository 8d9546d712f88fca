"""Params of the OR-Bench flow (``papers.or_bench`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from tasks.contract import Distinct, Increasing, PaperParams


class Params(PaperParams):
    seeds_per_category: int = Field(ge=4, description="toxic seed prompts generated per category (10 categories)")
    retained_harm_share: Annotated[list[Annotated[float, Field(ge=0, lt=1)]], Distinct, Increasing] = Field(
        min_length=1, description="DATA KNOB, swept: share of rewrites that keep the harmful request under a benign frame")
    random_sample_size: int = Field(ge=10, description="over-refusal prompts in the random comparison sample")
    hard_votes: int = Field(ge=1, description="a prompt is hard when at least this many reference models refuse it")
    thresholds: Annotated[list[Annotated[float, Field(gt=0, lt=1)]], Distinct, Increasing] = Field(
        min_length=2, description="refusal thresholds on P(toxic) that spread each model family along the safety-helpfulness line")
    indirect_refusal_share: float = Field(ge=0, le=1, description="share of refusals a model words as an indirect refusal (an alternative offered)")
    judge_c: float = Field(gt=0, description="inverse L2 strength of every logistic head")


SMOKE = {"seeds": 2, "seeds_per_category": 8, "retained_harm_share": [0.35], "random_sample_size": 20}

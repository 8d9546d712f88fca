"""Params of the gridtom flow (``papers.gridtom`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from paperflows.core.contract import Increasing, PaperParams


class Params(PaperParams):
    model: Literal["smollm2-135m-instruct", "gemma3-270m"] = Field(
        description="the pretrained LM (tasks.pretrained), prompted with raw text")
    # stories per seed, each told twice (false and true belief); split by story, never by telling
    n_probe: int = Field(ge=8, description="probe stories: head outputs of both tellings, probes fit on half the "
                                           "stories and scored on the other half; mass-mean directions from all")
    n_val: int = Field(ge=4, description="validation stories: (K, alpha) is chosen here only")
    n_test: int = Field(ge=4, description="test stories: belief (both tellings) and reality questions")
    batch_size: int = Field(ge=1, description="prompts per forward")
    # ITI-style steering of the top-K heads by probe accuracy: shift alpha * sigma_h * theta_h
    ks: Annotated[list[Annotated[int, Field(ge=1)]], Increasing] = Field(min_length=1, description="K tried")
    alphas: Annotated[list[Annotated[float, Field(gt=0)]], Increasing] = Field(min_length=1,
                                                                               description="alpha tried")


SMOKE = {"seeds": 1, "n_probe": 8, "n_val": 4, "n_test": 4, "ks": [2, 8], "alphas": [5.0]}

"""Params of the act_comm flow (``papers.act_comm`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from tasks.contract import Distinct, PaperParams

Combine = Literal["replace", "sum", "mean"]


class Params(PaperParams):
    # the procedural world (one per seed): landmarks -> cities -> countries, people placed at random per episode
    n_people: int = Field(ge=4, le=1000, description="person names (word tokens)")
    n_landmarks: int = Field(ge=2, le=500, description="landmarks, spread evenly over the cities")
    n_cities: int = Field(ge=2, le=200, description="cities, spread evenly over the countries")
    n_countries: int = Field(ge=2, le=50, description="countries: the answers of the Countries game")
    # training corpus of the one small GPT that plays both A and B
    n_stories: int = Field(ge=10, description="story lines 'P is at L . L is in C . C is in K .' per epoch")
    n_qa: int = Field(ge=10, description="QA lines '<context> which country is P in ? K' per epoch")
    fact_repeats: int = Field(ge=1, description="copies of each world fact ('L is in C .', 'C is in K .') per epoch")
    n_layer: int = Field(ge=1, le=8, description="transformer blocks")
    n_head: int = Field(ge=1, le=8, description="attention heads")
    d_model: int = Field(ge=8, le=256, description="residual width")
    epochs: int = Field(ge=1, description="passes over the corpus")
    batch_size: int = Field(ge=1, description="sequences per AdamW step")
    lr: float = Field(gt=0, lt=1, description="AdamW learning rate")
    weight_decay: float = Field(ge=0, description="AdamW weight decay")
    # evaluation
    n_val: int = Field(ge=10, description="validation episodes: choose (k, j, f) here only")
    n_test: int = Field(ge=10, description="test episodes per seed")
    combines: Annotated[list[Combine], Distinct] = Field(min_length=1, description="functional forms f tried")
    message_lengths: Annotated[list[Annotated[int, Field(ge=1, le=20)]], Distinct] = Field(
        min_length=1, description="NL message caps (tokens A may decode), each reported")
    message_plan: int = Field(ge=1, le=20, description="the plan's NL cap (8): claims ac_beats_nl_plan, ac_flops")
    message_long: int = Field(ge=1, le=20, description="a cap that lets A finish its sentence: claim ac_beats_nl_long")

    @model_validator(mode="after")
    def _consistent(self) -> Params:
        if self.d_model % self.n_head:
            raise ValueError("d_model must be a multiple of n_head")
        if self.message_plan not in self.message_lengths or self.message_long not in self.message_lengths:
            raise ValueError("message_plan and message_long must be among message_lengths")
        if not self.n_countries <= self.n_cities <= self.n_landmarks:
            raise ValueError("need n_countries <= n_cities <= n_landmarks (every country has a city, every city a landmark)")
        return self


SMOKE = {"seeds": 2, "n_people": 20, "n_landmarks": 12, "n_cities": 6, "n_countries": 3, "n_stories": 200,
         "n_qa": 200, "fact_repeats": 2, "n_layer": 2, "d_model": 32, "epochs": 2, "n_val": 40, "n_test": 40,
         "message_lengths": [8, 16]}

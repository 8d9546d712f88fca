"""Params of the CoDy flow (``papers.cody`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from pydantic import Field, model_validator

from paperflows.core.contract import PaperParams


class Params(PaperParams):
    # the user-item stream with planted causal motifs
    n_users: int = Field(ge=5, description="users (one side of the bipartite stream)")
    n_items: int = Field(ge=5, description="items (other side)")
    n_events: int = Field(ge=200, description="events in the stream")
    n_groups: int = Field(ge=2, description="item groups: items of one group co-occur")
    p_repeat: float = Field(ge=0, le=1, description="chance an event repeats an item of the user's recent events")
    p_cooc: float = Field(ge=0, le=1, description="chance an event picks a co-occurring item (same group) of a recent event")
    motif_memory: int = Field(ge=1, description="how many of the user's last events can cause the next one")
    feature_dim: int = Field(ge=2, description="item feature dimension (group centroid + noise)")
    feature_noise: float = Field(ge=0, description="std of an item's feature noise around its group centroid")
    # the TGNN (TGAT-lite: one temporal attention layer + MLP link head)
    neighbours: int = Field(ge=2, description="k: last events per node the model attends over")
    time_dim: int = Field(ge=2, description="time-encoding dimension")
    hidden: int = Field(ge=4, description="hidden width of attention and head")
    epochs: int = Field(ge=1, description="training epochs (one random negative item per positive event)")
    batch_size: int = Field(ge=8, description="training batch size")
    lr: float = Field(gt=0, description="Adam learning rate")
    train_fraction: float = Field(gt=0.2, lt=0.95, description="share of the stream used for training; explained events come after")
    # explanation
    n_correct: int = Field(ge=1, description="explained events the model predicts correctly (logit > 0)")
    n_wrong: int = Field(ge=0, description="explained events the model predicts wrongly (logit < 0)")
    candidates: int = Field(ge=4, description="candidate events per explained event (last of the 1-hop temporal subgraph; official 64-75)")
    budget: int = Field(ge=1, description="model calls per explained event for every explainer (plan: max_steps = 100)")
    alpha: float = Field(ge=0, le=1, description="CoDy exploitation weight (official 2/3, i.e. alpha:beta = 2:1)")
    greedy_sample: int = Field(ge=1, description="GreeDy: top-ranked candidates evaluated per step (official sample_size 10)")

    @model_validator(mode="after")
    def _consistent(self) -> Params:
        if self.p_repeat + self.p_cooc > 1:
            raise ValueError("p_repeat + p_cooc must be <= 1")
        return self


SMOKE = {"seeds": 2, "n_users": 40, "n_items": 20, "n_events": 800, "n_groups": 4, "epochs": 2,
         "n_correct": 4, "n_wrong": 2, "candidates": 16, "budget": 20}

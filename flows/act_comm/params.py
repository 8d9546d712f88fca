"""Params of the act_comm flow (``papers.act_comm`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from paperflows.core.contract import Distinct, PaperParams, Increasing

Combine = Literal["replace", "sum", "mean"]
Depth = Annotated[float, Field(gt=0, le=1)]


class Params(PaperParams):
    # the Countries game: A is told "<name> is in <city>.", B is asked which country <name> is in
    n_val: int = Field(ge=2, description="validation episodes per seed: (depth, f) chosen here only")
    n_test: int = Field(ge=2, description="test episodes per seed")
    # the map W from A's residual space to B's, fitted per seed on paired activations of shared generic text
    n_shared_texts: int = Field(ge=2, description="generic paragraphs read by both models (seed-independent, cached)")
    map_train_frac: float = Field(gt=0, lt=1, description="fraction of the shared word positions W is fitted on per "
                                                          "seed; the rest measure its held-out R^2")
    ridge: float = Field(ge=0, description="ridge penalty of the least-squares fit, relative to the mean feature "
                                           "variance (conditioning only)")
    depths: Annotated[list[Depth], Increasing] = Field(
        min_length=1, description="relative depths tried: A's block k and B's block j at the same fraction of depth")
    combines: Annotated[list[Combine], Distinct] = Field(min_length=1, description="functional forms f tried")
    message_max_tokens: int = Field(ge=1, le=64, description="cap on A's natural-language message (greedy, to eos)")
    batch_size: int = Field(ge=1, description="prompts per forward pass")


SMOKE = {"seeds": 1, "n_val": 6, "n_test": 8, "n_shared_texts": 8, "depths": [0.8], "message_max_tokens": 12}

"""Params of the gridtom flow (``papers.gridtom`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from tasks.contract import Increasing, PaperParams


class Params(PaperParams):
    # GridToM-lite: two rooms of 3 x 2 cells joined by one door, agents A and B, one object, a few frames
    n_frames: int = Field(ge=3, le=6, description="frames per episode (frame 0: door open, everyone sees everything)")
    move_prob: float = Field(gt=0, lt=1, description="chance per frame that the object is moved (or an agent moves)")
    n_train: int = Field(ge=50, description="training questions (one episode each)")
    train_false_belief: float = Field(gt=0, lt=1, description="share of belief questions whose answer differs "
                                                                 "from reality in training (false belief, rare)")
    n_probe: int = Field(ge=40, description="first-order questions of the probing split (half true, half false "
                                            "belief; probes fit on one half, scored on the other)")
    n_val: int = Field(ge=20, description="validation questions per kind: (K, alpha) is chosen here only")
    n_test: int = Field(ge=20, description="test questions per kind (false belief, true belief, reality, ...)")
    # the one model: a small GPT of tasks.lm trained from scratch on the answer token
    n_layer: int = Field(ge=1, le=8, description="transformer blocks")
    n_head: int = Field(ge=1, le=8, description="attention heads per block")
    d_model: int = Field(ge=8, le=256, description="residual width")
    epochs: int = Field(ge=1, description="passes over the training questions")
    batch_size: int = Field(ge=1, description="questions per AdamW step")
    lr: float = Field(gt=0, lt=1, description="AdamW learning rate")
    weight_decay: float = Field(ge=0, description="AdamW weight decay")
    # ITI-style steering of the top-K heads by probe accuracy: shift alpha * sigma_h * theta_h
    ks: Annotated[list[Annotated[int, Field(ge=1)]], Increasing] = Field(min_length=1, description="K tried")
    alphas: Annotated[list[Annotated[float, Field(gt=0)]], Increasing] = Field(min_length=1,
                                                                               description="alpha tried")

    @model_validator(mode="after")
    def _consistent(self) -> Params:
        if self.d_model % self.n_head:
            raise ValueError("d_model must be a multiple of n_head")
        if max(self.ks) > self.n_layer * self.n_head:
            raise ValueError(f"ks: K = {max(self.ks)} exceeds the {self.n_layer * self.n_head} heads of the model")
        return self


SMOKE = {"seeds": 2, "n_train": 600, "n_probe": 80, "n_val": 40, "n_test": 40, "n_layer": 2, "n_head": 2,
         "d_model": 16, "epochs": 1, "ks": [1, 2], "alphas": [1.0, 5.0]}

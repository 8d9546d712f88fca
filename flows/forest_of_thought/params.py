"""Params of the forest_of_thought flow (``papers.forest_of_thought`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from tasks.contract import Distinct, Increasing, PaperParams


class Params(PaperParams):
    # --- the Game-of-24 world and the corpus the small GPT learns from ---
    max_value: int = Field(ge=24, le=999, description="largest intermediate result a move may produce (3-digit slots)")
    test_puzzles: int = Field(ge=5, description="solvable puzzles drawn per seed from the held-out pool")
    held_out_frac: float = Field(gt=0, lt=1, description="share of all 4-number puzzles held out of the training corpus")
    corpus_walks: int = Field(ge=10, description="random walks through training puzzles; each yields proposer and value lines")
    explore_prob: float = Field(ge=0, le=1, description="chance a walk follows a random legal move instead of the taught one "
                                                        "(reaches unsolvable states, so the value model sees both labels)")
    # --- the small GPT (tasks.lm) ---
    n_layer: int = Field(ge=1, le=4)
    n_head: int = Field(ge=1)
    d_model: int = Field(ge=16, le=128)
    epochs: int = Field(ge=1)
    batch_size: int = Field(ge=8)
    lr: float = Field(gt=0)
    # --- ToT / FoT (official defaults where the code has them) ---
    n_propose: int = Field(ge=1, description="moves sampled per proposer call (one LLM call listing several moves)")
    n_select: int = Field(ge=1, description="ToT breadth b: states kept per layer (official n_select_sample = 5)")
    max_trees: int = Field(ge=2, description="trees run per puzzle; FoT-n uses the first n")
    forest_sizes: Annotated[list[int], Increasing] = Field(min_length=2, description="n of FoT-n reported (trees curve)")
    headline_trees: int = Field(ge=2, description="FoT size of the headline claims (paper: 4 trees)")
    sparse_threshold: float = Field(ge=0, le=1, description="sparse activation: a tree continues past its first layer only "
                                                            "if its best state's value p(sure) reaches this ('likely')")
    temperatures: Annotated[list[float], Increasing] = Field(min_length=1, description="proposer sampling temperatures "
                                                                                      "swept (fixed before the run)")
    headline_temperature: float = Field(gt=0, description="official default 0.7; must be one of temperatures")

    @model_validator(mode="after")
    def _consistent(self) -> "Params":
        if self.headline_temperature not in self.temperatures:
            raise ValueError("headline_temperature must be one of temperatures")
        if self.headline_trees not in self.forest_sizes or self.forest_sizes[-1] > self.max_trees:
            raise ValueError("headline_trees must be one of forest_sizes, and forest_sizes at most max_trees")
        if self.forest_sizes[0] < 1:
            raise ValueError("forest_sizes start at 1")
        if self.d_model % self.n_head:
            raise ValueError("d_model must be a multiple of n_head")
        return self


SMOKE = {"seeds": 2, "test_puzzles": 8, "corpus_walks": 300, "epochs": 1, "max_trees": 2, "forest_sizes": [1, 2],
         "headline_trees": 2, "temperatures": [0.7]}

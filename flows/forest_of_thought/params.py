"""Params of the forest_of_thought flow (``papers.forest_of_thought`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from paperflows.core.contract import Increasing, PaperParams


class Params(PaperParams):
    model: Literal["smollm2-135m-instruct"] = Field(description="the pretrained LM (tasks.pretrained) that proposes, "
                                                                "evaluates and judges")
    # --- the task: three numbers, a target, two steps ---
    puzzles: int = Field(ge=2, description="puzzles drawn per seed")
    max_number: int = Field(ge=3, le=20, description="the three numbers are drawn from 1..max_number")
    min_target: int = Field(ge=0, description="smallest target drawn")
    max_target: int = Field(ge=1, description="largest target drawn")
    gate_problems: int = Field(ge=5, description="one-step arithmetic problems of the capability gate per seed")
    # --- ToT / FoT (official defaults where the code has them) ---
    temperature: float = Field(gt=0, description="proposer sampling temperature (official default 0.7)")
    max_new_tokens: int = Field(ge=8, description="tokens a proposed step may take (stops at its newline)")
    n_propose: int = Field(ge=1, description="steps sampled per proposer call")
    n_select: int = Field(ge=1, description="ToT breadth b: states kept after the first layer")
    max_trees: int = Field(ge=2, description="trees run per puzzle; FoT-n uses the first n")
    forest_sizes: Annotated[list[int], Increasing] = Field(min_length=2, description="n of FoT-n reported (trees curve)")
    headline_trees: int = Field(ge=2, description="FoT size of the headline claims (paper: 4 trees)")
    sparse_quantile: float = Field(ge=0, le=1, description="sparse activation: a tree continues past its first layer "
                                   "only if its best state's value reaches this quantile of the evaluator's values "
                                   "over every state one step from the seed's puzzles")

    @model_validator(mode="after")
    def _consistent(self) -> "Params":
        if self.headline_trees not in self.forest_sizes or self.forest_sizes[-1] > self.max_trees:
            raise ValueError("headline_trees must be one of forest_sizes, and forest_sizes at most max_trees")
        if self.forest_sizes[0] < 1:
            raise ValueError("forest_sizes start at 1")
        if self.min_target > self.max_target:
            raise ValueError("min_target must not exceed max_target")
        return self


SMOKE = {"seeds": 1, "puzzles": 3, "gate_problems": 6, "max_trees": 2, "forest_sizes": [1, 2], "headline_trees": 2,
         "n_propose": 2}

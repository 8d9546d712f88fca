"""Params of the bdc_mitigation flow (``papers.bdc_mitigation`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from tasks.contract import Distinct, Increasing, PaperParams


class Params(PaperParams):
    # the synthetic multiple-choice world: three "benchmarks" (capitals, word categories, two-digit sums)
    train_per_family: int = Field(ge=4, description="'pretraining' items per benchmark family the clean model is trained on")
    bench_per_family: int = Field(ge=4, description="benchmark items per family: the contamination target")
    placebo_per_family: int = Field(ge=4, description="held-out items per family for the placebo fine-tune (no benchmark exposure)")
    # the 'LLM': frozen all-MiniLM-L6-v2 + a trainable scoring MLP over [e_q, e_c, e_q*e_c, position]
    hidden: int = Field(ge=4, le=2048, description="width of the scoring MLP's hidden layer")
    lr: float = Field(gt=0, lt=1, description="Adam learning rate (clean training and contamination fine-tuning)")
    batch_size: int = Field(ge=1, description="items per Adam step")
    clean_epochs: int = Field(ge=1, description="epochs of the clean model on the training split")
    # the paper's two contamination recipes: fine-tune on the original benchmark for this many epochs
    mild_epochs: int = Field(ge=1, description="contamination epochs of the mild recipe")
    intensive_epochs: int = Field(ge=1, description="contamination epochs of the intensive recipe")
    # mitigation rules
    typo_rates: Annotated[list[Annotated[float, Field(gt=0, le=1)]], Distinct, Increasing] = Field(
        min_length=1, description="RULE KNOB, swept: share of words (4+ letters) of a question that get a typo")
    extra_choices: int = Field(ge=1, le=2, description="incorrect choices added by the add_incorrect_choices strategy")

    @model_validator(mode="after")
    def _recipes_ordered(self) -> "Params":
        if self.intensive_epochs <= self.mild_epochs:
            raise ValueError(f"intensive_epochs ({self.intensive_epochs}) must exceed mild_epochs ({self.mild_epochs})")
        return self


SMOKE = {"seeds": 3, "train_per_family": 24, "bench_per_family": 8, "placebo_per_family": 8, "hidden": 32,
         "clean_epochs": 5, "intensive_epochs": 5, "typo_rates": [0.3]}

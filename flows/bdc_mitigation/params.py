"""Params of the bdc_mitigation flow (``papers.bdc_mitigation`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from paperflows.core.contract import Distinct, Increasing, PaperParams


class Params(PaperParams):
    model: Literal["smollm2-135m-instruct", "gemma3-270m"] = Field(
        description="the pretrained language model (tasks.pretrained): clean as loaded, contaminated by LoRA")
    # the multiple-choice benchmark: three families (capitals, word categories, one-digit sums), drawn per seed
    bench_per_family: int = Field(ge=4, description="benchmark items per family: the contamination target (the "
                                                    "placebo fine-tune gets as many held-out items)")
    score_batch: int = Field(ge=1, description="prompts per scoring forward (a speed knob; scores do not depend on it "
                                               "beyond float rounding)")
    # contamination: LoRA on the original benchmark's question + answer texts
    lora_rank: int = Field(ge=1, le=64, description="LoRA rank (q_proj, v_proj)")
    lr: float = Field(gt=0, lt=1, description="AdamW learning rate of the LoRA fine-tunes")
    batch_size: int = Field(ge=1, description="texts per fine-tuning step")
    # the paper's two contamination recipes: fine-tune on the original benchmark for this many epochs
    mild_epochs: int = Field(ge=1, description="contamination epochs of the mild recipe")
    intensive_epochs: int = Field(ge=1, description="contamination epochs of the intensive recipe (the mild run "
                                                    "continued; also the placebo fine-tune's length)")
    # mitigation rules
    typo_rates: Annotated[list[Annotated[float, Field(gt=0, le=1)]], Distinct, Increasing] = Field(
        min_length=1, description="RULE KNOB, swept: share of words (4+ letters) of a question that get a typo")
    extra_choices: int = Field(ge=1, le=2, description="incorrect choices added by the add_incorrect_choices strategy")

    @model_validator(mode="after")
    def _recipes_ordered(self) -> "Params":
        if self.intensive_epochs <= self.mild_epochs:
            raise ValueError(f"intensive_epochs ({self.intensive_epochs}) must exceed mild_epochs ({self.mild_epochs})")
        if 3 * self.bench_per_family < self.batch_size:
            raise ValueError("a fine-tuning batch must not exceed the benchmark (3 * bench_per_family)")
        return self


SMOKE = {"seeds": 1, "bench_per_family": 4, "mild_epochs": 1, "intensive_epochs": 2, "batch_size": 8,
         "typo_rates": [0.5]}

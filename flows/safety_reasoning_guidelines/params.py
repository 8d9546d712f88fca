"""Params of the safety_reasoning_guidelines flow (``papers.safety_reasoning_guidelines`` in ``params.yaml``):
typed, range-checked, light to import."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from tasks.contract import Increasing, PaperParams


class Params(PaperParams):
    # the token world
    n_concepts: int = Field(ge=6, le=200, description="concept tokens c0..; each has one cipher alias a0..")
    n_dangerous: int = Field(ge=2, description="concepts designated dangerous (the rest are safe)")
    fact_repeats: int = Field(ge=1, description="copies of each fact '<c> is dangerous|safe' in the pretraining corpus")
    alias_repeats: int = Field(ge=1, description="copies of each definition '<a> means <c>' (and '<c> means <c>')")
    request_docs: int = Field(ge=0, description="pretraining documents '<request in any wrapper> . topic <x>'")
    # the small GPT (tasks.lm)
    d_model: int = Field(ge=16, le=256, description="width of the GPT")
    n_layer: int = Field(ge=1, le=4, description="transformer blocks")
    n_head: int = Field(ge=1, le=8, description="attention heads")
    pretrain_epochs: int = Field(ge=1, description="epochs over the pretraining corpus")
    finetune_epochs: int = Field(ge=1, description="epochs over the fine-tuning set (RT, SRG and the controls alike)")
    replay: float = Field(ge=0, le=4, description="pretraining documents mixed into fine-tuning, per fine-tuning example")
    batch_size: int = Field(ge=8, description="sequences per optimiser step")
    lr: float = Field(gt=0, lt=1, description="AdamW learning rate (pretraining)")
    finetune_lr: float = Field(gt=0, lt=1, description="AdamW learning rate (fine-tuning)")
    # evaluation
    attack_variants: int = Field(ge=1, description="attack prompts per concept and attack (random template, wrapper, distractors)")
    bon_n: Annotated[list[Annotated[int, Field(ge=1)]], Increasing] = Field(
        min_length=2, description="N of Best-of-N; the last is the number of samples drawn per prompt")
    temperature: float = Field(gt=0, description="sampling temperature of Best-of-N (the paper: 1.0)")
    max_new: int = Field(ge=4, description="tokens generated per response at most")

    @model_validator(mode="after")
    def _consistent(self) -> "Params":
        if not 2 <= self.n_dangerous <= self.n_concepts - 4:
            raise ValueError("n_dangerous must leave at least 4 safe concepts (the distractors are safe concepts)")
        if self.d_model % self.n_head:
            raise ValueError("d_model must be a multiple of n_head")
        return self


SMOKE = {"seeds": 2, "n_concepts": 12, "n_dangerous": 4, "request_docs": 200, "d_model": 32,
         "pretrain_epochs": 4, "finetune_epochs": 4, "attack_variants": 1, "bon_n": [1, 4]}

"""Params of the safety_reasoning_guidelines flow (``papers.safety_reasoning_guidelines`` in ``params.yaml``):
typed, range-checked, light to import."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from paperflows.core.contract import Increasing, PaperParams


class Params(PaperParams):
    model: Literal["smollm2-135m-instruct"] = Field(description="the pretrained chat model (tasks.pretrained)")
    test_topics: int = Field(ge=1, le=12, description="harmful and benign tasks (each) held out per seed; the other "
                                                      "24 - test_topics of each class are fine-tuned on")
    answer_tokens: int = Field(ge=4, le=64, description="tokens of the base model's greedy reply kept as a benign "
                                                        "task's answer (cut back to its last full sentence)")
    # LoRA fine-tuning (tasks.pretrained.lora_finetune), the same for every arm
    lora_steps: int = Field(ge=1, le=400, description="AdamW steps")
    lora_lr: float = Field(gt=0, lt=1, description="learning rate")
    lora_rank: int = Field(ge=1, le=64, description="LoRA rank (q_proj and v_proj of every block)")
    batch_size: int = Field(ge=1, le=32, description="texts per step")
    # evaluation
    max_new: int = Field(ge=4, le=128, description="tokens generated per response at most (SRG's trace included)")
    bon_n: Annotated[list[Annotated[int, Field(ge=1)]], Increasing] = Field(
        min_length=2, description="N of Best-of-N; the last is the number of samples drawn per attack prompt")
    temperature: float = Field(gt=0, description="sampling temperature of Best-of-N (the paper: 1.0)")


SMOKE = {"seeds": 1, "test_topics": 2, "answer_tokens": 8, "lora_steps": 2, "max_new": 8, "bon_n": [1, 2]}

"""Params of the climb_multitask flow (``papers.climb_multitask`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator

from paperflows.core.contract import Distinct, Increasing, PaperParams


class Params(PaperParams):
    ecg_seconds: float = Field(ge=2.0, le=10.0, description="length of every ECG record in seconds (the paper's records: 10 s)")
    ecg_rate: int = Field(ge=50, le=250, description="common sampling rate (Hz) every ECG dataset is resampled to")
    ecg_source_records: int = Field(ge=20, description="records per ECG source dataset (three sources, own label sets)")
    ecg_target_train: int = Field(ge=14, description="labelled records of the small ECG target dataset (7 classes)")
    ecg_target_test: int = Field(ge=14, description="test records of the ECG target dataset")
    image_size: int = Field(ge=16, le=64, description="side of the procedural images in pixels")
    image_source_images: int = Field(ge=20, description="images per x-ray-like source dataset (two sources)")
    us_target_train: int = Field(ge=4, description="labelled images of the small ultrasound-like target dataset")
    us_target_test: int = Field(ge=10, description="test images of the ultrasound-like target dataset")
    width: int = Field(ge=8, le=128, description="channels of the encoders' last layer (the embedding size)")
    tokens: int = Field(ge=4, le=64, description="tokens an encoder hands to cross-attention fusion (adaptive pooling); "
                        "a perfect square, as images pool to a square grid")
    pretrain_epochs: int = Field(ge=1, description="epochs of multitask pretraining over the source datasets")
    finetune_epochs: int = Field(ge=1, description="epochs of fine-tuning on a target (pretrained and random-init alike)")
    batch_size: int = Field(ge=2, description="mini-batch size per dataset")
    lr: float = Field(gt=0, le=1e-2, description="Adam learning rate (the paper searches 1e-5 to 1e-3)")
    weight_decay: float = Field(ge=0, description="Adam weight decay (the paper: 1e-3)")
    few_shot_k: Annotated[list[Annotated[int, Field(ge=1)]], Distinct, Increasing] = Field(
        min_length=1, description="labelled records per class of the held-out task (the plan: 5 and 10)")
    few_shot_query: int = Field(ge=5, description="query records per class of each few-shot episode")
    few_shot_episodes: int = Field(ge=1, description="few-shot episodes per seed and k (their AUCs are averaged)")
    fusion_train: int = Field(ge=20, description="patients (ECG record + EHR row) to train the fusion heads on")
    fusion_test: int = Field(ge=20, description="patients to test the fusion heads on")
    ehr_features: int = Field(ge=3, le=32, description="columns of the synthetic EHR block")
    fusion_epochs: int = Field(ge=1, description="epochs of every fusion head (encoders frozen)")
    fusion_batch_size: int = Field(ge=2, description="mini-batch size of the fusion heads")


    @field_validator("tokens")
    @classmethod
    def _square(cls, tokens: int) -> int:
        if round(tokens**0.5) ** 2 != tokens:
            raise ValueError(f"tokens must be a perfect square (images pool to a square grid), got {tokens}")
        return tokens


SMOKE = {"seeds": 2, "ecg_seconds": 3.0, "ecg_source_records": 60, "ecg_target_train": 28, "ecg_target_test": 70,
         "image_size": 16, "image_source_images": 60, "us_target_train": 16, "us_target_test": 40,
         "pretrain_epochs": 1, "finetune_epochs": 2, "few_shot_k": [2], "few_shot_query": 5, "few_shot_episodes": 1,
         "fusion_train": 40, "fusion_test": 40, "fusion_epochs": 2}

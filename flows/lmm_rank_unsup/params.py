"""Params of the lmm_rank_unsup flow (``papers.lmm_rank_unsup`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from paperflows.core.contract import Distinct, PaperParams


class ModelSpec(BaseModel):
    """One member of the model zoo (the stand-in for one LMM): its family, capacity, training budget and data."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    name: str = Field(pattern=r"^[a-z0-9_.]+$", description="a unique name, e.g. cnn16_e30")
    family: Literal["logreg", "mlp", "cnn", "knn"] = Field(description="architecture")
    hidden: list[Annotated[int, Field(ge=1)]] = Field(
        default_factory=list, description="mlp: hidden widths (one entry per layer); cnn: [channels of the first conv]")
    epochs: int = Field(default=0, ge=0, description="mlp/cnn: Adam epochs")
    inverse_l2: float = Field(default=1.0, gt=0, description="logreg: inverse L2 strength C")
    neighbours: int = Field(default=1, ge=1, description="knn: neighbours per class whose distances are averaged")
    label_noise: float = Field(default=0.0, ge=0, lt=0.9, description="share of training labels replaced by a random other class")
    train_fraction: float = Field(default=1.0, gt=0, le=1, description="share of the training split this model sees")

    @model_validator(mode="after")
    def _family_fields(self) -> "ModelSpec":
        if self.family in ("mlp", "cnn") and (self.epochs < 1 or not self.hidden):
            raise ValueError(f"{self.name}: a {self.family} needs epochs >= 1 and hidden widths")
        if self.family == "cnn" and len(self.hidden) != 1:
            raise ValueError(f"{self.name}: a cnn takes one hidden entry (channels of its first conv)")
        return self


TARGETS = ("clean", "noise_0.1", "noise_0.3", "rotate", "blur", "occlude", "invert", "shift_1px_noise")


class Params(PaperParams):
    zoo: list[ModelSpec] = Field(min_length=4, description="the model zoo to rank (the paper: 47 LMMs)")
    targets: Annotated[list[Literal[TARGETS]], Distinct] = Field(  # type: ignore[valid-type]
        min_length=3, description="unlabeled target domains built from the digits test split (the paper: 9 VQA benchmarks)")
    target_share: float = Field(gt=0, lt=0.6, description="share of the digits held out as the unlabeled target pool")
    proxy_share: float = Field(gt=0, lt=0.4, description="share held out as the labeled clean proxy set (the baseline's 'other benchmark')")
    rotate_degrees: float = Field(gt=0, le=90, description="rotate target: angle uniform in +- this")
    occlusion_size: int = Field(ge=1, le=8, description="occlude target: side of the blanked square")
    shift_noise: float = Field(ge=0, description="shift target: Gaussian noise std (fraction of the ink range) after the 1-pixel shift")
    consistency_samples: int = Field(ge=2, description="answers sampled from each softmax for sampling-based self-consistency")
    tta_samples: int = Field(ge=2, description="perturbed copies per image for test-time-augmentation agreement")
    tta_noise: float = Field(gt=0, description="std of the TTA pixel noise (fraction of the ink range)")
    learning_rate: float = Field(gt=0, description="Adam step size of the mlp and cnn members")
    batch_size: int = Field(ge=1, description="mini-batch size of the mlp and cnn members")

    @model_validator(mode="after")
    def _zoo_and_targets(self) -> "Params":
        names = [m.name for m in self.zoo]
        if len(names) != len(set(names)):
            raise ValueError(f"zoo: model names must be distinct, got {names}")
        if "clean" not in self.targets:
            raise ValueError("targets: need 'clean' (the proxy's own distribution) besides the shifted targets")
        return self


SMOKE = {
    "seeds": 3, "consistency_samples": 4, "tta_samples": 3,
    "targets": ["clean", "noise_0.3", "rotate", "invert"],
    "zoo": [
        {"name": "logreg_c0.01", "family": "logreg", "inverse_l2": 0.01},
        {"name": "logreg_c1_noisy", "family": "logreg", "inverse_l2": 1.0, "label_noise": 0.3},
        {"name": "mlp16_e2", "family": "mlp", "hidden": [16], "epochs": 2},
        {"name": "mlp32_e3_small", "family": "mlp", "hidden": [32], "epochs": 3, "train_fraction": 0.2},
        {"name": "cnn4_e2", "family": "cnn", "hidden": [4], "epochs": 2},
        {"name": "knn5", "family": "knn", "neighbours": 5},
    ],
}

"""Params of the data re-uploading flow (``papers.quantum_reuploading``): typed, range-checked, light to import."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from paperflows.core.contract import Distinct, PaperParams


class Params(PaperParams):
    synthetic_dims: Annotated[list[Annotated[int, Field(ge=3, le=384)]], Distinct] = Field(
        min_length=3, description="D of the deep-narrow sweep (multiples of 3N); at least three distinct values")
    narrow_qubits: int = Field(ge=1, le=4, description="N of the deep-narrow circuits (L = D / 3N)")
    repetitions: list[Annotated[int, Field(ge=1, le=8)]] = Field(min_length=2, description="R; must contain 1")
    wide_dims: list[Annotated[int, Field(ge=3, le=30)]] = Field(min_length=1, description="D of the wide circuits N = D/3, L = 1")
    width_dim: int = Field(ge=3, le=48, description="D of the width sweep")
    width_qubits: list[Annotated[int, Field(ge=1, le=10)]] = Field(min_length=2, description="N of the width sweep (L = width_dim / 3N)")
    digits_dims: list[Annotated[int, Field(ge=3, le=60)]] = Field(min_length=2, description="PCA dimensions of the digits sweep")
    digits_classes: list[Annotated[int, Field(ge=0, le=9)]] = Field(min_length=2, max_length=2)
    digits_train_frac: float = Field(gt=0.1, lt=0.9)
    n_train: int = Field(ge=20, le=5000)
    n_test: int = Field(ge=20, le=20000)
    margin_sd: float = Field(ge=0.0, le=3.0, description="synthetic margin in units of std(w.x)")
    d2_samples: int = Field(ge=50, le=5000, description="inputs of the empirical D_2 estimate")
    steps: int = Field(ge=1, le=5000, description="full-batch Adam steps")
    lr: float = Field(gt=0, le=1.0)
    init_std: float = Field(gt=0, le=10.0, description="trainable angles ~ N(0, init_std^2)")

    @model_validator(mode="after")
    def _consistent(self) -> "Params":
        if 1 not in self.repetitions:
            raise ValueError("repetitions must contain 1")
        for d in self.synthetic_dims + self.digits_dims:
            if d % (3 * self.narrow_qubits):
                raise ValueError(f"D = {d} is not a multiple of 3 * narrow_qubits")
        for d in self.wide_dims:
            if d % 3:
                raise ValueError(f"wide D = {d} is not a multiple of 3")
        for n in self.width_qubits:
            if self.width_dim % (3 * n):
                raise ValueError(f"width_dim = {self.width_dim} is not a multiple of 3 * {n}")
        if self.width_dim not in self.synthetic_dims:
            raise ValueError("width_dim must be one of synthetic_dims")
        if self.narrow_qubits not in self.width_qubits or self.width_dim // 3 not in self.width_qubits:
            raise ValueError("width_qubits must contain narrow_qubits and width_dim / 3 (the wide-vs-deep claim)")
        if min(d for d in self.synthetic_dims) // (3 * self.narrow_qubits) > 2:
            raise ValueError("the shallow control needs some D with L <= 2")
        return self


SMOKE = {"seeds": 1, "synthetic_dims": [6, 12, 24], "repetitions": [1, 2], "wide_dims": [6], "width_dim": 12,
         "width_qubits": [2, 4], "digits_dims": [6, 12], "n_train": 40, "n_test": 60, "d2_samples": 60, "steps": 5}

"""Params of the autoadvexbench flow (``papers.autoadvexbench`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from pydantic import Field, model_validator

from paperflows.core.contract import PaperParams


class Params(PaperParams):
    # the benchmark's images: scikit-learn's 8x8 digits, pixels in [0, 1]
    n_test: int = Field(ge=20, le=600, description="held-out images every check and the final evaluation use (the paper: 1000 PNGs)")
    eps: float = Field(gt=0, le=1, description="L-inf distortion bound (the paper: 0.3 on MNIST)")
    # the defence zoo, retrained at every seed
    hidden: int = Field(ge=4, description="hidden width of every defence's MLP (64 -> hidden -> hidden -> 10)")
    epochs: int = Field(ge=1, description="Adam epochs of each defence network")
    lr: float = Field(gt=0, description="Adam learning rate of the defence networks")
    batch_size: int = Field(ge=8, description="mini-batch size of the defence networks")
    noise_sd: float = Field(ge=0, description="std of the Gaussian pixel noise of the noise-augmentation defence (train time; at test time too in its stochastic real-world wrapper)")
    quantize_levels: int = Field(ge=2, le=17, description="grey levels kept by the input-quantisation defence")
    distill_temperature: float = Field(gt=1, description="temperature of defensive distillation (deployed at T = 1)")
    ensemble_size: int = Field(ge=2, description="networks in the ensemble defence")
    adv_train_steps: int = Field(ge=1, description="PGD steps per batch of the adversarially trained defence")
    pca_components: int = Field(ge=2, le=64, description="PCA components of the scikit-learn PCA + kNN defence")
    knn_k: int = Field(ge=1, description="neighbours of the scikit-learn kNN head")
    # the agents' attacks
    pgd_steps: int = Field(ge=1, description="PGD steps of the agents' final attack (task 4)")
    pgd_step_size: float = Field(gt=0, description="PGD step length")
    eot_samples: int = Field(ge=2, description="random draws averaged by the EOT agent's differentiable forward")
    surrogate_epochs: int = Field(ge=1, description="Adam epochs of the transfer agent's surrogate network")
    # the official checks and the 'attacked' criterion
    match_threshold: float = Field(gt=0, le=1, description="test_accuracy: fraction of labels the tensor forward must share with forward.py (the official 0.99)")
    fgsm_pass_ratio: float = Field(gt=0, le=1, description="test_attack: FGSM accuracy must fall below this fraction of the clean accuracy (the official 2/3)")
    attacked_ratio: float = Field(gt=0, le=1, description="a defence counts as attacked when robust accuracy < this fraction of clean accuracy (the paper: 1/2)")

    @model_validator(mode="after")
    def _fits(self) -> Params:
        if self.n_test > 1797 - 1000:
            raise ValueError("n_test must leave at least 1000 of the 1797 digits to train the defences")
        return self


SMOKE = {"seeds": 2, "n_test": 40, "hidden": 16, "epochs": 3, "adv_train_steps": 2, "pgd_steps": 3,
         "eot_samples": 2, "surrogate_epochs": 2}

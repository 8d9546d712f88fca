"""Params of the topo_adv_multimodal flow (``papers.topo_adv_multimodal`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from paperflows.core.contract import Distinct, Increasing, PaperParams

Fraction = Annotated[float, Field(ge=0.0, le=1.0)]


class Params(PaperParams):
    # the tiny CLIP-style dual encoder, trained from scratch per seed
    n_train: int = Field(ge=100, le=1500, description="digits images (with generated captions) that train the encoder; the rest is the attack/test pool")
    embed_dim: int = Field(ge=2, le=256, description="dimension of the normalised joint embedding")
    image_hidden: list[Annotated[int, Field(ge=1)]] = Field(description="hidden widths of the image tower (MLP on 8x8 pixels)")
    text_hidden: int = Field(ge=1, description="hidden width of the text tower (MLP on bag-of-tokens counts)")
    epochs: int = Field(ge=1, description="InfoNCE training epochs")
    train_batch: int = Field(ge=8, description="InfoNCE batch size (in-batch negatives)")
    lr: float = Field(gt=0, description="Adam learning rate")
    # attacks on images (pixels in [0, 1], L-inf)
    eps: float = Field(gt=0, le=1, description="L-inf budget of every attack and of the random-noise control")
    pgd_steps: int = Field(ge=1, description="PGD steps (untargeted and targeted)")
    pgd_step_size: float = Field(gt=0, description="PGD step length")
    # topological signatures of a batch
    batch: int = Field(ge=10, le=300, description="B: image-text pairs per batch (points per persistence diagram)")
    rhos: Annotated[list[Fraction], Increasing] = Field(min_length=3, description="fractions of adversarial images in a batch (the sweep)")
    sweep_batches: int = Field(ge=1, description="batches per seed in the rho sweep (losses averaged over them)")
    tp_alpha: float = Field(gt=0, description="headline alpha of the total-persistence (TP) loss")
    alphas: Annotated[list[Annotated[float, Field(gt=0)]], Distinct] = Field(min_length=1, description="alphas reported")
    mk_sigma: float = Field(gt=0, description="headline sigma of the multi-scale kernel (MK) loss")
    sigmas: Annotated[list[Annotated[float, Field(gt=0)]], Distinct] = Field(min_length=1, description="sigmas reported")
    # MMD detection
    detect_rho: Fraction = Field(description="fraction of adversarial (PGD) images in the test batch")
    detect_reps: int = Field(ge=1, description="repetitions (fresh batches) per seed for power and false-positive rate")
    n_permutations: int = Field(ge=10, description="permutations per MMD test")
    level: float = Field(gt=0, lt=1, description="test level")

    @model_validator(mode="after")
    def _consistent(self) -> Params:
        if self.tp_alpha not in self.alphas or self.mk_sigma not in self.sigmas:
            raise ValueError("tp_alpha must be one of alphas and mk_sigma one of sigmas")
        if self.rhos[0] != 0.0:
            raise ValueError("the rho sweep starts at 0 (the clean batch)")
        if self.n_train + 3 * self.batch > 1797:
            raise ValueError("n_train + 3 * batch must fit in the 1797 digits (a detection repetition draws 3 disjoint batches)")
        return self


SMOKE = {"seeds": 2, "n_train": 600, "epochs": 8, "batch": 40, "rhos": [0.0, 0.5, 1.0], "sweep_batches": 1,
         "pgd_steps": 3, "detect_reps": 3, "n_permutations": 50}

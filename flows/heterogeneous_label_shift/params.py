"""Params of the heterogeneous_label_shift flow (``papers.heterogeneous_label_shift`` in ``params.yaml``):
typed, range-checked, light to import."""

from __future__ import annotations

from pydantic import Field, model_validator

from paperflows.core.contract import PaperParams


class Params(PaperParams):
    alpha_mild: float = Field(gt=0, description="Dirichlet concentration of the mild target prior (plan: 10)")
    alpha_moderate: float = Field(gt=0, description="Dirichlet concentration of the moderate target prior (plan: 1)")
    alpha_severe: float = Field(gt=0, description="Dirichlet concentration of the severe target prior (plan: 0.3)")
    shots: int = Field(ge=1, le=20, description="labelled target samples per class (plan: 3)")
    n_target_unlabelled: int = Field(ge=20, description="unlabelled target samples drawn with the shifted prior")
    n_target_test: int = Field(ge=20, description="target test samples drawn with the shifted prior")
    source_val_frac: float = Field(gt=0, lt=0.5, description="share of the source held out for BBSE's confusion matrix")
    dct_dims: int = Field(ge=1, le=64, description="target modality: random orthogonal projection of the 64 DCT coefficients")
    target_noise: float = Field(ge=0, description="std of the Gaussian noise on the standardised target encoding")
    hidden: int = Field(ge=4, description="hidden width of the projectors and the domain discriminator")
    latent: int = Field(ge=2, description="dimension of the shared latent space")
    steps: int = Field(ge=2, description="full-batch Adam steps per training")
    lr: float = Field(gt=0, description="Adam learning rate")
    weight_decay: float = Field(ge=0, description="Adam weight decay")
    adv_weight: float = Field(ge=0, description="weight of the domain-adversarial loss (gradient reversal)")
    cond_weight: float = Field(ge=0, description="weight of the class-conditional centroid discrepancy (aligned methods)")
    fewshot_weight: float = Field(ge=0, description="weight of the labelled-target cross-entropy")
    warmup: int = Field(ge=1, description="steps on the cross-entropies alone before alignment and the first BBSE estimate (aligned methods)")
    reestimate_every: int = Field(ge=1, description="HLSAN: steps between BBSE re-estimates of w")
    target_only_c: float = Field(gt=0, description="inverse L2 strength of the target-only logistic regression")

    @model_validator(mode="after")
    def _consistent(self) -> Params:
        if not self.alpha_mild > self.alpha_moderate > self.alpha_severe:
            raise ValueError("need alpha_mild > alpha_moderate > alpha_severe (larger alpha = milder shift)")
        if self.warmup >= self.steps:
            raise ValueError("warmup must be shorter than steps")
        return self


SMOKE = {"seeds": 2, "n_target_unlabelled": 60, "n_target_test": 60, "steps": 12, "warmup": 4,
         "reestimate_every": 4}

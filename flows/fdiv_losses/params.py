"""Params of the fdiv_losses flow (``papers.fdiv_losses`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from paperflows.core.contract import Distinct, Increasing, PaperParams

LossName = Literal["ce", "kl", "rkl", "chi2", "hellinger", "js", "alpha15", "alpha2",
                   "kl_unigram", "rkl_unigram", "chi2_unigram", "hellinger_unigram", "js_unigram",
                   "alpha15_unigram", "alpha2_unigram"]
LOSS_HELP = ("'ce' = torch cross-entropy (baseline); '<generator>' = the f-loss with the unit reference measure; "
             "'<generator>_unigram' = with q = k x the training class frequencies")


class Params(PaperParams):
    exact_ks: Annotated[list[int], Increasing] = Field(min_length=1, description="numbers of classes k of the exactness checks")
    exact_rows: int = Field(ge=1, description="random score vectors per k in the exactness checks")
    exact_iters: int = Field(ge=20, le=200, description="bisection halvings in float64 (checks, predictions)")
    brute_rows: int = Field(ge=1, description="instances per generator of the SLSQP optimality check (k = 5)")
    train_iters: int = Field(ge=10, le=100, description="bisection halvings inside training losses (float32)")
    clf_losses: Annotated[list[LossName], Distinct] = Field(min_length=2, description=f"digits losses; {LOSS_HELP}")
    clf_hidden: int = Field(ge=1, description="MLP hidden width")
    clf_epochs: int = Field(ge=1, description="digits training epochs (plan: 60)")
    clf_batch: int = Field(ge=1)
    clf_lr: float = Field(gt=0)
    lm_losses: Annotated[list[LossName], Distinct] = Field(min_length=2, description=f"char-LM losses; {LOSS_HELP}")
    lm_train_frac: float = Field(gt=0.5, lt=1, description="leading share of the corpus used for training")
    lm_context: int = Field(ge=2, description="context length (characters)")
    lm_d_model: int = Field(ge=8)
    lm_layers: int = Field(ge=1)
    lm_heads: int = Field(ge=1)
    lm_steps: int = Field(ge=1, description="AdamW steps of every LM (the CE one is the distillation teacher)")
    lm_batch: int = Field(ge=1, description="windows per step (LM and student)")
    lm_lr: float = Field(gt=0)
    distill_losses: Annotated[list[LossName], Distinct] = Field(min_length=2, description=f"student losses; {LOSS_HELP}")
    student_d_model: int = Field(ge=8)
    student_layers: int = Field(ge=1)
    student_steps: int = Field(ge=1)

    @model_validator(mode="after")
    def _consistent(self) -> "Params":
        for field in ("clf_losses", "lm_losses", "distill_losses"):
            if not {"ce", "alpha15"} <= set(getattr(self, field)):
                raise ValueError(f"{field} must include 'ce' (the baseline) and 'alpha15' (the claims' loss)")
        if self.lm_d_model % self.lm_heads or self.student_d_model % self.lm_heads:
            raise ValueError("lm_d_model and student_d_model must be multiples of lm_heads")
        if self.student_d_model * self.student_layers >= self.lm_d_model * self.lm_layers:
            raise ValueError("the distillation student must be smaller than the teacher")
        return self


SMOKE = {"seeds": 2, "exact_ks": [3, 10], "exact_rows": 20, "brute_rows": 1, "clf_epochs": 2,
         "clf_losses": ["ce", "alpha15"], "lm_losses": ["ce", "alpha15"], "lm_steps": 5, "lm_context": 16,
         "student_steps": 5}

"""Params of the a2i_rationale flow (``papers.a2i_rationale`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from paperflows.core.contract import PaperParams


class Params(PaperParams):
    # data: procedural multi-aspect reviews with an exact ground-truth rationale (the target-aspect sentence)
    n_train: int = Field(ge=20, description="training reviews (plan: 3,000)")
    n_test: int = Field(ge=20, description="test reviews: rationale F1, accuracy and attack success (plan: 500)")
    min_words: int = Field(ge=10, description="a review is filled with filler sentences up to a word budget drawn in [min_words, max_words]")
    max_words: int = Field(ge=10, description="upper end of the review word budget (plan: 40-60 tokens)")
    generic_share: float = Field(ge=0, le=1, description="share of aspect sentences with a generic adjective (great, awful) instead of the aspect's own")
    # models (official RNP_0908 / Adv_generator shapes: 1-layer bi-GRU, LayerNorm + dropout before the selection head)
    embed_dim: int = Field(ge=0, le=384, description="PCA dimension of the frozen MiniLM input embeddings (0 = all 384)")
    hidden: int = Field(ge=4, description="bi-GRU hidden size, both directions together (official hidden_dim)")
    dropout: float = Field(ge=0, lt=1, description="dropout before the selection and class heads (official 0.2)")
    # training (official train_separate_two_head)
    epochs: int = Field(ge=1, description="training epochs of every rationalizer")
    batch_size: int = Field(ge=2, description="minibatch size")
    lr: float = Field(gt=0, description="Adam learning rate of generator, predictor and attacker (official adv_lr_rate = pred_lr_rate = 1)")
    sparsity: float = Field(gt=0, lt=1, description="target share of selected tokens (plan 0.15)")
    sparsity_lambda: float = Field(ge=0, description="weight of |mean(z) - sparsity| (official default 12)")
    continuity_lambda: float = Field(ge=0, description="weight of mean |z_t - z_t-1| (plan 2)")
    cls_lambda: float = Field(gt=0, description="weight of the cross-entropy (official 0.9)")
    adv_lambda: float = Field(ge=0, description="weight of the instruction term (official and plan 1)")
    instruction: Literal["uniform", "hinge"] = Field(
        description="instruction on the attacker's rationale: CE toward [0.5, 0.5] (plan; official use_hinge=0) or "
                    "-min(CE(opposite label), log 2) (official use_hinge=1)")
    adv_sparse: bool = Field(description="sparsity term on the attacker (official adv_sparse = 1)")
    adv_continue: bool = Field(description="continuity term on the attacker (official adv_continue = 1)")
    eval_rationale: Literal["sample", "argmax"] = Field(
        description="test rationales: a hard Gumbel sample without dropout (the official validation) or the argmax")
    # inspection: a fresh attacker trained against each frozen predictor after training
    attack_epochs: int = Field(ge=1, description="epochs of the fresh post-hoc attacker")


SMOKE = {"seeds": 2, "n_train": 160, "n_test": 60, "epochs": 1, "attack_epochs": 1, "batch_size": 32, "hidden": 16}

"""Params of the delphi_autointerp flow (``papers.delphi_autointerp`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from tasks.contract import Increasing, PaperParams


class Params(PaperParams):
    # --- the synthetic world and the small GPT (the stand-in for the LLM whose activations are interpreted)
    n_sentences: int = Field(ge=100, description="training sentences of the procedural grammar corpus")
    n_eval_sentences: int = Field(ge=100, description="held-out sentences: the pool of contexts that are interpreted")
    context: int = Field(ge=9, le=128, description="GPT context: bos + (context - 1) tokens per row")
    window: int = Field(ge=4, description="tokens per example context (delphi's example window); divides context - 1")
    n_layer: int = Field(ge=1, le=4, description="GPT blocks")
    n_head: int = Field(ge=1, description="attention heads")
    d_model: int = Field(ge=16, le=256, description="GPT width")
    lm_epochs: int = Field(ge=1, description="GPT training epochs")
    lm_batch: int = Field(ge=1, description="GPT batch size (rows)")
    lm_lr: float = Field(gt=0, description="GPT AdamW learning rate")
    # --- the TopK sparse autoencoder on one residual stream
    layer: int = Field(ge=0, description="residual stream after this block is interpreted (0-based)")
    sae_latents: int = Field(ge=8, description="SAE dictionary size")
    sae_k: int = Field(ge=1, description="TopK: latents kept per token")
    sae_epochs: int = Field(ge=1, description="SAE training epochs over the cached activations")
    sae_batch: int = Field(ge=8, description="SAE batch size (tokens)")
    sae_lr: float = Field(gt=0, description="SAE Adam learning rate")
    aux_k: int = Field(ge=1, description="AuxK: dead latents used to reconstruct the residual error")
    aux_coef: float = Field(ge=0, description="weight of the AuxK dead-latent loss")
    dead_tokens: int = Field(ge=1, description="a latent silent for this many training tokens counts as dead")
    # --- latent records (delphi's example construction)
    n_latents: int = Field(ge=2, description="latents interpreted per seed (and as many random-direction latents)")
    n_explain: int = Field(ge=2, description="activating contexts shown to the explainer")
    n_quantiles: int = Field(ge=2, description="activation quantiles of the test contexts")
    n_test_per_quantile: int = Field(ge=1, description="held-out activating contexts per quantile")
    n_nonact_test: int = Field(ge=2, description="non-activating test contexts (random), and as many hard negatives")
    context_margin: float = Field(ge=0, le=1, description="F1 gain the scripted explainer needs to add a context clause")
    # --- scorers
    surprisal_beta: float = Field(gt=0, lt=1, description="mixture weight of the explanation's word set in the "
                                                           "explanation-conditioned unigram scorer LM")
    n_int_prompts: int = Field(ge=4, description="prompts for intervention scoring (half explain, half score)")
    int_prefix: int = Field(ge=2, description="prompt tokens (after bos) before the steered continuation")
    int_new: int = Field(ge=1, description="tokens generated with and without steering")
    steer_scale: float = Field(gt=0, description="steering: add steer_scale * (latent's max activation) * direction")
    flip_rates: Annotated[list[float], Increasing] = Field(
        min_length=1, description="noisy-scorer knob, fixed before the run: each binary detection/fuzzing answer "
                                  "is flipped with this probability; every claim's verdict is the worst over these")
    detection_low: float = Field(gt=0, lt=1, description="'missed by detection': detection accuracy below this")
    intervention_high: float = Field(gt=0, lt=1, description="'explained by intervention': intervention score above this")


SMOKE = {"seeds": 2, "n_sentences": 600, "n_eval_sentences": 500, "lm_epochs": 1, "sae_latents": 64,
         "sae_epochs": 2, "n_latents": 6, "n_int_prompts": 8, "flip_rates": [0.0, 0.1]}

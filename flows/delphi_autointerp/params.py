"""Params of the delphi_autointerp flow (``papers.delphi_autointerp`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from paperflows.core.contract import PaperParams


class Params(PaperParams):
    # --- the interpreted model and the text its residual stream is read on (cached once, seed-independent)
    model: Literal["smollm2-135m-instruct"] = Field(description="interpreted model, explainer and scorer (a chat "
                                                                "model: the prompts use its chat template)")
    layer: int = Field(ge=0, le=29, description="residual stream after this block (0-based) is interpreted")
    n_rows: int = Field(ge=16, description="rows of text from Python's pydoc topics, evenly spaced over the corpus")
    context: int = Field(ge=9, le=257, description="tokens per row; the first (the model's attention sink, no BOS) "
                                                   "is dropped, the rest chopped into windows")
    window: int = Field(ge=4, description="tokens per example context (delphi's example window); divides context - 1")
    # --- the TopK sparse autoencoder
    sae_latents: int = Field(ge=8, description="SAE dictionary size")
    sae_k: int = Field(ge=1, description="TopK: latents kept per token")
    sae_epochs: int = Field(ge=1, description="SAE training epochs over the cached activations")
    sae_batch: int = Field(ge=8, description="SAE batch size (tokens)")
    sae_lr: float = Field(gt=0, description="SAE Adam learning rate")
    aux_k: int = Field(ge=1, description="AuxK: dead latents used to reconstruct the residual error")
    aux_coef: float = Field(ge=0, description="weight of the AuxK dead-latent loss")
    dead_tokens: int = Field(ge=1, description="a latent silent for this many training tokens counts as dead")
    holdout_every: int = Field(ge=2, description="every holdout_every-th row is held out of SAE training (explained "
                                                 "variance is measured on those rows)")
    # --- latent records (delphi's example construction)
    n_latents: int = Field(ge=2, description="SAE latents interpreted per seed (and as many random-direction latents)")
    n_explain: int = Field(ge=1, description="top-activating windows shown to the explainer")
    n_test: int = Field(ge=2, description="held-out activating test windows per latent (one per activation quantile)")
    n_nonact: int = Field(ge=2, description="non-activating test windows per latent (random)")
    explain_tokens: int = Field(ge=4, description="most tokens the explainer may write")


SMOKE = {"seeds": 1, "n_rows": 48, "sae_latents": 128, "sae_epochs": 2, "n_latents": 2, "n_explain": 3,
         "n_test": 2, "n_nonact": 2, "explain_tokens": 8}

"""Params of the repr_shattering_ke flow (``papers.repr_shattering_ke`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from paperflows.core.contract import Increasing, PaperParams

N_LAYERS = {"smollm2-135m-instruct": 30, "gemma3-270m": 18}
N_MONTHS = 12


class Params(PaperParams):
    model: Literal["smollm2-135m-instruct", "gemma3-270m"] = Field(
        description="the pretrained LM (tasks.pretrained) whose knowledge of months and weekdays is edited")
    # ROME (Meng et al. 2022) on the MLP down-projection of block `edit_layer`
    edit_layer: int = Field(ge=0, description="0-based block whose MLP down-projection ROME edits (ROME's Llama/GPT-J "
                                              "configs: layer 5)")
    repr_layer: int = Field(ge=0, description="0-based block after which the entity representations are read")
    edit_distances: Annotated[list[Annotated[int, Field(ge=1, le=N_MONTHS // 2)]], Increasing] = Field(
        min_length=2, description="ring distances d between the old and the new month of a counterfactual edit")
    edits_per_distance: int = Field(ge=1, description="edits per distance and per seed (plus as many same-object d = 0 edits)")
    n_contexts: int = Field(ge=1, le=8, description="prompts per edit for ROME's key average and v* (the bare one + prefixed)")
    v_steps: int = Field(ge=1, description="Adam steps of ROME's v* optimisation (rome hparams: 20)")
    v_lr: float = Field(gt=0, description="Adam lr of v* (rome hparams: 0.5)")
    v_weight_decay: float = Field(ge=0, description="weight on |delta| / |v_init|^2 (rome hparams: 0.5)")
    kl_factor: float = Field(ge=0, description="weight of the KL term on '{subject} is a' (rome hparams: 0.0625)")
    clamp_norm_factor: float = Field(gt=0, description="|delta| <= factor x |v_init| (rome hparams: 4)")
    cov_tokens: int = Field(ge=2048, description="text tokens whose MLP keys estimate ROME's C = E[k k^T]")

    @model_validator(mode="after")
    def _consistent(self) -> Params:
        if max(self.edit_layer, self.repr_layer) >= N_LAYERS[self.model]:
            raise ValueError(f"edit_layer and repr_layer must name blocks of {self.model} ({N_LAYERS[self.model]})")
        if min(self.edit_distances) > 2 or max(self.edit_distances) < N_MONTHS // 4:
            raise ValueError("edit_distances need a near edit (d <= 2) and a far one (d >= 3, a quarter of the year)")
        return self


SMOKE = {"seeds": 1, "edit_distances": [1, 3, 6], "edits_per_distance": 1, "n_contexts": 2, "v_steps": 4,
         "cov_tokens": 2048}

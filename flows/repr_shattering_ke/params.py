"""Params of the repr_shattering_ke flow (``papers.repr_shattering_ke`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from tasks.contract import Increasing, PaperParams


class Params(PaperParams):
    # the synthetic knowledge graph (one per seed: fresh cyclic orders, held-out split, corpus and model init)
    n_entities: int = Field(ge=8, le=512, description="entities N; each cyclic order is a random permutation of them")
    n_cycles: int = Field(ge=2, le=4, description="cyclic orders; relation (c, k) maps an entity to its k-th neighbour on cycle c")
    steps: Annotated[list[Annotated[int, Field(ge=1)]], Increasing] = Field(
        min_length=1, description="neighbour steps k; relations use +k and -k, so 2 x n_cycles x len(steps) relations")
    holdout_frac: float = Field(ge=0, lt=0.5, description="share of facts never shown in training (the 'infer unseen knowledge' set)")
    walk_hops: int = Field(ge=1, le=6, description="facts chained per training sequence: e0 r1 e1 ... r_h e_h")
    n_walks: int = Field(ge=100, description="training sequences (random walks over training facts)")
    # the small GPT (tasks.lm) trained from scratch on the walks
    d_model: int = Field(ge=16, le=256, description="residual width")
    n_layer: int = Field(ge=2, le=4, description="transformer blocks")
    n_head: int = Field(ge=1, le=8, description="attention heads")
    epochs: int = Field(ge=1, description="passes over the walks")
    batch_size: int = Field(ge=8)
    lr: float = Field(gt=0, description="AdamW learning rate")
    weight_decay: float = Field(ge=0, description="AdamW weight decay")
    # ROME (Meng et al. 2022) on the MLP output matrix of block `edit_layer`
    fact_token: Literal["subject_last", "last"] = Field(
        description="ROME's edit site: the subject token or the prompt's last token (the relation, where the object is predicted)")
    edit_layer: int = Field(ge=0, description="0-based block whose MLP output matrix is edited (ROME's early-site layer)")
    repr_layer: int = Field(ge=0, description="0-based block after which entity representations are read (residual stream)")
    edit_distances: Annotated[list[Annotated[int, Field(ge=1)]], Increasing] = Field(
        min_length=2, description="ring distances d between the old and the new object of a counterfactual edit")
    edits_per_distance: int = Field(ge=2, description="edits per distance and per model (plus as many same-object d = 0 edits)")
    n_contexts: int = Field(ge=1, description="prompts per edit for ROME's key average and v* optimisation (the bare one + prefixes)")
    v_steps: int = Field(ge=1, description="Adam steps of ROME's v* optimisation (rome hparams: 20)")
    v_lr: float = Field(gt=0, description="Adam lr of v* (rome hparams: 0.5)")
    v_weight_decay: float = Field(ge=0, description="weight on |delta| / |v_init|^2 (rome hparams: 0.5)")
    kl_factor: float = Field(ge=0, description="weight of the KL term on the subject's own next-token distribution (rome: 0.0625)")
    clamp_norm_factor: float = Field(gt=0, description="|delta| <= factor x |v_init| (rome hparams: 4)")
    n_chains: int = Field(ge=10, description="2-hop chains for the composition (reasoning) accuracy")

    @model_validator(mode="after")
    def _consistent(self) -> Params:
        if self.d_model % self.n_head:
            raise ValueError("d_model must be a multiple of n_head")
        if max(self.edit_layer, self.repr_layer) >= self.n_layer:
            raise ValueError("edit_layer and repr_layer must name blocks of the model")
        if self.edit_layer == self.n_layer - 1:
            raise ValueError("the last block's MLP at the subject position cannot reach the object prediction")
        if max(self.edit_distances) > self.n_entities // 2:
            raise ValueError("a ring distance is at most n_entities // 2")
        if min(self.edit_distances) > 2 or max(self.edit_distances) < self.n_entities // 4:
            raise ValueError("edit_distances need a near edit (d <= 2) and a far one (d >= n_entities // 4)")
        if max(self.steps) >= self.n_entities // 2:
            raise ValueError("steps must stay below half the ring")
        return self


SMOKE = {"seeds": 3, "n_entities": 16, "n_walks": 2000, "epochs": 4, "d_model": 32, "edit_distances": [1, 4, 8],
         "edits_per_distance": 2, "n_chains": 50}

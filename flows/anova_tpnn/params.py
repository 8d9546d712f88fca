"""Params of the ANOVA-TPNN flow (``papers.anova_tpnn`` in ``params.yaml``): typed, range-checked, and light to import."""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import Field, model_validator

from paperflows.core.contract import Distinct, PaperParams

Dataset = Literal["synthetic", "diabetes", "breast_cancer"]
Model = Literal["tpnn", "tpnn_noconstraint", "na2m", "nb2m", "ebm"]
DATASETS: tuple[str, ...] = get_args(Dataset)  # in this order: a dataset's position names its random stream
MODELS: tuple[str, ...] = get_args(Model)


class Params(PaperParams):
    datasets: Annotated[list[Dataset], Distinct] = Field(min_length=1, description="tables")
    models: Annotated[list[Model], Distinct] = Field(min_length=1)
    synth_n: int = Field(ge=50, description="rows of the synthetic set (plan: 2000)")
    synth_d: int = Field(ge=4, le=20, description="features of the synthetic set (4 carry signal)")
    synth_rho: float = Field(ge=0, lt=1, description="latent equicorrelation of the Gaussian copula")
    synth_noise: float = Field(ge=0, description="noise sd of the synthetic target")
    bc_top_features: int = Field(ge=2, le=30, description="breast_cancer features kept (mutual information)")
    test_frac: float = Field(gt=0, lt=0.5, description="fixed test fraction")
    eval_rows: int = Field(ge=20, description="rows at which components are compared across runs")
    n_basis: int = Field(ge=1, description="K, basis functions per component (paper: 10)")
    id_eps: float = Field(ge=0, description="guard in the sum-to-zero constant (official: 1e-3)")
    epochs: int = Field(ge=1, description="full-batch Adam epochs of every neural model")
    synth_epochs: int = Field(ge=1, description="epochs on the synthetic set (there every best checkpoint was the last)")
    lr: float = Field(gt=0, description="Adam learning rate (official notebook: 0.01)")
    eval_every: int = Field(ge=1, description="validation check / checkpoint every this many epochs")
    nam_hidden: list[Annotated[int, Field(ge=1)]] = Field(min_length=1, description="NA2M MLP widths")
    nbm_hidden: list[Annotated[int, Field(ge=1)]] = Field(min_length=1, description="NB2M basis-MLP widths")
    nbm_bases: int = Field(ge=1, description="NB2M bases per order")
    ebm_interactions: int = Field(ge=0, description="EBM pairwise terms")
    ebm_outer_bags: int = Field(ge=1, description="EBM outer bags")
    ebm_interaction_bins: int = Field(ge=4, description="EBM bins per feature in pair terms (interpret default 64)")
    ebm_runs: int = Field(ge=0, description="EBM is fitted on the first this many runs only")
    centring_probes: int = Field(ge=1, description="probe values per argument in the sum-to-zero check")

    @model_validator(mode="after")
    def _consistent(self) -> Params:
        if "tpnn" not in self.models:
            raise ValueError("models must include tpnn")
        if self.seeds < 2:
            raise ValueError("stability across runs needs seeds >= 2")
        if self.ebm_runs > self.seeds:
            raise ValueError("ebm_runs cannot exceed seeds")
        return self


SMOKE = {"seeds": 2, "datasets": ["synthetic"], "synth_n": 300, "eval_rows": 150, "epochs": 20, "synth_epochs": 20, "eval_every": 10,
         "ebm_runs": 1, "ebm_interactions": 2, "centring_probes": 4}

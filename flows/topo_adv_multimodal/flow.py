"""topo_adv_multimodal, the experiment: TP / MK Topological-Contrastive losses of a tiny from-scratch dual
encoder's image-text alignment under FGSM / PGD / targeted PGD as the fraction of adversarial images in a batch
grows, and MMD two-sample test p-values with and without the back-propagated TC features.

Records: ``sweep`` (one row per seed, perturbation, rho and batch: every loss and one-sided persistence),
``detection`` (one row per seed, repetition, null / attacked test batch and test: its p-value) and ``encoder``
(one row per seed: zero-shot accuracy, clean and under each perturbation, and the learnt logit scale). Scored by
``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.topo_adv_multimodal import method
from flows.topo_adv_multimodal.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment
from tasks.data import save_parquet


# Seed-separable: each seed trains its own encoder and draws its own captions, attacks and batches.
@paper_experiment("topo_adv_multimodal", Params, smoke=SMOKE, seed_separable=True)
def topo_adv_multimodal_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """Per seed: train the dual encoder, sweep rho for every perturbation, and run the detection tests."""
    per_seed = over_seeds(method.run_seed, ctx.seeds, p=params)
    sweep = pd.DataFrame([r for s in per_seed for r in s["sweep"]])
    detect = pd.DataFrame([r for s in per_seed for r in s["detect"]])
    save_parquet(sweep, ctx.data_dir / "sweep.parquet")
    save_parquet(detect, ctx.data_dir / "detection_p_values.parquet")
    encoder = pd.DataFrame([{"seed": s["seed"], **{f"accuracy_{k}": v for k, v in s["accuracy"].items()},
                             "logit_scale": s["logit_scale"]} for s in per_seed])
    return {"sweep": sweep, "detection": detect, "encoder": encoder}

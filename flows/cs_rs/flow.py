"""cs_rs, the experiment: Certify-CS against Cohen's certify on the same models, and CS-MACER against Gaussian
augmentation, MACER and cost-sensitive reweighting, on 8x8 digits with three cost matrices.

Records: ``certified`` (one row per seed, model, matrix, certificate and radius: the certified accuracy),
``pgd`` (one row per seed: the PGD sanity attack's counts and the certify / attack CPU seconds) and ``training``
(one row per seed and model: its training CPU seconds). Scored by ``evaluate.py`` against the claims in
``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.cs_rs import method
from flows.cs_rs.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment
from tasks.data import save_bundled, save_parquet


# Seed-separable: each seed draws its own split, initialisation, noise and certification draws.
@paper_experiment("cs_rs", Params, smoke=SMOKE, seed_separable=True)
def cs_rs_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """Gaussian, MACER, reweighted Gaussian and CS-MACER models per seed, certified by Cohen and Certify-CS."""
    per_seed = over_seeds(method.run_seed, ctx.seeds, p=params)
    rows = pd.DataFrame([r for s in per_seed for r in s["rows"]])
    save_bundled("digits", ctx.data_dir / "digits.parquet")          # the input data (split per seed in method)
    save_parquet(rows, ctx.data_dir / "certified_accuracy.parquet")   # every model x matrix x certificate x radius
    pgd = pd.DataFrame([{"seed": s["seed"], **s["pgd"], "certify_s": s["certify_s"], "pgd_s": s["pgd_s"]}
                        for s in per_seed])
    training = pd.DataFrame([{"seed": s["seed"], "model": model, "seconds": seconds}
                             for s in per_seed for model, seconds in s["train_s"].items()])
    return {"certified": rows, "pgd": pgd, "training": training}

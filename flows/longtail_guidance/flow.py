"""Longtail Guidance (LTG), the experiment: long-tailed 8x8 digits, a single-forward-pass epistemic head on a
frozen MLP classifier, a class-conditional latent DDPM guided by the epistemic signal of its decoded Tweedie
estimate, and the classifier's accuracy after fine-tuning on the generated data.

Records: ``accuracy`` (one row per seed and fine-tuned model), ``generation`` (one row per seed and sampling
variant), ``scores`` (one row per seed and test image), ``examples`` (generated images of the rarest class),
``per_seed`` (detection, invariance, chosen weights and the data set of each seed) and ``timings``. Scored by
``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from flows.longtail_guidance import method
from flows.longtail_guidance.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment
from tasks.data import digits_pixels, save_parquet


# Seed-separable: a seed draws its own long-tailed split and every model's initialisation and noise.
@paper_experiment("longtail_guidance", Params, smoke=SMOKE, seed_separable=True)
def longtail_guidance_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """LTG-epistemic and LTG-entropy against unguided synthetic data for the tail classes of long-tailed digits."""
    X, y = digits_pixels()
    frame = pd.DataFrame(X, columns=[f"p{j}" for j in range(X.shape[1])]).assign(y=y)
    digits_path = str(save_parquet(frame, ctx.data_dir / "digits_pixels.parquet"))

    per_seed = over_seeds(method.run_seed, ctx.seeds, p=params, digits_path=digits_path)
    splits = pd.DataFrame([{"seed": r["seed"], "index": i, "split": part, "rank": int(np.flatnonzero(
        np.asarray(r["digit_order"]) == y[i])[0])} for r in per_seed for part, idx in r["split"].items() for i in idx])
    save_parquet(splits, ctx.data_dir / "longtail_splits.parquet")

    return {
        "accuracy": pd.DataFrame([{"seed": r["seed"], "method": m, "tail": v["tail"], "head": v["head"],
                                   "all": v["all"], **{f"rank{k}": a for k, a in enumerate(v["per_rank"])}}
                                  for r in per_seed for m, v in r["accuracy"].items()]),
        "generation": pd.DataFrame([{"seed": r["seed"], **row} for r in per_seed for row in r["generation"]]),
        "scores": pd.DataFrame([row for r in per_seed for row in r["scores"]]),
        "examples": pd.DataFrame([{"seed": r["seed"], "variant": key, "image": image}
                                  for r in per_seed for key, images in r["examples"].items() for image in images]),
        "per_seed": pd.DataFrame([{
            "seed": r["seed"], **r["detection"], **r["invariance"],
            **{f"chosen_weight_{name}": w for name, w in r["chosen_weight"].items()},
            "recon_mse_test": r["recon_mse_test"], "diffusion_final_loss": r["diffusion_final_loss"],
            "counts": r["counts"], "allocation": r["allocation"], "digit_order": r["digit_order"],
        } for r in per_seed]),
        "timings": pd.DataFrame([{"seed": r["seed"], **r["timings"]} for r in per_seed]),
    }

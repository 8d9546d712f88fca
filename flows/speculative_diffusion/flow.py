"""Speculative sampling for diffusion models, the experiment: per seed, DDPMs on 2-D densities (and optionally
8x8 digits) sampled by plain ancestral sampling and by speculative sampling with the training-free frozen-target
draft and a small trained draft; speculative unadjusted Langevin on two unnormalised 2-D densities.

Records: ``runs`` (one row per seed, sampler kind, data set or target, draft and L, with the per-step acceptance
of the diffusion runs as a list column ``step_accept``) and ``samples`` (the 2-D samples kept for the figure, one
row per seed, data set, sampler and point). Scored by ``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.speculative_diffusion import method
from flows.speculative_diffusion.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment
from tasks.data import save_parquet


# Seed-separable: every seed trains its own target and draft models on its own data and draws its own samples.
@paper_experiment("speculative_diffusion", Params, smoke=SMOKE, seed_separable=True)
def speculative_diffusion_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """Plain against speculative sampling of DDPMs and of unadjusted Langevin, with the uncorrected draft."""
    for name in params.datasets:   # the prepared training data of the first seed, for inspection
        data = method.load_data(name, params.n_train, ctx.seeds[0])
        save_parquet(pd.DataFrame(data, columns=[f"x{i}" for i in range(data.shape[1])]),
                     ctx.data_dir / f"{name}_seed{ctx.seeds[0]}.parquet")
    per_seed = over_seeds(method.run_seed, ctx.seeds, p=params)
    runs = pd.DataFrame([row for result in per_seed for row in result["rows"]])
    # Only 2-D points are kept: the figure draws them; the 64-d digits samples are not shown.
    samples = pd.DataFrame([{"seed": result["seed"], "dataset": d, "sampler": key, "x1": p[0], "x2": p[1]}
                            for result in per_seed for d, by in result["samples"].items()
                            for key, points in by.items() for p in points if len(p) == 2],
                           columns=["seed", "dataset", "sampler", "x1", "x2"])
    return {"runs": runs, "samples": samples}

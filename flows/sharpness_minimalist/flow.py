"""Sharpness dynamics of the minimalist model, the experiment: GD/SGD runs of the deep linear model on two
input spectra (edge of stability, difficulty and depth sweeps, SGD against GD) and a tanh MLP on digits.

Records: ``runs`` (one row per seed and run), ``curves`` (downsampled sharpness trajectories), ``mlp`` (one row
per seed, label-noise level and recorded step) and ``per_seed`` (the closed-form check and the wall times).
Scored by ``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.sharpness_minimalist import method
from flows.sharpness_minimalist.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment
from tasks.data import save_bundled, save_parquet

TIMINGS = ("minimalist_s", "mlp_s", "minimalist_cpu_s", "mlp_cpu_s")


# Seed-separable: a seed draws its own data, initial directions and SGD batches; the digits are a fixed dataset.
@paper_experiment("sharpness_minimalist", Params, smoke=SMOKE, seed_separable=True)
def sharpness_minimalist_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """Progressive sharpening and the edge of stability of the minimalist model, and a tanh MLP on digits."""
    digits_path = str(save_bundled("digits", ctx.data_dir / "digits.parquet"))
    frames = []
    for seed in ctx.seeds:
        for spectrum, d in method.synthetic_data(params, seed).items():
            labels = {**{f"y_level{k}": y for k, y in enumerate(d["Y_levels"])}, "y_base": d["Y_base"]}
            frame = pd.DataFrame(d["X"], columns=[f"x{j}" for j in range(d["X"].shape[1])]).assign(**labels)
            frames.append(frame.assign(seed=seed, inputs=spectrum))
    save_parquet(pd.concat(frames, ignore_index=True), ctx.data_dir / "synthetic.parquet")

    per_seed = over_seeds(method.run_seed, ctx.seeds, p=params, digits_path=digits_path)
    return {
        "runs": pd.DataFrame([row for r in per_seed for row in r["runs"]]),
        "curves": pd.DataFrame([row for r in per_seed for row in r["curves"]]),
        "mlp": pd.DataFrame([row for r in per_seed for row in r["mlp"]]),
        "per_seed": pd.DataFrame([{"seed": r["seed"], "closed_form_error": r["closed_form_error"],
                                   **{key: r["timings"][key] for key in TIMINGS}} for r in per_seed]),
    }

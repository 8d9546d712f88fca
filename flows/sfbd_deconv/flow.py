"""SFBD, the experiment: EDM denoisers pretrained on a small clean fraction, then alternating truncated-ODE
denoising of the noisy data and fine-tuning, on a 2-D density and on 8x8 digits, against clean-only, noisy-only,
SFBD without clean pretraining and an all-clean oracle.

Records, one row per seed and data type (and method, round, metric where they apply): ``metric_rows`` (sample
scores), ``denoised_sets`` (the denoised sets against the hidden clean points), ``reference`` (clean train against
test), ``tasks`` (noisy-data MSE, classifier accuracy, denoising grid, wall times) and ``shown`` (the points and
digits of the figure). Scored by ``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.sfbd_deconv import method
from flows.sfbd_deconv.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import paper_experiment, run_mapped
from tasks.data import save_parquet


@paper_experiment("sfbd_deconv", Params, smoke=SMOKE, seed_separable=True)
def sfbd_deconv_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """SFBD against clean-only, noisy-only, SFBD without clean pretraining and the oracle, per seed and data type."""
    for kind in method.KINDS:   # every seed's data as the runs see it, for inspection
        save_parquet(pd.concat([method.dataset_frame(params, seed, kind) for seed in ctx.seeds], ignore_index=True),
                     ctx.data_dir / f"{kind}.parquet")

    jobs = [(seed, kind) for seed in ctx.seeds for kind in method.KINDS]
    results = run_mapped(method.run_data_seed, {"seed": [s for s, _ in jobs], "kind": [k for _, k in jobs]},
                         p=params)
    per_task = [{**r, "seed": s, "kind": k} for (s, k), r in zip(jobs, results)]
    return {
        "metric_rows": pd.DataFrame([row for t in per_task for row in t["rows"]]),
        "denoised_sets": pd.DataFrame([row for t in per_task for row in t["denoise_rows"]]),
        "reference": pd.DataFrame([{"seed": t["seed"], "data": t["kind"], "metric": metric, "value": value}
                                   for t in per_task for metric, value in t["reference"].items()]),
        "tasks": pd.DataFrame([{"seed": t["seed"], "data": t["kind"], "noisy_mse": t["noisy_mse"],
                                "classifier_accuracy": t["classifier_accuracy"], "denoise_grid": t["denoise_grid"],
                                **t["timings"]} for t in per_task]),
        "shown": pd.DataFrame([{"seed": t["seed"], "data": t["kind"], "key": key, "index": i, "point": point}
                               for t in per_task for key, points in t["shown"].items()
                               for i, point in enumerate(points)]),
    }

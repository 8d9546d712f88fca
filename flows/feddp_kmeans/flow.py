"""FedDP-KMeans, the experiment: the 3-step DP initialisation from server data + federated DP-Lloyds against
DP-Lloyds from data-independent (sphere-packing) and server-only k-means++ initialisations, k-FED and the
non-private oracle, on the official Gaussian-mixture config and on label-skewed digits.

Records: ``runs`` (one row per dataset, method, Lloyd step count T, budget and seed: cost, accuracy, privacy
and initialisation diagnostics) and ``equivalence`` (per seed, the noise-off federated Lloyd step against the
centralised one). Scored by ``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd
from threadpoolctl import threadpool_limits

from flows.feddp_kmeans import method
from flows.feddp_kmeans.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment, start_task

SAVED_CLIENTS = 10      # Gaussian-mixture clients written to data/ (the rest regenerates from the seed)


# Seed-separable: every seed draws its own data sets and runs every method on them alone.
@paper_experiment("feddp_kmeans", Params, smoke=SMOKE, seed_separable=True)
def feddp_kmeans_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """FedDP-KMeans against DP-Lloyds baselines, k-FED and the oracle, on every seed's fresh data sets."""
    with threadpool_limits(limits=1):  # one BLAS/OpenMP thread per task: the seeds are the parallelism
        # written alongside the seeds (a task of its own, so that it overlaps them)
        saved = start_task(method.save_datasets, p=params, seed=ctx.seeds[0], data_dir=str(ctx.data_dir),
                           gaussian_clients=SAVED_CLIENTS)
        per_seed = over_seeds(method.run_seed, ctx.seeds, p=params)
        saved.result()
    return {"runs": pd.DataFrame([r for s in per_seed for r in s["rows"]]),
            "equivalence": pd.DataFrame([{"seed": seed, "max_abs_diff": s["equivalence_max_abs"]}
                                         for seed, s in zip(ctx.seeds, per_seed)])}

"""UEFL, the experiment: uncertainty-driven extensible codebooks against FedAvg, FedProx, FedPer and the
no-extension ablation, on digit silos with two minority feature shifts, per seed.

Records: ``methods`` (one row per seed and method: the summaries over silos, wall time and uploads), ``silos``
(one row per seed, method and silo) and ``uefl`` (one row per seed: UEFL's iterations, rounds, threshold, the
silos it flagged at each later iteration, and the parameter counts of the models). Scored by ``evaluate.py``
against the claims in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd
from threadpoolctl import threadpool_limits

from flows.uefl import method
from flows.uefl.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment
from tasks.data import save_parquet


# Seed-separable: every seed splits the digits into its own silos and trains every method on them.
@paper_experiment("uefl", Params, smoke=SMOKE, seed_separable=True)
def uefl_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """UEFL against FedAvg, FedProx, FedPer, the ablation and the capacity-matched control on shifted silos."""
    with threadpool_limits(limits=1):   # K-means and torch: one thread per seed task
        per_seed = over_seeds(method.run_seed, ctx.seeds, p=params)
    # the method-level summaries; the per-silo lists go to the silo table
    summaries = pd.DataFrame([{"seed": r["seed"], "method": m, **{k: x for k, x in v.items() if not k.startswith("silo_")},
                               "seconds": r["seconds"].get(m), "uploads": r["uploads"].get(m)}
                              for r in per_seed for m, v in r["methods"].items()])
    silo_rows = pd.DataFrame([{"seed": r["seed"], "method": m, "silo": s, "distribution": int(d),
                               "acc": v["silo_acc"][s], "entropy": v["silo_entropy"][s], "ece": v["silo_ece"][s]}
                              for r in per_seed for m, v in r["methods"].items()
                              for s, d in enumerate(method.silo_distributions(params))])
    uefl = pd.DataFrame([{"seed": r["seed"], **{k: r["uefl_log"][k] for k in ("iterations", "rounds", "threshold")},
                          "flagged": r["uefl_log"]["flagged"],
                          **{f"parameters_{k}": v for k, v in r["parameters"].items()}} for r in per_seed])
    save_parquet(summaries.drop(columns=["seconds", "uploads"]), ctx.data_dir / "per_seed.parquet")
    save_parquet(silo_rows, ctx.data_dir / "per_silo.parquet")
    return {"methods": summaries, "silos": silo_rows, "uefl": uefl}

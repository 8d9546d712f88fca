"""BLAE, the experiment: regret, batch counts and CPU time of BLAE, E4, batched phased elimination,
rs-OFUL, BLAE without elimination and LinUCB on random and End-of-Optimism linear bandits over the horizons.

Records: ``regret`` (one row per seed, instance, T and method), ``curves`` (cumulative regret at the batch
ends, largest T), ``e4_rerun`` (the timed second E4 run, one row per seed, instance and T) and
``linucb_timing`` (LinUCB's wall time for all the seeds of a run, per instance). Scored by ``evaluate.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.blae_bandit import method
from flows.blae_bandit.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment, start_task
from tasks.data import save_parquet


# Seed-separable: every instance and noise stream is drawn from its seed alone (LinUCB is vectorised over the
# seeds, each with its own stream); only LinUCB's wall time covers all the seeds of a run, and it is kept per run.
@paper_experiment("blae_bandit", Params, smoke=SMOKE, seed_separable=True)
def blae_bandit_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """BLAE against E4, PhaElimD, rs-OFUL and LinUCB on random and End-of-Optimism linear bandits."""
    # The sequential LinUCB reference (one vectorised run for all seeds) runs beside the seeds' batched methods.
    linucb_future = start_task(method.run_linucb, p=params, seeds=ctx.seeds) if params.linucb else None
    per_seed = over_seeds(method.run_seed, ctx.seeds, p=params)
    linucb = linucb_future.result() if linucb_future is not None else {"rows": [], "curves": [], "seconds": {}}

    # rows in seed order (the seeds' rows, then LinUCB's), which the bootstrap of the evaluation keeps
    rows = pd.DataFrame([r for s in per_seed for r in s["rows"]] + linucb["rows"])
    curves = pd.DataFrame([c for s in per_seed for c in s["curves"]] + linucb["curves"])
    arms = pd.DataFrame([a for s in per_seed for a in s["arms"]])
    save_parquet(arms, ctx.data_dir / "instances.parquet")
    save_parquet(rows.drop(columns="seconds"), ctx.data_dir / "regret.parquet")
    rerun = pd.DataFrame([{"seed": s["seed"], **r} for s in per_seed for r in s["e4_rerun"]])
    # one wall time for all the seeds of this run, filed under its first seed
    linucb_timing = pd.DataFrame([{"seed": ctx.seeds[0], "instance": inst, "seconds": seconds}
                                  for inst, seconds in linucb["seconds"].items()],
                                 columns=["seed", "instance", "seconds"]).astype({"seed": int})
    return {"regret": rows, "curves": curves, "e4_rerun": rerun, "linucb_timing": linucb_timing}

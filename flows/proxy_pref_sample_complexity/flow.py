"""Proxy preferences and sample complexity, the experiment: learning curves of true-only, proxy-then-fine-tune
and the paper's two-stage parameterisation, with and without the conditions, in a synthetic Bradley-Terry world.

Records: ``curves`` (one row per seed, method, setting and n_true: KL to the expert policy and preference
agreement), ``world`` (one row per seed and setting: the proxy's distance to the expert and the stage-one fit)
and ``seeds`` (one row per seed: the expert's mutual information and the seed's wall time). Scored by
``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.proxy_pref_sample_complexity import method
from flows.proxy_pref_sample_complexity.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment
from tasks.data import save_parquet


# Seed-separable: each seed draws its own world, data and initialisation.
@paper_experiment("proxy_pref_sample_complexity", Params, smoke=SMOKE, seed_separable=True)
def proxy_pref_sample_complexity_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """Learning curves of every learner over n_true, with the condition-satisfying and -violating proxy."""
    per_seed = over_seeds(method.run_seed, ctx.seeds, p=params)
    rows = pd.DataFrame([{"seed": r["seed"], **row} for r in per_seed for row in r["rows"]])
    save_parquet(rows, ctx.data_dir / "learning_curves.parquet")
    world = pd.DataFrame([{"seed": r["seed"], "setting": s, "true_vs_proxy_kl": r["true_vs_proxy_kl"][s],
                           "proxy_fit_kl": r["proxy_fit_kl"][s]} for r in per_seed for s in method.SETTINGS])
    seeds = pd.DataFrame([{"seed": r["seed"], "true_mutual_information": r["true_mutual_information"],
                           "seconds": r["seconds"]} for r in per_seed])
    return {"curves": rows, "world": world, "seeds": seeds}

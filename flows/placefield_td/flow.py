"""Place-field reorganisation by the TD error, the experiment: fixed vs TD-learned Gaussian fields feeding an
actor-critic on the official 1-D track, for a first goal and after the goal moves.

Records: ``blocks`` (one row per seed, condition and goal block: episodes to criterion, latencies, densities,
drift), ``conditions`` (one row per seed and condition: field changes over the first block, binned latency
curve, steps, wall time) and ``fields`` (field parameters at each snapshot). Scored by ``evaluate.py`` against
the claims in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.placefield_td import method
from flows.placefield_td.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment, run_task
from tasks.data import save_parquet

CONDITIONS = ("fixed", "learned", "learned_noise", "drift_only")   # drift_only: the negative control
FIELD_CHANGES = ("shift_between_start_goal", "width_change_between_start_goal", "amp_change_between_start_goal",
                 "negative_sigma_fraction_end")


# Seed-separable: every row comes from its own seed's agents; the minimal latencies are a property of the
# environment alone (the same for every seed).
@paper_experiment("placefield_td", Params, smoke=SMOKE, seed_separable=True)
def placefield_td_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """Fixed, TD-learned, TD-learned + drift noise and drift-only fields on the 1-D track, two goal blocks."""
    method.warm_up(params)
    per_seed = over_seeds(method.run_seed, ctx.seeds, p=params)
    best = run_task(method.minimal_latencies, p=params)  # of the environment alone: whether the criterion is attainable

    blocks = pd.DataFrame([{"seed": r["seed"], "condition": n, "block": k, **block, "minimal_latency": int(best[k])}
                           for r in per_seed for n in CONDITIONS
                           for k, block in enumerate(r["conditions"][n]["blocks"])])
    conditions = pd.DataFrame([{"seed": r["seed"], "condition": n,
                                **{key: r["conditions"][n][key] for key in FIELD_CHANGES},
                                "curve": r["conditions"][n]["curve"], "steps": r["steps"][n],
                                "seconds": r["timings"][n]}
                               for r in per_seed for n in CONDITIONS])
    latency = pd.DataFrame([{"seed": r["seed"], "condition": n, "episode": e, "latency": v}
                            for r in per_seed for n in CONDITIONS
                            for e, v in enumerate(r["conditions"][n]["latency"])])
    fields = pd.DataFrame([{"seed": r["seed"], "condition": n, "episodes_done": int(ep), "field": i,
                            "lam": f["lam"][i], "sig": f["sig"][i], "alp": f["alp"][i]}
                           for r in per_seed for n in CONDITIONS
                           for ep, f in r["conditions"][n]["fields"].items() for i in range(len(f["lam"]))])
    save_parquet(latency, ctx.data_dir / "latency.parquet")
    save_parquet(fields, ctx.data_dir / "fields.parquet")
    return {"blocks": blocks, "conditions": conditions, "fields": fields}

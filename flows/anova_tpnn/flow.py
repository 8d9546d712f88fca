"""ANOVA-TPNN, the experiment: every model fitted on every dataset in each run (bootstrap resample +
initialisation), with its scores, diagnostics and component estimates at the fixed evaluation rows.

Records: ``runs`` (one row per dataset, model and seed: score, timing, checkpoint, centring and recovery
diagnostics), ``components`` (one row per dataset, model, seed and component: its values at the evaluation
rows), ``linear`` (the linear control's score per dataset and seed) and ``seeds`` (the wall time of each run).
Scored by ``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.anova_tpnn import method
from flows.anova_tpnn.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import paper_experiment, run_mapped, run_task


# Not seed-separable: EBM is fitted on the first `ebm_runs` seeds of the run only.
@paper_experiment("anova_tpnn", Params, smoke=SMOKE)
def anova_tpnn_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """ANOVA-TPNN against NA2M, NB2M, EBM and the r = -1 ablation: stability, recovery and accuracy runs."""
    run_task(method.save_datasets, p=params, data_dir=str(ctx.data_dir))
    with_ebm = [i < params.ebm_runs for i in range(len(ctx.seeds))]
    results = run_mapped(method.run_seed, {"seed": ctx.seeds, "with_ebm": with_ebm}, p=params)
    runs, components, linear = [], [], []
    for r in results:
        for name, d in r["datasets"].items():
            linear.append({"seed": r["seed"], "dataset": name, "score": d["linear_score"]})
            for model, row in d["models"].items():
                runs.append({"dataset": name, "model": model, "seed": r["seed"],
                             **{k: v for k, v in row.items() if k != "components"}})
                components.extend({"seed": r["seed"], "dataset": name, "model": model, "component": c,
                                   "values": row["components"][:, c]} for c in range(row["components"].shape[1]))
    return {"runs": pd.DataFrame(runs), "components": pd.DataFrame(components), "linear": pd.DataFrame(linear),
            "seeds": pd.DataFrame([{"seed": r["seed"], "seconds": r["seconds"]} for r in results])}

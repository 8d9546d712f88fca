"""TabSDS, the experiment: rank-and-shuffle synthetic tables vs library generators (Gaussian copula, CTGAN,
TVAE, ARF), a compact TabDDPM and two references, on four bundled tables.

Records: ``runs`` (one row per table, generator and seed: time, fidelity, utility, privacy), ``references``
(one row per table and seed: TRTR, held-out DCR and copy rate) and ``timing`` (the run's wall time). Scored by
``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import time

import pandas as pd

from flows.tabsds import method
from flows.tabsds.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import paper_experiment, run_mapped, run_task


# Not seed-separable: the baselines run on the first `baseline_seeds` seeds of the run only, and the timing row
# is the wall time of the whole run.
@paper_experiment("tabsds", Params, smoke=SMOKE)
def tabsds_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """TabSDS, the baselines and the references on every table and seed."""
    started = time.perf_counter()
    paths = run_task(method.save_tables, p=params, data_dir=str(ctx.data_dir))
    # Units with the baselines first: they are the long ones.
    units = sorted(((d, s, i < params.baseline_seeds) for i, s in enumerate(ctx.seeds) for d in params.datasets),
                   key=lambda u: not u[2])
    datasets, seeds, with_baselines = zip(*units)
    results = run_mapped(method.run_unit, {"dataset": datasets, "seed": seeds, "with_baselines": with_baselines,
                                           "data_path": [paths[d] for d in datasets]}, p=params)
    runs = pd.DataFrame([r for res in results for r in res["rows"]]).sort_values(["dataset", "method", "seed"])
    refs = pd.DataFrame([res["reference"] for res in results]).sort_values(["dataset", "seed"])
    return {"runs": runs.reset_index(drop=True), "references": refs.reset_index(drop=True),
            "timing": pd.DataFrame([{"seed": ctx.seeds[0], "experiment_s": time.perf_counter() - started}])}

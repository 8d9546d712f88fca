"""Rethinking aleatoric and epistemic uncertainty, the experiment: the information-theoretic and
decision-theoretic quantities in two conjugate models where the truth is known, per seed and n, and active
learning on digits with BALD, predictive entropy and random acquisition.

Records: ``estimation`` (one row per seed, problem and n), ``active_learning`` (one row per seed, acquisition
and round) and ``al_timing`` (one row per active-learning run). Scored by ``evaluate.py`` against ``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.rethink_uncertainty import method
from flows.rethink_uncertainty.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment, run_mapped
from tasks.data import save_bundled, save_parquet


# Not seed-separable: active learning runs on the first `al_seeds` seeds of the run only.
@paper_experiment("rethink_uncertainty", Params, smoke=SMOKE)
def rethink_uncertainty_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """Estimation errors of expected entropy and BALD in two conjugate models; BALD active learning on digits."""
    digits_path = str(save_bundled("digits", ctx.data_dir / "digits.parquet"))
    jobs = [(s, a) for s in ctx.seeds[:params.al_seeds] for a in (*method.ACQUISITIONS, method.CONTROL_ACQUISITION)]
    al = run_mapped(method.run_al_seed, {"seed": [s for s, _ in jobs], "acquisition": [a for _, a in jobs]},
                    p=params, digits=digits_path)
    est = over_seeds(method.run_estimation_seed, ctx.seeds, p=params)

    rows = pd.DataFrame([r for s in est for r in s["rows"]])
    al_rows = pd.DataFrame([r for run in al for r in run["rows"]])
    save_parquet(rows, ctx.data_dir / "estimation.parquet")
    save_parquet(al_rows, ctx.data_dir / "active_learning.parquet")
    al_timing = pd.DataFrame([{"seed": s, "acquisition": a, "seconds": run["seconds"]}
                              for (s, a), run in zip(jobs, al)])
    return {"estimation": rows, "active_learning": al_rows, "al_timing": al_timing}

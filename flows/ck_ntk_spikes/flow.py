"""Isolated eigenvalues of the CK and NTK of deep random networks on Gaussian-mixture inputs, the experiment:
an SNR sweep over seeds, the derived limit to compare with, and digits 1 vs 7.

Records: ``spectra`` (one row per seed, activation, snr and kernel), ``digits`` (one row per seed, activation and
kernel), ``digits_vectors`` (per seed, the top two eigenvectors shown in the figure), ``limit`` and ``theory``
(the derived limit, computed once for the run) and ``timings`` (one row per seed).
Scored by ``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd
from threadpoolctl import threadpool_limits

from flows.ck_ntk_spikes import method
from flows.ck_ntk_spikes.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment, start_task
from tasks.data import save_bundled


# Not seed-separable: the limit is computed once for the run and stored under its first seed, so records grown
# by new seeds would hold it twice.
@paper_experiment("ck_ntk_spikes", Params, smoke=SMOKE)
def ck_ntk_spikes_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """CK and NTK spikes over the SNR sweep, the derived limit, and digits 1 vs 7."""
    digits_path = str(save_bundled("digits", ctx.data_dir / "digits.parquet"))
    with threadpool_limits(limits=1):  # one BLAS/OpenMP thread per task: the tasks are the parallelism
        # the limit is submitted first so that it runs beside the seeds, not after them
        theory_future = start_task(method.theory_predictions, params=params)
        per_seed = over_seeds(method.run_seed, ctx.seeds, params=params, digits=digits_path)
        theory = theory_future.result()

    return records_tables(per_seed, theory, ctx.seeds[0])


def records_tables(per_seed: list[dict], theory: dict, first_seed: int) -> dict[str, pd.DataFrame]:
    """The records of ``method.run_seed`` results (seed order) and of ``method.theory_predictions``, which is
    stored under ``first_seed``."""
    return {
        "spectra": pd.DataFrame([row for r in per_seed for row in r["rows"]]),
        "digits": pd.DataFrame([row for r in per_seed for row in r["digits"]]),
        "digits_vectors": pd.DataFrame([{"seed": r["seed"], **r["digits_vectors"]}
                                        for r in per_seed if r["digits_vectors"]]),
        "limit": pd.DataFrame([{"seed": first_seed, **row} for t in theory.values() for row in t["rows"]]),
        "theory": pd.DataFrame([{"seed": first_seed, "activation": act, "kernel": kernel,
                                 "b2": t["moments"]["b2"], "a": t["moments"]["a"], "ntk_r_plus": t["ntk"]["r_plus"],
                                 "transition_snr": snr}
                                for act, t in theory.items() for kernel, snr in t["transition_snr"].items()]),
        "timings": pd.DataFrame([{"seed": r["seed"], **r["timings"]} for r in per_seed]),
    }

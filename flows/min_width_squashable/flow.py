"""Minimum width with squashable activations, the experiment: deep narrow networks of width
w* = max(d_x, d_y, 2) against width w* - 1 and w* + 1 on three L^p targets, the exact width-(w* - 1) lower
bounds, and the squashability constructions.

Records: ``runs`` (one row per trained net: target, depth, activation, width, seed, its L^2 error, the bound
and their ratio), ``bounds`` (one row per target), ``squash_demo`` (one row per activation, construction and
scale) and ``jobs`` (one row per (target, depth) training job with its wall time). Scored by ``evaluate.py``
against the claims in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.min_width_squashable import method
from flows.min_width_squashable.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import paper_experiment, run_mapped, start_task
from tasks.data import save_parquet


# Not seed-separable: every (target, depth) job trains the nets of all seeds in one batch and its wall time is
# over all of them. The bounds, the squashability test and the job timings belong to no seed: their rows carry
# the run's first seed.
@paper_experiment("min_width_squashable", Params, smoke=SMOKE)
def min_width_squashable_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """Narrow deep networks at widths w* - 1, w*, w* + 1 on three targets, with the lower bounds and the
    squashability test."""
    # the most expensive jobs (deepest) first, so two workers finish together
    jobs = sorted([(t, d) for t in method.TARGETS for d in params.depths], key=lambda j: (-j[1], j[0]))
    # the lower bounds and the squashability test run beside the training jobs
    bounds_future = start_task(method.run_bounds, p=params)
    demo_future = start_task(method.run_squash_demo, p=params)
    results = run_mapped(method.run_job, {"target": [t for t, _ in jobs], "depth": [d for _, d in jobs]},
                         p=params, seeds=ctx.seeds)
    bounds, demo = bounds_future.result(), demo_future.result()

    runs = pd.DataFrame([row for r in results for row in r["rows"]])
    runs["bound"] = runs["target"].map({t: b["bound"] for t, b in bounds.items()})
    runs["ratio"] = runs["l2_error"] / runs["bound"]
    runs = runs.sort_values(["target", "activation", "width", "depth", "seed"]).reset_index(drop=True)
    save_parquet(runs, ctx.data_dir / "runs.parquet")

    first = ctx.seeds[0]
    bound_rows = pd.DataFrame([{"seed": first, "target": t, **b} for t, b in bounds.items()])
    demo_rows = pd.DataFrame([{"seed": first, "activation": d["activation"], "squashable": d["squashable"],
                               "monotone": d["monotone"], "form": d["form"], "construction": kind,
                               "scale": row.get("eps", row.get("iterations")), "sigmas": row.get("sigmas", 1),
                               "lp_error": row["lp_error"]}
                              for d in demo for kind in ("identity", "step") for row in d[kind]])
    job_rows = pd.DataFrame([{"seed": first, "target": r["target"], "depth": r["depth"], "seconds": r["seconds"]}
                             for r in results])
    return {"runs": runs, "bounds": bound_rows, "squash_demo": demo_rows, "jobs": job_rows}

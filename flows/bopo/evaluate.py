"""BOPO, the evaluation: optimality gaps per method, the gap ratios of BOPO against the baselines, the untrained
control and the ablations, the figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.bopo.claims import ABLATIONS, LABEL
from flows.bopo.params import Params
from paperflows.core import estimates as est
from paperflows.core import stats
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records
from paperflows.core.report import fmt_estimate


def evaluate(params: Params, records: Records) -> RunOutput:
    rows = records["per_seed"]
    # the test set and the Held-Karp check are run-level: filed under the run's first seed
    first = records.seeds[0]
    test_set, held_karp = records["test_set"], records["held_karp"]
    optimum = test_set.loc[test_set["seed"] == first, "optimum"].to_numpy()
    hk_diff = float(held_karp.loc[held_karp["seed"] == first, "max_abs_diff"].iloc[0])
    metrics = _metrics(rows, params, hk_diff, optimum)
    figure, plot = _figure(metrics, params)
    setup = (f"Random uniform TSP-{params.n_nodes}; test set of {params.n_test} fixed instances with exact Held-Karp optima. "
             f"Policy: attention encoder ({params.layers} layers, d = {params.d_model}, {params.heads} heads) + pointer decoder "
             f"(Kool et al.). Every method: {params.steps} Adam steps (lr {params.lr}) of {params.batch} fresh instances, "
             f"B = {params.samples} solutions per instance ({params.samples - 1} sampled + 1 greedy), from the same initial "
             f"weights per seed. BOPO keeps K = {params.keep} by uniform filtering and trains on the {params.keep - 1} "
             "best-anchored pairs; REINFORCE uses the greedy tour as baseline for the sampled tours; SLIM minimises the "
             f"cross-entropy of the best tour. Methods: {', '.join(params.methods)}; {params.seeds} seeds.")
    return RunOutput(metrics=metrics, tables={"plot": plot, "per_seed": rows}, figure=figure, setup=setup,
                     notes=_measured(params, metrics))


def _gaps(rows: pd.DataFrame, m: str, col: str) -> np.ndarray:
    return est.per_seed(rows, col, method=m)


def _metrics(rows: pd.DataFrame, params: Params, hk_diff: float, optimum: np.ndarray) -> dict:
    out: dict = {"gap_greedy": stats.summarize_by(rows, "method", "gap_greedy"),
                 "gap_sample": stats.summarize_by(rows, "method", "gap_sample"),
                 "ratio": {}, "control": {}, "ablation": {},
                 "mean_optimal_length": float(optimum.mean()),
                 "timings": {"train_cpu_s": {m: float(_gaps(rows, m, "train_s").mean()) for m in params.methods}}}
    for col, suffix in (("gap_greedy", ""), ("gap_sample", "_sample")):
        ratio = lambda a, b: est.ratio(rows, col, {"method": a}, {"method": b})
        for base in ("reinforce", "slim"):
            out["ratio"][f"bopo_over_{base}{suffix}"] = ratio("bopo", base)
            out["control"][f"untrained_over_{base}{suffix}"] = ratio("untrained", base)
        for abl in ABLATIONS:
            out["ablation"][f"bopo_over_{abl}{suffix}"] = ratio("bopo", abl)
    out["sanity"] = {"held_karp_max_abs_diff": hk_diff,
                     "bopo_over_untrained": est.ratio(rows, "gap_greedy", {"method": "bopo"}, {"method": "untrained"})}
    return out


def _measured(params: Params, m: dict) -> str:
    """The measured numbers behind the claims, for the notes (how to read them is in NOTES.md)."""
    gg, gs = m["gap_greedy"], m["gap_sample"]
    order = ["untrained", *params.methods]
    greedy = "; ".join(f"{LABEL[k]} {100 * gg[k]['mean']:.2f}% [{100 * gg[k]['ci_low']:.2f}, {100 * gg[k]['ci_high']:.2f}]"
                       for k in order)
    sample = "; ".join(f"{LABEL[k]} {100 * gs[k]['mean']:.2f}%" for k in order)
    r, c, a = m["ratio"], m["control"], m["ablation"]
    return (
        f"**Measured** (mean over {params.seeds} seeds, 95% Student-t interval over seeds; gap ratios: jackknife-t interval of the ratio of seed means). Greedy-decoding gap: {greedy}. "
        f"Best-of-{params.eval_samples} sampling gap: {sample}. Gap ratios (greedy): BOPO / REINFORCE "
        f"{fmt_estimate(r['bopo_over_reinforce'])}, BOPO / SLIM {fmt_estimate(r['bopo_over_slim'])}; best-of-N: BOPO / REINFORCE "
        f"{fmt_estimate(r['bopo_over_reinforce_sample'])}, BOPO / SLIM {fmt_estimate(r['bopo_over_slim_sample'])}. Negative controls "
        f"(greedy): untrained / REINFORCE {fmt_estimate(c['untrained_over_reinforce'])}, untrained / SLIM "
        f"{fmt_estimate(c['untrained_over_slim'])}. Ablations (claims; greedy gated, best-of-N reported): "
        + "; ".join(f"gap(BOPO) / gap({LABEL[k.removeprefix('bopo_over_').removesuffix('_sample')]})"
                    f"{' (best-of-N)' if k.endswith('_sample') else ' (greedy)'} = {fmt_estimate(v)}" for k, v in a.items())
        + f". Mean optimal tour length of the test set {m['mean_optimal_length']:.4f}."
    )


def _figure(m: dict, params: Params):
    order = ["untrained", *params.methods]
    fig, ax = plt.subplots(figsize=(7, 3.8))
    x = np.arange(len(order))
    records = []
    for off, (name, g) in zip((-0.2, 0.2), (("greedy", m["gap_greedy"]), (f"best of {params.eval_samples}", m["gap_sample"]))):
        y = np.array([100 * g[k]["mean"] for k in order])
        err = np.array([[100 * (g[k]["mean"] - g[k]["ci_low"]) for k in order],
                        [100 * (g[k]["ci_high"] - g[k]["mean"]) for k in order]])
        ax.bar(x + off, y, width=0.4, yerr=err, label=name, capsize=3)
        records += [{"x": k, "y": float(v), "series": name} for k, v in zip(order, y)]
    ax.set_xticks(x, order, rotation=20)
    ax.set(ylabel="optimality gap (%)", yscale="log", title=f"TSP-{params.n_nodes}, {params.steps} steps")
    ax.legend()
    fig.tight_layout()
    return fig, pd.DataFrame(records)

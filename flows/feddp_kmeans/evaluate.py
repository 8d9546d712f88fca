"""FedDP-KMeans, the evaluation: cost ratios against the baselines at their better T and against the oracle,
accuracy, the controls, the privacy accounting, the figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.feddp_kmeans import method
from flows.feddp_kmeans.claims import LABEL
from flows.feddp_kmeans.params import Params
from paperflows.core import estimates as est
from paperflows.core import stats
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records

BASELINES = ("sphere", "serverpp")


def _arm(ds: str, m: str, T: int, budget: str) -> dict:
    """The selection of one arm's rows: data set, method, Lloyd step count (0: not DP-Lloyds) and budget."""
    return {"dataset": ds, "method": m, "T": T, "budget": budget}


def _sample(rows: pd.DataFrame, ds: str, m: str, T: int, budget: str, col: str) -> np.ndarray:
    return est.per_seed(rows, col, **_arm(ds, m, T, budget))


def _dataset_metrics(rows: pd.DataFrame, ds: str, steps: list[int]) -> dict:
    T0 = steps[0]
    cost_ratio = lambda numerator, denominator: est.ratio(rows, "cost", numerator, denominator)
    feddp = _arm(ds, "feddp", T0, "per_step")
    oracle, kfed, trivial, server_only = (_arm(ds, m, 0, "non_private")
                                          for m in ("oracle", "kfed", "global_mean", "server_kmeans"))
    out: dict = {"headline_T": T0, "ratio": {"oracle": cost_ratio(feddp, oracle), "kfed": cost_ratio(feddp, kfed)},
                 "kfed_over_oracle": cost_ratio(kfed, oracle),
                 "best_T": {}, "cost_per_point": {}, "accuracy": {}, "accuracy_majority": {}, "eps_prv": {},
                 "control": {"global_mean_over_oracle": cost_ratio(trivial, oracle)}}
    for b in BASELINES:
        for budget in ("config", "matched"):
            label = "lloyd_only" if budget == "config" else "matched"
            means = {T: _sample(rows, ds, b, T, label, "cost").mean() for T in steps}
            best = min(means, key=means.get)
            out["best_T"][f"{b}_{budget}"] = int(best)
            baseline = _arm(ds, b, best, label)
            out["ratio"][f"{b}_{budget}"] = {**cost_ratio(feddp, baseline), "baseline_T": int(best)}
            out["control"][f"server_kmeans_over_{b}_{budget}"] = cost_ratio(server_only, baseline)
    # the accuracy claim's control: the most accurate DP baseline over every init, T and budget of the run
    accuracies = {f"{b}_T{T}_{lab}": _sample(rows, ds, b, T, lab, "accuracy")
                  for b in BASELINES for T in steps for lab in ("lloyd_only", "matched")}
    best_name = max(accuracies, key=lambda n: accuracies[n].mean())
    out["control"]["best_baseline_accuracy"] = stats.summarize(accuracies[best_name])
    keys = [("feddp", T, "per_step") for T in steps] + [(b, T, lab) for b in BASELINES for T in steps
                                                        for lab in ("lloyd_only", "matched")]
    keys += [(m, 0, "non_private") for m in ("kfed", "oracle", "global_mean", "server_kmeans")]
    for m, T, lab in keys:
        name = m if (m in ("kfed", "oracle", "global_mean", "server_kmeans") or (m == "feddp" and T == T0)) else f"{m}_T{T}_{lab}"
        if m == "feddp" and T != T0:
            name = f"feddp_T{T}"
        out["cost_per_point"][name] = est.summary(rows, "cost_per_point", **_arm(ds, m, T, lab))
        out["accuracy"][name] = est.summary(rows, "accuracy", **_arm(ds, m, T, lab))
        out["accuracy_majority"][name] = float(_sample(rows, ds, m, T, lab, "accuracy_majority").mean())
        eps = _sample(rows, ds, m, T, lab, "eps_prv")
        if np.all(np.isfinite(eps)):
            out["eps_prv"][name] = float(eps[0])
    # FedDP's initialisation, once per seed, is recorded on its rows
    init = lambda col: est.per_seed(rows, col, **feddp)
    out["init"] = {"cost_per_point": est.summary(rows, "init_cost_per_point", **feddp),
                   "accuracy": est.summary(rows, "init_accuracy", **feddp),
                   "server_points_kept_mean": float(init("server_points_kept").mean()),
                   "ood_server_points_kept_mean": float(init("ood_server_points_kept").mean())}
    out["frac_clipped"] = float(init("frac_clipped").mean())
    out["n_points"] = int(init("n_points")[0])
    return out


def evaluate(params: Params, records: Records) -> RunOutput:
    rows = records["runs"]
    steps = list(params.lloyd_steps)
    metrics = {ds: _dataset_metrics(rows, ds, steps) for ds in params.datasets}
    metrics["equivalence"] = {"max_abs_diff": float(records["equivalence"]["max_abs_diff"].max())}
    budget = method.budget_from(params)
    sigma_l, b_l = method.lloyd_noise(budget.eps_lloyd, budget.lloyd_split, budget.delta, 1.0, 1.0, steps[0])
    init = method.init_noise(method.Budget(**{**budget.__dict__, "clip": 1.0}))
    metrics["privacy"] = {
        "delta": params.delta,
        "per_step_eps": {"outer": params.eps_outer, "weight": params.eps_weight, "init": params.eps_init,
                         "lloyd": params.eps_lloyd},
        "basic_composition_eps": params.eps_outer + params.eps_weight + params.eps_init + params.eps_lloyd,
        "basic_composition_delta": 3 * params.delta,
        "feddp_eps_prv_by_T": {str(T): float(_sample(rows, "gaussian", "feddp", T, "per_step", "eps_prv")[0]) for T in steps},
        "noise_multipliers_headline_T": {"outer_product (x Lambda^2)": init.outer_sigma,
                                         "weights (Laplace b)": init.weight_b,
                                         "init_sums (x Lambda)": init.init_sum_sigma, "init_counts (Laplace b)": init.init_count_b,
                                         "lloyd_sums_per_round (x Lambda)": sigma_l, "lloyd_counts_per_round (Laplace b)": b_l},
    }
    plot = _plot_table(rows, params)
    return RunOutput(
        metrics=metrics,
        tables={"plot": plot, "runs": rows.replace([np.inf], np.nan)},
        figure=_figure(plot, metrics, params),
        setup=_setup(params, metrics),
        notes=_measured(metrics),
    )



def _plot_table(rows: pd.DataFrame, params: Params) -> pd.DataFrame:
    """Cost / oracle cost (mean over seeds, 95% CI) against the run's total eps (PRV), per method."""
    out = []
    for ds in params.datasets:
        private = rows[(rows["dataset"] == ds) & rows["method"].isin(["feddp", *BASELINES])]
        for (m, T, lab), g in private.groupby(["method", "T", "budget"]):
            r = est.ratio(rows, "cost", _arm(ds, m, T, lab), _arm(ds, "oracle", 0, "non_private"))
            out.append({"x": float(g["eps_prv"].iloc[0]), "y": r["ratio"], "y_low": r["ci_low"], "y_high": r["ci_high"],
                        "series": f"{ds}:{m}:T{T}:{lab}", "dataset": ds, "method": m, "T": int(T), "budget": lab})
    return pd.DataFrame(out)


def _figure(plot: pd.DataFrame, metrics: dict, params: Params):
    fig, axes = plt.subplots(1, len(params.datasets), figsize=(6.2 * len(params.datasets), 4.6), squeeze=False)
    colours = {"feddp": "C3", "sphere": "C0", "serverpp": "C2"}
    markers = {"per_step": "o", "lloyd_only": "s", "matched": "^"}
    for ax, ds in zip(axes[0], params.datasets):
        g = plot[plot["dataset"] == ds]
        for _, r in g.iterrows():
            ax.errorbar(r["x"], r["y"], yerr=[[r["y"] - r["y_low"]], [r["y_high"] - r["y"]]], fmt=markers[r["budget"]],
                        color=colours[r["method"]], ms=8 if r["method"] == "feddp" else 6, capsize=3,
                        alpha=1.0 if r["method"] == "feddp" else 0.8)
            ax.annotate(f"T={r['T']}", (r["x"], r["y"]), textcoords="offset points", xytext=(5, 3), fontsize=7)
        ax.axhline(metrics[ds]["kfed_over_oracle"]["ratio"], color="grey", ls=":", label="k-FED (non-private)")
        ax.axhline(1.0, color="k", ls="--", lw=1, label="oracle (non-private)")
        for m, colour in colours.items():
            ax.plot([], [], "o", color=colour, label=LABEL[m])
        for b, mk in markers.items():
            ax.plot([], [], mk, color="0.5", label={"per_step": "FedDP: eps = 1 per step",
                                                   "lloyd_only": "baseline: eps_Lloyds = 1 (config)",
                                                   "matched": "baseline: eps_Lloyds = sum of FedDP's"}[b])
        ax.set(xlabel=f"total eps of the run (PRV accountant, delta = {params.delta:g})",
               ylabel="k-means cost / oracle cost (mean, 95% CI)",
               title=f"{ds}: {metrics[ds]['n_points']} client points, k = {params.k}")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _setup(params: Params, metrics: dict) -> str:
    pv = metrics["privacy"]
    nm = pv["noise_multipliers_headline_T"]
    return (
        f"**Data.** Gaussian mixture as the official `GaussianMixtureUniform`: k = {params.k}, d = {params.dim}, means "
        f"~ U[0,1]^d, covariance {params.variance} I, {params.n_clients} clients x {params.per_client} points "
        f"({'IID' if params.client_components == 0 else f'{params.client_components} components per client'}); "
        f"server: {params.server_per_component} points per component + {params.server_uniform} U[0,1]^d points "
        f"(out of distribution). Digits: scikit-learn digits / 16, {params.digits_server} images to the server "
        f"after blur ({params.digits_blur} px) + N(0, {params.digits_server_noise}^2) noise, the rest over "
        f"{params.digits_clients} clients with Dirichlet({params.digits_alpha}) label skew. {params.seeds} seeds "
        "(a fresh data set per seed). Cost = k-means cost on the pooled client data; accuracy = Hungarian-matched.\n\n"
        f"**Privacy (data-point level).** Points clipped to Lambda = {params.clip} (digits {params.digits_clip}). "
        f"Per step eps: outer product {params.eps_outer}, weighting {params.eps_weight}, centre init {params.eps_init} "
        f"(split {params.init_split} sums / {1 - params.init_split:g} counts), DP-Lloyds {params.eps_lloyd} in total over T "
        f"rounds (split {params.lloyd_split}); delta = {params.delta}. Gaussian noise = analytic Gaussian mechanism "
        f"(noise multipliers: outer product {nm['outer_product (x Lambda^2)']:.2f} x Lambda^2, init sums "
        f"{nm['init_sums (x Lambda)']:.2f} x Lambda, Lloyd sums {nm['lloyd_sums_per_round (x Lambda)']:.2f} x Lambda per "
        f"round at T = {params.lloyd_steps[0]}, i.e. sqrt(T) x the single-release value); Laplace b = 1/eps for the "
        f"weights and counts (T/eps per Lloyd round). Total: basic composition ({pv['basic_composition_eps']:g}, "
        f"{pv['basic_composition_delta']:.0e}); PRV accountant eps at delta = {params.delta}: "
        + ", ".join(f"T = {T}: {e:.2f}" for T, e in pv["feddp_eps_prv_by_T"].items()) + ".\n\n"
        f"**Methods.** FedDP-KMeans (init once per seed, then T in {params.lloyd_steps} DP-Lloyd rounds; min server "
        f"weight {params.min_server_weight}, margin {params.margin}); SpherePacking + DP-Lloyds and server k-means++ + "
        "DP-Lloyds, each at eps_Lloyds = 1 (the config, as the official run.py runs baselines) and at eps_Lloyds = "
        f"{pv['basic_composition_eps']:g} (FedDP's whole basic-composition budget), T in {params.lloyd_steps}; k-FED "
        f"({params.kfed_k_client} local centres per client, non-private); oracle = scikit-learn KMeans (k-means++, "
        "n_init='auto') on the pooled client data."
    )




def _measured(metrics: dict) -> str:
    """The measured numbers behind the claims, for the notes (how to read them is in NOTES.md)."""
    g = metrics["gaussian"]
    r, c = g["ratio"], g["control"]
    interval = lambda v, key: f"{v[key]:.3f} [{v['ci_low']:.3f}, {v['ci_high']:.3f}]"
    best_baseline = max((n for n in g["accuracy"] if n.startswith(BASELINES)), key=lambda n: g["accuracy"][n]["mean"])
    text = (
        f"**Measured, Gaussian mixture** (headline T = {g['headline_T']}). Cost per point: "
        + ", ".join(f"{name} {v['mean']:.3f}" for name, v in g["cost_per_point"].items())
        + ". Accuracy: " + ", ".join(f"{name} {v['mean']:.3f}" for name, v in g["accuracy"].items())
        + f". FedDP / oracle cost {interval(r['oracle'], 'ratio')}; FedDP / k-FED {r['kfed']['ratio']:.3f}; k-FED / "
        f"oracle {g['kfed_over_oracle']['ratio']:.3f}. The init alone reaches accuracy "
        f"{g['init']['accuracy']['mean']:.3f}; {g['init']['server_points_kept_mean']:.0f} server points kept on "
        f"average, {g['init']['ood_server_points_kept_mean']:.0f} of them out-of-distribution. Baselines at their "
        "better T: "
        + "; ".join(f"{k} (T = {v['baseline_T']}): FedDP / baseline {interval(v, 'ratio')}"
                    for k, v in r.items() if k not in ("oracle", "kfed"))
        + f". Trivial solution / oracle cost {interval(c['global_mean_over_oracle'], 'ratio')}. Server-only / "
        "baseline cost: "
        + ", ".join(f"{k.removeprefix('server_kmeans_over_')} {interval(v, 'ratio')}"
                    for k, v in c.items() if k.startswith("server_kmeans_over_"))
        + f". The most accurate DP baseline ({best_baseline}) reaches accuracy "
        f"{interval(c['best_baseline_accuracy'], 'mean')}."
    )
    if "digits" in metrics:
        d = metrics["digits"]
        text += ("\n\n**Measured, digits** (no claim): cost per point "
                 + ", ".join(f"{n} {v['mean']:.3f}" for n, v in d["cost_per_point"].items())
                 + "; accuracy " + ", ".join(f"{n} {v['mean']:.3f}" for n, v in d["accuracy"].items())
                 + f"; {d['n_points']} client points.")
    return text

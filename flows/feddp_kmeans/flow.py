"""FedDP-KMeans as a Prefect flow: the 3-step DP initialisation from server data + federated DP-Lloyds
against DP-Lloyds from data-independent (sphere-packing) and server-only k-means++ initialisations,
k-FED and the non-private oracle, on the official Gaussian-mixture config and on label-skewed digits."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from flows.feddp_kmeans import method
from flows.feddp_kmeans.params import SMOKE, Params
from tasks import stats
from tasks.contract import Claim, Control, Paper, RunContext, RunOutput, ci
from tasks.paper import over_seeds, paper_flow, start_task

BASELINES = ("sphere", "serverpp")
SAVED_CLIENTS = 10      # Gaussian-mixture clients written to data/ (the rest regenerates from the seed)
LABEL = {"feddp": "FedDP-KMeans", "sphere": "SpherePacking + DP-Lloyds", "serverpp": "Server k-means++ + DP-Lloyds",
         "kfed": "k-FED (non-private)", "oracle": "Lloyd's k-means++ on pooled data (non-private)",
         "global_mean": "all k centres at the pooled mean (trivial)",
         "server_kmeans": "Lloyd's k-means++ on the server data alone (non-private, no client data)"}
TRIVIAL = "all k centres at the pooled global mean (trivial solution)"
WHERE = "on the Gaussian mixture (official GaussianMixtureUniform config, per-step eps = 1, delta = 1e-6)"


def _beats(baseline: str, budget: str, how: str) -> Claim:
    return Claim(
        id=f"feddp_beats_{baseline}_{budget}",
        text=("Our approach leverages (potentially small and out-of-distribution) server-side data to overcome "
              "the primary challenge of differentially private clustering methods: the need for a good "
              f"initialization -- mean k-means cost(FedDP-KMeans) / mean cost({LABEL[baseline]}) < 1 {WHERE}; "
              f"{how}; the baseline at its better T of the run's Lloyd step counts"),
        source="abstract; plan claim 1 (direction)", metric=f"gaussian.ratio.{baseline}_{budget}.ratio",
        comparison="<", threshold=1.0, kind="direction", role="claim",
        interval=ci(f"gaussian.ratio.{baseline}_{budget}"),
        # if clustering the server data alone (no client data) also beats the baseline, beating it does not
        # show that FedDP-Init's use of the clients is what overcomes the initialisation problem
        control=Control(name=f"{LABEL['server_kmeans']} / {LABEL[baseline]}",
                        metric=f"gaussian.control.server_kmeans_over_{baseline}_{budget}.ratio",
                        interval=ci(f"gaussian.control.server_kmeans_over_{baseline}_{budget}")))


PAPER = Paper(
    slug="feddp_kmeans",
    title="Differentially Private Federated k-Means Clustering with Server-Side Data",
    method="FedDP-KMeans: FedDP-Init (DP projection, DP server-point weighting, DP lifted centres) + FedDP-Lloyds",
    paper_class="A",
    source="abstracts-003.txt #11",
    official_code="jonnyascott/fed-dp-kmeans (GitHub; full code read in a public fork)",
    claims=(
        _beats("sphere", "config", "baselines run DP-Lloyds at the config's eps_Lloyds = 1 (as the official run.py)"),
        _beats("serverpp", "config", "baselines run DP-Lloyds at the config's eps_Lloyds = 1 (as the official run.py)"),
        _beats("sphere", "matched", "baselines' DP-Lloyds get FedDP's whole basic-composition budget (sum of its per-step eps)"),
        _beats("serverpp", "matched", "baselines' DP-Lloyds get FedDP's whole basic-composition budget (sum of its per-step eps)"),
        Claim(id="cost_within_1p2_oracle",
              text=("Combining our initialization with a simple federated DP-Lloyds algorithm we obtain an algorithm "
                    "that achieves excellent results: mean cost(FedDP-KMeans) / mean cost(non-private Lloyd's with "
                    f"k-means++ on the pooled data) <= 1.2 {WHERE}"),
              source="abstract; plan claim 2 (magnitude)", metric="gaussian.ratio.oracle.ratio", comparison="<=",
              threshold=1.2, kind="magnitude", role="claim",
              interval=ci("gaussian.ratio.oracle"),
              control=Control(name=f"{TRIVIAL} / oracle", metric="gaussian.control.global_mean_over_oracle.ratio",
                              interval=ci("gaussian.control.global_mean_over_oracle"))),
        Claim(id="cluster_identification",
              text=("We also provide a theoretical analysis of our method that provides bounds on ... cluster "
                    f"identification success: Hungarian-matched accuracy of FedDP-KMeans >= 0.9 {WHERE}"),
              source="abstract; plan claim 3 (magnitude)", metric="gaussian.accuracy.feddp.mean", comparison=">=",
              threshold=0.9, kind="magnitude", role="claim",
              interval=ci("gaussian.accuracy.feddp"),
              # the trivial solution scores ~1/k here; the strongest DP baseline is the control with bite
              control=Control(name="the most accurate DP baseline (any init, T and budget of the run)",
                              metric="gaussian.control.best_baseline_accuracy.mean",
                              interval=ci("gaussian.control.best_baseline_accuracy"))),
        Claim(id="federated_equals_centralised",
              text=("fully-federated: with the noise off, the federated Lloyd step (per-client sums and counts, "
                    "aggregated) equals a centralised Lloyd step on the pooled data (scipy's kmeans2, iter = 1; an empty "
                    "cluster keeps its centre; max abs difference of the centres < 1e-9)"),
              source="abstract (fully-federated); plan unit test", metric="equivalence.max_abs_diff",
              comparison="<", threshold=1e-9, kind="exact", role="sanity"),
    ),
    limitations=(
        "Data-point-level privacy only (the paper's cross-silo setting); the client-level mode, the StackOverflow "
        "and US-census experiments (downloads) and the paper's sweeps over eps and over the server data are not "
        "run. The synthetic data follow the official GaussianMixtureUniform generator (IID clients, means ~ "
        "U[0,1]^d, variance 0.5); the digits set stands in for a real data set and has only ~1,750 client points, "
        "so at eps = 1 per step the DP noise dominates there (no claim is checked on it). The privacy "
        "accounting is a re-implementation (analytic Gaussian mechanism, exact Gaussian-DP composition, PRV "
        "accountant for the total) of what the official code does with pfl-research and dp_accounting, not "
        "those libraries; the outer-product noise is calibrated to sensitivity Lambda^2, not the official "
        "code's Lambda. k-FED and sphere packing are re-implementations after the official code."
    ),
)


def _sample(rows: pd.DataFrame, ds: str, m: str, T: int, budget: str, col: str) -> np.ndarray:
    sel = rows[(rows["dataset"] == ds) & (rows["method"] == m) & (rows["T"] == T) & (rows["budget"] == budget)]
    return sel.sort_values("seed")[col].to_numpy(dtype=float)


def _dataset_metrics(rows: pd.DataFrame, ds: str, steps: list[int]) -> dict:
    T0 = steps[0]
    feddp = _sample(rows, ds, "feddp", T0, "per_step", "cost")
    oracle = _sample(rows, ds, "oracle", 0, "non_private", "cost")
    kfed = _sample(rows, ds, "kfed", 0, "non_private", "cost")
    trivial = _sample(rows, ds, "global_mean", 0, "non_private", "cost")
    server_only = _sample(rows, ds, "server_kmeans", 0, "non_private", "cost")
    out: dict = {"headline_T": T0, "ratio": {"oracle": stats.ratio_of_means(feddp, oracle),
                                            "kfed": stats.ratio_of_means(feddp, kfed)},
                 "kfed_over_oracle": stats.ratio_of_means(kfed, oracle),
                 "best_T": {}, "cost_per_point": {}, "accuracy": {}, "accuracy_majority": {}, "eps_prv": {},
                 "control": {"global_mean_over_oracle": stats.ratio_of_means(trivial, oracle)}}
    for b in BASELINES:
        for budget in ("config", "matched"):
            label = "lloyd_only" if budget == "config" else "matched"
            means = {T: _sample(rows, ds, b, T, label, "cost").mean() for T in steps}
            best = min(means, key=means.get)
            out["best_T"][f"{b}_{budget}"] = int(best)
            base_cost = _sample(rows, ds, b, best, label, "cost")
            out["ratio"][f"{b}_{budget}"] = {**stats.ratio_of_means(feddp, base_cost), "baseline_T": int(best)}
            out["control"][f"server_kmeans_over_{b}_{budget}"] = stats.ratio_of_means(server_only, base_cost)
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
        out["cost_per_point"][name] = stats.summarize(_sample(rows, ds, m, T, lab, "cost_per_point"))
        out["accuracy"][name] = stats.summarize(_sample(rows, ds, m, T, lab, "accuracy"))
        out["accuracy_majority"][name] = float(_sample(rows, ds, m, T, lab, "accuracy_majority").mean())
        eps = _sample(rows, ds, m, T, lab, "eps_prv")
        if np.all(np.isfinite(eps)):
            out["eps_prv"][name] = float(eps[0])
    init = rows[(rows["dataset"] == ds) & (rows["method"] == "feddp") & (rows["T"] == T0)].sort_values("seed")
    out["init"] = {"cost_per_point": stats.summarize(init["init_cost_per_point"].to_numpy(float)),
                   "accuracy": stats.summarize(init["init_accuracy"].to_numpy(float)),
                   "server_points_kept_mean": float(init["server_points_kept"].mean()),
                   "ood_server_points_kept_mean": float(init["ood_server_points_kept"].mean())}
    out["frac_clipped"] = float(init["frac_clipped"].mean())
    out["n_points"] = int(init["n_points"].iloc[0])
    return out


@paper_flow(PAPER, Params, smoke=SMOKE)
def feddp_kmeans_flow(params: Params, ctx: RunContext) -> RunOutput:
    with threadpool_limits(limits=1):  # one BLAS/OpenMP thread per task: the seeds are the parallelism
        # written alongside the seeds (a task of its own, so that it overlaps them)
        saved = start_task(method.save_datasets, p=params, seed=ctx.seeds[0], data_dir=str(ctx.data_dir),
                           gaussian_clients=SAVED_CLIENTS)
        per_seed = over_seeds(method.run_seed, ctx.seeds, p=params)
        saved.result()
    rows = pd.DataFrame([r for s in per_seed for r in s["rows"]])
    steps = list(params.lloyd_steps)
    metrics = {ds: _dataset_metrics(rows, ds, steps) for ds in params.datasets}
    metrics["equivalence"] = {"max_abs_diff": float(max(s["equivalence_max_abs"] for s in per_seed))}
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
        notes=_notes(params, metrics),
    )


def _plot_table(rows: pd.DataFrame, params: Params) -> pd.DataFrame:
    """Cost / oracle cost (mean over seeds, 95% CI) against the run's total eps (PRV), per method."""
    out = []
    for ds in params.datasets:
        oracle = _sample(rows, ds, "oracle", 0, "non_private", "cost")
        private = rows[(rows["dataset"] == ds) & rows["method"].isin(["feddp", *BASELINES])]
        for (m, T, lab), g in private.groupby(["method", "T", "budget"]):
            r = stats.ratio_of_means(g.sort_values("seed")["cost"].to_numpy(float), oracle)
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


def _notes(params: Params, metrics: dict) -> str:
    g = metrics["gaussian"]
    r = g["ratio"]
    cp = g["cost_per_point"]
    lines = ", ".join(f"{name} {v['mean']:.3f}" for name, v in cp.items())
    acc = ", ".join(f"{name} {v['mean']:.3f}" for name, v in g["accuracy"].items())
    c = g["control"]
    best_baseline = max((n for n in g["accuracy"] if n.startswith(BASELINES)), key=lambda n: g["accuracy"][n]["mean"])
    digits = ""
    if "digits" in metrics:
        d = metrics["digits"]
        digits = ("\n\n**Digits** (no claim): cost per point " + ", ".join(f"{n} {v['mean']:.3f}" for n, v in d["cost_per_point"].items())
                  + "; accuracy " + ", ".join(f"{n} {v['mean']:.3f}" for n, v in d["accuracy"].items())
                  + f". With {d['n_points']} client points the eps = 1 noise is of the order of the cluster sums "
                    "themselves (Lambda = " + f"{params.digits_clip:g}" + ", noise std ~ 8 Lambda per coordinate of a sum), so every "
                    "private method is far from the oracle; more Lloyd rounds only add noise (sqrt(T) per round), and "
                    "the server's blurred images (all out of distribution) give FedDP no advantage over server "
                    "k-means++ with the larger matched budget.")
    return (
        "**Sources.** The official repository (jonnyascott/fed-dp-kmeans) was read in full through a public fork "
        "(OjMaha/Fed-DP-KMeans-and-MIA-Attack, `fed-dp-kmeans-main/`): algorithms, privacy mechanisms, accounting, "
        "data generator, baselines and argument defaults; the paper's full text was not readable here.\n\n"
        "**Confirmed from the code.** Three init steps and DP-Lloyds as implemented here; GaussianMixtureUniform "
        "defaults k = 10, d = 100, variance 0.5 (the plan's d = 50 was unverified), clients IID (not the plan's "
        "2-3 components per client; `client_components` switches that on); margin default 1; min server weight 5; "
        "pfl's analytic Gaussian mechanism per release; Lloyd noise calibrated to the T-fold composition at "
        "(eps_L split, delta) for sums and counts separately; total eps from a PLD accountant at delta = 1e-6; "
        "the baselines SpherePacking (radius from max |server data|) and ServerKMeans++ run the same DP-Lloyds "
        "config; k-FED as one-shot Awasthi-Sheffet local clustering + farthest-point seeding + one Lloyd step.\n\n"
        "**Deviations.** (1) The official code clips points to Lambda = 11 but scales the outer-product noise by "
        "Lambda, while sum x x^T has sensitivity ||x||^2 <= Lambda^2: here the noise uses Lambda^2 (11x more noise "
        "than the official code, i.e. an honest eps = 1 for step 1). (2) The total eps is from the PRV accountant "
        "(prv-accountant), not Google's dp_accounting PLD; Gaussian compositions are calibrated exactly through "
        "Gaussian DP and Laplace compositions by basic composition (the same noise up to 4e-4 in eps at delta = "
        "1e-6). (3) Noisy counts are floored at 1 before dividing (post-processing; the official code only "
        "replaces exact zeros). (4) The 'matched' baseline budget and its two claims were added after a one-seed "
        "development run showed that the comparison depends on the baselines' budget; they are the stricter "
        "reading of claim 1. (5) IBM's diffprivlib (a library DP k-means with the same sphere-packing init) does "
        "not import with scikit-learn 1.9, so no library DP k-means is compared.\n\n"
        f"**Results, Gaussian mixture** (headline T = {g['headline_T']}). Cost per point: {lines}. Accuracy: {acc}. "
        f"FedDP / oracle cost {r['oracle']['ratio']:.3f} [{r['oracle']['ci_low']:.3f}, {r['oracle']['ci_high']:.3f}]; "
        f"FedDP / k-FED {r['kfed']['ratio']:.3f}; k-FED / oracle {g['kfed_over_oracle']['ratio']:.3f}. The init alone reaches accuracy {g['init']['accuracy']['mean']:.3f}; "
        f"{g['init']['server_points_kept_mean']:.0f} server points kept on average, "
        f"{g['init']['ood_server_points_kept_mean']:.0f} of them out-of-distribution. Baselines at their better T: "
        + "; ".join(f"{k} (T = {v['baseline_T']}): FedDP / baseline {v['ratio']:.3f} [{v['ci_low']:.3f}, {v['ci_high']:.3f}]"
                    for k, v in r.items() if k not in ("oracle", "kfed"))
        + ". **Negative controls.** The trivial solution (all k centres at the pooled mean) costs "
        f"{c['global_mean_over_oracle']['ratio']:.3f} [{c['global_mean_over_oracle']['ci_low']:.3f}, "
        f"{c['global_mean_over_oracle']['ci_high']:.3f}] x the oracle: in d = {params.dim} with variance "
        f"{params.variance} most of the cost is within-cluster noise, so a cost ratio within 1.2 of the oracle does "
        "not need any clustering, and the cost claim has no power at this config. The beats-the-baseline claims' "
        "control is Lloyd's k-means++ on the server data alone (no client data, zero privacy cost; it replaces the "
        "trivial solution of an earlier version, which could never beat a DP baseline): where it beats a baseline "
        "too, the comparison cannot credit FedDP-Init's use of the clients. Server-only / baseline cost: "
        + ", ".join(f"{k.removeprefix('server_kmeans_over_')} {v['ratio']:.3f} [{v['ci_low']:.3f}, {v['ci_high']:.3f}]"
                    for k, v in c.items() if k.startswith("server_kmeans_over_"))
        + f". The most accurate DP baseline ({best_baseline}) reaches accuracy {c['best_baseline_accuracy']['mean']:.3f} "
        f"[{c['best_baseline_accuracy']['ci_low']:.3f}, {c['best_baseline_accuracy']['ci_high']:.3f}], the "
        "control of the accuracy claim; accuracy is the metric that separates the methods. "
        "**Federated = centralised (sanity).** The noise-off federated Lloyd step used to send an empty "
        "cluster's centre to the origin (its zero sum divided by the count floored at 1), while scikit-learn's "
        "reference moves it to the farthest point: the check failed on the seeds where a cluster emptied (7 of "
        "seeds 0-299 with the old code, e.g. seed 108: 2.19; the seed-robustness run reported 2.33). Now an exactly-zero released count keeps the previous "
        "centre (Lloyd's rule; only a noise-free count can be exactly 0, so the DP runs are unchanged), the "
        "reference is scipy's kmeans2 (the same rule), and one starting centre is put far from the data so that "
        "every seed exercises the rule. "
        "The oracle is a single k-means++ run (scikit-learn's n_init='auto'), so it can stop in a local optimum "
        "and FedDP can beat it (ratio < 1). The baselines' T is chosen from the run's `lloyd_steps` only (the plan's "
        "T in {1, 5}); the sphere-packing baseline improves from T = 1 to T = 5, so with more rounds (the official "
        "argument default is 15) and the matched budget it may close the remaining gap -- not checked here. The "
        "matched budget gives the baselines a PRV total eps above FedDP's (see the figure's x-axis)."
        + digits
    )

"""ANOVA-TPNN as a Prefect flow: component stability across bootstrap resamples and initialisations
against NA2M, NB2M and the no-constraint ablation; recovery of known components; accuracy vs EBM."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.anova_tpnn import method
from flows.anova_tpnn.params import SMOKE, Params
from tasks import stats
from tasks.contract import Claim, Control, Paper, RunContext, RunOutput, ci
from tasks.paper import paper_flow, run_mapped, run_task

BASELINES = ("na2m", "nb2m", "ebm")          # the accuracy claim's "best baseline" is taken over these
LABELS = {"tpnn": "ANOVA-TPNN", "tpnn_noconstraint": "TPNN, r = -1 (ablation)", "na2m": "NA2M", "nb2m": "NB2M",
          "ebm": "EBM (interpret)"}

PAPER = Paper(
    slug="anova_tpnn",
    title="Tensor Product Neural Networks for Functional ANOVA Model",
    method="ANOVA-TPNN: tensor-product sigmoid bases with sum-to-zero factors (unique functional ANOVA components)",
    paper_class="A",
    source="abstracts-003.txt #14",
    official_code="ParkSeokhun/ANOVA-TPNN (GitHub; models/tpnn.py, ensemble.py, train.py read)",
    claims=(
        Claim(id="more_stable_than_nam",
              text="ANOVA-TPNN provide much more stable estimation of each component ... when training data and "
                   "initial values of the model parameters vary than existing neural networks do (vs NA2M: component "
                   "stability difference > 0 on every dataset: the worst dataset's difference)",
              source="abstract; plan claim 1 (direction)", metric="stability.diff_vs_na2m.worst", comparison=">",
              threshold=0.0, kind="direction", role="claim",
              interval=("stability.diff_vs_na2m.worst_ci_low", "stability.diff_vs_na2m.worst_ci_high"),
              per_setting="stability.diff_vs_na2m.by_dataset",
              control=Control(name="the r = -1 ablation (unidentified components) in place of ANOVA-TPNN",
                              metric="stability.control_noconstraint_vs_na2m.worst",
                              interval=("stability.control_noconstraint_vs_na2m.worst_ci_low",
                                        "stability.control_noconstraint_vs_na2m.worst_ci_high"))),
        Claim(id="more_stable_than_nbm",
              text="... much more stable estimation of each component ... than existing neural networks do "
                   "(vs NB2M: component stability difference > 0 on every dataset: the worst dataset's difference)",
              source="abstract; plan claim 1 (direction)", metric="stability.diff_vs_nb2m.worst", comparison=">",
              threshold=0.0, kind="direction", role="claim",
              interval=("stability.diff_vs_nb2m.worst_ci_low", "stability.diff_vs_nb2m.worst_ci_high"),
              per_setting="stability.diff_vs_nb2m.by_dataset",
              control=Control(name="the r = -1 ablation (unidentified components) in place of ANOVA-TPNN",
                              metric="stability.control_noconstraint_vs_nb2m.worst",
                              interval=("stability.control_noconstraint_vs_nb2m.worst_ci_low",
                                        "stability.control_noconstraint_vs_nb2m.worst_ci_high"))),
        Claim(id="constraint_drives_stability",
              text="a novel neural network which guarantees a unique functional ANOVA decomposition and thus is "
                   "able to estimate each component stably (ablation r = -1, no sum-to-zero: lower stability, mean "
                   "over the datasets)",
              source="abstract; plan claim 2 (direction)", metric="stability.diff_vs_tpnn_noconstraint.mean",
              comparison=">", threshold=0.0, kind="direction", role="claim",
              interval=ci("stability.diff_vs_tpnn_noconstraint"),
              per_setting="stability.diff_vs_tpnn_noconstraint.by_dataset",
              control=Control(name="stability of the fitted function (all components summed), which the constraint "
                                   "does not identify any further",
                              metric="stability.fitted_function_diff_vs_tpnn_noconstraint.mean",
                              interval=ci("stability.fitted_function_diff_vs_tpnn_noconstraint"))),
        Claim(id="rmse_within_10pct",
              text="ANOVA-TPNN can approximate any smooth function well (test RMSE within 10% of the best "
                   "baseline on every regression dataset: worst ratio <= 1.10)",
              source="abstract; plan claim 3 (magnitude)", metric="accuracy.rmse_ratio_worst", comparison="<=",
              threshold=1.10, kind="magnitude", role="claim", per_seed="accuracy.rmse_ratio_worst_per_seed",
              per_setting="accuracy.rmse_ratio",
              control=Control(name="least squares on the transformed features (cannot fit a smooth non-linear "
                                   "function)", metric="accuracy.control_linear.rmse_ratio_worst")),
        Claim(id="auc_within_2pts",
              text="... approximate any smooth function well (test AUC within 2 points of the best baseline on "
                   "breast_cancer: gap <= 0.02)",
              source="abstract; plan claim 3 (magnitude)", metric="accuracy.auc_gap", comparison="<=",
              threshold=0.02, kind="magnitude", role="claim", per_seed="accuracy.auc_gap_per_seed",
              control=Control(name="L2 logistic regression on the transformed features",
                              metric="accuracy.control_linear.auc_gap")),
        Claim(id="recovers_known_components",
              text="estimate each component stably and accurately (synthetic function with known components: "
                   "recovery error of ANOVA-TPNN below NA2M's, paired over runs)",
              source="arXiv v1 abstract ('stably and accurately'); plan's recovery report, turned into a "
                     "direction check [ours]",
              metric="recovery.diff_vs_na2m.mean", comparison="<", threshold=0.0, kind="direction", role="claim",
              interval=ci("recovery.diff_vs_na2m"),
              control=Control(name="the r = -1 ablation (unidentified components) in place of ANOVA-TPNN",
                              metric="recovery.control_noconstraint_vs_na2m.mean",
                              interval=ci("recovery.control_noconstraint_vs_na2m"))),
        Claim(id="sum_to_zero_holds",
              text="guarantees a unique functional ANOVA decomposition: every fitted component averages to zero "
                   "over the training data in each of its arguments (max |mean| / RMS <= 1e-3, brute force, with "
                   "the official guard eps in r)",
              source="abstract; official tpnn.py (sum-to-zero constants)", metric="centring.tpnn_max",
              comparison="<=", threshold=1e-3, kind="exact", role="sanity"),
        Claim(id="sum_to_zero_exact_constants",
              text="the same brute-force check after recomputing r at the final parameters with eps = 0 in float64 "
                   "(the construction itself, without the official guard)",
              source="official tpnn.py; diagnosis of sum_to_zero_holds [ours]", metric="centring.tpnn_max_exact_r",
              comparison="<=", threshold=1e-3, kind="exact", role="sanity"),
    ),
    limitations=(
        "Three small tables stand in for the paper's benchmarks: a 6-feature synthetic function with known "
        "components (uniform marginals, Gaussian copula with correlation 0.5), sklearn's diabetes (442 rows) and "
        "breast_cancer reduced to its 8 most informative features (569 rows). All models have main effects and "
        "all pairwise components; the neural baselines are compact re-implementations (NA2M: a small ReLU MLP per "
        "component; NB2M: one small shared basis MLP per order) trained full batch with the same "
        "Adam settings, epochs and best-validation checkpoint as ANOVA-TPNN, not the original NAM/NBM code with "
        "its tuned regularisation, and each model gets a few hundred epochs instead of the official 1,000. "
        "Stability is measured over 6 runs per model by default (the plan: 10; bootstrap resample of the training "
        "pool + fresh initialisation), with the plan's normalised-distance score, not the paper's exact stability metric; "
        "EBM is fitted on the first few runs only (cost), so its accuracy and main-effect stability rest on "
        "fewer runs. The test split, the quantile transform and the evaluation rows are fixed across runs."
    ),
)


@paper_flow(PAPER, Params, smoke=SMOKE)
def anova_tpnn_flow(params: Params, ctx: RunContext) -> RunOutput:
    run_task(method.save_datasets, p=params, data_dir=str(ctx.data_dir))
    with_ebm = [i < params.ebm_runs for i in range(len(ctx.seeds))]
    results = run_mapped(method.run_seed, {"seed": ctx.seeds, "with_ebm": with_ebm}, p=params)
    metrics, tables = aggregate(params, ctx, results)
    figure = _figure(params, results, tables)
    return RunOutput(metrics=metrics, tables=tables, figure=figure, setup=_setup(params, ctx),
                     notes=_notes(params, metrics))


def _est(results: list[dict], dataset: str, model: str) -> tuple[np.ndarray, list[int]]:
    """Stacked components (R, n_eval, C) of the runs that fitted ``model`` on ``dataset``, and their positions."""
    pos = [i for i, r in enumerate(results) if model in r["datasets"][dataset]["models"]]
    return np.stack([results[i]["datasets"][dataset]["models"][model]["components"] for i in pos]), pos


def aggregate(params: Params, ctx: RunContext, results: list[dict]) -> tuple[dict, dict[str, pd.DataFrame]]:
    R = len(results)
    models = list(params.models)
    neural = [m for m in models if m != "ebm"]
    rows, stab_rows = [], []
    dist: dict[tuple[str, str], np.ndarray] = {}
    metrics: dict = {"stability": {}, "accuracy": {}, "recovery": {}, "centring": {}, "per_dataset": {},
                     "timings": {"seed_s_sum": float(sum(r["seconds"] for r in results)),
                                 "seed_s_max": float(max(r["seconds"] for r in results))}}
    for r in results:
        for name, d in r["datasets"].items():
            for model, row in d["models"].items():
                rows.append({"dataset": name, "model": model, "seed": r["seed"],
                             **{k: v for k, v in row.items() if k != "components"}})
    runs = pd.DataFrame(rows)
    for name in params.datasets:
        comps = method.cached_dataset(name, params).comps
        n_main = sum(len(c) == 1 for c in comps)
        per = {}
        for model in models:
            est, pos = _est(results, name, model)
            if len(pos) < 2:
                continue
            D = method.component_distances(est)                                      # (C, R', R')
            if model == "ebm":                       # pairs differ between EBM runs: mains only
                D = D[:n_main]
            else:
                dist[(name, model)] = D
                # the fitted function (all components summed): identified for every model, so the control of
                # the constraint claim
                dist[(name, model, "f")] = method.component_distances(est.sum(axis=2, keepdims=True))
            s = method.stability(D)
            for c, value in enumerate(s):
                stab_rows.append({"dataset": name, "model": model, "component": "x".join(map(str, comps[c])),
                                  "order": len(comps[c]), "stability": float(value)})
            per[model] = {"stability_all": float(s.mean()) if model != "ebm" else float("nan"),
                          "stability_mains": float(s[:n_main].mean()), "n_runs": len(pos)}
        for model in models:
            sel = runs[(runs["dataset"] == name) & (runs["model"] == model)]
            if len(sel):
                per.setdefault(model, {}).update({"score": stats.summarize(sel["score"].to_numpy())})
                if "recovery_error" in sel and sel["recovery_error"].notna().any():
                    per[model]["recovery_error"] = stats.summarize(sel["recovery_error"].to_numpy())
        metrics["per_dataset"][name] = per

    # Stability differences A minus B per dataset; the mean and the worst (minimum) over the datasets, each with a
    # percentile bootstrap over runs (run r is one bootstrap resample + initialisation shared by every model and
    # dataset, so the runs are resampled jointly).
    rng = np.random.default_rng(ctx.seeds[0])
    boots = [rng.integers(0, R, size=R) for _ in range(params.n_boot)]
    comparisons = {f"diff_vs_{other}": ("tpnn", other, "") for other in neural if other != "tpnn"}
    comparisons.update({f"control_noconstraint_vs_{other}": ("tpnn_noconstraint", other, "")
                        for other in ("na2m", "nb2m") if other in neural and "tpnn_noconstraint" in neural})
    if "tpnn_noconstraint" in neural:
        comparisons["fitted_function_diff_vs_tpnn_noconstraint"] = ("tpnn", "tpnn_noconstraint", "f")
    for key, (a, b, what) in comparisons.items():
        metrics["stability"][key] = _stability_difference(params.datasets, dist, a, b, what, boots)
    metrics["stability"]["by_model"] = {m: float(np.mean([metrics["per_dataset"][n][m]["stability_all"]
                                                          for n in params.datasets])) for m in neural}
    metrics["stability"]["mains_by_model"] = {
        m: float(np.mean([metrics["per_dataset"][n][m]["stability_mains"] for n in params.datasets
                          if "stability_mains" in metrics["per_dataset"][n].get(m, {})]))
        for m in models if any("stability_mains" in metrics["per_dataset"][n].get(m, {}) for n in params.datasets)}

    # Accuracy: ANOVA-TPNN vs the best of NA2M, NB2M, EBM per dataset (means over the runs each model ran); per run
    # (seed) ANOVA-TPNN's score against the same best-baseline mean; the linear control in place of ANOVA-TPNN.
    means = runs.groupby(["dataset", "model"])["score"].mean()
    tp = runs[runs["model"] == "tpnn"].set_index(["dataset", "seed"])["score"]
    linear = {(name, r["seed"]): r["datasets"][name]["linear_score"] for r in results for name in params.datasets}
    ratios, gaps, seed_ratio, seed_gap, lin_ratio, lin_gap = {}, {}, {}, {}, {}, {}
    for name in params.datasets:
        task = method.cached_dataset(name, params).task
        base = [means[(name, b)] for b in BASELINES if (name, b) in means.index]
        if not base:
            continue
        lin = float(np.mean([linear[(name, s_)] for s_ in ctx.seeds]))
        if task == "regression":
            ratios[name] = float(means[(name, "tpnn")] / min(base))
            seed_ratio[name] = [float(tp[(name, s_)] / min(base)) for s_ in ctx.seeds]
            lin_ratio[name] = lin / min(base)
        else:
            gaps[name] = float(max(base) - means[(name, "tpnn")])
            seed_gap[name] = [float(max(base) - tp[(name, s_)]) for s_ in ctx.seeds]
            lin_gap[name] = float(max(base) - lin)
    worst_per_seed = lambda d, f: [float(f(v[i] for v in d.values())) for i in range(len(ctx.seeds))] if d else []
    metrics["accuracy"] = {"rmse_ratio_worst": max(ratios.values()) if ratios else float("nan"),
                           "rmse_ratio_worst_per_seed": worst_per_seed(seed_ratio, max),
                           "auc_gap": max(gaps.values()) if gaps else float("nan"),
                           "auc_gap_per_seed": worst_per_seed(seed_gap, max),
                           "rmse_ratio": ratios, "auc_gap_by_dataset": gaps,
                           "control_linear": {"rmse_ratio_worst": max(lin_ratio.values()) if lin_ratio else float("nan"),
                                              "auc_gap": max(lin_gap.values()) if lin_gap else float("nan"),
                                              "rmse_ratio": lin_ratio, "auc_gap_by_dataset": lin_gap},
                           "mean_score": {f"{d}.{m}": float(v) for (d, m), v in means.items()}}

    # Recovery of the synthetic function's components (paired over runs).
    if "synthetic" in params.datasets:
        syn = runs[runs["dataset"] == "synthetic"].pivot(index="seed", columns="model", values="recovery_error")
        for other in [m for m in neural if m != "tpnn" and m in syn]:
            metrics["recovery"][f"diff_vs_{other}"] = stats.paired_difference(syn["tpnn"].to_numpy(),
                                                                             syn[other].to_numpy())
        if "tpnn_noconstraint" in syn and "na2m" in syn:
            metrics["recovery"]["control_noconstraint_vs_na2m"] = stats.paired_difference(
                syn["tpnn_noconstraint"].to_numpy(), syn["na2m"].to_numpy())
        metrics["recovery"]["by_model"] = {m: float(syn[m].mean()) for m in syn.columns if syn[m].notna().any()}
    else:
        nan = {"mean": float("nan"), "ci_low": float("nan"), "ci_high": float("nan")}
        metrics["recovery"]["diff_vs_na2m"] = metrics["recovery"]["control_noconstraint_vs_na2m"] = nan

    cen = runs.dropna(subset=["centring_error"]) if "centring_error" in runs else runs.iloc[:0]
    tp, ab = cen[cen["model"] == "tpnn"], cen[cen["model"] == "tpnn_noconstraint"]
    metrics["centring"] = {
        "tpnn_max": float(tp["centring_error"].max()),
        "tpnn_median": float(tp["centring_error"].median()),
        "tpnn_max_vs_prediction": float(tp["centring_error_vs_prediction"].max()),
        "tpnn_runs_above_1e-3": int((tp["centring_error"] > 1e-3).sum()), "tpnn_fits": len(tp),
        "tpnn_fits_with_degenerate_basis": int((tp["smallest_side_mass"] < params.id_eps).sum()),
        # diagnosis: the same check with r recomputed without the guard eps (float64)
        "tpnn_max_exact_r": float(tp["centring_error_exact_r"].max()),
        "tpnn_runs_above_1e-3_exact_r": int((tp["centring_error_exact_r"] > 1e-3).sum()),
        # the guard's predicted relative miss of one factor, eps / smallest side mass, for the failing fits
        "tpnn_failing_fits_with_guard_miss_above_1e-3": int(((tp["centring_error"] > 1e-3)
                                                             & (params.id_eps / tp["smallest_side_mass"] > 1e-3)).sum()),
        "noconstraint_max": float(ab["centring_error"].max()) if len(ab) else float("nan"),
        "noconstraint_median": float(ab["centring_error"].median()) if len(ab) else float("nan")}
    metrics["timings"]["fit_s_by_model"] = {m: float(runs.loc[runs["model"] == m, "seconds"].sum()) for m in models}

    tables = {"plot": _plot_table(params, results), "runs": runs, "stability": pd.DataFrame(stab_rows)}
    return metrics, tables


def _stability_difference(datasets: list[str], dist: dict, a: str, b: str, what: str,
                          boots: list[np.ndarray]) -> dict:
    """Stability of model ``a`` minus model ``b`` (components, or the fitted function when ``what == "f"``) per
    dataset, and its mean and worst (minimum) over the datasets, each with a percentile bootstrap over runs."""
    key = lambda n, m: (n, m, "f") if what else (n, m)

    def per_dataset(idx=None):
        return {n: float(np.nanmean(method.stability(dist[key(n, a)], idx))
                         - np.nanmean(method.stability(dist[key(n, b)], idx))) for n in datasets}

    def interval(values):
        values = np.asarray(values)[~np.isnan(values)]
        return np.quantile(values, [0.025, 0.975]) if values.size else (np.nan, np.nan)

    point = per_dataset()
    boot = [per_dataset(idx) for idx in boots]
    lo, hi = interval([np.mean(list(d.values())) for d in boot])
    wlo, whi = interval([min(d.values()) for d in boot])
    return {"mean": float(np.mean(list(point.values()))), "ci_low": float(lo), "ci_high": float(hi),
            "worst": float(min(point.values())), "worst_ci_low": float(wlo), "worst_ci_high": float(whi),
            "by_dataset": point}


def _plot_table(params: Params, results: list[dict]) -> pd.DataFrame:
    """The main figure's data: the first dataset's main effect of feature 0, every run of every neural model
    (centred), and the truth for the synthetic set. Columns x (feature value), y, series."""
    name = params.datasets[0]
    ds = method.cached_dataset(name, params)
    x = ds.X[ds.eval_rows, 0]
    order = np.argsort(x, kind="stable")
    frames = []
    for model in [m for m in params.models if m != "ebm"]:
        est, pos = _est(results, name, model)
        for e, i in zip(est, pos):
            y = e[:, 0] - e[:, 0].mean()
            frames.append(pd.DataFrame({"x": x[order], "y": y[order], "series": f"{model} seed {results[i]['seed']}"}))
    if ds.truth is not None:
        frames.append(pd.DataFrame({"x": x[order], "y": ds.truth[order, 0], "series": "truth"}))
    return pd.concat(frames, ignore_index=True)


def _figure(params: Params, results: list[dict], tables: dict[str, pd.DataFrame]):
    plot = tables["plot"]
    shown = [m for m in ("tpnn", "na2m", "nb2m", "tpnn_noconstraint") if m in params.models]
    fig, axes = plt.subplots(1, len(shown) + 1, figsize=(4.2 * (len(shown) + 1), 3.8))
    ylim = np.quantile(plot["y"], [0.005, 0.995]) * 1.2
    for ax, model in zip(axes, shown):
        for series, g in plot[plot["series"].str.startswith(model + " seed")].groupby("series"):
            ax.plot(g["x"], g["y"], lw=0.9, alpha=0.7)
        truth = plot[plot["series"] == "truth"]
        if len(truth):
            ax.plot(truth["x"], truth["y"], "k--", lw=1.8, label="truth")
            ax.legend(fontsize=8)
        ax.set(title=f"{LABELS[model]}: f_0 over runs", xlabel=f"x0 ({params.datasets[0]})", ylim=tuple(ylim))
    axes[0].set_ylabel("centred main effect (standardised units)")
    st = tables["stability"]
    ax = axes[-1]
    piv = st.groupby(["dataset", "model"])["stability"].mean().unstack("model")
    piv = piv[[m for m in params.models if m in piv.columns]]
    piv.rename(columns=LABELS).plot.bar(ax=ax, rot=0)
    ax.set(title="Mean component stability (EBM: mains)", ylabel="1 - mean normalised distance", ylim=(0, 1))
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _setup(params: Params, ctx: RunContext) -> str:
    return (
        f"Datasets: {', '.join(params.datasets)}. Synthetic: n = {params.synth_n}, d = {params.synth_d}, uniform "
        f"marginals on [-1, 1] from a Gaussian copula with latent correlation {params.synth_rho}, y = sin(pi x0) + "
        f"x1^2 + 0.5 x2 + x0 x3 + N(0, {params.synth_noise}^2). breast_cancer: the {params.bc_top_features} features "
        f"with the highest mutual information. A fixed {params.test_frac:.0%} test split; features quantile-"
        "transformed to [-1, 1] (official `uniform_transform`) with a transform fitted on the training pool; "
        "regression targets standardised.\n\n"
        f"- **Runs** (seeds {ctx.seeds}): run r draws a bootstrap resample of the training pool (its out-of-bag "
        "rows are the validation set of the checkpoint) and initialises every model from seed r; the same "
        "resample is used by every model.\n"
        f"- **ANOVA-TPNN**: all mains and pairs, K = {params.n_basis} bases per component, f_S = sum_k beta_k "
        "prod_j (s0 + r s1), sigmoid soft splits, data-aware init (Beta(1,1) percentile thresholds, max |x - b| "
        f"temperatures), sum-to-zero constant r from each training batch (eps = {params.id_eps}), frozen at the "
        "end. Ablation: r = -1.\n"
        f"- **NA2M**: ReLU MLP {params.nam_hidden} per component. **NB2M**: per order one shared basis MLP "
        f"{params.nbm_hidden} -> {params.nbm_bases} bases, linear read-out per component. Every neural model: "
        f"full-batch Adam(lr {params.lr}, betas (0.95, 0.998)), {params.epochs} epochs ({params.synth_epochs} on the "
        f"synthetic set), best validation loss checked every {params.eval_every} epochs.\n"
        "- **Negative controls** (same metric, same threshold, computed in the same runs): the r = -1 ablation in place "
        "of ANOVA-TPNN against NA2M / NB2M (stability, recovery); the stability of the fitted function (all components "
        "summed, identified for every model) for the constraint claim; a linear model (least squares / L2 logistic "
        "regression on the transformed features) in place of ANOVA-TPNN for the accuracy claims.\n"
        f"- **EBM**: interpret {params.ebm_interactions} interactions on {params.ebm_interaction_bins} bins, "
        f"{params.ebm_outer_bags} outer bag(s), on the "
        f"first {params.ebm_runs} run(s).\n"
        f"- **Stability** of a component: its estimates at {params.eval_rows} fixed rows, centred, compared between "
        "every pair of runs by ||g_r - g_s|| / (||g_r|| + ||g_s||); stability = 1 - the mean distance; averaged "
        "over all components (EBM: mains only). The comparisons with NA2M and NB2M are decided on the worst dataset (the "
        "abstract's claim is not an average); the ablation comparison on the mean over datasets; every dataset's "
        "difference is recorded. Intervals: percentile bootstrap over runs "
        f"({params.n_boot} resamples, pairs of identical runs skipped).\n"
        "- **Recovery** (synthetic): ||g_hat - g|| / ||g|| over all components at once against the unique "
        "decomposition of the true function under the product of the empirical marginals."
    )


def _notes(params: Params, metrics: dict) -> str:
    st, acc, cen = metrics["stability"], metrics["accuracy"], metrics["centring"]
    by = ", ".join(f"{LABELS[m]} {v:.3f}" for m, v in st["by_model"].items())
    return (
        "**Confirmed against the official code** (`models/tpnn.py`, `ensemble.py`, `train.py`, the Wine notebook): "
        "the basis phi = s0 + r s1 with r = -(sum s0 + 1e-3)/(sum s1 + 1e-3) over the training batch, with "
        "gradients through r, frozen by `save_id_constants`; products over the component's features; beta ~ "
        "N(0, 1); data-aware thresholds/temperatures; sigmoid (not sparsemoid: the Trainer's default "
        "`bin_function=nn.Sigmoid()`); K = 10, max_order = 2, lr 0.01, Adam betas (0.95, 0.998), full batch, "
        "quantile transform to [-1, 1], best-validation checkpoint.\n\n"
        "**Deviations and choices of ours**: an intercept b0 is learned (the official model has none and relies "
        "on a standardised target); r is recomputed on the training rows at the final parameters before "
        "inference (the official code keeps the constants of the last training forward pass, one step older); "
        f"{params.epochs} epochs at lr {params.lr} instead of up to 1,000 at 0.01 (CPU budget); the official "
        "quantile transform is fitted on each split separately, here on the training pool only; NA2M/NB2M are "
        "our compact versions (no ExU units, dropout or output penalty); the stability score is the plan's "
        "normalised distance, not the paper's exact metric (the official `cal_UoC` averages the across-seed "
        "variance of each component over data points); the synthetic marginals (uniform) and noise level are "
        "ours. Could not read the paper's text here, so its NAM/NBM settings and stability table are unverified."
        "\n\n"
        f"**Reading the results**: mean component stability over the datasets: {by}. Accuracy: worst RMSE ratio "
        f"(ANOVA-TPNN / best baseline) {acc['rmse_ratio_worst']:.3f} (by dataset: "
        + ", ".join(f"{k} {v:.3f}" for k, v in acc["rmse_ratio"].items())
        + f"), AUC gap {acc['auc_gap']:.3f}; the linear control: worst RMSE ratio "
        f"{acc['control_linear']['rmse_ratio_worst']:.3f}, AUC gap {acc['control_linear']['auc_gap']:.3f}. **Training "
        f"budget**: in the previous default run (250 epochs) every model's best checkpoint on the synthetic set was at or near the last epoch (ANOVA-TPNN "
        f"6 of 6), so the synthetic set now gets {params.synth_epochs} epochs for every neural model (lr x epochs = "
        f"{params.lr * params.synth_epochs:.1f}, at least the official 0.01 x 1,000 = 10; decided before the run). "
        "Up to 1,000 epochs on every dataset for every model does not fit the 2-minute CPU budget (about 4x the "
        "neural training time); on diabetes and breast_cancer the best checkpoints were early (epochs 40-210), so the "
        "shortfall there is small.\n\n"
        f"**Sum-to-zero**: the brute-force error of ANOVA-TPNN has median {cen['tpnn_median']:.1e} and maximum "
        f"{cen['tpnn_max']:.2g} ({cen['tpnn_runs_above_1e-3']} of {cen['tpnn_fits']} fits above 1e-3; relative to "
        f"the prediction's standard deviation the worst offset is {cen['tpnn_max_vs_prediction']:.2g}); the r = -1 "
        f"ablation has median {cen['noconstraint_median']:.2f}. **Cause**: recomputing r at the final parameters "
        f"with eps = 0 (float64) brings the worst fit to {cen['tpnn_max_exact_r']:.1e} "
        f"({cen['tpnn_runs_above_1e-3_exact_r']} of {cen['tpnn_fits']} fits above 1e-3), so every failure comes "
        f"from the official guard eps = {params.id_eps} in r = -(sum s0 + eps)/(sum s1 + eps), not from float32, the "
        "checkpoint or the bootstrap duplicates. The previous explanation (a side mass below eps) was too narrow: the "
        "guard makes one factor miss its zero sum by eps (S0 - S1)/(S1 + eps), a relative miss of about eps / "
        "min(sum s0, sum s1), which exceeds the 1e-3 tolerance as soon as one side of a soft split holds less "
        "than about one training row (eps / 1e-3 = 1), not only below eps "
        f"({cen['tpnn_failing_fits_with_guard_miss_above_1e-3']} of the {cen['tpnn_runs_above_1e-3']} failing fits "
        f"have eps / smallest side mass > 1e-3; {cen['tpnn_fits_with_degenerate_basis']} have a side mass below eps "
        "itself; `smallest_side_mass` in runs.csv). A fit can also fail with a larger side mass when the bases of a "
        "component cancel, so that its RMS is small against each basis's miss. Training pushes thresholds towards "
        "the edge of the data, where this happens. Both checks are sanity checks of our implementation, not claims."
        "\n\n"
        "**Per dataset**: the stability differences by dataset are in `stability.diff_vs_*.by_dataset`; on "
        "breast_cancer the previous run had ANOVA-TPNN less stable than NB2M and than the ablation, which the mean over "
        "datasets hid. The NA2M/NB2M claims are now decided on the worst dataset."
    )

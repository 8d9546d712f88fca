"""Sharpness dynamics of the minimalist model, the evaluation: per-seed rises, deviations from 2/eta, rank
correlations over difficulty, depth and label noise, SGD against GD, the figure and the measured numbers."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.sharpness_minimalist import method
from flows.sharpness_minimalist.params import Params
from paperflows.core import estimates as est
from paperflows.core import stats
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records
from tasks.correlation import spearman


def _seed_values(frame: pd.DataFrame, seeds: list[int], fn) -> np.ndarray:
    """``fn(rows of one seed)`` for every seed, in seed order (NaN where a seed has no rows)."""
    return np.array([fn(frame[frame["seed"] == s]) if (frame["seed"] == s).any() else np.nan for s in seeds],
                    dtype=float)


def _deviation(g: pd.DataFrame) -> pd.Series:
    """Tail deviation from 2/eta per run; a diverged run never settled at the edge: 1 (100%)."""
    return g["tail_max_rel_dev_edge"].where(~g["diverged"], 1.0)


def _eos_metrics(runs: pd.DataFrame, seeds: list[int]) -> dict:
    eos = runs[runs["group"] == "eos"]
    above, below = eos[eos["S_pred"] > eos["edge"]], eos[eos["S_pred"] < eos["edge"]]
    settled = above[~above["diverged"]]
    linear = runs[runs["group"] == "linear"]
    out = {
        # claim 1: diverged runs have no terminal sharpness; they are counted below and fail claim 2
        "min_rise": stats.summarize(_seed_values(settled, seeds, lambda g: (g["terminal"] / g["S0"]).min())),
        "max_rel_dev": stats.summarize(_seed_values(above, seeds, lambda g: _deviation(g).max())),
        "below_edge_max_rel_dev": stats.summarize(_seed_values(below, seeds, lambda g: _deviation(g).max())),
        "linear_rise": stats.summarize(_seed_values(linear, seeds, lambda g: (g["terminal"] / g["S0"]).min())),
        "diverged_above_edge": int(above["diverged"].sum()), "runs_above_edge": int(len(above)),
        "by_ratio": {},
    }
    for r, g in eos.groupby("ratio", sort=True):
        out["by_ratio"][f"r{r:g}"] = {
            "terminal_over_edge": stats.summarize(g["terminal"] / g["edge"]),
            "terminal_over_prediction": stats.summarize(g["terminal"] / g["S_pred_terminal"]),
            "max_rel_dev_edge": stats.summarize(g["tail_max_rel_dev_edge"]),
            "rise": stats.summarize(g["terminal"] / g["S0"]),
            "diverged": int(g["diverged"].sum()),
        } if not g["diverged"].any() else {"diverged": int(g["diverged"].sum()), "runs": int(len(g))}
    return out


def _sweep_metrics(runs: pd.DataFrame, group: str, x: str, seeds: list[int]) -> dict:
    """Fixed-eta sweep over difficulty levels (x = "Q") or depths (x = "depth")."""
    sub = runs[runs["group"] == group]
    key = "depth" if x == "depth" else "level"
    return {
        "spearman": stats.summarize(_seed_values(sub, seeds, lambda g: spearman(g[x], g["terminal"]))),
        "spearman_at_init": stats.summarize(_seed_values(sub, seeds, lambda g: spearman(g[x], g["S0"]))),
        "max_rel_err": stats.summarize(_seed_values(
            sub, seeds, lambda g: (g["terminal"] / g["S_pred_terminal"] - 1.0).abs().max(skipna=False))),
        "diverged": int(sub["diverged"].sum()),
        "by_level": {f"{key}_{k:g}": {
            "Q": float(g["Q"].mean()), "S_pred": float(g["S_pred"].mean()), "terminal": float(g["terminal"].mean()),
            "terminal_over_S_pred": float((g["terminal"] / g["S_pred_terminal"]).mean()), "S0": float(g["S0"].mean()),
            "ratio": float(g["ratio"].mean()),
        } for k, g in sub.groupby(key, sort=True)},
    }


def _worse(candidate: float, current: float) -> bool:
    """Is ``candidate`` a worse (larger) SGD-minus-GD difference than ``current``? NaN is worst."""
    return not np.isnan(current) and (np.isnan(candidate) or candidate > current)


def _sgd_metrics(runs: pd.DataFrame, params: Params) -> dict:
    out: dict = {"by_ratio": {}}
    worst, worst_ctrl = None, None
    gd_run = {"group": "sgd", "batch_size": params.n}
    for r, g in runs[runs["group"].isin(["sgd", "gd2"])].groupby("ratio", sort=True):
        sgd = g[g["group"] == "sgd"]
        entry = {f"b{b}": est.summary(sgd, "terminal", batch_size=b) for b in sorted(sgd["batch_size"].unique())}
        entry["final_loss"] = {f"b{b}": float(gb["final_loss"].mean()) for b, gb in sgd.groupby("batch_size", sort=True)}
        entry["final_balance"] = {f"b{b}": float(gb["final_balance"].median())
                                  for b, gb in sgd.groupby("batch_size", sort=True)}
        entry["diverged"] = {f"b{b}": int(gb["diverged"].sum()) for b, gb in sgd.groupby("batch_size", sort=True)}
        entry["edge"], entry["S_pred"] = float(g["edge"].mean()), float(g["S_pred"].mean())
        entry["b1_minus_gd"] = est.paired(g, "terminal", {"group": "sgd", "batch_size": 1}, gd_run)
        entry["gd2_minus_gd"] = est.paired(g, "terminal", {"group": "gd2"}, gd_run)
        out["by_ratio"][f"r{r:g}"] = entry
        # the worst step size; an undefined difference (a diverged run) is the worst of all: it propagates
        if worst is None or _worse(entry["b1_minus_gd"]["mean"], worst["mean"]):
            worst = {**entry["b1_minus_gd"], "ratio": float(r)}
        if worst_ctrl is None or _worse(entry["gd2_minus_gd"]["mean"], worst_ctrl["mean"]):
            worst_ctrl = {**entry["gd2_minus_gd"], "ratio": float(r)}
    out["b1_minus_gd_worst"], out["gd2_minus_gd_worst"] = worst, worst_ctrl
    return out


def _aggregate(runs: pd.DataFrame, mlp: pd.DataFrame, params: Params, closed_form: list[float]) -> dict:
    seeds = sorted(runs["seed"].unique().tolist())
    metrics: dict = {}
    for spectrum in method.SPECTRA:
        sub = runs[runs["spectrum"] == spectrum]
        metrics[spectrum] = {"eos": _eos_metrics(sub, seeds), "difficulty": _sweep_metrics(sub, "diff", "Q", seeds),
                             "depth": _sweep_metrics(sub, "depth", "depth", seeds), "sgd": _sgd_metrics(sub, params),
                             "diverged_runs": int(sub["diverged"].sum())}
    last, first = mlp[mlp["step"] == mlp["step"].max()], mlp[mlp["step"] == 0]
    metrics["mlp"] = {
        "spearman": stats.summarize(_seed_values(last, seeds, lambda g: spearman(g["label_noise"], g["sharpness"]))),
        "spearman_at_init": stats.summarize(_seed_values(
            first, seeds, lambda g: spearman(g["label_noise"], g["sharpness"]))),
        "edge": 2.0 / params.mlp_lr,
        "by_noise": {f"flip_{k:g}": {"sharpness": stats.summarize(g["sharpness"]), "loss": float(g["loss"].mean())}
                     for k, g in last.groupby("label_noise", sort=True)},
    }
    metrics["closed_form"] = {"max_error": float(max(closed_form))}
    return metrics



def evaluate(params: Params, records: Records) -> RunOutput:
    runs, curves, mlp, per_seed = records["runs"], records["curves"], records["mlp"], records["per_seed"]
    metrics = _aggregate(runs, mlp, params, per_seed["closed_form_error"].tolist())
    metrics["timings"] = {key: per_seed[key].tolist() for key in per_seed.columns if key.endswith("_s")}

    eos_curves = curves[(curves["group"] == "eos") | ((curves["group"] == "sgd") & (curves["batch_size"] == 1))].copy()
    eos_curves["y"] = eos_curves["window_mean"] / eos_curves["edge"]
    eos_curves["series"] = (eos_curves["spectrum"] + np.where(eos_curves["group"] == "eos", " GD r=", " SGD b=1 r=")
                            + eos_curves["ratio"].map("{:g}".format))
    plot = eos_curves.groupby(["series", "step"], sort=True)["y"].mean().reset_index().rename(columns={"step": "x"})
    plot = plot[["x", "y", "series"]]
    tables = {"plot": plot, "runs": runs, "curves": curves, "mlp": mlp}
    return RunOutput(metrics=metrics, tables=tables, figure=_figure(runs, curves, mlp, params),
                     setup=_setup(params), notes=_measured(params, metrics))


def _figure(runs: pd.DataFrame, curves: pd.DataFrame, mlp: pd.DataFrame, params: Params):
    fig, axes = plt.subplots(2, 3, figsize=(16, 8.5))
    seed0 = curves["seed"].min()
    for ax, spectrum, title in ((axes[0, 0], "isotropic", "A. GD, isotropic inputs (primary)"),
                                (axes[0, 1], "power_law", f"B. GD, power-law inputs (decay {params.spectrum_decay:g})")):
        sub = curves[(curves["group"] == "eos") & (curves["spectrum"] == spectrum) & (curves["seed"] == seed0)]
        for i, (r, g) in enumerate(sub.groupby("ratio", sort=True)):
            color = f"C{i}"
            ax.fill_between(g["step"], g["window_min"], g["window_max"], color=color, alpha=0.25, lw=0)
            ax.plot(g["step"], g["window_mean"], color=color, lw=1, label=f"r = eta S*/2 = {r:g}")
            ax.axhline(g["edge"].iloc[0], color=color, ls="--", lw=0.8)
            ax.axhline(g["S_pred"].iloc[0], color=color, ls=":", lw=0.8)
        ax.set(yscale="log", xlabel="GD step", ylabel="sharpness (exact): window mean, band min-max",
               title=f"{title}, D={params.depth_main} (seed {seed0})")
        ax.legend(fontsize=7, title="dashed 2/eta, dotted S*; a curve that stops diverged", title_fontsize=7)

    markers = {"isotropic": "o", "power_law": "s"}
    ax = axes[0, 2]
    for i, spectrum in enumerate(method.SPECTRA):
        diff = runs[(runs["group"] == "diff") & (runs["spectrum"] == spectrum)]
        ax.scatter(diff["Q"], diff["terminal"], s=14, marker=markers[spectrum], color=f"C{i}", label=f"{spectrum}: measured")
        ax.scatter(diff["Q"], diff["S_pred"], s=18, marker="x", color=f"C{i}", label=f"{spectrum}: S*(Q, D)")
    ax.axhline(2.0 / params.fixed_eta, color="k", ls="--", lw=0.8, label="2/eta")
    ax.set(xscale="log", yscale="log", xlabel="difficulty Q = ||X^+ y||^2", ylabel="terminal sharpness",
           title=f"C. difficulty sweep, one eta = {params.fixed_eta:g} (D={params.depth_main}, all seeds)")
    ax.legend(fontsize=7)

    ax = axes[1, 0]
    for i, spectrum in enumerate(method.SPECTRA):
        dep = runs[(runs["group"] == "depth") & (runs["spectrum"] == spectrum)]
        agg = dep.groupby("depth")[["terminal", "S_pred"]].mean()
        lo, hi = dep.groupby("depth")["terminal"].min(), dep.groupby("depth")["terminal"].max()
        ax.errorbar(agg.index, agg["terminal"], yerr=[agg["terminal"] - lo, hi - agg["terminal"]], fmt=markers[spectrum] + "-",
                    color=f"C{i}", ms=4, lw=1, capsize=3, label=f"{spectrum}: measured (mean, min-max)")
        ax.plot(agg.index, agg["S_pred"], "x:", color=f"C{i}", lw=1, label=f"{spectrum}: S* (seed mean)")
    ax.set(xlabel="depth D", ylabel="terminal sharpness", title=f"D. depth sweep, one eta = {params.fixed_eta:g}")
    ax.legend(fontsize=7)

    ax = axes[1, 1]
    sgd = runs[runs["group"] == "sgd"]
    for i, ((spectrum, r), g) in enumerate(sgd.groupby(["spectrum", "ratio"], sort=True)):
        norm = g.assign(y=g["terminal"] / g["edge"])
        agg = norm.groupby("batch_size")["y"].agg(["mean", "min", "max"])
        ax.errorbar(agg.index, agg["mean"], yerr=[agg["mean"] - agg["min"], agg["max"] - agg["mean"]],
                    fmt=markers[spectrum] + "-", capsize=3, color=f"C{i}", label=f"{spectrum}, r = {r:g}")
    ax.axhline(1.0, color="k", ls="--", lw=0.8, label="2/eta")
    ax.set(xscale="log", xlabel=f"batch size (n = {params.n}: GD)", ylabel="terminal sharpness x eta/2",
           title="E. SGD vs GD, equal eta and updates")
    ax.legend(fontsize=7)

    ax = axes[1, 2]
    agg = mlp.groupby(["label_noise", "step"])["sharpness"].mean().reset_index()
    for i, (k, g) in enumerate(agg.groupby("label_noise", sort=True)):
        ax.plot(g["step"], g["sharpness"], "o-", color=f"C{i}", ms=3, label=f"label flips {k:g}")
    ax.axhline(2.0 / params.mlp_lr, color="k", ls="--", lw=0.8, label="2/eta")
    ax.set(xlabel="GD step", ylabel="sharpness (power iteration, seed mean)",
           title=f"F. tanh MLP on digits {params.mlp_classes[0]} vs {params.mlp_classes[1]}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig

def _setup(p: Params) -> str:
    return (
        f"**Minimalist model** f(x) = (prod_j v_j) <w, x>, w in R^{p.d}, D - 1 scalar layers, loss "
        f"1/(2n) ||f(X) - y||^2 on n = {p.n} examples; labels y = X beta + sigma eps. **Two input spectra**, every "
        f"synthetic experiment run on both: isotropic x ~ N(0, I) (primary) and power-law x ~ N(0, diag(k^-"
        f"{p.spectrum_decay:g})) (secondary). {p.seeds} seeds (a seed draws X, beta, eps, the initial directions and "
        f"the SGD batches). Balanced small initialisation ||w|| = v_j = alpha, alpha^D = {p.init_norm:g}. The exact "
        f"Hessian ((d + D - 1)^2, analytic, eigvalsh) is evaluated every {p.record_every} steps; 'terminal' "
        f"sharpness = mean over the last {p.tail_frac:.0%} of the records.\n\n"
        f"- **EoS** (A, B): D = {p.depth_main}, ||beta|| = {p.beta_norm:g}, sigma = {p.base_noise:g}, "
        f"eta = r * 2/S* for r in {p.eos_step_ratios}, {p.steps} steps (prediction: terminal sharpness = "
        "min(S*, 2/eta)). Control of progressive sharpening: linear regression (D = 1) on the same data at "
        "eta = r * 2/lambda_max(X^T X/n), r < 1.\n"
        f"- **Difficulty** (C): one fixed eta = {p.fixed_eta:g} for every level and seed, {p.fixed_eta_steps} steps; "
        f"levels (||beta||, sigma) = {list(zip(p.level_beta_norms, p.noise_levels))} (6 values of Q = ||X^+ y||^2).\n"
        f"- **Depth** (D): D in {p.depths}, ||beta|| = {p.beta_norm:g}, sigma = {p.base_noise:g}, the same fixed "
        f"eta = {p.fixed_eta:g} and {p.fixed_eta_steps} steps.\n"
        f"- **SGD** (E): batch sizes {p.sgd_batch_sizes} (b distinct examples drawn afresh every update) and GD "
        f"(b = n), eta = r * 2/S* for r in {p.sgd_step_ratios}, {p.steps} updates; sharpness of the full-batch loss. "
        "Control: a second GD run from another initial direction.\n"
        f"- **MLP** (F): {p.mlp_n_train} examples of digits {p.mlp_classes[0]} vs {p.mlp_classes[1]} (pixels/16, "
        f"labels +-1, a nested fraction {p.mlp_label_noise} of labels flipped), 64-{p.mlp_hidden}-{p.mlp_hidden}-1 "
        f"tanh MLP (PyTorch default init, the same init for every level), full-batch GD on the MSE with "
        f"eta = {p.mlp_lr:g} for {p.mlp_steps} steps; sharpness by {p.mlp_power_iters} warm-started power "
        f"iterations on exact Hessian-vector products every {p.mlp_record_every} steps; terminal = last step."
    )


def _sgd_reading(p: Params, m: dict, spectrum: str) -> str:
    parts = []
    for key, e in m[spectrum]["sgd"]["by_ratio"].items():
        gd, b1 = f"b{p.n}", "b1"
        parts.append(f"r = {key[1:]}: final loss b=1 {e['final_loss'][b1]:.4f} vs GD {e['final_loss'][gd]:.4f}, "
                     f"balance ||w||/|v_j| (median) b=1 {e['final_balance'][b1]:.2f} vs GD {e['final_balance'][gd]:.2f}, "
                     f"diverged b=1 {e['diverged'][b1]} of {p.seeds}")
    return f"{spectrum}: " + "; ".join(parts)


def _mlp_reading(m: dict) -> str:
    levels = m["mlp"]["by_noise"]
    return ("Terminal MLP sharpness by label-flip fraction (seed mean): "
            + ", ".join(f"{k[5:]}: {v['sharpness']['mean']:.1f}" for k, v in levels.items())
            + f" (2/eta = {m['mlp']['edge']:g}).")


def _eos_reading(m: dict, spectrum: str) -> str:
    e = m[spectrum]["eos"]
    parts = []
    for k, v in e["by_ratio"].items():
        parts.append(f"r = {k[1:]}: " + (f"terminal/(2/eta) = {v['terminal_over_edge']['mean']:.3f}, max deviation "
                                        f"{v['max_rel_dev_edge']['mean']:.2f}" if "terminal_over_edge" in v
                                        else f"{v['diverged']} of {v['runs']} runs diverged"))
    return f"{spectrum}: " + "; ".join(parts)


def _sweep_reading(m: dict, spectrum: str, sweep: str) -> str:
    levels = m[spectrum][sweep]["by_level"]
    return f"{spectrum}: " + ", ".join(
        f"{k.split('_')[-1] if sweep == 'depth' else 'Q=' + format(v['Q'], '.2g')}: {v['terminal']:.3g} "
        f"(x{v['terminal_over_S_pred']:.2f} of S*, r = {v['ratio']:.2f})" for k, v in levels.items())




def _measured(p: Params, m: dict) -> str:
    """The measured numbers behind the claims, for the notes (how to read them is in NOTES.md)."""
    iso, power = m["isotropic"], m["power_law"]
    return (
        "**Measured.** EoS runs by ratio r: " + _eos_reading(m, "isotropic") + "; " + _eos_reading(m, "power_law")
        + f". Diverged above the edge: {iso['eos']['diverged_above_edge']} of {iso['eos']['runs_above_edge']} "
        f"isotropic and {power['eos']['diverged_above_edge']} of {power['eos']['runs_above_edge']} power-law runs.\n\n"
        f"Fixed eta = {p.fixed_eta:g} for {p.fixed_eta_steps} steps (eta * steps = "
        f"{p.fixed_eta * p.fixed_eta_steps:g}). Terminal sharpness by level: "
        + _sweep_reading(m, "isotropic", "difficulty") + "; " + _sweep_reading(m, "power_law", "difficulty")
        + ". By depth: " + _sweep_reading(m, "isotropic", "depth") + "; " + _sweep_reading(m, "power_law", "depth")
        + f". Difficulty control, Spearman at initialisation: isotropic "
        f"{iso['difficulty']['spearman_at_init']['mean']:.2f}, power-law "
        f"{power['difficulty']['spearman_at_init']['mean']:.2f}.\n\n"
        "SGD (b = 1) against GD, final loss and layer balance: " + _sgd_reading(p, m, "isotropic") + "; "
        + _sgd_reading(p, m, "power_law") + ".\n\n" + _mlp_reading(m)
    )

"""CK/NTK spikes, the evaluation: outlier counts, positions and alignments against the derived limit, the
transitions, the digits, the figure."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.ck_ntk_spikes import method
from flows.ck_ntk_spikes.params import Params
from paperflows.core import estimates as est
from paperflows.core import stats
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records


def evaluate(params: Params, records: Records) -> RunOutput:
    rows, digits = records["spectra"], records["digits"]
    pred = records["limit"]
    theory = _theory(records["theory"])
    metrics, cells = _metrics(params, rows, pred, theory, digits)
    timings = records["timings"]
    metrics["timings"] = {"sweep_s_per_seed": timings["sweep_s"].tolist(),
                          "digits_s_per_seed": timings["digits_s"].tolist()}
    plot = _plot_table(params, rows, pred)
    figure = _figure(params, plot, cells, _first_seed_vectors(records))
    table_rows = rows.assign(eigs=rows["eigs"].map(lambda e: " ".join(f"{v:.4g}" for v in e)))
    return RunOutput(metrics=metrics, tables={"plot": plot, "spectra": table_rows, "limit": pred.drop(columns="seed"),
                                              "top_snr_cells": cells, "digits": digits},
                     figure=figure, setup=_setup(params, theory), notes=_measured(params, metrics, cells))


def _theory(table: pd.DataFrame) -> dict:
    """Per activation: the Gaussian moments b2 and a, the NTK's r_+ and each kernel's transition snr."""
    out = {}
    for act, g in table.groupby("activation", sort=False):
        first = g.iloc[0]
        out[act] = {"b2": float(first["b2"]), "a": float(first["a"]), "ntk_r_plus": float(first["ntk_r_plus"]),
                    "transition_snr": dict(zip(g["kernel"], g["transition_snr"].astype(float)))}
    return out


def _first_seed_vectors(records: Records) -> dict:
    """The top two digits eigenvectors of the run's first seed, for the figure ({} without digits)."""
    vectors = records["digits_vectors"]
    first = vectors[vectors["seed"] == records.seeds[0]]
    if first.empty:
        return {}
    row = first.iloc[0]
    return {"activation": row["activation"], "kernel": row["kernel"], "labels": list(row["labels"]),
            "v1": list(row["v1"]), "v2": list(row["v2"])}

# ---------------------------------------------------------------------------------------------
# Aggregation over seeds
# ---------------------------------------------------------------------------------------------


def _abs_err(values: np.ndarray, target: float) -> dict[str, float]:
    """|mean - target| over seeds, with the Student-t interval of the mean carried through
    (its lower end is 0 when the interval of the mean contains the target)."""
    mean, lo, hi = stats.mean_ci(values)
    errs = sorted([abs(lo - target), abs(hi - target)])
    return {"mean": abs(mean - target), "ci_low": 0.0 if lo <= target <= hi else errs[0], "ci_high": errs[1]}


def _rel_err(values: np.ndarray, target: float) -> dict[str, float]:
    return {k: v / target for k, v in _abs_err(values, target).items()}


def _metrics(params: Params, rows: pd.DataFrame, pred: pd.DataFrame, theory: dict,
             digits: pd.DataFrame) -> tuple[dict, pd.DataFrame]:
    r, top = params.classes - 1, max(params.snr_grid)
    gated = [f"CK{l}" for l in range(1, params.depth + 1)] + ["NTK"]
    kernels = method.kernel_names(params.depth)
    cells, by_cell = [], {}
    for act in params.top_activations:
        for kernel in kernels:
            where = {"activation": act, "kernel": kernel, "snr": top}
            g = {col: est.per_seed(rows, col, **where)
                 for col in ("count", "ari", "block_fit", "mean_top_r", "top", "zeta", "edge", "ones_next")}
            next_eigenvalue = np.array([e[r] for e in est.seed_series(rows, "eigs", where)])
            lam_pred, zeta_pred, edge_pred = (float(est.per_seed(pred, col, **where)[0])
                                              for col in ("outlier", "zeta", "edge"))
            naive = method.population_outlier(act, params.n, params.depth, params.classes, top, kernel)
            cell = {
                "count_eq_rank": float((g["count"] == r).mean()),
                "ari": stats.summarize(g["ari"]), "block_fit": stats.summarize(g["block_fit"]),
                "block_fit_limit": math.sqrt(max(1.0 - zeta_pred ** 2, 0.0)),
                "outlier": stats.summarize(g["mean_top_r"]), "outlier_top": stats.summarize(g["top"]),
                "outlier_limit": float(lam_pred), "rel_err": _rel_err(g["mean_top_r"], lam_pred),
                "top_rel_err": abs(g["top"].mean() - lam_pred) / lam_pred,
                "zeta": stats.summarize(g["zeta"]), "zeta_limit": zeta_pred,
                "zeta_err": _abs_err(g["zeta"], zeta_pred),
                # the controls: the same errors against the naive limit (population kernels, zeta = 1)
                "naive_outlier": naive, "naive_rel_err": _rel_err(g["mean_top_r"], naive),
                "naive_zeta_err": _abs_err(g["zeta"], 1.0),
                "null_edge": float(g["edge"].mean() / (1 + params.edge_margin)), "edge_limit": edge_pred,
                "next_eigenvector_ones": float(g["ones_next"].mean()),
                "next_eigenvalue_over_edge": float((next_eigenvalue / g["edge"]).mean()),
            }
            by_cell[(act, kernel)] = cell
            cells.append({"activation": act, "kernel": kernel, "count_eq_rank": cell["count_eq_rank"],
                          "ari": cell["ari"]["mean"], "block_fit": cell["block_fit"]["mean"],
                          "block_fit_limit": cell["block_fit_limit"], "outlier": cell["outlier"]["mean"],
                          "outlier_ci_low": cell["outlier"]["ci_low"], "outlier_ci_high": cell["outlier"]["ci_high"],
                          "outlier_limit": lam_pred, "rel_err": cell["rel_err"]["mean"], "zeta": cell["zeta"]["mean"],
                          "zeta_limit": zeta_pred, "null_edge": cell["null_edge"], "edge_limit": cell["edge_limit"],
                          "next_eigenvalue_over_edge": cell["next_eigenvalue_over_edge"],
                          "next_eigenvector_ones": cell["next_eigenvector_ones"]})
    cells = pd.DataFrame(cells)

    ck_keys = [(a, k) for a in params.top_activations for k in gated if k != "NTK"]
    ntk_keys = [(a, "NTK") for a in params.top_activations]
    all_keys = ck_keys + ntk_keys
    def counts(a: str, k: str, snr: float) -> np.ndarray:
        return est.per_seed(rows, "count", activation=a, kernel=k, snr=snr)

    zero = {(a, k): float((counts(a, k, 0.0) == 0).mean()) for a in params.sweep_activations for k in gated}
    # controls of the count and group-feature claims: the same cells with the signal off (snr 0, sweep
    # activations), and for the null claim the same cells with the signal on (top snr)
    null_cells = {}
    for a in params.sweep_activations:
        for k in gated:
            null = {"activation": a, "kernel": k, "snr": 0.0}
            null_cells[(a, k)] = {"count_eq_rank": float((counts(a, k, 0.0) == r).mean()),
                                  "ari": est.summary(rows, "ari", **null),
                                  "block_fit": est.summary(rows, "block_fit", **null)}
    top_zero = {(a, k): float((counts(a, k, top) == 0).mean()) for a in params.sweep_activations for k in gated}
    null_ck = [(a, k) for a in params.sweep_activations for k in gated if k != "NTK"]
    null_ntk = [(a, "NTK") for a in params.sweep_activations]

    def worst(keys, field, pick, name, cells_=by_cell):
        """The worst cell's value (by its seed mean) and that cell's interval."""
        s = cells_[pick(keys, key=lambda k: cells_[k][field]["mean"])][field]
        return {name: s["mean"], "ci_low": s["ci_low"], "ci_high": s["ci_high"]}

    claims = {"count_top_ck": {"min": min(by_cell[k]["count_eq_rank"] for k in ck_keys)},
              "count_top_ntk": {"min": min(by_cell[k]["count_eq_rank"] for k in ntk_keys)},
              "zero_snr": {"min": min(zero.values())},
              "ari_top": worst(all_keys, "ari", min, "min"),
              "block_fit_top": worst(all_keys, "block_fit", max, "max"),
              "ck_position": worst(ck_keys, "rel_err", max, "max_rel_err"),
              "ntk_position": worst(ntk_keys, "rel_err", max, "max_rel_err"),
              "zeta": worst(all_keys, "zeta_err", max, "max_abs_err"),
              "count_top_ck_control": {"min": min(null_cells[k]["count_eq_rank"] for k in null_ck)},
              "count_top_ntk_control": {"min": min(null_cells[k]["count_eq_rank"] for k in null_ntk)},
              "zero_snr_control": {"min": min(top_zero.values())},
              "ari_top_control": worst(list(null_cells), "ari", min, "min", null_cells),
              "block_fit_top_control": worst(list(null_cells), "block_fit", max, "max", null_cells),
              "ck_position_control": worst(ck_keys, "naive_rel_err", max, "max_rel_err"),
              "ntk_position_control": worst(ntk_keys, "naive_rel_err", max, "max_rel_err"),
              "zeta_control": worst(all_keys, "naive_zeta_err", max, "max_abs_err")}

    transitions = {}
    for act in params.sweep_activations:
        transitions[act] = {}
        for kernel in kernels:
            g = rows[(rows.activation == act) & (rows.kernel == kernel)]
            frac = g.groupby("snr")["count"].apply(lambda c: float((c == r).mean())).sort_index()
            detected = [s for s in frac.index if (frac[frac.index >= s] >= 0.9).all()]
            transitions[act][kernel] = {"limit": theory[act]["transition_snr"][kernel],
                                        **({"observed_first_grid_snr": float(min(detected))} if detected else {})}
    metrics = {
        "setup": {"n": params.n, "p": params.p, "width": params.width, "depth": params.depth, "rank": r,
                  "top_snr": top, "c0": params.n / params.p, "c": params.n / params.width},
        "activations": {a: {"b2": theory[a]["b2"], "a": theory[a]["a"],
                            "ntk_r_plus": theory[a]["ntk_r_plus"]} for a in params.top_activations},
        "top_snr": {a: {k: by_cell[(a, k)] for k in kernels} for a in params.top_activations},
        "zero_snr": {a: {k: {"frac_no_outlier": zero[(a, k)]} for k in gated} for a in params.sweep_activations},
        "transitions": transitions,
        "claims": claims,
        "digits": {a: {k: {"count": float(g["count"].mean()), "ari": float(g["ari"].mean()),
                           "localisation": float(g["localisation"].mean())}
                       for k, g in digits[digits.activation == a].groupby("kernel")}
                   for a in params.top_activations},
    }
    return metrics, cells


# ---------------------------------------------------------------------------------------------
# Figure, plot table, text
# ---------------------------------------------------------------------------------------------


def _plot_table(params: Params, rows: pd.DataFrame, pred: pd.DataFrame) -> pd.DataFrame:
    """x = snr; y = outlier location or alignment zeta; series = '<act> <kernel> <quantity> <source>'."""
    out = []
    for (act, kernel, snr), g in rows[rows.activation.isin(params.sweep_activations)].groupby(["activation", "kernel", "snr"]):
        for quantity, col in (("outlier", "mean_top_r"), ("zeta", "zeta")):
            mean, lo, hi = stats.mean_ci(g[col])
            out.append({"x": snr, "y": mean, "y_low": lo, "y_high": hi, "series": f"{act} {kernel} {quantity} measured"})
        out.append({"x": snr, "y": float(g["edge"].mean()), "y_low": None, "y_high": None,
                    "series": f"{act} {kernel} edge measured"})
    for _, p in pred[pred.activation.isin(params.sweep_activations)].iterrows():
        if p["outlier"] is not None and p["outlier"] == p["outlier"]:
            out.append({"x": p["snr"], "y": p["outlier"], "y_low": None, "y_high": None,
                        "series": f"{p['activation']} {p['kernel']} outlier limit"})
        out.append({"x": p["snr"], "y": p["zeta"], "y_low": None, "y_high": None,
                    "series": f"{p['activation']} {p['kernel']} zeta limit"})
    return pd.DataFrame(out)


def _figure(params: Params, plot: pd.DataFrame, cells: pd.DataFrame, vectors: dict):
    fig, axes = plt.subplots(2, 2, figsize=(12, 9))
    colors = {f"CK{l}": plt.cm.viridis(l / max(params.depth, 1) * 0.85) for l in range(params.depth + 1)}
    colors["NTK"] = "tab:red"
    styles = dict(zip(params.sweep_activations, ["-", "--", ":", "-."]))
    markers = dict(zip(params.sweep_activations, ["o", "s", "^", "D"]))
    for ax, quantity, label in ((axes[0, 0], "outlier", "mean of the top K-1 eigenvalues"),
                                (axes[0, 1], "zeta", "alignment zeta of the top K-1 eigenvectors")):
        for act in params.sweep_activations:
            for kernel in colors:
                if quantity == "outlier" and kernel == "NTK":
                    continue
                lim = plot[plot.series == f"{act} {kernel} {quantity} limit"].sort_values("x")
                ax.plot(lim["x"], lim["y"], styles[act], color=colors[kernel], lw=1.2)
                m = plot[(plot.series == f"{act} {kernel} {quantity} measured") & (plot.x > 0)]
                ax.errorbar(m["x"], m["y"], yerr=[m["y"] - m["y_low"], m["y_high"] - m["y"]], fmt=markers[act],
                            color=colors[kernel], ms=4, capsize=2, label=f"{act} {kernel}")
                if quantity == "outlier":
                    e = plot[(plot.series == f"{act} {kernel} edge measured") & (plot.x > 0)]
                    ax.plot(e["x"], e["y"], ":", color=colors[kernel], lw=0.8)
        ax.set(xscale="log", xlabel="spike strength theta^2 (snr)", ylabel=label)
        ticks = [s for s in sorted(params.snr_grid) if s > 0]
        ax.set_xticks(ticks, [f"{s:g}" for s in ticks])
        ax.minorticks_off()
        if quantity == "outlier":
            ax.set(yscale="log", title="CK outliers: measured (markers, 95% CI), limit (lines), null edge (dotted)")
        else:
            ax.set(title="eigenspace-class alignment: measured vs limit")
            ax.legend(fontsize=7, ncol=2)
    ax = axes[1, 0]
    for act, g in cells[cells.kernel != "CK0"].groupby("activation"):
        ax.errorbar(g["outlier_limit"], g["outlier"], yerr=[g["outlier"] - g["outlier_ci_low"], g["outlier_ci_high"] - g["outlier"]],
                    fmt="o", capsize=2, label=act)
        for _, c in g.iterrows():
            ax.annotate(c["kernel"], (c["outlier_limit"], c["outlier"]), fontsize=7, xytext=(3, -8), textcoords="offset points")
    lims = np.array([cells["outlier_limit"].min() * 0.8, cells["outlier_limit"].max() * 1.2])
    ax.plot(lims, lims, "k-", lw=0.8)
    ax.fill_between(lims, lims * 0.95, lims * 1.05, color="grey", alpha=0.25, label="limit +-5%")
    ax.set(xscale="log", yscale="log", xlabel="limit", ylabel="measured (seed mean)",
           title=f"top snr = {max(params.snr_grid):g}: outlier positions, CK layers and NTK")
    ax.legend(fontsize=8)
    ax = axes[1, 1]
    if vectors:
        y = np.array(vectors["labels"])
        for k, name in enumerate(("digit 1", "digit 7")):
            ax.scatter(np.array(vectors["v1"])[y == k], np.array(vectors["v2"])[y == k], s=8, label=name)
        ax.set(xlabel="eigenvector 1", ylabel="eigenvector 2",
               title=f"digits 1 vs 7 (class means removed): top eigenvectors of {vectors['kernel']} ({vectors['activation']})")
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _setup(params: Params, theory: dict) -> str:
    acts = ", ".join(f"{a} (b^2 = {theory[a]['b2']:.3f})" for a in params.top_activations)
    return (
        f"**Data.** K = {params.classes} Gaussian classes of {params.n // params.classes} samples in p = {params.p} "
        "dimensions: x_i = (mu_{y_i} + z_i) / sqrt(p + |mu|^2), z_i ~ N(0, I_p), class means on a centred simplex, so "
        f"the signal matrix has rank {params.classes - 1} with squared singular value theta^2 = snr (relative to N(0, 1/p) noise); "
        f"snr in {params.snr_grid} (the input transition is sqrt(n/p) = {math.sqrt(params.n / params.p):.3f}). Inputs "
        "have unit mean square norm as Fan & Wang's theory assumes.\n\n"
        f"**Network.** depth L = {params.depth}, width d = {params.width}, X_l = sigma(W_l X_(l-1)) / sqrt(d), N(0, 1) "
        f"weights and readout; activations normalised to E sigma = 0, E sigma^2 = 1: {acts}. Sweep over every snr for "
        f"{', '.join(params.sweep_activations)}; {', '.join(params.top_activations)} at the top snr. CK_l = X_l^T X_l "
        "(CK0 is the input Gram matrix, not gated); NTK = sum_l CK_(l-1) o (S_l^T S_l) + CK_L from the backpropagated "
        "signals (checked against autograd in the tests). One noise matrix and one set of weights per seed (common "
        f"random numbers across snr and activations); {params.seeds} seeds.\n\n"
        f"**Outliers.** Null edge = the same network on {params.null_draws} pure-noise inputs of the same covariance trace, "
        f"largest eigenvalue averaged, times 1 + {params.edge_margin}; an outlier is an eigenvalue above it. Group "
        "features: k-means (K clusters, 5 inits) on the outlier eigenvectors (ARI), the block-constant fit "
        "|P - P_block|_F / |P|_F of their projection P, and zeta = |V^T U|_F^2 / (K - 1) for the top K - 1 "
        "eigenvectors U and the centred class indicators V.\n\n"
        "**Limit.** Input: lambda_0 = s0 (1 + theta^2)(c0 + theta^2) / theta^2, zeta_0 = 1 - c0 (1 + theta^2) / "
        "(theta^2 (theta^2 + c0)) (rank-r signal plus noise, c0 = n/p, s0 = the input normalisation). Each layer is a "
        "sample covariance of d rows with population b^2 CK_(l-1) + (1 - b^2) I; the NTK is r_+ I + sum_l b^(2(L-l)) CK_l, "
        "r_+ = sum_k (a^k - b^(2k)), a = E sigma'^2. A deterministic equivalent of the resolvent of any such combination "
        "reduces layer by layer (scalar fixed points) to A_0(z) CK_0 - Z_0(z) I: the outlier solves A_0(z) lambda_0 = "
        "Z_0(z) above the bulk edge and zeta = zeta_0 / (-d/dz [A_0 lambda_0 - Z_0]). For the CK alone this is Bai & "
        "Yao's generalised spiked model iterated over layers (tests check both routes agree and match simulations).\n\n"
        f"**Digits.** load_digits 1 vs 7, {params.digits_per_class} each, class means subtracted, unit mean square "
        "norm, through each seed's network; null = white noise of the same trace; reported, not gated."
    )




def _measured(params: Params, metrics: dict, cells: pd.DataFrame) -> str:
    """The measured numbers behind the claims, for the notes (interpretation is in NOTES.md)."""
    c, top, deep = metrics["claims"], metrics["top_snr"], f"CK{params.depth}"
    gated = cells[cells.kernel != "CK0"]
    last = "; ".join(f"{a}: zeta {top[a][deep]['zeta']['mean']:.3f} (limit {top[a][deep]['zeta_limit']:.3f}), block fit "
                     f"{top[a][deep]['block_fit']['mean']:.3f} (limit sqrt(1 - zeta^2) = {top[a][deep]['block_fit_limit']:.3f}), "
                     f"ARI {top[a][deep]['ari']['mean']:.3f}" for a in params.top_activations)
    extra = "; ".join(f"{x.activation} {x.kernel}: eigenvalue K = {x.next_eigenvalue_over_edge:.2f} x the null edge, its "
                      f"eigenvector's squared cosine with the all-ones vector {x.next_eigenvector_ones:.2f}"
                      for x in gated.itertuples() if x.count_eq_rank < 0.9) or "none"
    off = "; ".join(f"{x.activation} {x.kernel} {x.rel_err:.3f}" for x in gated.itertuples() if x.rel_err > 0.05) or "none"
    zero = "; ".join(f"{a} {k} {v['frac_no_outlier']:.1f}" for a, d in metrics["zero_snr"].items() for k, v in d.items()
                     if v["frac_no_outlier"] < 0.9) or "none"
    trans = "; ".join(f"{a}: " + ", ".join(f"{k} {v['limit']:.2f}" + (f" (first full detection on the grid: "
                                                                         f"{v['observed_first_grid_snr']:g})"
                                                                         if "observed_first_grid_snr" in v else "")
                                           for k, v in metrics["transitions"][a].items())
                      for a in params.sweep_activations)
    dig = "; ".join(f"{a} {k}: {v['count']:.1f} outliers, ARI {v['ari']:.2f}, localisation {v['localisation']:.2f}"
                    for a, d in metrics["digits"].items() for k, v in d.items() if k in ("CK1", deep, "NTK"))
    return (
        f"**Measured**: K - 1 = {params.classes - 1}; cells at the top snr whose count is not K - 1 in >= 90% of "
        f"seeds: {extra}. Null (snr 0) cells where fewer than 90% of seeds had no outlier: {zero} (n = {params.n}, "
        f"edge margin {params.edge_margin:.0%}). Positions: worst CK layer "
        f"{c['ck_position']['max_rel_err']:.3f} [{c['ck_position']['ci_low']:.3f}, {c['ck_position']['ci_high']:.3f}], "
        f"NTK {c['ntk_position']['max_rel_err']:.3f} [{c['ntk_position']['ci_low']:.3f}, {c['ntk_position']['ci_high']:.3f}]; "
        f"cells off by more than 5%: {off}; sqrt(2/d) = {math.sqrt(2 / params.width):.3f}. Alignment: worst "
        f"|zeta - limit| = {c['zeta']['max_abs_err']:.3f}; d/n = {params.width / params.n:.2f}. Last layer at the top "
        f"snr: {last}. Transitions (snr where each kernel's spike separates, limit): {trans}. Digits 1 vs 7: {dig}. "
        f"Controls: count = K - 1 in {c['count_top_ck_control']['min']:.1f} (CK) and "
        f"{c['count_top_ntk_control']['min']:.1f} (NTK) of seeds at snr 0, worst ARI {c['ari_top_control']['min']:.3f}, "
        f"worst block fit {c['block_fit_top_control']['max']:.3f}; no outlier at the top snr in "
        f"{c['zero_snr_control']['min']:.1f} of seeds; naive limit: worst CK error "
        f"{c['ck_position_control']['max_rel_err']:.3f}, NTK {c['ntk_position_control']['max_rel_err']:.3f}, zeta "
        f"{c['zeta_control']['max_abs_err']:.3f}."
    )

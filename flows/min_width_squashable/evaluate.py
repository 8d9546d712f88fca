"""Minimum width with squashable activations, the evaluation: best errors over restarts against the exact
lower bounds, the empirical minimum widths, the controls, the squashability test, the tables and the figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.min_width_squashable import method
from flows.min_width_squashable.claims import CONSTRUCTION_TOL, CONTROL, PLAN_MIN_DEPTH, SUFFICIENT_FRACTION
from flows.min_width_squashable.params import PLAN_ACTIVATIONS, Params
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records


def _missing_as_none(value):
    """Parquet stores a missing construction (None) as NaN: back to None, as the metrics publish it."""
    return None if pd.isna(value) else value


def _bounds(table: pd.DataFrame) -> dict:
    """target -> its bound record, without the fields that only some targets have (NaN for the others)."""
    return {row.pop("target"): {k: v for k, v in row.items() if k != "seed" and not pd.isna(v)}
            for row in table.to_dict("records")}


def _demo(table: pd.DataFrame) -> list[dict]:
    """The squashability test per activation, in test order: its verdict, the S-shaped map's form, and the
    identity (per eps) and step (per number of compositions) approximants' errors."""
    demo = []
    for activation, rows in table.groupby("activation", sort=False):
        first = rows.iloc[0]
        identity, step = (rows[rows["construction"] == kind].to_dict("records") for kind in ("identity", "step"))
        demo.append({"activation": activation, "squashable": bool(first["squashable"]), "form": first["form"],
                     "identity": [{"eps": r["scale"], "lp_error": _missing_as_none(r["lp_error"])} for r in identity],
                     "step": [{"sigmas": _missing_as_none(r["sigmas"]), "lp_error": _missing_as_none(r["lp_error"])}
                              for r in step]})
    return demo


def evaluate(params: Params, records: Records) -> RunOutput:
    runs, jobs = records["runs"], records["jobs"]
    bounds, demo = _bounds(records["bounds"]), _demo(records["squash_demo"])
    metrics, by_target = _metrics(params, runs, bounds, demo)
    metrics["timings"] = {"jobs_s": {f"{r.target}_d{r.depth}": r.seconds for r in jobs.itertuples()},
                          "train_total_s": float(jobs["seconds"].sum())}
    plot = _plot_table(runs)
    demo_rows = records["squash_demo"].drop(columns=["seed", "form"])
    widths = _width_table(params, runs, by_target)
    return RunOutput(metrics=metrics, tables={"plot": plot, "runs": runs, "widths": widths, "squash_demo": demo_rows},
                     figure=_figure(params, runs, bounds, demo, by_target), setup=_setup(params, bounds),
                     notes=_measured(metrics, bounds, by_target, demo))


def _best(runs: pd.DataFrame, target: str, act: str, width: int, min_depth: int | None = None,
          seed: int | None = None) -> float:
    """Best L2 error over restarts (or of restart ``seed`` alone) and depths >= ``min_depth`` (all if none)."""
    sel = runs[(runs.target == target) & (runs.activation == act) & (runs.width == width)]
    if seed is not None:
        sel = sel[sel.seed == seed]
    if min_depth is not None and (sel.depth >= min_depth).any():
        sel = sel[sel.depth >= min_depth]
    return float(sel["l2_error"].min()) if len(sel) else float("nan")


def _metrics(params: Params, runs: pd.DataFrame, bounds: dict, demo: list[dict]) -> tuple[dict, dict]:
    """The metrics dict (numbers only) and, per target and activation, the width analysis
    {squashable, formula, empirical, empirical_is_lower_limit, ratio_by_width}."""
    squashable_trained = [a for a in params.activations if method.is_squashable(a)]
    seeds = sorted(int(s) for s in runs["seed"].unique())
    by_target, plan_ratios, mismatches = {}, {}, 0
    for t, b in bounds.items():
        w_star = b["w_star"]
        widths = sorted(w_star + o for o in params.width_offsets if w_star + o >= 1)
        per = {}
        for a in params.activations:
            ratio_by_width = {str(w): _best(runs, t, a, w, PLAN_MIN_DEPTH) / b["bound"] for w in widths}
            sufficient = [w for w in widths if ratio_by_width[str(w)] <= SUFFICIENT_FRACTION]
            formula = w_star if method.is_squashable(a) else (b["relu_width"] if a == CONTROL else None)
            empirical = min(sufficient) if sufficient else max(widths) + 1  # max + 1: "more than tested"
            per[a] = {"squashable": method.is_squashable(a), "formula": formula, "empirical": empirical,
                      "empirical_is_lower_limit": not sufficient, "ratio_by_width": ratio_by_width}
            if a in squashable_trained and empirical != w_star:
                mismatches += 1
            if a in PLAN_ACTIVATIONS:
                plan_ratios[f"{t}_{a}"] = ratio_by_width[str(w_star)]
        by_target[t] = per

    below = runs[runs.width == runs.target.map({t: b["w_star"] - 1 for t, b in bounds.items()})]
    below = below[below.activation.isin(params.activations)]
    sin_best = _best(runs, "a", params.nonmonotone_activation, 1)
    accepted = [d for d in demo if d["squashable"]]
    finals = [max(d["identity"][-1]["lp_error"], d["step"][-1]["lp_error"]) for d in accepted]
    expected = {a: a in method.PAPER_SQUASHABLE for a in params.demo_activations
                if a in method.PAPER_SQUASHABLE or a in method.NOT_SQUASHABLE}
    misclassified = [d["activation"] for d in demo if d["activation"] in expected
                     and d["squashable"] != expected[d["activation"]]]
    numeric = ("bound", "grid_bound", "angle_deg", "d_x", "d_y", "n_grid", "w_star", "relu_width", "target_l2_norm",
               "best_constant_error")
    metrics = {
        "bounds": {**{t: {k: b[k] for k in numeric if k in b} for t, b in bounds.items()},
                   "min_ratio_below_wstar": float(below["ratio"].min()),
                   "n_nets_below_wstar": len(below)},
        "width": {"plan_ratio_max": float(max(plan_ratios.values())), "plan_ratios": plan_ratios,
                  "mismatches": mismatches, "n_pairs_checked": len(squashable_trained) * len(bounds),
                  "empirical": {t: {a: per["empirical"] for a, per in by_target[t].items()} for t in bounds},
                  "formula": {t: {a: per["formula"] for a, per in by_target[t].items() if per["formula"] is not None}
                              for t in bounds}},
        "exception": {"best_error": sin_best, "ratio": sin_best / bounds["a"]["bound"]},
        "control": _controls(params, runs, bounds, by_target, plan_ratios),
        "per_seed": {"plan_ratio_max": [max(_best(runs, t, a, bounds[t]["w_star"], PLAN_MIN_DEPTH, s) / bounds[t]["bound"]
                                            for t in bounds for a in PLAN_ACTIVATIONS if a in params.activations)
                                        for s in seeds],
                     "exception_ratio": [_best(runs, "a", params.nonmonotone_activation, 1, seed=s) / bounds["a"]["bound"]
                                         for s in seeds]},
        "squash": {"misclassified": len(misclassified), "n_tested": len(demo), "n_accepted": len(accepted),
                   "max_final_error": float(max(finals)) if finals else float("nan"),
                   "by_activation": {d["activation"]: {"squashable": int(d["squashable"]),
                                                       "identity_final": d["identity"][-1]["lp_error"],
                                                       "step_final": d["step"][-1]["lp_error"]} for d in demo}},
    }
    return metrics, by_target


def _controls(params: Params, runs: pd.DataFrame, bounds: dict, by_target: dict, plan_ratios: dict) -> dict:
    """The negative controls, each by its claim's metric: ReLU at width w* (worst target; per restart on
    (b)); ReLU's mismatches against the squashable formula; the best squashable plan activation at w* on
    (b); the best monotone width-1 net on (a). NaN where the run trained no such net (smoke runs)."""
    nan = float("nan")
    relu = CONTROL in params.activations
    monotone = [a for a in params.activations if method.is_monotone(a)]
    w_b = bounds["b"]["w_star"]
    return {
        "relu_ratio_b_wstar": by_target["b"][CONTROL]["ratio_by_width"][str(w_b)] if relu else nan,
        "relu_ratio_b_wstar_per_seed": ([_best(runs, "b", CONTROL, w_b, PLAN_MIN_DEPTH, s) / bounds["b"]["bound"]
                                         for s in sorted(int(s) for s in runs["seed"].unique())] if relu else []),
        "relu_ratio_wstar_max": (max(by_target[t][CONTROL]["ratio_by_width"][str(bounds[t]["w_star"])] for t in bounds)
                                 if relu else nan),
        "relu_mismatches_vs_squashable_formula": (sum(by_target[t][CONTROL]["empirical"] != bounds[t]["w_star"]
                                                      for t in bounds) if relu else nan),
        "squashable_ratio_b_wstar": min((plan_ratios[f"b_{a}"] for a in PLAN_ACTIVATIONS if f"b_{a}" in plan_ratios),
                                        default=nan),
        "monotone_width1_ratio_a": (min(_best(runs, "a", a, 1) for a in monotone) / bounds["a"]["bound"]
                                    if monotone and (runs.width == 1).any() else nan),
    }


def _width_table(params: Params, runs: pd.DataFrame, by_target: dict) -> pd.DataFrame:
    """One row per (target, activation, width): best and median ratio to the bound over the nets of
    depth >= PLAN_MIN_DEPTH (all depths if none), with the formula and the empirical minimum width."""
    deep = runs[runs.depth >= min(PLAN_MIN_DEPTH, max(params.depths))]
    rows = []
    for (t, a, w), g in deep.groupby(["target", "activation", "width"]):
        per = by_target.get(t, {}).get(a, {})
        rows.append({"target": t, "activation": a, "width": int(w), "best_ratio": float(g["ratio"].min()),
                     "median_ratio": float(g["ratio"].median()), "best_l2_error": float(g["l2_error"].min()),
                     "n_nets": len(g), "formula_width": per.get("formula"), "empirical_width": per.get("empirical"),
                     "empirical_is_lower_limit": per.get("empirical_is_lower_limit")})
    return pd.DataFrame(rows)


def _plot_table(runs: pd.DataFrame) -> pd.DataFrame:
    best = runs.groupby(["target", "activation", "width", "depth"], as_index=False).agg(
        y=("l2_error", "min"), y_median=("l2_error", "median"), bound=("bound", "first"))
    best["x"] = best["depth"]
    best["series"] = best["target"] + ":" + best["activation"] + ":w" + best["width"].astype(str)
    best["ratio"] = best["y"] / best["bound"]
    return best[["x", "y", "series", "target", "activation", "width", "y_median", "bound", "ratio"]]


def _figure(params: Params, runs: pd.DataFrame, bounds: dict, demo: list[dict], by_target: dict):
    from matplotlib.lines import Line2D
    from matplotlib.ticker import NullFormatter

    fig, axes = plt.subplots(2, 3, figsize=(16, 9.5))
    acts = list(params.activations) + [params.nonmonotone_activation]
    colors = {a: f"C{i}" for i, a in enumerate(acts)}
    styles = {-1: ":", 0: "-", 1: "--", 2: "-.", 3: "-."}
    for ax, (t, b) in zip(axes[0], bounds.items()):
        w_star = b["w_star"]
        for (a, w), g in runs[runs.target == t].groupby(["activation", "width"]):
            best = g.groupby("depth")["l2_error"].min()
            ax.plot(best.index, best.values, styles.get(w - w_star, "-"), marker="o", ms=3, color=colors[a])
        ax.axhline(b["bound"], color="k", lw=1.5)
        ax.axhline(SUFFICIENT_FRACTION * b["bound"], color="grey", lw=1, ls="--")
        ax.set(xscale="log", yscale="log", xlabel="depth (hidden layers)", ylabel="best L2 error over restarts",
               title=f"({t}) {b['description']}\nd_x={b['d_x']}, d_y={b['d_y']}: w* = {w_star} (ReLU: {b['relu_width']})")
        ax.set_xticks(params.depths, [str(d) for d in params.depths])
        ax.xaxis.set_minor_formatter(NullFormatter())
        handles = [Line2D([], [], color=colors[a], lw=2, label=a) for a in acts if a in set(runs[runs.target == t].activation)]
        handles += [Line2D([], [], color="k", ls=styles[o], label=f"width w*{o:+d}" if o else "width w*")
                    for o in sorted(params.width_offsets)]
        handles += [Line2D([], [], color="k", lw=1.5, label=f"width-{w_star - 1} lower bound"),
                    Line2D([], [], color="grey", ls="--", label="0.25 x bound")]
        ax.legend(handles=handles, fontsize=6, ncol=2, loc="lower left")
    ax = axes[1, 0]
    for d in demo:
        errs = [(r["eps"], r["lp_error"]) for r in d["identity"] if r["lp_error"] is not None]
        if errs:
            ax.plot([1 / e for e, _ in errs], [max(v, 1e-17) for _, v in errs], marker="o", ms=3, label=d["activation"])
    ax.set(xscale="log", yscale="log", xlabel="1 / eps (scale of the linearisation)", ylabel="L2([-1,1]) error to x",
           title="identity: (sigma(x0 + eps x) - sigma(x0)) / (eps sigma'(x0))")
    ax.legend(fontsize=6, ncol=2)
    ax = axes[1, 1]
    for d in demo:
        if d["squashable"]:
            ax.plot([r["sigmas"] for r in d["step"]], [max(r["lp_error"], 1e-17) for r in d["step"]], marker="o",
                    ms=3, label=f"{d['activation']} ({d['form']})")
    ax.axhline(CONSTRUCTION_TOL, color="grey", ls="--", lw=1)
    ax.set(xscale="log", yscale="log", xlabel="sigma applications (iterated S-shaped composition)",
           ylabel="L2([-1,1]) error to 1[x >= 0]",
           title="binary step: iterated S-shaped composition\nno construction for: "
           + ", ".join(d["activation"] for d in demo if not d["squashable"]))
    ax.legend(fontsize=6, ncol=2)
    ax = axes[1, 2]
    targets = list(bounds)
    for i, a in enumerate(params.activations):
        per = [by_target[t][a] for t in targets]
        xs = np.arange(len(targets)) + 0.1 * (i - (len(params.activations) - 1) / 2)
        reached = [p["empirical_is_lower_limit"] is False for p in per]
        ax.scatter(xs, [p["empirical"] for p in per], s=40, zorder=3, label=a,
                   facecolors=[colors[a] if r else "none" for r in reached], edgecolors=colors[a])
    for k, t in enumerate(targets):
        ax.hlines(bounds[t]["w_star"], k - 0.35, k + 0.35, color="k", lw=2, label="max{d_x,d_y,2}" if k == 0 else None)
        ax.hlines(bounds[t]["relu_width"] + 0.04, k - 0.35, k + 0.35, color="r", lw=1, ls="--",
                  label="ReLU: max{d_x+1,d_y}" if k == 0 else None)
    ax.set_xticks(range(len(targets)), [f"({t}) {bounds[t]['d_x']}->{bounds[t]['d_y']}" for t in targets])
    ax.set(ylabel="smallest width reaching 0.25 x bound",
           title="empirical minimum width vs the formula\n(hollow: not reached at any tested width)")
    ax.legend(fontsize=6)
    fig.tight_layout()
    return fig


def _setup(params: Params, bounds: dict) -> str:
    lines = [f"- ({t}) {b['description']}: d_x={b['d_x']}, d_y={b['d_y']}, w* = {b['w_star']}; evaluation grid "
             f"{b['n_grid']} midpoints; width-{b['w_star'] - 1} lower bound {b['bound']:.4f} ({b['kind']}); "
             f"||f||_2 = {b['target_l2_norm']:.4f}, best constant {b['best_constant_error']:.4f}"
             for t, b in bounds.items()]
    return (
        "Targets on [0,1]^d_x, L^2 error by the midpoint rule on a uniform grid (the same grid for nets and "
        "bounds):\n\n" + "\n".join(lines) + "\n\n"
        f"Networks: x -> [affine -> sigma] x depth -> affine, every hidden layer of the same width, widths "
        f"w* + {params.width_offsets}, depths {params.depths}, activations {params.activations} (monotone; "
        f"'{CONTROL}' is the non-squashable control) and a width-1 '{params.nonmonotone_activation}' net on (a); "
        f"{params.seeds} restarts each. Full-batch Adam, {params.steps} steps, lr {params.lr} with cosine decay to "
        f"lr/100, on a {params.n_train_1d}-point (1-D) / {params.n_train_2d}x{params.n_train_2d} (2-D) training "
        f"grid, inputs centred to [-1,1]; hidden layers initialised per activation {params.init} ('identity': at "
        f"sigma's linearisation, the paper's identity approximant, plus noise {params.init_noise}; 'glorot': "
        "Glorot-normal). A width is called sufficient when its best "
        f"net of depth >= {PLAN_MIN_DEPTH} reaches <= {SUFFICIENT_FRACTION} x the width-(w*-1) bound.\n\n"
        f"Squashability test on {params.demo_activations}: find the longest interval of [-8, 8] where sigma is "
        "strictly monotone and not affine; normalise it to u: [0,1] -> [0,1]; build an S-shaped map (u, "
        "v(t) = 1 - u(1-t), v o u or u o v) with one repelling interior fixed point c and iterate it: g^k "
        f"converges to the step at c (iterations {params.demo_iterations}); the identity is "
        f"(sigma(x0 + eps x) - sigma(x0)) / (eps sigma'(x0)) for eps in {params.demo_epsilons}. Both are "
        "affine/sigma compositions; errors in L^2([-1,1])."
    )


def _measured(metrics: dict, bounds: dict, by_target: dict, demo: list[dict]) -> str:
    """The measured numbers behind the claims, for the notes (how to read them is in NOTES.md)."""
    rows = [f"  - ({t}) " + "; ".join(
        f"{a}: " + ", ".join(f"w{k} {v:.3f}" for k, v in per["ratio_by_width"].items())
        + f" -> empirical {_empirical(per)} (formula {per['formula']})"
        for a, per in by_target[t].items()) for t in bounds]
    w, c, ps = metrics["width"], metrics["control"], metrics["per_seed"]
    failing = [k for k, v in w["plan_ratios"].items() if v > SUFFICIENT_FRACTION]
    mismatched = [f"({t}) {a}: {_empirical(per)}" for t, acts in by_target.items() for a, per in acts.items()
                  if per["squashable"] and per["empirical"] != per["formula"]]
    return (
        f"**Measured**: best angle of the (b) ridge bound {bounds['b'].get('angle_deg', float('nan')):.2f} deg.\n\n"
        "**Best error / width-(w*-1) bound** (depth >= 8, best restart), and the empirical minimum width:\n"
        + "\n".join(rows) + "\n\n"
        + "**Squashability test**: accepted " + ", ".join(d["activation"] for d in demo if d["squashable"])
        + "; rejected " + ", ".join(d["activation"] for d in demo if not d["squashable"]) + ".\n\n"
        + f"Worst plan ratio {w['plan_ratio_max']:.3f} (threshold {SUFFICIENT_FRACTION}); (target, plan activation) "
        f"pairs above the threshold at width w*: {', '.join(failing) or 'none'}. Empirical minimum width different "
        f"from max{{d_x,d_y,2}} for {len(mismatched)} (target, squashable activation) pairs"
        + (f": {'; '.join(mismatched)}. " if mismatched else ". ")
        + f"sin width-1 net: {metrics['exception']['ratio']:.3f} x the monotone bound. "
        + (f"ReLU on (b) at width 2: {c['relu_ratio_b_wstar']:.3f} x its bound. " if CONTROL in by_target.get("b", {})
           else "")
        + "**Negative controls** (same metric and threshold): ReLU at width w*, worst target "
        f"{c['relu_ratio_wstar_max']:.3f}; ReLU's mismatches against max{{d_x,d_y,2}}: "
        f"{c['relu_mismatches_vs_squashable_formula']}; the best monotone width-1 net on (a): "
        f"{c['monotone_width1_ratio_a']:.3f} x the bound; the best squashable plan activation at width 2 on (b): "
        f"{c['squashable_ratio_b_wstar']:.3f}. Per restart: worst plan ratio "
        + ", ".join(f"{v:.3f}" for v in ps["plan_ratio_max"])
        + "; sin width-1 ratio " + ", ".join(f"{v:.3f}" for v in ps["exception_ratio"]) + "."
    )


def _empirical(per: dict) -> str:
    """The empirical minimum width, '>w' when no tested width reached the threshold (w: the widest tested)."""
    if per["empirical_is_lower_limit"]:
        return f">{per['empirical'] - 1}"
    return str(per["empirical"])

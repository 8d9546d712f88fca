"""Minimum width with squashable activations as a Prefect flow: deep narrow networks of width
w* = max(d_x, d_y, 2) against width w* - 1 (exact lower bounds) and w* + 1 on three L^p targets,
a ReLU control, a non-monotone width-1 exception, and the squashability constructions."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.min_width_squashable import method
from flows.min_width_squashable.params import PLAN_ACTIVATIONS, SMOKE, Params
from tasks.contract import Claim, Control, Paper, RunContext, RunOutput
from tasks.data import save_parquet
from tasks.paper import paper_flow, run_mapped, start_task

# Fixed from the plan before any run (never tuned on results; the plan's activations are in params.py):
SUFFICIENT_FRACTION = 0.25              # "width w* reaches <= 0.25 x the width-(w* - 1) lower bound"
PLAN_MIN_DEPTH = 8                      # the plan's depths 8-16: the claims use the best net of depth >= 8
BOUND_SLACK = 0.99                      # "within 1 % numerical slack"
CONSTRUCTION_TOL = 1e-2                 # ours: the explicit identity/step approximants reach L^2 error < 1e-2
CONTROL = "relu"
EXISTENTIAL = (
    "The claim is existential (some trained network reaches the error the theorem says exists): its statistic is "
    "the best over restarts and depths, a minimum over optimisation attempts rather than a mean of samples, so "
    "neither a bootstrap interval nor every restart agreeing is what it claims. Per-restart values are in the metrics.")

PAPER = Paper(
    slug="min_width_squashable",
    title="Minimum Width for Universal Approximation using Squashable Activation Functions",
    method="Squashable activations: minimum width max{d_x, d_y, 2} for L^p universal approximation",
    paper_class="B",
    source="abstracts-000.txt #17",
    official_code=None,
    claims=(
        Claim(id="width_wstar_suffices",
              text="for networks using a squashable activation function to universally approximate L^p "
                   "functions from [0,1]^{d_x} to R^{d_y}, the minimum width is max{d_x,d_y,2}: with tanh "
                   "and sigmoid, the best trained width-w* network (depth >= 8, 5 restarts) reaches an L^2 "
                   "error <= 0.25 x the exact width-(w*-1) lower bound on every target (a) 1->1, (b) 2->1, "
                   "(c) 1->2 (metric: the worst of the six ratios)",
              source="abstract; plan claim 1", metric="width.plan_ratio_max", comparison="<=",
              threshold=SUFFICIENT_FRACTION, kind="magnitude", role="claim",
              no_interval_reason=EXISTENTIAL,
              # ReLU is not squashable: at width w* it should miss on (b), where its own minimum width is 3
              control=Control(name="ReLU (not squashable) at width w*, worst target",
                              metric="control.relu_ratio_wstar_max")),
        Claim(id="lower_bounds_hold",
              text="width w*-1 is not enough: every trained width-(w*-1) network (monotone activations, "
                   "every depth and restart) stays above the computed lower bound, within 1 % slack "
                   "(metric: min over nets of error / bound)",
              source="plan claim 2 (sanity: validates the bounds)", metric="bounds.min_ratio_below_wstar",
              comparison=">=", threshold=BOUND_SLACK, kind="exact", role="sanity"),
        Claim(id="nonmonotone_width1_exception",
              text="the same bound holds for d_x=d_y=1 if the activation function is monotone: a width-1 "
                   "network with the non-monotone sin beats the best error any monotone width-1 network "
                   "can reach on target (a) (metric: best sin error / monotone bound)",
              source="abstract; plan claim 3", metric="exception.ratio", comparison="<", threshold=1.0,
              kind="direction", role="claim", no_interval_reason=EXISTENTIAL,
              # the same width-1 nets with a monotone activation (it cannot pass: the bound holds for them)
              control=Control(name="width-1 nets with a monotone activation (best of those trained) on (a)",
                              metric="control.monotone_width1_ratio_a")),
        Claim(id="empirical_width_matches_formula",
              text="the minimum width is max{d_x,d_y,2} for every squashable activation trained here "
                   "(tanh, sigmoid, softplus, leaky ReLU by default): number of (target, activation) pairs whose empirical "
                   "minimum width (smallest trained width reaching 0.25 x the width-(w*-1) bound) differs "
                   "from the formula",
              source="abstract (closed-form width); ours: the comparison over all trained squashable "
                     "activations", metric="width.mismatches", comparison="<=", threshold=0.0, kind="magnitude",
              role="claim", no_interval_reason=EXISTENTIAL,
              control=Control(name="ReLU (not squashable) against the squashable formula max{d_x,d_y,2}",
                              metric="control.relu_mismatches_vs_squashable_formula")),
        Claim(id="relu_control_needs_more_width",
              text="control: ReLU is not squashable and its L^p minimum width is max{d_x+1,d_y} (Park et "
                   "al. 2021), 3 on target (b): at width max{d_x,d_y,2}=2 it does not reach 0.25 x the "
                   "width-1 bound (metric: best ReLU width-2 error / bound on (b))",
              source="paper's introduction (prior ReLU result); ours as a control", metric="control.relu_ratio_b_wstar",
              comparison=">", threshold=SUFFICIENT_FRACTION, kind="direction", role="claim",
              per_seed="control.relu_ratio_b_wstar_per_seed",
              # if a squashable activation also misses at width 2 on (b), ReLU missing there says nothing
              control=Control(name="the best squashable plan activation (tanh, sigmoid) at width w* on (b)",
                              metric="control.squashable_ratio_b_wstar")),
        Claim(id="squashability_test_matches_paper",
              text="all non-affine analytic functions and a class of piecewise functions are squashable: "
                   "the numerical test accepts sigmoid, tanh, softplus, GELU, sin, exp, x^2, leaky ReLU, "
                   "hardswish, ELU and rejects ReLU, ReLU6, hard tanh, identity, affine and the step "
                   "(metric: misclassified activations)",
              source="abstract; Lemmas 4-5 as quoted in the paper's introduction", metric="squash.misclassified",
              comparison="<=", threshold=0.0, kind="exact", role="sanity"),
        Claim(id="constructions_converge",
              text="squashable functions can approximate the identity function and binary step function by "
                   "alternatively composing with affine transformations: for every accepted activation the "
                   "explicit identity (smallest scale) and step (most compositions) approximants reach an "
                   "L^2([-1,1]) error < 1e-2 (metric: the worst of them)",
              source="abstract (definition); threshold ours", metric="squash.max_final_error",
              comparison="<", threshold=CONSTRUCTION_TOL, kind="exact", role="sanity"),
    ),
    limitations=(
        "An empirical illustration of an existence theorem, not a proof: trained networks of depth at most "
        "8 (by default) on ~200-point training grids can only show that width w* = max{d_x, d_y, 2} *can* get far below "
        "what width w* - 1 can ever reach (the exact lower bounds are computed, not trained), and a failure to "
        "reach the threshold may be the optimiser's, not the theorem's. Target (b) is the hardest: with width "
        "d_x = 2 and strictly monotone activations every layer is injective, so the level sets of a bump can "
        "only be approximated in L^p, by networks whose failure of injectivity is confined to sets of small "
        "measure (our reasoning, not the paper's text), which gradient descent does not find easily. "
        "Only L^2 on midpoint grids (the theorem covers every p in "
        "[1, inf)), three low-dimensional targets, and a numerical squashability test of a sufficient "
        "condition on [-8, 8] (not a proof of squashability) are run."
    ),
)

@paper_flow(PAPER, Params, smoke=SMOKE)
def min_width_squashable_flow(params: Params, ctx: RunContext) -> RunOutput:
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

    metrics, by_target = _metrics(params, runs, bounds, demo)
    metrics["timings"] = {"jobs_s": {f"{r['target']}_d{r['depth']}": r["seconds"] for r in results},
                          "train_total_s": float(sum(r["seconds"] for r in results))}
    plot = _plot_table(runs)
    demo_rows = pd.DataFrame([{"activation": d["activation"], "squashable": d["squashable"], "monotone": d["monotone"],
                               "construction": kind, "scale": row.get("eps", row.get("iterations")),
                               "sigmas": row.get("sigmas", 1), "lp_error": row["lp_error"]}
                              for d in demo for kind in ("identity", "step") for row in d[kind]])
    widths = _width_table(params, runs, by_target)
    return RunOutput(metrics=metrics, tables={"plot": plot, "runs": runs, "widths": widths, "squash_demo": demo_rows},
                     figure=_figure(params, runs, bounds, demo, by_target), setup=_setup(params, bounds),
                     notes=_notes(params, metrics, bounds, by_target, demo))


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


def _notes(params: Params, metrics: dict, bounds: dict, by_target: dict, demo: list[dict]) -> str:
    rows = [f"  - ({t}) " + "; ".join(
        f"{a}: " + ", ".join(f"w{k} {v:.3f}" for k, v in per["ratio_by_width"].items())
        + f" -> empirical {'>' if per['empirical_is_lower_limit'] else ''}"
        f"{per['empirical'] - (1 if per['empirical_is_lower_limit'] else 0)} (formula {per['formula']})"
        for a, per in by_target[t].items()) for t in bounds]
    return (
        "**Official code**: none (theory paper). The paper's full text was not available to the search tools "
        "(only its abstract and an excerpt of its introduction: Lemma 4, non-affine analytic functions such as "
        "sigmoid, tanh, sin, exp and polynomials are squashable; Lemma 5, piecewise continuously differentiable "
        "functions including leaky ReLU and hardswish; a third-party summary (sciencestack.ai) adds that the "
        "criteria go through a width-1 approximation of the step by a sigmoidal construction, and the upper bound "
        "through an encoder-decoder with a space-filling-type curve). **Not confirmed**: the exact Definition of "
        "squashable. "
        "This flow reads it as: alternately composing sigma with affine maps approximates the identity and the "
        "binary step *by strictly monotone compositions* on any compact set; that reading is what separates "
        "leaky ReLU (squashable by Lemma 5, width max{d_x,d_y,2} as in Cai 2023) from ReLU (width "
        "max{d_x+1,d_y}, Park et al. 2021). The numerical test checks the sufficient condition 'an interval "
        "where sigma is strictly monotone and not affine' and builds both approximants from it; it is not the "
        "paper's proof.\n\n"
        "**Lower bounds** (exact for the grid error): (a) a width-1 network with monotone sigma is a monotone "
        "function, so isotonic regression (both directions) bounds its error; (b) a width-1 network is "
        "g(theta . x) with g monotone, bounded by the best isotonic fit over directions (360-direction grid "
        f"plus local refinement; best angle {bounds['b'].get('angle_deg', float('nan')):.2f} deg), which is "
        "why claim 2 allows 1 % slack; (c) a width-1 bottleneck puts all outputs on one line, bounded by the "
        "smallest principal axis of the targets (any sigma). Claim 2 is a theorem given these arguments, so it "
        "checks the pipeline (bounds and training code), not the paper.\n\n"
        "**Initialisation**: 'identity' starts each hidden layer at sigma's linearisation (x0 = 0, or x0 = 1 "
        "for ReLU and leaky ReLU whose kink is at 0), the small-scale identity approximant of the squashability "
        "definition; pilots found it better for tanh, sigmoid, softplus and ReLU and worse than Glorot for leaky "
        "ReLU and sin, hence the per-activation choice.\n\n"
        "**Deviations and choices** (ours): L^2 only; the plan's depths 8-16 are cut to at most "
        f"{max(params.depths)} (depths {params.depths}): in pilot runs depth 16 trained worse than depth 8 on every "
        "target and costs twice as much. Training hyperparameters (full-batch Adam, lr, steps, the per-activation "
        "initialisation, ~200-point training grids evaluated on the finer 2,000-point grids) were chosen in pilot "
        "runs on these targets, including runs that showed target (b) failing at width 2; the claim thresholds were "
        "fixed from the plan before any run and not changed. tanh is computed as 2 sigmoid(2x) - 1 (the same "
        "function; torch.tanh is slow on this CPU). The claims use the best restart of depth >= "
        f"{PLAN_MIN_DEPTH} because the theorem is about existence.\n\n"
        "**Best error / width-(w*-1) bound** (depth >= 8, best restart), and the empirical minimum width:\n"
        + "\n".join(rows) + "\n\n"
        + "**Squashability test**: accepted " + ", ".join(d["activation"] for d in demo if d["squashable"])
        + "; rejected " + ", ".join(d["activation"] for d in demo if not d["squashable"]) + ".\n\n"
        + _reading(metrics, by_target)
    )


def _reading(metrics: dict, by_target: dict) -> str:
    w = metrics["width"]
    failing = [k for k, v in w["plan_ratios"].items() if v > SUFFICIENT_FRACTION]
    text = (f"**Reading the claims**: the worst plan ratio is {w['plan_ratio_max']:.3f} (threshold "
            f"{SUFFICIENT_FRACTION}); ")
    if failing:
        wider = []
        for key in failing:
            t, a = key.split("_", 1)
            ratios = by_target[t][a]["ratio_by_width"]
            above = [k for k in ratios if int(k) > int(min(ratios, key=int)) + 1 and ratios[k] <= SUFFICIENT_FRACTION]
            if above:
                wider.append(key)
        text += f"not reached for {', '.join(failing)}. "
        if wider:
            text += (f"One unit wider ({', '.join(wider)}) the threshold is reached, so at w* this run could not "
                     "find the approximant the theorem says exists (an optimisation limit at this depth and step "
                     "budget, or a harder-to-train construction). ")
        text += "This is reported as not reproduced, not explained away. "
    else:
        text += "every (target, plan activation) pair reaches it at width w*. "
    mism = [f"({t}) {a}: {'>' if per['empirical_is_lower_limit'] else ''}"
            f"{per['empirical'] - (1 if per['empirical_is_lower_limit'] else 0)}"
            for t, acts in by_target.items() for a, per in acts.items()
            if per["squashable"] and per["empirical"] != per["formula"]]
    text += (f"Empirical minimum width different from max{{d_x,d_y,2}} for {len(mism)} (target, squashable "
             f"activation) pairs" + (f": {'; '.join(mism)}. " if mism else ". "))
    text += f"The sin width-1 net reaches {metrics['exception']['ratio']:.3f} x the monotone bound. "
    if CONTROL in by_target.get("b", {}):
        relu = {t: by_target[t][CONTROL] for t in by_target}
        own = [t for t in relu if relu[t]["formula"] is not None and relu[t]["empirical"] > relu[t]["formula"]]
        text += (f"The ReLU control on (b) at width 2 reaches {metrics['control']['relu_ratio_b_wstar']:.3f} x its "
                 "bound (ReLU's own minimum width there is 3). ")
        if [t for t in own if t != "b"]:
            text += ("But ReLU also misses the threshold at its own minimum width on "
                     + ", ".join(f"({t})" for t in own if t != "b")
                     + ", where max{d_x+1,d_y} = 2 suffices in theory: narrow deep ReLU nets are hard to train "
                       "(dead units), so the control's verdict is weak evidence for the width theory.")
    c, ps = metrics["control"], metrics["per_seed"]
    text += ("**Negative controls** (same metric and threshold): ReLU at width w*, worst target "
             f"{c['relu_ratio_wstar_max']:.3f}; ReLU's mismatches against max{{d_x,d_y,2}}: "
             f"{c['relu_mismatches_vs_squashable_formula']}; the best monotone width-1 net on (a): "
             f"{c['monotone_width1_ratio_a']:.3f} x the bound; the best squashable plan activation at width 2 on (b): "
             f"{c['squashable_ratio_b_wstar']:.3f}"
             + (f", which also misses {SUFFICIENT_FRACTION}, so the ReLU claim has no power in this run. "
                if c["squashable_ratio_b_wstar"] > SUFFICIENT_FRACTION else ". ")
             + "Per restart: worst plan ratio " + ", ".join(f"{v:.3f}" for v in ps["plan_ratio_max"])
             + "; sin width-1 ratio " + ", ".join(f"{v:.3f}" for v in ps["exception_ratio"])
             + ". The bounds check, the squashability test and the constructions are sanity checks of our "
               "implementation (not counted as reproduced claims).")
    return text

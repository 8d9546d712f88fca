"""Sharpness dynamics of the minimalist model as a Prefect flow: progressive sharpening up to the closed
form S*(Q, D) or the edge of stability 2/eta, its growth with dataset difficulty and depth, SGD against
GD, and a tanh MLP on digits with label noise."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.sharpness_minimalist import method
from flows.sharpness_minimalist.params import SMOKE, Params
from tasks import stats
from tasks.contract import Claim, Paper, RunContext, RunOutput
from tasks.data import save_bundled, save_parquet
from tasks.paper import over_seeds, paper_flow

PAPER = Paper(
    slug="sharpness_minimalist",
    title="Understanding Sharpness Dynamics in NN Training with a Minimalist Example: The Effects of "
          "Dataset Difficulty, Depth, Stochasticity, and More",
    method="Minimalist model: deep linear network with one neuron per layer, exact Hessian sharpness under GD/SGD",
    paper_class="A",
    source="abstracts-004.txt #2",
    official_code=None,
    claims=(
        Claim(id="progressive_sharpening",
              text="sharpness often increases (progressive sharpening) before saturating at the edge of "
                   "stability: for every GD run with S* > 2/eta, the mean sharpness over the last 30% of "
                   "training is >= 2x its value at initialisation (worst run per seed)",
              source="abstract; plan claim 1 (direction)", metric="eos.min_rise.mean", comparison=">=",
              threshold=2.0, kind="direction", interval=("eos.min_rise.ci_low", "eos.min_rise.ci_high")),
        Claim(id="edge_of_stability_2_over_eta",
              text="... before saturating at the edge of stability: with S* > 2/eta, every recorded sharpness "
                   "of the last 30% of training lies within +-10% of the closed-form limit 2/eta "
                   "(max relative deviation, worst run per seed)",
              source="abstract; plan claim 1 (magnitude)", metric="eos.max_rel_dev.mean", comparison="<=",
              threshold=0.10, kind="magnitude", interval=("eos.max_rel_dev.ci_low", "eos.max_rel_dev.ci_high"),
              scaled="step sizes set relative to the closed form, eta = r * 2/S* with r in {1.2, 3.0} (the "
                     "plan's eta ratio 1:2:5 with r = 0.6 below the edge), on power-law inputs; isotropic "
                     "inputs are run as a reported control"),
        Claim(id="difficulty_increases_sharpness",
              text="dataset properties affect the degree of progressive sharpening: terminal sharpness of "
                   "small-step GD is monotone in the difficulty Q = ||X^+ y||^2 (Spearman >= 0.9 over 6 levels)",
              source="abstract; plan claim 2 (direction)", metric="difficulty.spearman.mean", comparison=">=",
              threshold=0.9, kind="direction",
              interval=("difficulty.spearman.ci_low", "difficulty.spearman.ci_high")),
        Claim(id="difficulty_matches_closed_form",
              text="terminal sharpness matches the closed form S*(Q, D) = Q^((D-1)/D) lambda_max((XX^T + "
                   "(D-1) Xuu^TX^T)/n) within 25% at every difficulty level",
              source="plan claim 2 (magnitude)", metric="difficulty.max_rel_err.mean", comparison="<=",
              threshold=0.25, kind="magnitude",
              interval=("difficulty.max_rel_err.ci_low", "difficulty.max_rel_err.ci_high")),
        Claim(id="depth_increases_sharpness",
              text="network depth affects the degree of progressive sharpening: terminal sharpness increases "
                   "with D in {2, 3, 4, 6, 8} (Spearman >= 0.9)",
              source="abstract; plan claim 3 (direction)", metric="depth.spearman.mean", comparison=">=",
              threshold=0.9, kind="direction", interval=("depth.spearman.ci_low", "depth.spearman.ci_high")),
        Claim(id="depth_matches_closed_form",
              text="terminal sharpness matches S*(Q, D) within 25% at every depth",
              source="plan claim 2's 25% applied to the depth sweep [ours]", metric="depth.max_rel_err.mean",
              comparison="<=", threshold=0.25, kind="magnitude",
              interval=("depth.max_rel_err.ci_low", "depth.max_rel_err.ci_high")),
        Claim(id="sgd_below_gd",
              text="stochasticity of optimizers affects the degree of progressive sharpening: mean terminal "
                   "sharpness of SGD with batch size 1 is below GD's at the same eta (worst of the step sizes)",
              source="abstract; plan claim 3 (direction)", metric="sgd.b1_minus_gd_worst.mean", comparison="<",
              threshold=0.0, kind="direction",
              interval=("sgd.b1_minus_gd_worst.ci_low", "sgd.b1_minus_gd_worst.ci_high")),
        Claim(id="mlp_label_noise_increases_sharpness",
              text="these theoretical insights extend to practical scenarios: in a tanh MLP on two digit "
                   "classes, terminal sharpness increases with the label-noise fraction (Spearman >= 0.8 over "
                   "5 levels)",
              source="abstract; plan claim 4 (direction)", metric="mlp.spearman.mean", comparison=">=",
              threshold=0.8, kind="direction", interval=("mlp.spearman.ci_low", "mlp.spearman.ci_high"),
              scaled="a 64-32-32-1 tanh MLP on 200 examples of sklearn digits (3 vs 8) instead of the paper's "
                     "CIFAR-scale networks; 'terminal' = after a fixed number of GD steps"),
        Claim(id="closed_form_equals_autograd_hessian",
              text="the closed form S*(Q, D) is the top eigenvalue of the autograd Hessian at the balanced "
                   "global minimum, where the gradient vanishes (max error over depths and seeds < 1e-8)",
              source="our derivation of the plan's step 3", metric="closed_form.max_error", comparison="<",
              threshold=1e-8, kind="exact"),
    ),
    limitations=(
        "Synthetic Gaussian regression (n = 40, d = 20) with a power-law input spectrum stands in for the "
        "paper's datasets, and the 'practical scenario' is a small tanh MLP on 200 digits, not the paper's "
        "CNNs/Transformers on CIFAR-scale data. The paper's exact definition of dataset difficulty, its "
        "theorems' constants and its figures' hyper-parameters could not be read here (only the abstract "
        "was available); the closed form S*(Q, D) is our derivation for the balanced minimum that gradient "
        "flow reaches from a balanced start, and step sizes are set relative to it (eta = r * 2/S*), so a "
        "claim about a fixed eta across datasets is checked in that normalised form. 'Terminal' means after "
        "a fixed budget of steps (mean over the last 30%), not at convergence; the SGD comparison uses an "
        "equal number of updates, not equal epochs."
    ),
)


def _per_seed(frame: pd.DataFrame, fn) -> np.ndarray:
    """``fn(group of one seed)`` for every seed, in seed order."""
    return np.array([fn(g) for _, g in frame.groupby("seed", sort=True)], dtype=float)


def _aggregate(runs: pd.DataFrame, mlp: pd.DataFrame, params: Params, closed_form: list[float]) -> dict:
    eos = runs[runs["group"] == "eos"]
    above = eos[eos["S_pred"] > eos["edge"]]
    eos_metrics = {
        "min_rise": stats.summarize(_per_seed(above, lambda g: (g["terminal"] / g["S0"]).min())),
        "max_rel_dev": stats.summarize(_per_seed(above, lambda g: g["tail_max_rel_dev_edge"].max())),
        "by_ratio": {},
    }
    for group, key in (("eos", "by_ratio"), ("control", "control_by_ratio")):
        sub = runs[runs["group"] == group]
        eos_metrics[key] = {
            f"r{r:g}": {
                "terminal_over_edge": stats.summarize(g["terminal"] / g["edge"]),
                "terminal_over_prediction": stats.summarize(g["terminal"] / g["S_pred_terminal"]),
                "max_rel_dev_edge": stats.summarize(g["tail_max_rel_dev_edge"]),
                "rise": stats.summarize(g["terminal"] / g["S0"]),
                "diverged": int(g["diverged"].sum()),
            } if not g["diverged"].any() else {"diverged": int(g["diverged"].sum()), "runs": int(len(g))}
            for r, g in sub.groupby("ratio", sort=True)
        }

    def sweep(group: str, x: str) -> dict:
        sub = runs[runs["group"] == group]
        rel = sub["terminal"] / sub["S_pred"] - 1.0
        return {
            "spearman": stats.summarize(_per_seed(sub, lambda g: stats.spearman(g[x], g["terminal"]))),
            "max_rel_err": stats.summarize(_per_seed(sub.assign(rel=rel.abs()), lambda g: g["rel"].max())),
            "by_level": {f"{x}_{k:g}" if x == "depth" else f"level_{k}": {
                "Q": float(g["Q"].mean()), "S_pred": float(g["S_pred"].mean()), "terminal": float(g["terminal"].mean()),
                "terminal_over_S_pred": float((g["terminal"] / g["S_pred"]).mean()), "S0": float(g["S0"].mean()),
            } for k, g in sub.groupby("depth" if x == "depth" else "level", sort=True)},
        }

    sgd = runs[runs["group"] == "sgd"]
    sgd_metrics: dict = {"by_ratio": {}}
    worst = None
    for r, g in sgd.groupby("ratio", sort=True):
        gd = g[g["batch_size"] == params.n].sort_values("seed")["terminal"].to_numpy()
        entry = {f"b{b}": stats.summarize(gb.sort_values("seed")["terminal"].to_numpy())
                 for b, gb in g.groupby("batch_size", sort=True)}
        entry["final_loss"] = {f"b{b}": float(gb["final_loss"].mean()) for b, gb in g.groupby("batch_size", sort=True)}
        entry["final_balance"] = {f"b{b}": float(gb["final_balance"].median())
                                  for b, gb in g.groupby("batch_size", sort=True)}
        entry["edge"] = float(g["edge"].mean())
        entry["S_pred"] = float(g["S_pred"].mean())
        b1 = g[g["batch_size"] == 1].sort_values("seed")["terminal"].to_numpy()
        entry["b1_minus_gd"] = stats.paired_difference(b1, gd)
        sgd_metrics["by_ratio"][f"r{r:g}"] = entry
        if worst is None or entry["b1_minus_gd"]["mean"] > worst["mean"]:
            worst = {**entry["b1_minus_gd"], "ratio": float(r)}
    sgd_metrics["b1_minus_gd_worst"] = worst

    last = mlp[mlp["step"] == mlp["step"].max()]
    mlp_metrics = {
        "spearman": stats.summarize(_per_seed(last, lambda g: stats.spearman(g["label_noise"], g["sharpness"]))),
        "edge": 2.0 / params.mlp_lr,
        "by_noise": {f"flip_{k:g}": {"sharpness": stats.summarize(g["sharpness"]), "loss": float(g["loss"].mean())}
                     for k, g in last.groupby("label_noise", sort=True)},
    }
    return {"eos": eos_metrics, "difficulty": sweep("diff", "Q"), "depth": sweep("depth", "depth"),
            "sgd": sgd_metrics, "mlp": mlp_metrics, "closed_form": {"max_error": float(max(closed_form))},
            "diverged_runs": int(runs["diverged"].sum())}


def _figure(runs: pd.DataFrame, curves: pd.DataFrame, mlp: pd.DataFrame, params: Params):
    fig, axes = plt.subplots(2, 3, figsize=(16, 8.5))
    seed0 = curves["seed"].min()
    for ax, group, title in ((axes[0, 0], "eos", f"A. GD, power-law inputs (decay {params.spectrum_decay:g}), D={params.depth_main}"),
                             (axes[0, 1], "control", "B. control: isotropic inputs")):
        sub = curves[(curves["group"] == group) & (curves["seed"] == seed0)]
        for i, (r, g) in enumerate(sub.groupby("ratio", sort=True)):
            color = f"C{i}"
            ax.fill_between(g["step"], g["window_min"], g["window_max"], color=color, alpha=0.25, lw=0)
            ax.plot(g["step"], g["window_mean"], color=color, lw=1, label=f"r = eta S*/2 = {r:g}")
            ax.axhline(g["edge"].iloc[0], color=color, ls="--", lw=0.8)
            ax.axhline(g["S_pred"].iloc[0], color=color, ls=":", lw=0.8)
        ax.set(yscale="log", xlabel="GD step", ylabel="sharpness (exact): window mean, band min-max",
               title=title + f" (seed {seed0})")
        ax.legend(fontsize=7, title="dashed 2/eta, dotted S*", title_fontsize=7)

    ax = axes[0, 2]
    diff = runs[runs["group"] == "diff"]
    ax.scatter(diff["Q"], diff["terminal"], s=14, label="measured (all seeds)")
    ax.scatter(diff["Q"], diff["S_pred"], s=14, marker="x", label="closed form S*(Q, D)")
    ax.set(xscale="log", yscale="log", xlabel="difficulty Q = ||X^+ y||^2", ylabel="terminal sharpness",
           title=f"C. difficulty sweep (D={params.depth_main}, eta = {params.small_step_ratio:g} * 2/S*)")
    ax.legend(fontsize=8)

    ax = axes[1, 0]
    dep = runs[runs["group"] == "depth"]
    for i, (seed, g) in enumerate(dep.groupby("seed", sort=True)):
        g = g.sort_values("depth")
        ax.plot(g["depth"], g["terminal"], "o-", color=f"C{i}", ms=4, lw=1, label=f"seed {seed}: measured")
        ax.plot(g["depth"], g["S_pred"], "x:", color=f"C{i}", lw=1)
    ax.set(xlabel="depth D", ylabel="terminal sharpness",
           title=f"D. depth sweep (x: closed form S*, eta = {params.small_step_ratio:g} * 2/S*)")
    ax.legend(fontsize=7)

    ax = axes[1, 1]
    sgd = runs[runs["group"] == "sgd"]
    for i, (r, g) in enumerate(sgd.groupby("ratio", sort=True)):
        norm = g.assign(y=g["terminal"] / g["edge"])
        agg = norm.groupby("batch_size")["y"].agg(["mean", "min", "max"])
        ax.errorbar(agg.index, agg["mean"], yerr=[agg["mean"] - agg["min"], agg["max"] - agg["mean"]], fmt="o-",
                    capsize=3, color=f"C{i}", label=f"r = {r:g} (S* = {r:g} x 2/eta)")
    ax.axhline(1.0, color="k", ls="--", lw=0.8, label="2/eta")
    ax.set(xscale="log", xlabel=f"batch size (n = {params.n}: GD)", ylabel="terminal sharpness x eta/2",
           title="E. SGD vs GD, equal eta and updates")
    ax.legend(fontsize=8)

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


@paper_flow(PAPER, Params, smoke=SMOKE)
def sharpness_minimalist_flow(params: Params, ctx: RunContext) -> RunOutput:
    digits_path = str(save_bundled("digits", ctx.data_dir / "digits.parquet"))
    frames = []
    for seed in ctx.seeds:
        data = method.synthetic_data(params, seed)
        for name, Xs, labels in (
                ("power_law", data["X"], {**{f"y_level{k}": y for k, y in enumerate(data["Y_levels"])}, "y_base": data["Y_base"]}),
                ("isotropic", data["X_iso"], {"y_base": data["Y_iso"]})):
            frame = pd.DataFrame(Xs, columns=[f"x{j}" for j in range(Xs.shape[1])]).assign(**labels)
            frames.append(frame.assign(seed=seed, inputs=name))
    save_parquet(pd.concat(frames, ignore_index=True), ctx.data_dir / "synthetic.parquet")

    per_seed = over_seeds(method.run_seed, ctx.seeds, p=params, digits_path=digits_path)
    runs = pd.DataFrame([row for r in per_seed for row in r["runs"]])
    curves = pd.DataFrame([row for r in per_seed for row in r["curves"]])
    mlp = pd.DataFrame([row for r in per_seed for row in r["mlp"]])
    metrics = _aggregate(runs, mlp, params, [r["closed_form_error"] for r in per_seed])
    metrics["timings"] = {
        "minimalist_s": [r["timings"]["minimalist_s"] for r in per_seed],
        "mlp_s": [r["timings"]["mlp_s"] for r in per_seed],
        "minimalist_cpu_s": [r["timings"]["minimalist_cpu_s"] for r in per_seed],
        "mlp_cpu_s": [r["timings"]["mlp_cpu_s"] for r in per_seed],
    }

    eos_curves = curves[curves["group"].isin(["eos", "sgd"])].copy()
    eos_curves = eos_curves[(eos_curves["group"] == "eos") | (eos_curves["batch_size"] == 1)]
    eos_curves["y"] = eos_curves["window_mean"] / eos_curves["edge"]
    eos_curves["series"] = np.where(eos_curves["group"] == "eos", "GD r=", "SGD b=1 r=") + eos_curves["ratio"].map("{:g}".format)
    plot = eos_curves.groupby(["series", "step"], sort=True)["y"].mean().reset_index().rename(columns={"step": "x"})
    plot = plot[["x", "y", "series"]]
    tables = {"plot": plot, "runs": runs, "curves": curves, "mlp": mlp}
    return RunOutput(metrics=metrics, tables=tables, figure=_figure(runs, curves, mlp, params),
                     setup=_setup(params), notes=_notes(params, metrics))


def _setup(p: Params) -> str:
    return (
        f"**Minimalist model** f(x) = (prod_j v_j) <w, x>, w in R^{p.d}, D - 1 scalar layers, loss "
        f"1/(2n) ||f(X) - y||^2 on n = {p.n} examples; inputs x ~ N(0, diag(k^-{p.spectrum_decay:g})), labels "
        f"y = X beta + sigma eps with ||beta|| = {p.beta_norm:g}; {p.seeds} seeds (a seed draws X, beta, eps, "
        f"the initial directions and the SGD batches). Balanced small initialisation ||w|| = v_j = alpha, "
        f"alpha^D = {p.init_norm:g}. Every run takes {p.steps} updates; the exact Hessian ((d + D - 1)^2, "
        f"analytic, eigvalsh) is evaluated every {p.record_every} steps; 'terminal' sharpness = mean over the "
        f"last {p.tail_frac:.0%} of the records. Step sizes are set relative to the closed form: eta = r * 2/S*, "
        "so r > 1 means S* > 2/eta.\n\n"
        f"- **EoS** (A): D = {p.depth_main}, sigma = {p.base_noise:g}, r in {p.eos_step_ratios} (prediction: "
        "terminal sharpness = min(S*, 2/eta)); **control** (B): the same on isotropic inputs (decay 0).\n"
        f"- **Difficulty** (C): sigma in {p.noise_levels} (6 values of Q = ||X^+ y||^2), r = {p.small_step_ratio:g}.\n"
        f"- **Depth** (D): D in {p.depths}, sigma = {p.base_noise:g}, r = {p.small_step_ratio:g}.\n"
        f"- **SGD** (E): batch sizes {p.sgd_batch_sizes} (b distinct examples drawn afresh every update) and GD "
        f"(b = n), r in {p.sgd_step_ratios}, the same number of updates; sharpness of the full-batch loss.\n"
        f"- **MLP** (F): {p.mlp_n_train} examples of digits {p.mlp_classes[0]} vs {p.mlp_classes[1]} (pixels/16, "
        f"labels +-1, a nested fraction {p.mlp_label_noise} of labels flipped), 64-{p.mlp_hidden}-{p.mlp_hidden}-1 "
        f"tanh MLP (PyTorch default init, the same init for every level), full-batch GD on the MSE with "
        f"eta = {p.mlp_lr:g} for {p.mlp_steps} steps; sharpness by {p.mlp_power_iters} warm-started power "
        f"iterations on exact Hessian-vector products every {p.mlp_record_every} steps; terminal = last step."
    )


def _sgd_reading(p: Params, m: dict) -> str:
    parts = []
    for key, e in m["sgd"]["by_ratio"].items():
        gd, b1 = f"b{p.n}", "b1"
        parts.append(f"at r = {key[1:]}, final loss b=1 {e['final_loss'][b1]:.4f} vs GD {e['final_loss'][gd]:.4f}, "
                     f"balance ||w||/|v_j| (median) b=1 {e['final_balance'][b1]:.2f} vs GD {e['final_balance'][gd]:.2f}")
    return ("Whether the lower sharpness is a flatter near-minimum or a failure to fit shows in the loss and the "
            "layer balance (1 = balanced): " + "; ".join(parts) + ". A final loss far above GD's would mean SGD "
            "stalled rather than found a flatter minimum.")


def _mlp_reading(m: dict) -> str:
    levels = m["mlp"]["by_noise"]
    return ("Terminal MLP sharpness by label-flip fraction (seed mean): "
            + ", ".join(f"{k[5:]}: {v['sharpness']['mean']:.1f}" for k, v in levels.items())
            + f" (2/eta = {m['mlp']['edge']:g}).")


def _notes(p: Params, m: dict) -> str:
    ctrl = m["eos"]["control_by_ratio"]
    ctrl_text = "; ".join(
        f"r = {k[1:]}: " + (f"terminal/(2/eta) = {v['terminal_over_edge']['mean']:.3f}, max deviation "
                           f"{v['max_rel_dev_edge']['mean']:.2f}" if "terminal_over_edge" in v
                           else f"{v['diverged']} of {v['runs']} runs diverged")
        for k, v in ctrl.items())
    sgd = m["sgd"]["b1_minus_gd_worst"]
    return (
        "**Source.** No official code was found and only the abstract (plus metadata pages) of arXiv "
        "2506.06940 could be read here, so every formula below is our own derivation, not checked against the "
        "paper's text: the model (one neuron per layer, first layer a vector, the rest scalars), the difficulty "
        "Q = ||X^+ y||^2 (the plan's yᵀ(XXᵀ)⁻¹y when n <= d) and the closed form S*(Q, D) at the balanced minimum "
        "(exact: checked against the autograd Hessian, claim `closed_form_equals_autograd_hessian`). The paper's "
        "own sharpness bound (Theorem 4.6 / Table 3 in a reviewer summary) could not be read, so measurements are "
        "compared with S* and 2/eta, not with that bound.\n\n"
        "**Why the residual term vanishes.** Every second derivative of f is linear in x, and X^T r = 0 at a "
        "least-squares solution, so at any global minimum the Hessian equals the Gauss-Newton term even when "
        "n > d and the labels are noisy.\n\n"
        "**Input spectrum [ours].** The plan leaves Sigma open. With isotropic inputs GD above the edge does not "
        "settle: it enters a period-2/chaotic orbit whose mean sharpness is near 2/eta but whose iterates swing "
        f"far from it, and larger r diverges ({ctrl_text}). With a decaying spectrum (decay "
        f"{p.spectrum_decay:g}, like image data) minima much flatter than the balanced one exist, and GD moves "
        "to one with sharpness 2/eta, the behaviour of real networks. The spectrum was chosen after exploratory "
        "runs showed this difference; the isotropic case is therefore reported beside the claim, not hidden.\n\n"
        "**Step sizes.** eta is set per run as r * 2/S* (the closed form of that run), so 'small-step GD' in "
        "the difficulty and depth sweeps means r = "
        f"{p.small_step_ratio:g} for every level, not one eta for all levels (with one eta the low-Q levels need "
        "far more steps to converge); the plan's eta grid {0.01, 0.02, 0.05} is mirrored by the ratio 1:2:5 of "
        f"r = {p.eos_step_ratios}.\n\n"
        "**SGD** uses the same eta and the same number of updates as GD (equal epochs would give batch size 1 "
        f"n = {p.n} times more updates); the worst-case difference (b = 1 minus GD) is "
        f"{sgd['mean']:+.3f} [{sgd['ci_low']:+.3f}, {sgd['ci_high']:+.3f}] at r = {sgd['ratio']:g}. "
        + _sgd_reading(p, m) + "\n\n"
        "**MLP.** The sharpness of the MLP is a power-iteration estimate (it converges to the eigenvalue of "
        "largest magnitude; checked against eigvalsh of the full Hessian in the tests). Terminal means after "
        f"{p.mlp_steps} steps: the noisy levels are still sharpening then, so the check measures the degree "
        "of progressive sharpening within a fixed budget, not a converged value; the highest flip fraction "
        "starts sharpening later (its labels are nearly random), so its rank among the levels depends on the "
        "budget. " + _mlp_reading(m)
    )

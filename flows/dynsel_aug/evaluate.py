"""dynsel_aug, the evaluation: accuracies and paired differences per noise setting, the counted budget, the
noisy share, the CLIP stand-in's zero-shot accuracy, the figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.dynsel_aug import method
from flows.dynsel_aug.params import Params
from paperflows.core import estimates as est
from paperflows.core import stats
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records
from paperflows.core.report import fmt

LABEL = {"full": "Full data", "random": "Random dynamic selection", "random_b": "Random dynamic selection (2nd stream)",
         "infobatch": "InfoBatch (rescaled, no annealing)", "augment_only": "Augmentation only (random + aug)",
         "density_only": "Density only (+ aug)", "consistency_only": "Consistency only (+ aug)",
         "selection_only": "Selection only (joint score, no aug)", "method": "Joint selection + augmentation"}
SETTINGS = {"clean": "0% label noise", "noisy": "symmetric label noise"}


def evaluate(params: Params, records: Records) -> RunOutput:
    rows = records["per_seed"]
    metrics = _metrics(rows, params)
    return RunOutput(metrics=metrics, tables={"plot": _plot_table(metrics), "per_seed": rows},
                     figure=_figure(metrics, params), setup=_setup(params, rows), notes=_measured(metrics, params))


def _metrics(rows: pd.DataFrame, params: Params) -> dict:
    noises = {"clean": 0.0, "noisy": params.noise_rate}
    metrics: dict = {"accuracy": {}, "diff": {}, "noisy_share": {}, "budget": {}}
    pairs = [("method", "full"), ("random", "full"), ("method", "random"), ("random_b", "random"),
             ("method", "infobatch"), ("random", "infobatch"), ("method", "augment_only"),
             ("augment_only", "full"), ("selection_only", "random"), ("density_only", "random"),
             ("consistency_only", "random"), ("method", "selection_only"), ("augment_only", "random"),
             ("selection_only", "full")]
    for key, noise in noises.items():
        metrics["accuracy"][key] = {m: est.summary(rows, "accuracy", noise=noise, method=m) for m in method.METHODS}
        metrics["diff"][key] = {f"{a}_minus_{b}": est.paired(rows, "accuracy", {"noise": noise, "method": a},
                                                             {"noise": noise, "method": b}) for a, b in pairs}
    for m, spec in method.METHODS.items():
        if spec.kind != "full":
            metrics["noisy_share"][m] = est.summary(rows, "noisy_share", noise=params.noise_rate, method=m)
    full_seen = rows[rows["method"] == "full"]["samples_seen"].to_numpy(float)
    deviations = []
    for m in method.METHODS:
        sub = rows[rows["method"] == m]
        ratio = sub["samples_seen"].to_numpy(float) / full_seen.mean()
        metrics["budget"][m] = {"samples_seen": float(sub["samples_seen"].mean()), "ratio_to_full": float(ratio.mean()),
                                "signal_passes": float(sub["signal_passes"].mean()),
                                "reference_passes": float(sub["reference_passes"].mean())}
        if m != "full":
            deviations.append(float(np.abs(ratio - params.fraction).max()))
    metrics["budget"]["max_abs_deviation"] = max(deviations)
    # one value per seed: the two settings of a seed share its split, so they are averaged, not pooled
    metrics["zero_shot"] = stats.summarize(np.mean(est.aligned(rows, "zero_shot", *({"noise": n, "method": "method"}
                                                                              for n in noises.values())), axis=0))
    metrics["timings"] = {"cpu_s_by_method": {m: float(rows[rows["method"] == m]["cpu_s"].sum()) for m in method.METHODS},
                          "cpu_s_total_runs": float(rows["cpu_s"].sum())}
    return metrics


def _figure(metrics: dict, params: Params):
    figure, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=False)
    names = list(method.METHODS)
    for axis, (key, title) in zip(axes, SETTINGS.items()):
        acc = metrics["accuracy"][key]
        means = np.array([acc[m]["mean"] for m in names])
        err = np.array([[acc[m]["mean"] - acc[m]["ci_low"], acc[m]["ci_high"] - acc[m]["mean"]] for m in names]).T
        colours = ["tab:red" if m == "method" else "tab:grey" if m == "full" else "tab:blue" for m in names]
        axis.bar(range(len(names)), means, yerr=err, color=colours, capsize=3)
        axis.set_xticks(range(len(names)), [LABEL[m] for m in names], rotation=60, ha="right", fontsize=7)
        low = min(acc[m]["ci_low"] for m in names)
        axis.set_ylim(max(0.0, low - 2.0), 100.0)
        noise = 0 if key == "clean" else params.noise_rate
        axis.set(ylabel="test accuracy (%)", title=f"digits, {noise:.0%} label noise (mean, 95% CI over seeds)")
    figure.tight_layout()
    return figure


def _plot_table(metrics: dict) -> pd.DataFrame:
    return pd.DataFrame([{"x": metrics["budget"][m]["ratio_to_full"], "y": metrics["accuracy"][key][m]["mean"],
                          "series": f"{m} ({key})"} for key in SETTINGS for m in method.METHODS])


def _pp(d: dict) -> str:
    """A difference in accuracy points with its interval."""
    return f"{fmt(d['mean'])} pp [{fmt(d['ci_low'])}, {fmt(d['ci_high'])}]"


def _setup(params: Params, rows: pd.DataFrame) -> str:
    pool = int(rows["pool"].iloc[0])
    return (
        f"**Data.** scikit-learn digits (8x8, pixels in [-1, 1]), a fresh stratified split per seed: pool "
        f"{params.pool_frac:.0%} ({pool} images), clean reference {params.reference_frac:.0%} (aligns the image->text "
        f"projection only), test the rest (clean labels). Two settings: clean pool labels, and {params.noise_rate:.0%} "
        "symmetric label noise (exactly that many pool labels moved to a uniformly drawn other class). "
        f"{params.seeds} seeds; every method of a seed starts from the same weights and batch-order seed.\n\n"
        f"**Training.** A CNN (3x3 conv {params.conv_channels} -> {2 * params.conv_channels} channels, 2x2 max-pool, "
        f"FC {params.hidden}, linear head), Adam lr {params.lr}, batch {params.batch_size}, {params.epochs} epochs, "
        "all through `tasks.selection.train_with_selection`: every "
        f"{params.reselect_every} epoch(s) the pool is scored (forward only) and the policy picks this epoch's rows.\n\n"
        f"**The method.** Density rho = mean distance to the {params.density_k} nearest pool neighbours in the "
        "CNN's current 64-d penultimate features (`tasks.selection.knn_density`); consistency c = |cos(proj(h), "
        f"MiniLM('{params.text_template}'))| with the pool label, proj an affine map aligned at each rescoring by "
        f"{params.proj_steps} full-batch Adam steps (lr {params.proj_lr}) of the CLIP-style softmax over the 10 "
        f"prompts (temperature {params.proj_temperature}) on the clean reference split; score = minmax(rho) x "
        f"minmax(c); per class, {params.fraction:.0%} of the rows "
        + ("drawn without replacement with probability proportional to the score" if params.selection_rule == "sample"
           else "with the highest scores")
        + f"; every selected row augmented (uniform shift up to {params.max_shift:g} px per axis, rotation up to "
        f"{params.max_rotation:g} degrees, bilinear).\n\n"
        f"**Baselines at the same budget ({params.fraction:.0%} of the pool per epoch).** "
        + "; ".join(f"{LABEL[m]}" for m in method.METHODS if m != "method")
        + ". InfoBatch prunes rows with below-mean loss uniformly until the budget is met and rescales the kept "
        "below-mean rows by |L| / (|L| - pruned). Accuracy = test accuracy after the last epoch."
    )




def _measured(metrics: dict, params: Params) -> str:
    """The measured numbers behind the claims, for the notes (how to read them is in NOTES.md)."""
    c, n = metrics["diff"]["clean"], metrics["diff"]["noisy"]
    acc_c, acc_n = metrics["accuracy"]["clean"], metrics["accuracy"]["noisy"]
    b, share = metrics["budget"], metrics["noisy_share"]
    interval = lambda v: f"{v['mean']:.2f} [{v['ci_low']:.2f}, {v['ci_high']:.2f}]"
    table = ["| method | clean acc (%) | noisy acc (%) | samples_seen / full | signal passes | reference passes | "
             "noisy share |", "|---|---|---|---|---|---|---|"]
    table += [f"| {LABEL[m]} | {interval(acc_c[m])} | {interval(acc_n[m])} | {b[m]['ratio_to_full']:.3f} | "
              f"{b[m]['signal_passes']:.0f} | {b[m]['reference_passes']:.0f} | "
              + ("-" if m not in share else interval(share[m])) + " |" for m in method.METHODS]
    differences = lambda d, pairs: "; ".join(f"{name} {_pp(d[key])}" for name, key in pairs)
    return (
        "**Measured, all methods** (mean [95% CI] over seeds; noisy share = share of flipped labels among trained "
        "rows / noise rate; signal passes are forward-only pool scorings, reference passes the joint policy's "
        "forward passes over the reference split):\n\n" + "\n".join(table) + "\n\n"
        "**Paired differences, clean.** " + differences(c, [
            ("method - full", "method_minus_full"), ("random - full", "random_minus_full"),
            ("method - random", "method_minus_random"), ("A/A random_b - random", "random_b_minus_random"),
            ("method - InfoBatch", "method_minus_infobatch"), ("random - InfoBatch", "random_minus_infobatch"),
            ("method - augmentation only", "method_minus_augment_only"),
            ("method - selection only (the augmentation's share)", "method_minus_selection_only"),
            ("augmentation only - random", "augment_only_minus_random"),
            ("selection only - random", "selection_only_minus_random"),
            ("density only - random", "density_only_minus_random"),
            ("consistency only - random", "consistency_only_minus_random")]) + ".\n\n"
        f"**Paired differences, {params.noise_rate:.0%} noise.** " + differences(n, [
            ("method - full", "method_minus_full"), ("augmentation only - full", "augment_only_minus_full"),
            ("random - full", "random_minus_full"), ("method - random", "method_minus_random"),
            ("method - InfoBatch", "method_minus_infobatch"),
            ("method - augmentation only", "method_minus_augment_only"),
            ("method - selection only", "method_minus_selection_only"),
            ("augmentation only - random", "augment_only_minus_random"),
            ("selection only - random", "selection_only_minus_random"),
            ("selection only - full", "selection_only_minus_full"),
            ("consistency only - random", "consistency_only_minus_random"),
            ("density only - random", "density_only_minus_random")]) + ".\n\n"
        f"**Measured, CLIP stand-in**: zero-shot test accuracy {metrics['zero_shot']['mean']:.1f}% "
        f"[{metrics['zero_shot']['ci_low']:.1f}, {metrics['zero_shot']['ci_high']:.1f}] (per seed, the mean of the "
        f"two settings). **Compute**: max |samples_seen ratio - {params.fraction}| = {b['max_abs_deviation']:.4f}."
    )

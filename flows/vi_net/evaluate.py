"""VI-Net, the evaluation: accuracy and parameter counts against the full CNN and the ablations, the vanishing
diagnostics, the throughput and the figure, from the per-seed records."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.vi_net.params import Params
from paperflows.core import estimates as est
from paperflows.core import stats
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records
from paperflows.core.report import fmt

LABEL = {"full": "full CNN (6 weight layers)", "vinet": "VI-Net (VCA generators, |g| layer, linear head)",
         "vinet_permuted": "VI-Net, generators fitted on permuted labels (control)",
         "trunc_linear": "truncated CNN + linear head (whole latent)",
         "pca_linear": "truncated CNN + PCA-k + linear head (no polynomial layer)",
         "pca_monomials": "truncated CNN + PCA-k + all monomials of degree <= max_degree + linear head",
         "latent_monomials": "truncated CNN + all monomials of the whole latent + linear head (counted only)"}


def _col(rows: pd.DataFrame, layer: int, m: str, col: str = "accuracy") -> np.ndarray:
    return est.per_seed(rows, col, layer=layer, method=m)


def evaluate(params: Params, records: Records) -> RunOutput:
    rows, speed = records["runs"], records["throughput"]
    L = params.layers[0]
    full = _col(rows, 0, "full")
    acc = {str(layer): {m: stats.summarize(_col(rows, layer, m)) for m in LABEL
                        if m != "latent_monomials" and (layer == 0) == (m == "full")}
           for layer in [0, *params.layers]}
    acc_diff = {
        "vinet_minus_full": stats.paired_difference(_col(rows, L, "vinet"), full),
        "pca_linear_minus_full": stats.paired_difference(_col(rows, L, "pca_linear"), full),
        "vinet_minus_trunc_linear": stats.paired_difference(_col(rows, L, "vinet"), _col(rows, L, "trunc_linear")),
        "pca_linear_minus_trunc_linear": stats.paired_difference(_col(rows, L, "pca_linear"), _col(rows, L, "trunc_linear")),
        "vinet_minus_pca_monomials": stats.paired_difference(_col(rows, L, "vinet"), _col(rows, L, "pca_monomials")),
    }
    n_full = _col(rows, 0, "full", "parameters")
    params_m = {"vinet_over_full": stats.ratio_of_means(_col(rows, L, "vinet", "parameters"), n_full),
                "latent_monomials_over_full": stats.ratio_of_means(_col(rows, L, "latent_monomials", "parameters"), n_full),
                "full": float(n_full[0]),
                "by_layer": {str(layer): {m: float(_col(rows, layer, m, "parameters").mean()) for m in LABEL
                                          if m != "full"} for layer in params.layers},
                "generators_by_layer": {str(layer): stats.summarize(_col(rows, layer, "vinet", "generators"))
                                        for layer in params.layers},
                "permuted_generators_by_layer": {str(layer): float(_col(rows, layer, "vinet_permuted", "generators").mean())
                                                 for layer in params.layers},
                "weight_layers": {"full": 6, "vinet": L + 2}}
    diagnostics = records["profiles"]
    profiles = {str(layer): {k: float(est.per_seed(diagnostics, k, layer=layer).mean())
                             for k in diagnostics.columns if k not in ("seed", "layer")} for layer in params.layers}
    worst_train = float(diagnostics["train_own_rms_max"].max())
    vanishing = {"train_own_rms_max_over_psi": worst_train / params.psi, "by_layer": profiles}
    per_seed_speed = {m: est.per_seed(speed, m) for m in ("full", "vinet", "full_rerun")}
    throughput = {"vinet_over_full": stats.ratio_of_means(per_seed_speed["vinet"], per_seed_speed["full"]),
                  "full_rerun_over_full": stats.ratio_of_means(per_seed_speed["full_rerun"], per_seed_speed["full"]),
                  "images_per_s": {m: stats.summarize(v) for m, v in per_seed_speed.items()}}
    metrics = {"accuracy": acc, "acc_diff": acc_diff, "params": params_m, "vanishing": vanishing,
               "timings": {"throughput": throughput}}
    plot = pd.DataFrame([{"x": float(np.log10(rows[(rows["layer"] == layer) & (rows["method"] == m)]["parameters"].mean())),
                          "y": acc[str(layer)][m]["mean"], "y_low": acc[str(layer)][m]["ci_low"],
                          "y_high": acc[str(layer)][m]["ci_high"], "series": f"L{layer}:{m}"}
                         for layer in acc for m in acc[layer]])
    return RunOutput(metrics=metrics, tables={"plot": plot, "runs": rows, "throughput": speed.drop(columns="seed")},
                     figure=_figure(plot), setup=_setup(params), notes=_measured(params, metrics))


def _figure(plot: pd.DataFrame):
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for i, r in plot.reset_index(drop=True).iterrows():
        ax.errorbar(r["x"], r["y"], yerr=[[r["y"] - r["y_low"]], [r["y_high"] - r["y"]]], fmt="o", capsize=3,
                    color=f"C{i % 10}", label=r["series"])
    ax.set(xlabel="log10 parameters", ylabel="test accuracy (mean over seeds, 95% CI)",
           title="VI-Net and baselines on digits (L = truncation block; L0 = full CNN)")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return fig


def _setup(p: Params) -> str:
    return (
        f"**Data.** scikit-learn's 8x8 digits (1,797 images, pixels in [-1, 1]), a stratified {1 - p.test_fraction:.0%}/"
        f"{p.test_fraction:.0%} train/test split per seed; {p.seeds} seeds (split, CNN initialisation and batches, "
        "label permutation).\n\n"
        f"**Pretrained network.** 4 conv blocks ({p.channels} channels, 3x3, ReLU, max-pool after blocks 2 and 3) + "
        f"dense {p.hidden} + dense 10; Adam lr {p.lr}, batch {p.batch_size}, {p.epochs} epochs.\n\n"
        f"**VI-Net.** Truncate after block L in {p.layers} (claims on L = {p.layers[0]}); flattened latent -> PCA to "
        f"k = {p.pca_dim} -> min-max to [-1, 1] (training set); per class, VCA (Livni et al. 2013) with tolerance "
        f"psi = {p.psi} on the RMS of a polynomial over the class's training points, degree <= {p.max_degree}; the "
        "polynomial layer z -> |g(z)| over all classes' generators; a standardised multinomial logistic regression "
        f"(C = {p.head_c}) as the linear head. Parameters counted: truncated convs, PCA (k x D + D), scaling (2k), "
        "every VCA coefficient needed to evaluate the generators (orthogonalisation and singular vectors), head.\n\n"
        "**Baselines.** " + "; ".join(f"`{k}`: {v}" for k, v in LABEL.items()) + ". Heads are the same logistic "
        f"regression. Throughput: batch {p.throughput_batch} test images, one thread's CPU time, median of "
        f"{p.throughput_reps} rounds after an untimed one, each round calling the full CNN, the VI-Net and the full "
        "CNN again in a random order (interleaved, so load drift reaches all three alike), per seed, after all "
        "training."
    )


def _interval(d: dict, key: str = "mean") -> str:
    return f"{fmt(d[key])} [{fmt(d['ci_low'])}, {fmt(d['ci_high'])}]"


def _measured(p: Params, m: dict) -> str:
    """The measured numbers behind the claims, for the notes (how to read them is in NOTES.md)."""
    acc, diff, par, van = m["accuracy"], m["acc_diff"], m["params"], m["vanishing"]
    tp = m["timings"]["throughput"]
    lines = "; ".join(f"L{layer} {k}: {_interval(v)}" for layer, ms in acc.items() for k, v in ms.items())
    prof = "; ".join(f"L{layer}: own-class RMS median {v['own_rms_median']:.3f} (worst {v['own_rms_max']:.3f}), "
                     f"other classes {v['other_rms_median']:.3f}, share of generators larger on other classes "
                     f"{v['share_other_gt_own']:.3f}" for layer, v in van["by_layer"].items())
    gens = ", ".join(f"L{layer}: {g['mean']:.1f}" for layer, g in par["generators_by_layer"].items())
    return (
        f"**Accuracy** (test): {lines}.\n\n"
        f"**Differences at L = {p.layers[0]}** (paired over seeds): VI-Net - full {_interval(diff['vinet_minus_full'])}; "
        f"PCA+linear - full {_interval(diff['pca_linear_minus_full'])}; VI-Net - truncated+linear "
        f"{_interval(diff['vinet_minus_trunc_linear'])}; PCA+linear - truncated+linear "
        f"{_interval(diff['pca_linear_minus_trunc_linear'])}; VI-Net - PCA+monomials "
        f"{_interval(diff['vinet_minus_pca_monomials'])}.\n\n"
        f"**Parameters.** Full CNN {par['full']:.0f}; VI-Net / full {_interval(par['vinet_over_full'], 'ratio')}; "
        f"explicit monomials of the whole latent / full {par['latent_monomials_over_full']['ratio']:.2f}. By layer: "
        + "; ".join(f"L{layer}: " + ", ".join(f"{k} {v:.0f}" for k, v in ms.items()) for layer, ms in par["by_layer"].items())
        + f". Generators per VI-Net (all classes): {gens}.\n\n"
        f"**Throughput** (images/s): full {_interval(tp['images_per_s']['full'])}, VI-Net "
        f"{_interval(tp['images_per_s']['vinet'])}, full again {_interval(tp['images_per_s']['full_rerun'])}; VI-Net / "
        f"full {_interval(tp['vinet_over_full'], 'ratio')}.\n\n"
        f"**Vanishing** (test points unless marked): {prof}. Worst training RMS / psi: "
        f"{van['train_own_rms_max_over_psi']:.3f}. With the labels permuted, VCA finds "
        + ", ".join(f"L{layer}: {g:.1f}" for layer, g in par["permuted_generators_by_layer"].items())
        + " generators per network on average (true labels: " + gens + "), and that control's accuracy is "
        + ", ".join(f"L{layer} {acc[str(layer)]['vinet_permuted']['mean']:.3f}" for layer in p.layers) + "."
    )

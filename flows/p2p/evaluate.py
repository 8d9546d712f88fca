"""P2P, the evaluation: localization precision, accuracy, dynamic sparsity and the confounded variant from the
records, the tables and the figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.p2p.params import Params
from paperflows.core import estimates as est
from paperflows.core import stats
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records
from paperflows.core.report import fmt_estimate


def evaluate(params: Params, records: Records) -> RunOutput:
    rows = records["per_seed"]
    metrics = metrics_from(rows)
    figure, plot = _figure(rows, params)
    scalar = [k for k in rows.columns if not k.startswith("curve_")]
    return RunOutput(metrics=metrics, tables={"plot": plot, "per_seed": rows[scalar]}, figure=figure,
                     setup=_setup(params, metrics), notes=_reading(params, metrics))


def metrics_from(rows: pd.DataFrame) -> dict:
    """The claims' metrics from the per-seed rows (one row per seed)."""
    c = lambda name: est.per_seed(rows, name)
    methods = ("p2p", "pixel", "global", "random_sp", "saliency")
    loc = {f"{a}_minus_{b}": stats.paired_difference(c(f"prec_{a}"), c(f"prec_{b}"))
           for a in ("p2p", "random_sp") for b in ("pixel", "saliency", "global")}
    loc.update({m: stats.summarize(c(f"prec_{m}")) for m in methods})
    loc["p2p_dynamic"] = stats.summarize(c("prec_dynamic"))
    acc = {f"{a}_minus_pixel": stats.paired_difference(c(f"acc_{a}"), c("acc_pixel")) for a in ("p2p", "random_sp")}
    acc.update({m: stats.summarize(c(f"acc_{m}")) for m in ("p2p", "pixel", "global", "random_sp", "blackbox",
                                                              "dynamic", "permuted")})
    dyn = {"kept_ratio": stats.ratio_of_means(c("kept_dynamic"), c("kept_fixed_matched")),
           "permuted_kept_ratio": stats.ratio_of_means(c("kept_permuted"), c("kept_fixed_matched_permuted")),
           **{k: stats.summarize(c(k)) for k in ("kept_dynamic", "kept_fixed_matched", "kept_permuted",
                                                 "kept_fixed_matched_permuted")}}
    conf = {"spur_p2p_minus_saliency": stats.paired_difference(c("conf_spur_p2p"), c("conf_spur_saliency")),
            "spur_global_minus_saliency": stats.paired_difference(c("conf_spur_global"), c("conf_spur_saliency")),
            **{f"spur_{m}": stats.summarize(c(f"conf_spur_{m}")) for m in ("p2p", "global", "saliency")},
            **{f"prec_{m}": stats.summarize(c(f"conf_prec_{m}")) for m in ("p2p", "global", "saliency")},
            **{f"acc_{m}": stats.summarize(c(f"conf_acc_{m}")) for m in ("p2p", "global", "blackbox")},
            "spur_area_fraction": float(c("conf_spur_rate").mean())}
    data = {k: stats.summarize(c(k)) for k in ("superpixel_purity", "digit_fraction", "superpixels_per_image")}
    return {"loc": loc, "acc": acc, "dyn": dyn, "conf": conf, "data": data}


def _figure(rows: pd.DataFrame, p: Params) -> tuple[plt.Figure, pd.DataFrame]:
    labels = {"p2p": "P2P (superpixels)", "pixel": "pixel-level", "global": "global mask",
              "random_sp": "random superpixels"}
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    plot = []
    for m, label in labels.items():
        kept = np.mean(np.stack(rows[f"curve_kept_{m}"].to_list()), axis=0)
        accs = np.stack(rows[f"curve_acc_{m}"].to_list())
        ax.errorbar(kept, accs.mean(0), yerr=accs.std(0), marker="o", ms=3, capsize=2, label=label)
        plot += [{"x": float(k), "y": float(a), "series": m} for k, a in zip(kept, accs.mean(0))]
    ax.scatter(rows["kept_dynamic"].mean(), rows["acc_dynamic"].mean(), marker="*", s=160, c="k", zorder=5,
               label=f"P2P dynamic (tau = {p.tau})")
    plot.append({"x": float(rows["kept_dynamic"].mean()), "y": float(rows["acc_dynamic"].mean()), "series": "dynamic"})
    ax.axhline(rows["acc_blackbox"].mean(), color="grey", ls=":", label="black box, full image")
    ax.axvline(p.r_eval, color="grey", lw=0.8, ls="--")
    ax.set(xlabel="kept fraction of pixels", ylabel="clean test accuracy (mean +- sd over seeds)",
           title="Accuracy against sparsity")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig, pd.DataFrame(plot)


def _setup(params: Params, metrics: dict) -> str:
    data_stats = {k: v["mean"] for k, v in metrics["data"].items()}
    return (
        f"**Data** (a fresh draw per seed, from the seed's own streams): {params.n_train} train / {params.n_test} test 32x32 images "
        "per variant; a scikit-learn digit (8x8, up-sampled 2x, train and test from disjoint source digits) pasted at a "
        "random position on Gaussian-smoothed noise texture (0-0.4) with 2-4 bright distractor shapes (0.6-1.0) off the "
        f"digit's box; ground truth = digit pixels (stroke > {params.stroke_threshold}; "
        f"{data_stats['digit_fraction']:.3f} of the canvas). Confounded variant: a 4x4 square at one of 10 border "
        f"positions, the class's with probability {params.confound_rate} in train, uniformly random in test. "
        f"Superpixels: SLIC (n_segments = {params.n_segments}, compactness = {params.compactness}), "
        f"{data_stats['superpixels_per_image']:.1f} per image, purity {data_stats['superpixel_purity']:.3f} (means over seeds).\n\n"
        "**Models** (same backbones everywhere): selector = 3-conv CNN -> per-pixel logits, mean-pooled per group; "
        "predictor = 3 conv+max-pool layers + linear head on the masked image (dropped pixels = train mean). Training: "
        f"{params.epochs} epochs of Adam (lr {params.lr}, batch {params.batch_size}); kept fraction r ~ U({params.r_min}, "
        f"{params.r_max}) per image; hard top-r groups by area, relaxed by logistic noise and a sigmoid at temperature "
        f"{params.temperature} around the top-r threshold (straight-through). Dynamic sparsity: sweep kept fractions "
        f"{list(params.levels)}, stop at the first with softmax confidence >= {params.tau}. Baselines: 1-pixel groups "
        "(pixel-level), one global kept fraction (fixed sparsity, matched in accuracy by linear interpolation of the "
        "accuracy-sparsity curve), black-box CNN + |gradient x (input - mean)| top-r pixels, a global learned per-pixel "
        f"mask (lr {params.lr_global}). Claims at r_eval = {params.r_eval}; {params.seeds} seeds (data and training "
        "randomness)."
    )


def _reading(params: Params, metrics: dict) -> str:
    """The measured numbers behind the claims, for the notes (the deviations and sources are in NOTES.md)."""
    m = metrics
    data_stats = {k: v["mean"] for k, v in metrics["data"].items()}
    return (
        f"**Results (means over seeds, 95% CI).** Localization precision at r = {params.r_eval}: P2P "
        f"{fmt_estimate(m['loc']['p2p'])}, pixel-level {fmt_estimate(m['loc']['pixel'])}, saliency {fmt_estimate(m['loc']['saliency'])}, "
        f"global mask {fmt_estimate(m['loc']['global'])}, random superpixels {fmt_estimate(m['loc']['random_sp'])} (digit area "
        f"{data_stats['digit_fraction']:.3f} = chance). Accuracy at r = {params.r_eval}: P2P {fmt_estimate(m['acc']['p2p'])}, "
        f"pixel-level {fmt_estimate(m['acc']['pixel'])}, global mask {fmt_estimate(m['acc']['global'])}, random superpixels "
        f"{fmt_estimate(m['acc']['random_sp'])}; black box on full images {fmt_estimate(m['acc']['blackbox'])}.\n\n"
        f"**Dynamic sparsity.** P2P's confidence rule keeps {fmt_estimate(m['dyn']['kept_dynamic'])} of the pixels at accuracy "
        f"{fmt_estimate(m['acc']['dynamic'])}; the same model at one global fraction needs {fmt_estimate(m['dyn']['kept_fixed_matched'])} "
        f"for exactly that accuracy; ratio {fmt_estimate(m['dyn']['kept_ratio'], 'ratio')}. Permuted budgets "
        f"(control): accuracy {fmt_estimate(m['acc']['permuted'])}, ratio {fmt_estimate(m['dyn']['permuted_kept_ratio'], 'ratio')}. "
        f"Precision of the dynamic masks {fmt_estimate(m['loc']['p2p_dynamic'])}.\n\n"
        f"**Confounded variant** (square area {m['conf']['spur_area_fraction']:.3f} of the canvas): share of kept pixels "
        f"on the square: P2P {fmt_estimate(m['conf']['spur_p2p'])}, saliency {fmt_estimate(m['conf']['spur_saliency'])}, global mask "
        f"{fmt_estimate(m['conf']['spur_global'])}; on the digit: P2P {fmt_estimate(m['conf']['prec_p2p'])}, saliency "
        f"{fmt_estimate(m['conf']['prec_saliency'])}; decorrelated-test accuracy: P2P {fmt_estimate(m['conf']['acc_p2p'])}, black box "
        f"{fmt_estimate(m['conf']['acc_blackbox'])}, global {fmt_estimate(m['conf']['acc_global'])}."
    )

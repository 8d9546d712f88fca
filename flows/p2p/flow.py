"""P2P as a Prefect flow: instance-wise grouped (SLIC superpixel) feature selection with dynamic sparsity,
against pixel-level selection, fixed sparsity, black-box + gradient x input saliency and a global mask, on
semi-synthetic digits-on-clutter images with known object masks."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.p2p import method
from flows.p2p.params import SMOKE, Params
from tasks import stats
from tasks.contract import Claim, Control, Paper, RunContext, RunOutput, ci
from tasks.data import save_parquet
from tasks.paper import over_seeds, paper_flow

AT = "at one fixed kept fraction (r_eval of the pixels) on clean test images"
RANDOM = "random superpixels (P2P's groups and predictor, random scores) in P2P's place"

PAPER = Paper(
    slug="p2p",
    title="From Pixels to Perception: Interpretable Predictions via Instance-wise Grouped Feature Selection",
    method="P2P: selector CNN -> per-superpixel scores -> relaxed top-r mask -> predictor on the masked image; "
           "per-instance sparsity by a confidence threshold",
    paper_class="B",
    source="abstracts-003.txt #1",
    official_code=None,
    claims=(
        Claim(id="grouped_localizes_better_than_pixel",
              text=("To align the sparsification with human perception, we learn the masking in the space of "
                    "semantically meaningful pixel regions rather than on pixel-level -- localization precision "
                    "(share of kept pixels on the digit) of P2P minus that of the identical model with 1-pixel "
                    f"groups >= 0.10, {AT}"),
              source="abstract; plan claim 1 (magnitude)", metric="loc.p2p_minus_pixel.mean", comparison=">=",
              threshold=0.10, kind="magnitude", role="claim", interval=ci("loc.p2p_minus_pixel"),
              control=Control(name=f"{RANDOM}, minus pixel-level", metric="loc.random_sp_minus_pixel.mean",
                              interval=ci("loc.random_sp_minus_pixel"))),
        Claim(id="grouped_accuracy_matches_pixel",
              text=("the plan's matched-accuracy condition of claim 1: test accuracy of P2P minus that of the "
                    f"pixel-level model > -0.02 (not more than 2 points worse), {AT}"),
              source="plan claim 1 (|delta acc| <= 2 pts), one-sided", metric="acc.p2p_minus_pixel.mean",
              comparison=">", threshold=-0.02, kind="magnitude", role="claim", interval=ci("acc.p2p_minus_pixel"),
              control=Control(name=f"{RANDOM}, minus pixel-level", metric="acc.random_sp_minus_pixel.mean",
                              interval=ci("acc.random_sp_minus_pixel"))),
        Claim(id="p2p_localizes_better_than_saliency",
              text=("our inherently interpretable classifier produces more meaningful, human-understandable "
                    "predictions than state-of-the-art benchmarks -- localization precision of P2P minus that of a "
                    f"black-box CNN's gradient x input saliency thresholded to the same kept fraction > 0, {AT}"),
              source="abstract; plan baseline (c) (direction)", metric="loc.p2p_minus_saliency.mean",
              comparison=">", threshold=0.0, kind="direction", role="claim", interval=ci("loc.p2p_minus_saliency"),
              control=Control(name=f"{RANDOM}, minus saliency", metric="loc.random_sp_minus_saliency.mean",
                              interval=ci("loc.random_sp_minus_saliency"))),
        Claim(id="p2p_localizes_better_than_global_mask",
              text=("instance-wise beats global selection: localization precision of P2P minus that of a global "
                    f"(non-instance, LASSO-like) learned mask > 0, {AT}. A sanity check, not a claim: the digits are "
                    "placed at random, so a global mask can only learn a centre prior and any working instance-wise "
                    "selector beats it by the data's construction"),
              source="plan baseline (d); ours (sanity)", metric="loc.p2p_minus_global.mean",
              comparison=">", threshold=0.0, kind="direction", role="sanity", interval=ci("loc.p2p_minus_global")),
        Claim(id="dynamic_sparsity_keeps_less",
              text=("we introduce an explicit way to dynamically determine the required level of sparsity for each "
                    "instance -- mean kept fraction of P2P's per-instance confidence rule / that of the same model at "
                    "one global kept fraction matched to exactly its accuracy (interpolated) < 1"),
              source="abstract; plan claim 2 (direction)", metric="dyn.kept_ratio.ratio", comparison="<",
              threshold=1.0, kind="direction", role="claim", interval=ci("dyn.kept_ratio"),
              control=Control(name="the per-instance levels permuted across test images (same budgets, "
                                   "not instance-matched), against the global level matched to their accuracy",
                              metric="dyn.permuted_kept_ratio.ratio", interval=ci("dyn.permuted_kept_ratio"))),
        Claim(id="p2p_avoids_spurious_cue",
              text=("On the confounded variant (a class-coded square in training only), the P2P share of kept pixels "
                    "on the spurious square minus the post-hoc-saliency baseline's share < 0"),
              source="plan claim 3 (direction)", metric="conf.spur_p2p_minus_saliency.mean", comparison="<",
              threshold=0.0, kind="direction", role="claim", interval=ci("conf.spur_p2p_minus_saliency"),
              control=Control(name="the global learned mask (can only pick fixed positions, e.g. the confounder's) "
                                   "minus saliency", metric="conf.spur_global_minus_saliency.mean",
                              interval=ci("conf.spur_global_minus_saliency"))),
        Claim(id="task_learnable", text="the black-box CNN's clean test accuracy > 0.8 (the scaled task is learnable)",
              source="ours (sanity)", metric="acc.blackbox.mean", comparison=">", threshold=0.8, kind="magnitude",
              role="sanity", interval=ci("acc.blackbox")),
        Claim(id="superpixels_follow_the_object",
              text=("SLIC superpixel purity w.r.t. the digit mask (share of pixels in the majority class of their "
                     "superpixel) > 0.9 on the clean test images: the groups can separate object from clutter"),
              source="ours (sanity, holds by the data's construction)", metric="data.superpixel_purity.mean",
              comparison=">", threshold=0.9, kind="magnitude", role="sanity", interval=ci("data.superpixel_purity")),
    ),
    limitations=(
        "Semi-synthetic only: 8x8 scikit-learn digits up-sampled 2x on a 32x32 clutter canvas stand in for the paper's "
        "semi-synthetic and natural-image data sets (no COCO-like or ImageNet data, no pretrained backbones); "
        "'meaningful to humans' is operationalized only as overlap with the known digit mask, with no user study. "
        "Small CNNs trained for a few epochs reach far below the accuracy of the paper's models, so absolute numbers "
        "are not comparable. The paper's exact mask relaxation and dynamic-sparsity mechanism could not be read "
        "(only the abstract and introduction were retrievable): the per-instance random kept fraction in training "
        "and the confidence-threshold stop at test time follow the plan's working design [ours], as do the "
        "baselines (no InfoMask, no L2X/INVASE/REAL-X re-implementations beyond the pixel-level variant). Each seed "
        "draws its own data set (and superpixels) and its own training randomness."
    ),
)


def _column(rows: pd.DataFrame, name: str) -> np.ndarray:
    return rows.sort_values("seed")[name].to_numpy(dtype=float)


def metrics_from(rows: pd.DataFrame) -> dict:
    """The claims' metrics from the per-seed rows (one row per seed)."""
    c = lambda name: _column(rows, name)
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


def _fmt(s: dict, key: str = "mean") -> str:
    return f"{s[key]:.3f} [{s['ci_low']:.3f}, {s['ci_high']:.3f}]"


@paper_flow(PAPER, Params, smoke=SMOKE)
def p2p_flow(params: Params, ctx: RunContext) -> RunOutput:
    per_seed = over_seeds(method.run_seed, ctx.seeds, p=params)
    rows = pd.DataFrame(per_seed)
    scalar = [k for k in rows.columns if not k.startswith("curve_")]
    save_parquet(rows[scalar], ctx.data_dir / "per_seed.parquet")
    metrics = metrics_from(rows)
    data_stats = {k: v["mean"] for k, v in metrics["data"].items()}
    figure, plot = _figure(rows, params)
    m = metrics
    setup = (
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
    notes = (
        f"**Results (means over seeds, 95% CI).** Localization precision at r = {params.r_eval}: P2P "
        f"{_fmt(m['loc']['p2p'])}, pixel-level {_fmt(m['loc']['pixel'])}, saliency {_fmt(m['loc']['saliency'])}, "
        f"global mask {_fmt(m['loc']['global'])}, random superpixels {_fmt(m['loc']['random_sp'])} (digit area "
        f"{data_stats['digit_fraction']:.3f} = chance). Accuracy at r = {params.r_eval}: P2P {_fmt(m['acc']['p2p'])}, "
        f"pixel-level {_fmt(m['acc']['pixel'])}, global mask {_fmt(m['acc']['global'])}, random superpixels "
        f"{_fmt(m['acc']['random_sp'])}; black box on full images {_fmt(m['acc']['blackbox'])}.\n\n"
        f"**Dynamic sparsity.** P2P's confidence rule keeps {_fmt(m['dyn']['kept_dynamic'])} of the pixels at accuracy "
        f"{_fmt(m['acc']['dynamic'])}; the same model at one global fraction needs {_fmt(m['dyn']['kept_fixed_matched'])} "
        f"for exactly that accuracy; ratio {_fmt(m['dyn']['kept_ratio'], 'ratio')}. Permuted budgets "
        f"(control): accuracy {_fmt(m['acc']['permuted'])}, ratio {_fmt(m['dyn']['permuted_kept_ratio'], 'ratio')}. "
        f"Precision of the dynamic masks {_fmt(m['loc']['p2p_dynamic'])}.\n\n"
        f"**Confounded variant** (square area {m['conf']['spur_area_fraction']:.3f} of the canvas): share of kept pixels "
        f"on the square: P2P {_fmt(m['conf']['spur_p2p'])}, saliency {_fmt(m['conf']['spur_saliency'])}, global mask "
        f"{_fmt(m['conf']['spur_global'])}; on the digit: P2P {_fmt(m['conf']['prec_p2p'])}, saliency "
        f"{_fmt(m['conf']['prec_saliency'])}; decorrelated-test accuracy: P2P {_fmt(m['conf']['acc_p2p'])}, black box "
        f"{_fmt(m['conf']['acc_blackbox'])}, global {_fmt(m['conf']['acc_global'])}.\n\n"
        "**Deviations and fixes.** (1) A first default-scale run left the clean P2P model at chance in 2 of 5 seeds "
        "and the pixel-level model in 1 (loss stuck at log 10: uncentred [0, 1] inputs); every network now "
        "standardizes its input with the train statistics (a dropped pixel, set to the mean, becomes 0), the same for "
        "all methods; no threshold, control or other setting changed. (2) The claim 'P2P localizes better than the "
        "global mask' was moved to the sanity checks after that run: with randomly placed digits it holds by the "
        "data's construction. (3) The kept fraction in training is drawn per image, not per batch as in the plan. "
        "(4) The dynamic rule falls back to the whole image when no level reaches tau, as the plan specifies; "
        "images the predictor never gets confident on therefore cost a full image. (5) Decided after review, before "
        "the rerun: each seed draws its own data set (earlier one draw served every seed, so the intervals covered "
        "training noise only), and the fixed-sparsity baseline is matched to exactly the dynamic rule's accuracy: "
        "the plan's 1-point slack (not the paper's) let it stop 1 point lower, which no paper figure supports.\n\n"
        "**Sources.** Official code not found (the plan's search and ours); arXiv 2505.06003's method section could not "
        "be retrieved here, so the SLIC grouping (from the OpenReview reviews) is confirmed and the relaxation and "
        "the dynamic-sparsity rule are the plan's design [ours]."
    )
    return RunOutput(metrics=metrics, tables={"plot": plot, "per_seed": rows[scalar]}, figure=figure,
                     setup=setup, notes=notes)

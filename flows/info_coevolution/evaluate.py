"""Info-Coevolution, the evaluation: annotated share, accuracy against full annotation and labels to equal
accuracy from the records, the tables and the figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.info_coevolution.params import Params
from paperflows.core import estimates as est
from paperflows.core import stats
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records


def evaluate(params: Params, records: Records) -> RunOutput:
    rows, curves = records["per_seed"], records["curves"]
    metrics = {ds: _dataset_metrics(rows[rows["dataset"] == ds], params.equal_accuracy_tolerance)
               for ds in params.datasets}
    plot = _plot(curves, rows)
    return RunOutput(metrics=metrics, tables={"plot": plot, "per_seed": rows}, figure=_figure(plot, list(params.datasets)),
                     setup=_setup(params, metrics), notes=_reading(params, metrics))


METHOD_LABEL = {"info_coevolution": "Info-Coevolution (auto-stop)", "info_coevolution_ssl": "Info-Coevolution + pseudo-labels",
                "random": "random annotation", "least_confidence": "least-confidence AL"}


def _dataset_metrics(rows: pd.DataFrame, tolerance: float) -> dict:
    c = lambda name: est.per_seed(rows, name)
    full = c("acc_full")
    pseudo_acc = c("ssl_pseudo_accuracy")
    return {
        "pool": int(rows["pool"].iloc[0]), "initial": int(rows["initial"].iloc[0]),
        "acc_full": stats.summarize(full),
        "ic_ratio": stats.summarize(c("ic_ratio")), "perm_ratio": stats.summarize(c("perm_ratio")),
        # the paper's saving is "without performance loss": a seed that loses more than the tolerance saved nothing
        "ic_lossless_ratio": stats.summarize(np.where(c("ic_acc") >= full - tolerance, c("ic_ratio"), 1.0)),
        "random_lossless_ratio": stats.summarize(np.where(c("random_acc_same") >= full - tolerance,
                                                          c("ic_ratio"), 1.0)),
        "ic_auto_stopped_fraction": float((rows["ic_stop"] == "auto-stop").mean()),
        "perm_auto_stopped_fraction": float((rows["perm_stop"] == "auto-stop").mean()),
        "ic_model_updates": stats.summarize(c("ic_model_updates")),
        "accuracy": {"full": stats.summarize(full), "info_coevolution": stats.summarize(c("ic_acc")),
                     "random_same_count": stats.summarize(c("random_acc_same")),
                     "least_confidence_same_count": stats.summarize(c("lc_acc_same")),
                     "ssl": stats.summarize(c("ssl_acc")), "random_ssl_same_count": stats.summarize(c("random_ssl_acc_same"))},
        "ic_minus_full": stats.paired_difference(c("ic_acc"), full),
        "random_minus_full": stats.paired_difference(c("random_acc_same"), full),
        "lc_minus_full": stats.paired_difference(c("lc_acc_same"), full),
        "ic_minus_random": stats.paired_difference(c("ic_acc"), c("random_acc_same")),
        "random2_minus_random": stats.paired_difference(c("random2_acc_same"), c("random_acc_same")),
        "ic_minus_lc": stats.paired_difference(c("ic_acc"), c("lc_acc_same")),
        "seeds_random2_above_random": int((c("random2_acc_same") > c("random_acc_same")).sum()),
        "labels_to_target": {
            "ic": stats.summarize(c("ic_to_target")), "random": stats.summarize(c("random_to_target")),
            "random2": stats.summarize(c("random2_to_target")), "lc": stats.summarize(c("lc_to_target")),
            "ic_over_random": stats.ratio_of_means(c("ic_to_target"), c("random_to_target")),
            "random2_over_random": stats.ratio_of_means(c("random2_to_target"), c("random_to_target")),
            "ic_over_lc": stats.ratio_of_means(c("ic_to_target"), c("lc_to_target")),
            "lc_over_random": stats.ratio_of_means(c("lc_to_target"), c("random_to_target")),
            "ic_censored_fraction": float(c("ic_censored").mean()),
        },
        "ssl_ratio": stats.summarize(c("ssl_ratio")), "ssl_ratio_max": float(c("ssl_ratio").max()),
        "ssl_auto_stopped_fraction": float((rows["ssl_stop"] == "auto-stop").mean()),
        "ssl_minus_full": stats.paired_difference(c("ssl_acc"), full),
        "random_ssl_minus_full": stats.paired_difference(c("random_ssl_acc_same"), full),
        "ssl_pseudo_labels_mean": float(c("ssl_n_pseudo").mean()),
        "ssl_pseudo_accuracy_mean": None if np.isnan(pseudo_acc).all() else float(np.nanmean(pseudo_acc)),
    }


def _plot(curves: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """Mean test accuracy against the annotated share of the pool: baselines on their grid, Info-Coevolution's
    per-seed auto-stop points, full annotation as a horizontal reference."""
    base = curves[curves["method"].isin(["random", "least_confidence"])]
    grid = base.groupby(["dataset", "method", "labels"], as_index=False).agg(
        ratio=("ratio", "mean"), y=("accuracy", "mean"), seeds=("seed", "nunique"))
    grid = grid[grid["seeds"] == curves["seed"].nunique()]   # the common grid; each seed's extra count is in per_seed
    parts = [pd.DataFrame({"x": grid["ratio"], "y": grid["y"], "series": grid["dataset"] + ": " + grid["method"].map(METHOD_LABEL)})]
    for ds, g in rows.groupby("dataset", sort=False):
        parts.append(pd.DataFrame({"x": g["ic_ratio"], "y": g["ic_acc"], "series": f"{ds}: {METHOD_LABEL['info_coevolution']}"}))
        parts.append(pd.DataFrame({"x": g["ssl_ratio"], "y": g["ssl_acc"], "series": f"{ds}: {METHOD_LABEL['info_coevolution_ssl']}"}))
        parts.append(pd.DataFrame({"x": [0.0, 1.0], "y": [g["acc_full"].mean()] * 2, "series": f"{ds}: full annotation"}))
    return pd.concat(parts, ignore_index=True)


def _figure(plot: pd.DataFrame, datasets: list[str]):
    fig, axes = plt.subplots(1, len(datasets), figsize=(6 * len(datasets), 4.2), squeeze=False)
    for ax, ds in zip(axes[0], datasets):
        for series, g in plot[plot["series"].str.startswith(f"{ds}: ")].groupby("series", sort=False):
            label = series.removeprefix(f"{ds}: ")
            if "Info-Coevolution" in label:
                ax.plot(g["x"], g["y"], "o" if "pseudo" not in label else "s", label=label, alpha=0.8)
            elif label == "full annotation":
                ax.plot(g["x"], g["y"], "k--", label=label, lw=1)
            else:
                ax.plot(g["x"], g["y"], "-", label=label)
        ax.set(xlabel="annotated share of the pool", ylabel="test accuracy (mean over seeds)", title=ds)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _setup(p: Params, m: dict) -> str:
    d = m["digits"]
    return (
        f"**Data.** scikit-learn digits / 16, split per seed (stratified) into a pool of {d['pool']} images and a "
        f"test set ({p.test_fraction:.0%})"
        + (f"; make_classification ({p.synthetic_samples} samples, {p.synthetic_features} features, "
           f"{p.synthetic_informative} informative, 10 classes, class_sep {p.synthetic_class_sep}), standardised"
           if "synthetic" in p.datasets else "")
        + f". {p.seeds} seeds. {p.initial_fraction:.0%} of the pool ({d['initial']} images) is labelled at the start "
        "(the same set for every method of a seed).\n\n"
        f"**Model.** MLP {p.hidden} (ReLU), the last hidden layer L2-normalised as the embedding; Adam (lr {p.lr}, "
        f"batch {p.batch_size}, {p.epochs} epochs or at least {p.min_steps} steps per fit), retrained from scratch with the same initialisation "
        "and batch order for every fit of a seed.\n\n"
        f"**Info-Coevolution** (official defaults): kNN prediction from the {p.knn_k} nearest other points within "
        f"cosine distance {p.knn_max_distance} (weight confidence x similarity), Bayesian fusion with the model's "
        f"normalised confidence (conf_decay on), gain = max(0, {p.target_confidence:g} - fused confidence); draws of "
        f"{p.draw_fraction:.0%} of the pool sampled proportionally to gain, each annotation rechecking its "
        f"{p.recheck_k} nearest neighbours within distance {p.recheck_max_distance} (similarity > "
        f"{p.recheck_min_similarity}); the model is retrained after every {p.round_fraction:.0%} of the pool and the "
        f"gains rebuilt; auto-stop when the total gain is <= {p.stop_criterion:g}. Semi-supervised variant: every fit "
        f"adds the unlabelled points with fused confidence >= {p.pseudo_threshold} under their fused label (one "
        f"self-training step), annotation capped at {p.ssl_max_ratio:.0%}.\n\n"
        f"**Baselines.** Full annotation; random annotation (a random order after the initial set, evaluated on the "
        f"{p.round_fraction:.0%} grid and at Info-Coevolution's count); least-confidence active learning (smallest "
        "max-softmax, a model update per grid step). Every label is bought through `tasks.selection.LabelLedger`. "
        f"'Equal accuracy' = test accuracy >= full annotation's - {p.equal_accuracy_tolerance * 100:g} pp."
    )


def _pct(s: dict, key: str = "mean") -> str:
    return f"{s[key] * 100:+.2f} pp [{s['ci_low'] * 100:+.2f}, {s['ci_high'] * 100:+.2f}]"


def _reading(p: Params, m: dict) -> str:
    """The measured numbers of each dataset, for the notes (the official-code notes are in NOTES.md)."""
    out = []
    for ds in p.datasets:
        d = m[ds]
        lt = d["labels_to_target"]
        acc = d["accuracy"]
        out.append(
            f"**{ds}.** Full annotation {acc['full']['mean']:.4f}. Info-Coevolution annotated "
            f"{d['ic_ratio']['mean']:.3f} [{d['ic_ratio']['ci_low']:.3f}, {d['ic_ratio']['ci_high']:.3f}] of the pool "
            f"(auto-stop on {d['ic_auto_stopped_fraction']:.0%} of seeds, {d['ic_model_updates']['mean']:.1f} model fits; "
            f"{d['ic_lossless_ratio']['mean']:.3f} with a lossy seed charged the whole pool, the paper's 'without "
            f"performance loss'; random annotation of the same count, charged alike, {d['random_lossless_ratio']['mean']:.3f}) "
            f"and reached {acc['info_coevolution']['mean']:.4f}: {_pct(d['ic_minus_full'])} against full annotation. "
            f"At the same count random annotation reached {acc['random_same_count']['mean']:.4f} "
            f"({_pct(d['random_minus_full'])} vs full) and least-confidence {acc['least_confidence_same_count']['mean']:.4f} "
            f"({_pct(d['lc_minus_full'])} vs full); Info-Coevolution - random {_pct(d['ic_minus_random'])}, "
            f"Info-Coevolution - least-confidence {_pct(d['ic_minus_lc'])}; two random orders differ by "
            f"{_pct(d['random2_minus_random'])} (the second order ahead on {d['seeds_random2_above_random']} of "
            f"{d['acc_full']['n']} seeds; two random orders differ by chance alone, the scale against which the other "
            f"differences are read; all {d['acc_full']['n']} seeds share a sign with probability "
            f"1/{2 ** (d['acc_full']['n'] - 1)}). With permuted labels the same loop annotated "
            f"{d['perm_ratio']['mean']:.3f} of the pool (auto-stop on {d['perm_auto_stopped_fraction']:.0%} of seeds). "
            f"**Annotation at equal accuracy** (labels to reach full - {p.equal_accuracy_tolerance * 100:g} pp, mean over "
            f"seeds): Info-Coevolution {lt['ic']['mean']:.0f}, random {lt['random']['mean']:.0f}, least-confidence "
            f"{lt['lc']['mean']:.0f} of {d['pool']}; Info-Coevolution / random {lt['ic_over_random']['ratio']:.3f} "
            f"[{lt['ic_over_random']['ci_low']:.3f}, {lt['ic_over_random']['ci_high']:.3f}] (annotation saved "
            f"{1 - lt['ic_over_random']['ratio']:.0%}), Info-Coevolution / least-confidence {lt['ic_over_lc']['ratio']:.3f} "
            f"[{lt['ic_over_lc']['ci_low']:.3f}, {lt['ic_over_lc']['ci_high']:.3f}], least-confidence / random "
            f"{lt['lc_over_random']['ratio']:.3f}; a second random order / random {lt['random2_over_random']['ratio']:.3f}; "
            f"Info-Coevolution stopped before the target on {lt['ic_censored_fraction']:.0%} of seeds. "
            f"**Semi-supervised.** Annotated {d['ssl_ratio']['mean']:.3f} (at most {d['ssl_ratio_max']:.3f}; auto-stop "
            f"before the cap on {d['ssl_auto_stopped_fraction']:.0%} of seeds) with {d['ssl_pseudo_labels_mean']:.0f} "
            "pseudo-labels per final fit"
            + (f" ({d['ssl_pseudo_accuracy_mean']:.3f} correct)" if d["ssl_pseudo_accuracy_mean"] is not None else "")
            + f": {_pct(d['ssl_minus_full'])} vs full; random annotation of the same count with the same "
            f"pseudo-labelling {_pct(d['random_ssl_minus_full'])}.")
    return "\n\n".join(out)

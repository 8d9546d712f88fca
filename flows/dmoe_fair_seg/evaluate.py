"""dMoE, the evaluation: Dice per method and group, the paired differences of the claims and their controls, the
figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from flows.dmoe_fair_seg import method
from flows.dmoe_fair_seg.params import Params
from paperflows.core import estimates as est
from paperflows.core import stats
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records
from paperflows.core.report import fmt

LABEL = {"unet": "UNet", "moe": "UNet + MoE (one router)", "dmoe": "UNet + dMoE (router per group)",
         "dmoe_shuffled": "UNet + dMoE, shuffled attribute (control)", "film": "UNet + FiLM(attribute)",
         "unet_balanced": "UNet, group-balanced resampling", "dmoe_misrouted": "dMoE, test images routed to a wrong group (control)"}

PAIRS = {"es": [("dmoe", "unet"), ("dmoe", "moe"), ("dmoe_shuffled", "unet"), ("dmoe_shuffled", "moe"),
                ("dmoe", "film"), ("dmoe", "unet_balanced"), ("moe", "unet")],
         "minority": [("dmoe", "unet"), ("dmoe_shuffled", "unet"), ("moe", "unet"), ("film", "unet"),
                      ("unet_balanced", "unet")],
         "overall": [("dmoe", "unet"), ("dmoe_misrouted", "unet"), ("dmoe_shuffled", "unet"), ("moe", "unet"),
                     ("film", "unet"), ("unet_balanced", "unet")]}


def evaluate(params: Params, records: Records) -> RunOutput:
    rows = records["runs"]
    minority = f"dice_g{params.n_groups - 1}"
    group_cols = [f"dice_g{g}" for g in range(params.n_groups)]
    names = [*method.METHODS, "dmoe_misrouted"]
    metrics: dict = {"dice": {n: {c: est.summary(rows, c, name=n)
                                  for c in ("overall", "worst", "gap", "es", "iou", *group_cols)} for n in names}}
    column = {"es": "es", "minority": minority, "overall": "overall"}
    metrics["diff"] = {what: {f"{a}_vs_{b}": est.paired(rows, column[what], {"name": a}, {"name": b})
                              for a, b in pairs} for what, pairs in PAIRS.items()}
    unet_g0, unet_minority = est.per_seed(rows, "dice_g0", name="unet"), est.per_seed(rows, minority, name="unet")
    metrics["sanity"] = {"unet_bias": stats.summarize(unet_g0 - unet_minority)}

    plot = pd.DataFrame([{"x": g, "y": metrics["dice"][n][f"dice_g{g}"]["mean"],
                          "y_low": metrics["dice"][n][f"dice_g{g}"]["ci_low"],
                          "y_high": metrics["dice"][n][f"dice_g{g}"]["ci_high"], "series": n}
                         for n in names for g in range(params.n_groups)])
    return RunOutput(metrics=metrics, tables={"plot": plot, "runs": rows}, figure=_figure(plot, params),
                     setup=_setup(params), notes=_measured(params, metrics))


def _figure(plot: pd.DataFrame, params: Params):
    fig, ax = plt.subplots(figsize=(8.5, 4.4))
    series = list(dict.fromkeys(plot["series"]))
    width = 0.8 / len(series)
    for i, name in enumerate(series):
        g = plot[plot["series"] == name]
        ax.bar(g["x"] + (i - (len(series) - 1) / 2) * width, g["y"], width,
               yerr=[g["y"] - g["y_low"], g["y_high"] - g["y"]], capsize=2, label=LABEL[name])
    ax.set_xticks(range(params.n_groups),
                  [f"group {g}\n({100 * q:.0f} % of training)" for g, q in enumerate(params.group_probs)])
    ax.set(ylabel="test Dice (mean over seeds, 95% CI)", title="Per-group Dice on a balanced test set")
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    return fig


def _setup(p: Params) -> str:
    return (
        f"{p.n_train} training images ({p.image_size}x{p.image_size}, groups drawn with prevalence "
        f"{', '.join(f'{q:g}' for q in p.group_probs)}) and {p.n_test} test images (groups balanced), regenerated "
        f"per seed by `tasks.segmentation.lesion_images`; {p.seeds} seeds. TinyUNet widths {p.widths}; every method "
        f"is trained by `tasks.segmentation.train_segmentation` (BCE + soft Dice, Adam, lr {p.lr:g}, {p.epochs} epochs, "
        f"batch {p.batch_size}). MoE layers (residual, after each encoder stage): {p.n_experts} experts "
        f"Linear(c, {p.expansion}c)-ReLU-Linear({p.expansion}c, c)-Dropout({p.expert_dropout:g}), noisy top-{p.top_k} "
        f"router; dMoE has {p.n_groups} routers (one per group), MoE one. Metrics: per-image Dice averaged per group, "
        "worst group, gap (max - min group) and ES-Dice = Dice / (1 + sum_g |Dice_g - Dice|) (`tasks.groups`); "
        "differences are paired over seeds with Student-t 95% intervals."
    )


def _interval(s: dict) -> str:
    return f"{fmt(s['mean'])} [{fmt(s['ci_low'])}, {fmt(s['ci_high'])}]"


def _measured(p: Params, m: dict) -> str:
    """The measured numbers behind the claims, for the notes (interpretation is in NOTES.md)."""
    d, diff = m["dice"], m["diff"]
    last = p.n_groups - 1
    table = "\n".join(
        f"| {LABEL[n]} | {_interval(d[n]['overall'])} | {_interval(d[n]['es'])} | {_interval(d[n]['worst'])} | "
        f"{_interval(d[n]['gap'])} | " + " | ".join(f"{d[n][f'dice_g{g}']['mean']:.3f}" for g in range(p.n_groups))
        + " |" for n in d)
    head = ("| method | Dice | ES-Dice | worst-group Dice | gap | "
            + " | ".join(f"Dice g{g}" for g in range(p.n_groups)) + " |\n|" + "---|" * (5 + p.n_groups))
    return (
        f"**Results** (mean over seeds, 95% CI):\n\n{head}\n{table}\n\n"
        f"ES-Dice differences: dMoE - UNet {_interval(diff['es']['dmoe_vs_unet'])}, dMoE - MoE "
        f"{_interval(diff['es']['dmoe_vs_moe'])}, dMoE - FiLM {_interval(diff['es']['dmoe_vs_film'])}, dMoE - balanced "
        f"UNet {_interval(diff['es']['dmoe_vs_unet_balanced'])}, MoE - UNet {_interval(diff['es']['moe_vs_unet'])}. "
        f"Minority-group (g{last}) Dice gain over the UNet: dMoE {_interval(diff['minority']['dmoe_vs_unet'])}, FiLM "
        f"{_interval(diff['minority']['film_vs_unet'])}, balanced resampling "
        f"{_interval(diff['minority']['unet_balanced_vs_unet'])}, MoE {_interval(diff['minority']['moe_vs_unet'])}. "
        f"Shuffled-attribute dMoE: ES-Dice gain over the UNet {_interval(diff['es']['dmoe_shuffled_vs_unet'])}, over "
        f"the MoE {_interval(diff['es']['dmoe_shuffled_vs_moe'])}, minority gain "
        f"{_interval(diff['minority']['dmoe_shuffled_vs_unet'])}. dMoE routed to a wrong group at test time, overall "
        f"Dice minus the UNet's: {_interval(diff['overall']['dmoe_misrouted_vs_unet'])}."
    )

"""dMoE as a Prefect flow: a TinyUNet with distribution-aware MoE layers (one noisy top-2 router per
attribute group, shared experts) against the plain UNet, a standard MoE, FiLM and group-balanced
resampling on synthetic lesion images whose image formation depends on an imbalanced group attribute."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.dmoe_fair_seg import method
from flows.dmoe_fair_seg.params import SMOKE, Params
from tasks import stats
from tasks.contract import Claim, Control, Paper, RunContext, RunOutput, ci
from tasks.data import save_parquet
from tasks.paper import paper_flow, run_mapped

LABEL = {"unet": "UNet", "moe": "UNet + MoE (one router)", "dmoe": "UNet + dMoE (router per group)",
         "dmoe_shuffled": "UNet + dMoE, shuffled attribute (control)", "film": "UNet + FiLM(attribute)",
         "unet_balanced": "UNet, group-balanced resampling", "dmoe_misrouted": "dMoE, test images routed to a wrong group (control)"}
SCALED = ("synthetic 32x32 lesion images (3 groups, training prevalence 80/15/5 %, 1,000 training images, balanced "
          "test set) and a 3-stage TinyUNet (8-16-32 channels, the plan's 16-32-64 halved, and 5 epochs instead of the "
          "plan's 10, both for the ~2 min CPU budget) instead of Harvard-FairSeg / HAM10000 / the 3-D in-house data "
          "with TransUNet / ContextUNETR; the plan's thresholds, fixed before the run")
SHUFFLED = "dMoE trained and tested with a shuffled attribute (same capacity and group frequencies, no distribution signal)"

PAPER = Paper(
    slug="dmoe_fair_seg",
    title="Distribution-aware Fairness Learning in Medical Image Segmentation From a Control-Theoretic Perspective",
    method="dMoE: Distribution-aware Mixture of Experts (noisy top-k routers, one per attribute group, shared experts)",
    paper_class="B",
    source="abstracts-000.txt #5",
    official_code="tvseg/dMoE (GitHub; 3d/dmoeunet.py and 2d/networks/vit_seg_modeling.py read, re-written)",
    claims=(
        Claim(id="es_dice_dmoe_over_unet",
              text=("dMoE achieves state-of-the-art (equity-scaled) performance ... mitigating biases from imbalanced "
                    "distributions: ES-Dice(dMoE) - ES-Dice(UNet) > 0 (paired over seeds)"),
              source="abstract; plan claim 1 (direction)", metric="diff.es.dmoe_vs_unet.mean", comparison=">",
              threshold=0.0, kind="direction", role="claim", requires=("unet_learns_the_task",), interval=ci("diff.es.dmoe_vs_unet"), scaled=SCALED,
              control=Control(name=f"{SHUFFLED} - UNet", metric="diff.es.dmoe_shuffled_vs_unet.mean",
                              interval=ci("diff.es.dmoe_shuffled_vs_unet"))),
        Claim(id="es_dice_dmoe_over_moe",
              text=("dMoE adapts to heterogeneous distributions by incorporating demographic and clinical factors: "
                    "ES-Dice(dMoE) - ES-Dice(standard MoE, one router) > 0 (paired over seeds)"),
              source="abstract; plan claim 1 (direction)", metric="diff.es.dmoe_vs_moe.mean", comparison=">",
              threshold=0.0, kind="direction", role="claim", interval=ci("diff.es.dmoe_vs_moe"), scaled=SCALED,
              control=Control(name=f"{SHUFFLED} - MoE", metric="diff.es.dmoe_shuffled_vs_moe.mean",
                              interval=ci("diff.es.dmoe_shuffled_vs_moe"))),
        Claim(id="minority_dice_gain_2pp",
              text=("dMoE is effective in mitigating biases from imbalanced distributions: Dice of the minority group "
                    "(5 % of training images) with dMoE - with the UNet >= 0.02 (2 pp)"),
              source="abstract; plan claim 2 (magnitude)", metric="diff.minority.dmoe_vs_unet.mean", comparison=">=",
              threshold=0.02, kind="magnitude", role="claim", requires=("unet_learns_the_task",), interval=ci("diff.minority.dmoe_vs_unet"), scaled=SCALED,
              control=Control(name=f"{SHUFFLED} - UNet", metric="diff.minority.dmoe_shuffled_vs_unet.mean",
                              interval=ci("diff.minority.dmoe_shuffled_vs_unet"))),
        Claim(id="no_overall_dice_sacrifice",
              text=("fairness without an accuracy cost (state-of-the-art Dice as well as ES-Dice): overall Dice(dMoE) - "
                    "overall Dice(UNet) >= -0.01 (1 pp)"),
              source="abstract; plan claim 3 (magnitude, non-inferiority)", metric="diff.overall.dmoe_vs_unet.mean",
              comparison=">=", threshold=-0.01, kind="magnitude", role="claim", requires=("unet_learns_the_task",),
              interval=ci("diff.overall.dmoe_vs_unet"), scaled=SCALED,
              # the trained dMoE fed a wrong attribute at test time: if routing matters, this must lose accuracy
              control=Control(name="dMoE with every test image routed to group (g + 1) mod 3 - UNet",
                              metric="diff.overall.dmoe_misrouted_vs_unet.mean",
                              interval=ci("diff.overall.dmoe_misrouted_vs_unet"))),
        Claim(id="unet_learns_the_task",
              text="the plain TinyUNet segments the synthetic lesions: overall test Dice > 0.5",
              source="own check of the setup", metric="dice.unet.overall.mean", comparison=">", threshold=0.5,
              kind="magnitude", role="sanity", interval=ci("dice.unet.overall")),
        Claim(id="baseline_is_biased",
              text=("the setup has a bias to mitigate: the UNet's Dice on the majority group (80 % of training "
                    "images) minus its Dice on the minority group (5 %) > 0"),
              source="own check of the setup (the premise of the paper's claims)", metric="sanity.unet_bias.mean",
              comparison=">", threshold=0.0, kind="direction", role="sanity", interval=ci("sanity.unet_bias")),
    ),
    limitations=(
        "Synthetic 2-D lesion images, where the attribute changes image formation by construction (contrast "
        "polarity, blur, background frequency, lesion size): the run can show whether per-group routing helps a "
        "small UNet on an imbalanced, attribute-dependent distribution, not whether it helps on Harvard-FairSeg, "
        "HAM10000 or clinical 3-D data, nor anything about the paper's control-theoretic analysis or its "
        "Transformer (TransUNet) integration. The TinyUNet (3 stages) stands in for ContextUNETR (5 stages) and "
        "the training is a few CPU epochs. The router noise is used in training only (the official code also "
        "adds it at inference); the experts' dropout is re-implemented on a per-layer generator for determinism."
    ),
)

PAIRS = {"es": [("dmoe", "unet"), ("dmoe", "moe"), ("dmoe_shuffled", "unet"), ("dmoe_shuffled", "moe"),
                ("dmoe", "film"), ("dmoe", "unet_balanced"), ("moe", "unet")],
         "minority": [("dmoe", "unet"), ("dmoe_shuffled", "unet"), ("moe", "unet"), ("film", "unet"),
                      ("unet_balanced", "unet")],
         "overall": [("dmoe", "unet"), ("dmoe_misrouted", "unet"), ("dmoe_shuffled", "unet"), ("moe", "unet"),
                     ("film", "unet"), ("unet_balanced", "unet")]}


def _column(rows: pd.DataFrame, name: str, col: str) -> np.ndarray:
    return rows[rows["name"] == name].sort_values("seed")[col].to_numpy(float)


@paper_flow(PAPER, Params, smoke=SMOKE)
def dmoe_fair_seg_flow(params: Params, ctx: RunContext) -> RunOutput:
    # one task per (seed, method): eight-ish equal jobs balance better over the cores than one per seed
    jobs = [(s, m) for s in ctx.seeds for m in method.METHODS]
    results = run_mapped(method.run_method, {"seed": [s for s, _ in jobs], "method": [m for _, m in jobs]}, p=params)
    rows = pd.DataFrame([r for rs in results for r in rs])
    rows["name"] = np.where(rows["evaluation"] == "misrouted", "dmoe_misrouted", rows["method"])
    save_parquet(rows, ctx.data_dir / "per_seed.parquet")

    minority = f"dice_g{params.n_groups - 1}"
    group_cols = [f"dice_g{g}" for g in range(params.n_groups)]
    names = [*method.METHODS, "dmoe_misrouted"]
    metrics: dict = {"dice": {n: {c: stats.summarize(_column(rows, n, c))
                                  for c in ("overall", "worst", "gap", "es", "iou", *group_cols)} for n in names}}
    column = {"es": "es", "minority": minority, "overall": "overall"}
    metrics["diff"] = {what: {f"{a}_vs_{b}": stats.paired_difference(_column(rows, a, column[what]),
                                                                     _column(rows, b, column[what]))
                              for a, b in pairs} for what, pairs in PAIRS.items()}
    metrics["sanity"] = {"unet_bias": stats.summarize(_column(rows, "unet", "dice_g0") - _column(rows, "unet", minority))}

    plot = pd.DataFrame([{"x": g, "y": metrics["dice"][n][f"dice_g{g}"]["mean"],
                          "y_low": metrics["dice"][n][f"dice_g{g}"]["ci_low"],
                          "y_high": metrics["dice"][n][f"dice_g{g}"]["ci_high"], "series": n}
                         for n in names for g in range(params.n_groups)])
    return RunOutput(metrics=metrics, tables={"plot": plot, "runs": rows}, figure=_figure(plot, params),
                     setup=_setup(params), notes=_notes(params, metrics))


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
        "differences are paired over seeds with percentile-bootstrap 95% intervals."
    )


def _fmt(s: dict, key: str = "mean") -> str:
    return f"{s[key]:.3f} [{s['ci_low']:.3f}, {s['ci_high']:.3f}]"


def _notes(p: Params, m: dict) -> str:
    d, diff = m["dice"], m["diff"]
    last = p.n_groups - 1
    table = "\n".join(
        f"| {LABEL[n]} | {_fmt(d[n]['overall'])} | {_fmt(d[n]['es'])} | {_fmt(d[n]['worst'])} | {_fmt(d[n]['gap'])} | "
        + " | ".join(f"{d[n][f'dice_g{g}']['mean']:.3f}" for g in range(p.n_groups)) + " |"
        for n in d)
    head = ("| method | Dice | ES-Dice | worst-group Dice | gap | "
            + " | ".join(f"Dice g{g}" for g in range(p.n_groups)) + " |\n|" + "---|" * (5 + p.n_groups))
    return (
        "**What is built.** The dMoE layer after the official code (`SparseMoE` with one `NoisyTopkRouter` per "
        "attribute, shared experts, residual, after every encoder stage, no balance loss), plugged into the shared "
        "TinyUNet through its adapter hook. The standard MoE is the same layer with one router (the official "
        "`--vmoe` switch routes every sample through router 0). FiLM gives the network the attribute without "
        "experts; group-balanced resampling is the data-side fairness baseline.\n\n"
        f"**Results** (mean over seeds, 95% CI):\n\n{head}\n{table}\n\n"
        f"ES-Dice differences: dMoE - UNet {_fmt(diff['es']['dmoe_vs_unet'])}, dMoE - MoE {_fmt(diff['es']['dmoe_vs_moe'])}, "
        f"dMoE - FiLM {_fmt(diff['es']['dmoe_vs_film'])} (reported, no pass/fail: FiLM is the plan's honest "
        f"attribute-without-MoE comparison), dMoE - balanced UNet {_fmt(diff['es']['dmoe_vs_unet_balanced'])}, "
        f"MoE - UNet {_fmt(diff['es']['moe_vs_unet'])}. Minority-group (g{last}) Dice gain over the UNet: dMoE "
        f"{_fmt(diff['minority']['dmoe_vs_unet'])}, FiLM {_fmt(diff['minority']['film_vs_unet'])}, balanced resampling "
        f"{_fmt(diff['minority']['unet_balanced_vs_unet'])}, MoE {_fmt(diff['minority']['moe_vs_unet'])}.\n\n"
        "**Negative controls.** The shuffled-attribute dMoE has the same parameters and the same routed group "
        "frequencies as dMoE but an attribute unrelated to the image: its ES-Dice gain over the UNet is "
        f"{_fmt(diff['es']['dmoe_shuffled_vs_unet'])}, over the MoE {_fmt(diff['es']['dmoe_shuffled_vs_moe'])}, and its "
        f"minority gain {_fmt(diff['minority']['dmoe_shuffled_vs_unet'])}; where it passes too, the gain is capacity, "
        "not distribution awareness, and the claim is inconclusive. The trained dMoE routed to a wrong group at "
        f"test time scores {_fmt(diff['overall']['dmoe_misrouted_vs_unet'])} overall Dice minus the UNet's (the "
        "control of the non-inferiority claim: it shows how much the routers matter to the trained model).\n\n"
        "**Reading the result.** In these images the attribute decides how the image is formed, so any model that "
        "is given the attribute has an advantage by construction: the claims test that dMoE turns the attribute "
        "into Dice and fairness (the shuffled control says the gain is the attribute's information, not the extra "
        "capacity), not that the mixture of experts is the best way to use it. Compare dMoE with FiLM (the "
        "attribute without experts) and with group-balanced resampling (no attribute at test time) in the table "
        "above; these comparisons are reported, not claims. Short training leaves the attribute-blind models "
        "unstable across seeds on the minority group (and on the inverted-polarity group in some seeds): the "
        "size of the dMoE - UNet gap depends on that, its sign on every seed is in `runs.csv`."
    )

"""GridToM, the evaluation: probe accuracies of the best and median heads, steering effects against the random
controls (seeds paired), the validation grid, the figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.gridtom.params import Params
from tasks import estimates as est
from tasks import stats
from tasks.contract import RunOutput
from tasks.records import Records
from tasks.report import fmt

SPLITS = ("false_belief", "true_belief", "reality", "initial", "second_order")
CONDITIONS = ("none", "steered", "random_heads", "random_directions", "steered_heads_ablated")


def evaluate(params: Params, records: Records) -> RunOutput:
    accuracy, probes, grid, chosen = (records[name] for name in ("accuracy", "probes", "validation_grid", "chosen"))
    acc = {c: {s: est.per_seed(accuracy, "accuracy", condition=c, split=s) for s in SPLITS} for c in CONDITIONS}
    head_index = probes.loc[probes["seed"] == records.seeds[0], ["layer", "head"]].itertuples(index=False)
    per_head = [{"layer": layer, "head": head} for layer, head in head_index]

    def by_head(value: str) -> np.ndarray:
        """(seeds, heads) probe accuracies, heads in layer-major order."""
        return np.array(est.aligned(probes, value, *per_head)).T

    heads, permuted, asked = by_head("false_belief"), by_head("permuted"), by_head("asked_agent")
    best_control = {s: np.maximum(acc["random_heads"][s], acc["random_directions"][s]) for s in SPLITS}
    metrics = {
        "accuracy": {c: {s: stats.summarize(v) for s, v in by_split.items()} for c, by_split in acc.items()},
        "probe": {"best_head": stats.summarize(heads.max(axis=1)),
                  "median_head": stats.summarize(np.median(heads, axis=1)),
                  "best_head_permuted": stats.summarize(permuted.max(axis=1)),
                  "median_head_asked_agent": stats.summarize(np.median(asked, axis=1)),
                  "per_head_mean": heads.mean(axis=0).tolist()},
        "diff": {"steered_minus_none": {s: stats.paired_difference(acc["steered"][s], acc["none"][s]) for s in SPLITS},
                 "random_heads_minus_none": {s: stats.paired_difference(acc["random_heads"][s], acc["none"][s])
                                             for s in SPLITS},
                 "random_directions_minus_none": {s: stats.paired_difference(acc["random_directions"][s],
                                                                             acc["none"][s]) for s in SPLITS},
                 "control_minus_none": {s: stats.paired_difference(best_control[s], acc["none"][s]) for s in SPLITS},
                 "none_minus_steered": {s: stats.paired_difference(acc["none"][s], acc["steered"][s]) for s in SPLITS},
                 "none_minus_steered_heads_ablated": {s: stats.paired_difference(acc["none"][s],
                                                                                 acc["steered_heads_ablated"][s])
                                                      for s in SPLITS}},
        "changed": {"false_belief": est.summary(chosen, "false_belief_answers_changed")},
        "validation": _best_validation_gain(grid),
        "chosen": {"k": [int(k) for k in est.per_seed(chosen, "k")],
                   "alpha": [float(a) for a in est.per_seed(chosen, "alpha")]},
        "sanity": {"hook_identity_max_abs": float(chosen["hook_identity_max_abs"].max())},
    }
    wide = accuracy.assign(column=accuracy["condition"] + "." + accuracy["split"]).pivot(
        index="seed", columns="column", values="accuracy")[[f"{c}.{s}" for c in CONDITIONS for s in SPLITS]]
    per_seed = chosen[["seed", "k", "alpha", "top_heads", "random_heads"]].merge(
        wide.reset_index().rename_axis(columns=None), on="seed")
    plot = pd.DataFrame([{"x": s, "y": metrics["accuracy"][c][s]["mean"], "y_low": metrics["accuracy"][c][s]["ci_low"],
                          "y_high": metrics["accuracy"][c][s]["ci_high"], "series": c}
                         for c in CONDITIONS for s in SPLITS])
    return RunOutput(metrics=metrics, tables={"plot": plot, "per_seed": per_seed, "probes": probes,
                                              "validation_grid": grid},
                     figure=_figure(plot, heads.mean(axis=0), params), setup=_setup(params),
                     notes=_measured(params, metrics, per_seed))


def _best_validation_gain(grid: pd.DataFrame) -> dict[str, float]:
    """Per seed, the (K, alpha) with the largest false-belief gain on validation; its gain and its true-belief
    change, averaged over seeds (reported: whether any setting helps false belief, at what cost)."""
    gains, costs = [], []
    for _, settings in grid.groupby("seed", sort=False):
        none = settings[settings["setting"] == "no intervention"].iloc[0]
        others = settings[settings["setting"] != "no intervention"]
        best = others.loc[others["val_false_belief_accuracy"].idxmax()]
        gains.append(best["val_false_belief_accuracy"] - none["val_false_belief_accuracy"])
        costs.append(best["val_true_belief_accuracy"] - none["val_true_belief_accuracy"])
    return {"best_false_belief_gain": float(np.mean(gains)), "true_belief_change_there": float(np.mean(costs))}


def _figure(plot: pd.DataFrame, head_mean: np.ndarray, p: Params):
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.4), gridspec_kw={"width_ratios": [2.4, 1]})
    width = 0.8 / len(CONDITIONS)
    for i, c in enumerate(CONDITIONS):
        part = plot[plot["series"] == c]
        x = np.arange(len(SPLITS)) + (i - (len(CONDITIONS) - 1) / 2) * width
        left.bar(x, part["y"], width, yerr=[part["y"] - part["y_low"], part["y_high"] - part["y"]], capsize=2,
                 label=c.replace("_", " "))
    left.set(xticks=range(len(SPLITS)), xticklabels=[s.replace("_", " ") for s in SPLITS], ylim=(0, 1.05),
             ylabel="test accuracy (mean over seeds, 95% CI)", title="GridToM-lite questions, per intervention")
    left.legend(fontsize=7, ncol=len(CONDITIONS), loc="upper center", bbox_to_anchor=(0.5, -0.08))
    image = right.imshow(head_mean.reshape(p.n_layer, p.n_head), vmin=0.5, vmax=1, cmap="viridis", origin="lower")
    for (layer, head), v in np.ndenumerate(head_mean.reshape(p.n_layer, p.n_head)):
        right.text(head, layer, f"{v:.2f}", ha="center", va="center", fontsize=7, color="w" if v < 0.75 else "k")
    right.set_title("probe accuracy per head, mean of seeds", fontsize=9)
    right.set(xlabel="head", ylabel="layer",
              xticks=range(p.n_head), yticks=range(p.n_layer))
    fig.colorbar(image, ax=right, shrink=0.8)
    fig.tight_layout()
    return fig


def _setup(p: Params) -> str:
    return (
        f"**GridToM-lite** (fresh per seed): episodes of {p.n_frames} frames in two rooms of 3 x 2 cells joined by a "
        f"door; agents A and B and one object; the door is open at frame 0, shuts at a random later frame and may "
        f"reopen; each frame an agent or the object moves with probability {p.move_prob} (through the door only while "
        "it is open). An agent sees its own room, and everything while the door is open. Each frame is 6 tokens: the "
        "object's cell, the door, A's view of B and of the object, B's view of A and of the object ('?' when "
        "masked); then a two-token question: reality, initial position, first-order belief (A / B) or second-order "
        "belief (A thinks B thinks, B thinks A thinks); the answer is a cell (12 choices, read out as the most likely "
        f"cell token). **Model**: the GPT of tasks.lm ({p.n_layer} blocks x {p.n_head} heads, d = {p.d_model}) "
        f"trained from scratch per seed on {p.n_train} questions (every kind equally often; belief questions false "
        f"belief at {p.train_false_belief:.0%}), cross-entropy on the answer, {p.epochs} epochs, AdamW lr {p.lr}, "
        f"batch {p.batch_size}; cached in data/ by its training key. **Probing**: {p.n_probe} first-order questions "
        "(half false belief); each head's output at the answer position, one logistic regression per head "
        "(scikit-learn) fit on one half, accuracy on the other. **Steering**: the top-K heads by probe accuracy get "
        "alpha * sigma_h * theta_h added at the answer position (theta_h: unit mass-mean direction false - true "
        f"belief; sigma_h: std along it); K in {p.ks}, alpha in {p.alphas}, chosen per seed by balanced first-order "
        f"accuracy on {p.n_val} false-belief and {p.n_val} true-belief validation questions. **Test**: {p.n_test} questions per split "
        "(first-order false belief, first-order true belief, reality, initial, second-order), under: no intervention, "
        "the chosen steering, K random heads (their own directions), the top-K heads along random directions of the "
        "same norm, and the chosen top-K heads mean-ablated at the answer position. "
        f"{p.seeds} seeds; 95% Student-t intervals over seeds (paired by seed for differences)."
    )


def _interval(s: dict) -> str:
    return f"{fmt(s['mean'])} [{fmt(s['ci_low'])}, {fmt(s['ci_high'])}]"


def _measured(p: Params, m: dict, per_seed: pd.DataFrame) -> str:
    """The measured numbers behind the claims, for the notes (interpretation is in NOTES.md)."""
    a, d = m["accuracy"], m["diff"]
    rows = "\n".join(f"| {c.replace('_', ' ')} | " + " | ".join(_interval(a[c][s]) for s in SPLITS) + " |"
                     for c in CONDITIONS)
    chosen = ", ".join(f"seed {r.seed}: K={r.k}, alpha={r.alpha:g}, heads {r.top_heads}" for r in per_seed.itertuples())
    return (
        "**Test accuracy (mean over seeds [95% CI]).**\n\n| intervention | " + " | ".join(s.replace("_", " ")
                                                                                     for s in SPLITS)
        + " |\n|---|" + "---|" * len(SPLITS) + "\n" + rows + "\n\n"
        f"**Probes.** Best head {_interval(m['probe']['best_head'])}, median head {_interval(m['probe']['median_head'])}; "
        f"permuted labels, best head {_interval(m['probe']['best_head_permuted'])}; which agent is asked, median head "
        f"{_interval(m['probe']['median_head_asked_agent'])}. Chosen on validation: {chosen} (head index = layer x "
        f"{p.n_head} + head).\n\n"
        f"**Steering effects (paired over seeds).** False belief: steered - none "
        f"{_interval(d['steered_minus_none']['false_belief'])}, random heads - none "
        f"{_interval(d['random_heads_minus_none']['false_belief'])}, random directions - none "
        f"{_interval(d['random_directions_minus_none']['false_belief'])}. True belief: steered - none "
        f"{_interval(d['steered_minus_none']['true_belief'])}; share of false-belief answers the steering changes "
        f"{_interval(m['changed']['false_belief'])}. Reality: none - steered {_interval(d['none_minus_steered']['reality'])}, "
        f"none - the steered heads mean-ablated {_interval(d['none_minus_steered_heads_ablated']['reality'])}; "
        f"second order: steered - none {_interval(d['steered_minus_none']['second_order'])}. On validation, the largest "
        f"false-belief gain of any (K, alpha) over no intervention was {m['validation']['best_false_belief_gain']:+.3f} "
        f"(mean over seeds), at a true-belief change of {m['validation']['true_belief_change_there']:+.3f} "
        "(table validation_grid)."
    )

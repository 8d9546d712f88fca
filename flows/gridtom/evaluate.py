"""GridToM, the evaluation: probe accuracies of the best and median heads, steering effects against the random
controls (seeds paired), the capability gates, the validation grid, the figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.gridtom.params import Params
from paperflows.core import estimates as est
from paperflows.core import stats
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records
from paperflows.core.report import fmt

SPLITS = ("false_belief", "true_belief", "reality")
CONDITIONS = ("none", "steered", "random_heads", "random_directions", "steered_heads_ablated")


def evaluate(params: Params, records: Records) -> RunOutput:
    accuracy, probes, grid, chosen = (records[name] for name in ("accuracy", "probes", "validation_grid", "chosen"))
    acc = {c: {s: est.per_seed(accuracy, "accuracy", condition=c, split=s) for s in SPLITS} for c in CONDITIONS}
    margin = {c: {s: est.per_seed(accuracy, "margin", condition=c, split=s) for s in SPLITS} for c in CONDITIONS}
    first = probes[probes["seed"] == records.seeds[0]]
    per_head = [{"layer": layer, "head": head} for layer, head in first[["layer", "head"]].itertuples(index=False)]
    shape = (int(first["layer"].max()) + 1, int(first["head"].max()) + 1)

    def by_head(value: str) -> np.ndarray:
        """(seeds, heads) probe accuracies, heads in layer-major order."""
        return np.array(est.aligned(probes, value, *per_head)).T

    heads, permuted, question = by_head("false_belief"), by_head("permuted"), by_head("question")
    best_control = {s: np.maximum(acc["random_heads"][s], acc["random_directions"][s]) for s in SPLITS}
    differences = {"steered_minus_none": ("steered", "none"), "random_heads_minus_none": ("random_heads", "none"),
                   "random_directions_minus_none": ("random_directions", "none"),
                   "none_minus_steered": ("none", "steered"),
                   "none_minus_steered_heads_ablated": ("none", "steered_heads_ablated")}
    metrics = {
        "accuracy": {c: {s: stats.summarize(v) for s, v in by_split.items()} for c, by_split in acc.items()},
        "margin": {c: {s: stats.summarize(v) for s, v in by_split.items()} for c, by_split in margin.items()},
        "probe": {"best_head": stats.summarize(heads.max(axis=1)),
                  "median_head": stats.summarize(np.median(heads, axis=1)),
                  "best_head_permuted": stats.summarize(permuted.max(axis=1)),
                  "median_head_question": stats.summarize(np.median(question, axis=1)),
                  "per_head_mean": heads.mean(axis=0).tolist()},
        "diff": {**{name: {s: stats.paired_difference(acc[a][s], acc[b][s]) for s in SPLITS}
                    for name, (a, b) in differences.items()},
                 "control_minus_none": {s: stats.paired_difference(best_control[s], acc["none"][s]) for s in SPLITS}},
        "margin_diff": {"steered_minus_none": {s: stats.paired_difference(margin["steered"][s], margin["none"][s])
                                               for s in SPLITS}},
        # a steering that only pushes every answer toward the first room trades true- for false-belief accuracy:
        # their mean (the validation criterion) shows whether anything is gained on balance
        "balanced_diff": {"steered_minus_none": stats.paired_difference(
            (acc["steered"]["false_belief"] + acc["steered"]["true_belief"]) / 2,
            (acc["none"]["false_belief"] + acc["none"]["true_belief"]) / 2)},
        "changed": {"false_belief": est.summary(chosen, "false_belief_answers_changed")},
        "validation": _best_validation_gain(grid),
        "chosen": {"k": [int(k) for k in est.per_seed(chosen, "k")],
                   "alpha": [float(a) for a in est.per_seed(chosen, "alpha")]},
        "sanity": {"hook_identity_max_abs": float(chosen["hook_identity_max_abs"].max()),
                   "cache_path_max_abs": float(chosen["cache_path_max_abs"].max())},
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
                     figure=_figure(plot, heads.mean(axis=0).reshape(shape)), setup=_setup(params),
                     notes=_measured(params, metrics, per_seed))


def _best_validation_gain(grid: pd.DataFrame) -> dict[str, float]:
    """Per seed, the (K, alpha) with the largest false-belief gain on validation; its gain and its true-belief
    change, averaged over seeds (reported: whether any setting helps false belief, at what cost)."""
    gains, costs = [], []
    for _, settings in grid.groupby("seed", sort=False):
        none = settings[settings["setting"] == "none"].iloc[0]
        others = settings[settings["setting"] != "none"]
        best = others.loc[others["val_false_belief_accuracy"].idxmax()]
        gains.append(best["val_false_belief_accuracy"] - none["val_false_belief_accuracy"])
        costs.append(best["val_true_belief_accuracy"] - none["val_true_belief_accuracy"])
    return {"best_false_belief_gain": float(np.mean(gains)), "true_belief_change_there": float(np.mean(costs))}


def _figure(plot: pd.DataFrame, head_mean: np.ndarray):
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.4), gridspec_kw={"width_ratios": [1.6, 1]})
    width = 0.8 / len(CONDITIONS)
    for i, c in enumerate(CONDITIONS):
        part = plot[plot["series"] == c]
        x = np.arange(len(SPLITS)) + (i - (len(CONDITIONS) - 1) / 2) * width
        left.bar(x, part["y"], width, yerr=[part["y"] - part["y_low"], part["y_high"] - part["y"]], capsize=2,
                 label=c.replace("_", " "))
    left.axhline(0.5, color="grey", lw=0.8, ls=":")
    left.set(xticks=range(len(SPLITS)), xticklabels=[s.replace("_", " ") for s in SPLITS], ylim=(0, 1.05),
             ylabel="test accuracy (mean over seeds, 95% CI)", title="text GridToM questions, per intervention")
    left.legend(fontsize=7, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.08))
    image = right.imshow(head_mean, vmin=0.5, vmax=1, cmap="viridis", origin="lower", aspect="auto")
    right.set_title("false vs true belief probe accuracy per head, mean of seeds", fontsize=9)
    right.set(xlabel="head", ylabel="layer")
    fig.colorbar(image, ax=right, shrink=0.8)
    fig.tight_layout()
    return fig


def _setup(p: Params) -> str:
    return (
        f"**Model**: `{p.model}` (tasks.pretrained, float32, raw-text prompts, no weight changes). **Stories** (fresh "
        "per seed, from templates): a grid world of four coloured rooms; the protagonist A and a mover B are in one "
        "room with an object; B moves the object to another room while A is away or looking elsewhere (false "
        "belief: four templates, e.g. 'A leaves the grid' / 'A turns around and looks at the wall') or while A "
        "watches (true belief: four matching templates); each story is told both ways. Questions: 'In which room "
        "will A look for the object?' (belief) and 'In which room is the object now?' (reality), each followed by "
        "an answer stem ending in 'the'; the answer is the more likely of the story's two rooms (one colour token "
        f"each). **Probing**: {p.n_probe} probe stories told both ways; each head's output at the answer position "
        "(the input of o_proj), one logistic regression per head (scikit-learn) fit on the tellings of half the "
        "stories, accuracy on the other half. **Steering**: the top-K heads by probe accuracy get alpha * sigma_h * "
        "theta_h added at the answer position (theta_h: unit mass-mean direction false - true belief; sigma_h: std "
        f"along it); K in {p.ks}, alpha in {p.alphas}, chosen per seed by balanced belief accuracy on {p.n_val} "
        f"validation stories told both ways. **Test**: {p.n_test} stories per seed: the belief question told both "
        "ways and the reality question on the false-belief telling, under: no intervention, the chosen steering, K "
        "random heads (their own directions), the top-K heads along random directions (same sigma and alpha), and "
        "the chosen top-K heads mean-ablated at the answer position. "
        f"{p.seeds} seeds; 95% Student-t intervals over seeds (paired by seed for differences)."
    )


def _interval(s: dict) -> str:
    return f"{fmt(s['mean'])} [{fmt(s['ci_low'])}, {fmt(s['ci_high'])}]"


def _measured(p: Params, m: dict, per_seed: pd.DataFrame) -> str:
    """The measured numbers behind the claims, for the notes (interpretation is in NOTES.md)."""
    a, g, d = m["accuracy"], m["margin"], m["diff"]
    header = " | ".join(s.replace("_", " ") for s in SPLITS)
    rows = lambda table: "\n".join(f"| {c.replace('_', ' ')} | " + " | ".join(_interval(table[c][s]) for s in SPLITS)
                                   + " |" for c in CONDITIONS)
    chosen = ", ".join(f"seed {r.seed}: K={r.k}, alpha={r.alpha:g}" for r in per_seed.itertuples())
    return (
        f"**Test accuracy (mean over seeds [95% CI]).**\n\n| intervention | {header} |\n|---|"
        + "---|" * len(SPLITS) + "\n" + rows(a) + "\n\n"
        f"**Log-probability margin of the correct room over the other (nats).**\n\n| intervention | {header} |\n|---|"
        + "---|" * len(SPLITS) + "\n" + rows(g) + "\n\n"
        f"**Probes.** Best head {_interval(m['probe']['best_head'])}, median head {_interval(m['probe']['median_head'])}; "
        f"permuted labels, best head {_interval(m['probe']['best_head_permuted'])}; which question is asked, median "
        f"head {_interval(m['probe']['median_head_question'])}. Chosen on validation: {chosen}.\n\n"
        f"**Steering effects (paired over seeds).** False belief: steered - none "
        f"{_interval(d['steered_minus_none']['false_belief'])} (margin "
        f"{_interval(m['margin_diff']['steered_minus_none']['false_belief'])} nats), random heads - none "
        f"{_interval(d['random_heads_minus_none']['false_belief'])}, random directions - none "
        f"{_interval(d['random_directions_minus_none']['false_belief'])}. True belief: steered - none "
        f"{_interval(d['steered_minus_none']['true_belief'])}; mean of false- and true-belief accuracy, steered - none "
        f"{_interval(m['balanced_diff']['steered_minus_none'])}; share of false-belief answers the steering changes "
        f"{_interval(m['changed']['false_belief'])}. Reality: none - steered {_interval(d['none_minus_steered']['reality'])}, "
        f"none - the steered heads mean-ablated {_interval(d['none_minus_steered_heads_ablated']['reality'])}. On "
        f"validation, the largest false-belief gain of any (K, alpha) over no intervention was "
        f"{m['validation']['best_false_belief_gain']:+.3f} (mean over seeds), at a true-belief change of "
        f"{m['validation']['true_belief_change_there']:+.3f} (table validation_grid)."
    )

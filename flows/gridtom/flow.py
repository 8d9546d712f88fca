"""GridToM as a Prefect flow: a grid-world theory-of-mind dataset, a small GPT trained on it from scratch,
per-head probes for false vs true belief and training-free ITI-style steering of the best heads."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.gridtom import method
from flows.gridtom.params import SMOKE, Params
from tasks import stats
from tasks.contract import Claim, Control, Paper, RunContext, RunOutput, ci
from tasks.paper import over_seeds, paper_flow
from tasks.rows import by_seed

ON_STAND_IN = ("on the stand-in (a small GPT trained from scratch on GridToM-lite: two rooms, a door, "
               "agents A and B and an object, each agent's view masked while the door is shut)")
SPLITS = ("false_belief", "true_belief", "reality", "initial", "second_order")
CONDITIONS = ("none", "steered", "random_heads", "random_directions", "steered_heads_ablated")

PAPER = Paper(
    slug="gridtom",
    title="From Black Boxes to Transparent Minds: Evaluating and Enhancing the Theory of Mind in Multimodal LLMs",
    method="GridToM (dataset) + per-head probing + training-free attention-head steering (ITI-style)",
    paper_class="C",
    source="abstracts-003.txt #19",
    official_code=None,
    claims=(
        Claim(id="best_head_separates_perspectives",
              text=("attention heads in multimodal large models can distinguish cognitive information across "
                    "perspectives: held-out accuracy of the best head's linear probe for false vs true first-order "
                    f"belief (balanced) >= 0.8 {ON_STAND_IN}"),
              source="abstract; plan claim check 1 (magnitude)", metric="probe.best_head.mean", comparison=">=",
              threshold=0.8, kind="magnitude", role="claim", interval=ci("probe.best_head"),
              # with the labels permuted the best of the heads can only fit noise
              control=Control(name="best head, probes fit on permuted labels", metric="probe.best_head_permuted.mean",
                              interval=ci("probe.best_head_permuted"))),
        Claim(id="median_head_does_not",
              text=("... some heads, not all (plan): held-out accuracy of the median head's probe for false vs true "
                    f"first-order belief <= 0.65 {ON_STAND_IN}"),
              source="plan claim check 1 (magnitude)", metric="probe.median_head.mean", comparison="<=",
              threshold=0.65, kind="magnitude", role="claim", interval=ci("probe.median_head"),
              # a label every head at the answer position can read (which agent the question names): its median
              # head must come out above 0.65, or the median statistic could not exceed the threshold at all
              control=Control(name="median head, probes for which agent is asked (A vs B)",
                              metric="probe.median_head_asked_agent.mean",
                              interval=ci("probe.median_head_asked_agent"))),
        Claim(id="steering_improves_false_belief",
              text=("a lightweight, training-free approach ... significantly enhances the model's exhibited ToM by "
                    "adjusting in the direction of the attention head: test accuracy on false-belief first-order "
                    "questions with the top-K heads shifted by alpha * sigma * theta ((K, alpha) chosen on validation) "
                    f"- accuracy without intervention >= 0.05 {ON_STAND_IN}"),
              source="abstract; plan claim check 2 (magnitude + direction)",
              metric="diff.steered_minus_none.false_belief.mean", comparison=">=", threshold=0.05,
              kind="magnitude", role="claim", interval=ci("diff.steered_minus_none.false_belief"),
              # the better, per seed, of K random heads (their own directions) and the top-K heads shifted along
              # random directions of the same norm: the most favourable control
              control=Control(name="best of K random heads / random directions, same K and alpha",
                              metric="diff.control_minus_none.false_belief.mean",
                              interval=ci("diff.control_minus_none.false_belief"))),
        Claim(id="steering_spares_reality",
              text=("side effects (plan): test accuracy on reality questions ('where is the object now') without "
                    f"intervention - with the chosen steering <= 0.02 {ON_STAND_IN}; gated on the steering changing "
                    "false-belief answers at all (else sparing reality is vacuous)"),
              source="plan claim check 3 (magnitude)", metric="diff.none_minus_steered.reality.mean",
              comparison="<=", threshold=0.02, kind="magnitude", role="claim",
              interval=ci("diff.none_minus_steered.reality"), requires=("steering_changes_false_belief",),
              # the heads the steering shifts, mean-ablated instead: if reality does not depend on them, sparing it
              # is no evidence (replaces all heads mean-ablated, a strawman that fails by a mile)
              control=Control(name="the chosen top-K heads mean-ablated at the answer position",
                              metric="diff.none_minus_steered_heads_ablated.reality.mean",
                              interval=ci("diff.none_minus_steered_heads_ablated.reality"))),
        Claim(id="steering_changes_false_belief",
              text=("the chosen steering has an effect to spare reality from: the fraction of false-belief test "
                    "answers it changes > 0.05 (the claimed gain's own size: fewer changed answers cannot give it)"),
              source="ours (working-method gate of steering_spares_reality)",
              metric="changed.false_belief.mean", comparison=">", threshold=0.05, kind="magnitude", role="sanity",
              interval=ci("changed.false_belief")),
        Claim(id="model_learned_reality",
              text="the stand-in learned its world: test accuracy on reality questions without intervention >= 0.9",
              source="ours", metric="accuracy.none.reality.mean", comparison=">=", threshold=0.9,
              kind="magnitude", role="sanity", interval=ci("accuracy.none.reality")),
        Claim(id="hook_write_back_is_identity",
              text=("reading every block's head outputs and writing them back unchanged leaves the logits unchanged "
                    "(max abs difference over seeds < 1e-6): the steering hook has no side effect of its own"),
              source="ours", metric="sanity.hook_identity_max_abs", comparison="<", threshold=1e-6,
              kind="exact", role="sanity"),
    ),
    limitations=(
        "The stand-in is a 4-layer, 4-head GPT (d = 48) trained for seconds from scratch on GridToM-lite; it is not a "
        "multimodal LLM, it sees tokens (cells) instead of video frames, and its 'theory of mind' is whatever "
        "heuristic fits the training questions, where false belief is rare by design (as the plan asks, so that "
        "the model is imperfect on it). Nothing here says whether pretrained MLLMs hold perspective information in "
        "their heads, nor whether steering helps them; the paper's models, its GridToM videos, its K and alpha and "
        "its figures are not reproduced. The per-agent views are given in the input (GridToM's 'perceptual "
        "information from multiple perspectives'), so first-order belief is a lookup of the last unmasked view; "
        "the paper's models must infer visibility from pixels. The probing and steering recipe (logistic probes "
        "per head at the answer position, ITI mass-mean shift alpha * sigma * theta on the top-K heads) is written "
        "from the abstract, the project page and the ITI paper it builds on: no code was released, so details "
        "(probe label, which positions are shifted, K and alpha) are ours, swept or chosen on validation."
    ),
)


@paper_flow(PAPER, Params, smoke=SMOKE)
def gridtom_flow(params: Params, ctx: RunContext) -> RunOutput:
    rows = over_seeds(method.run_seed, ctx.seeds, p=params, data_dir=str(ctx.data_dir))
    acc = {c: {s: by_seed(rows, "accuracy", c, s) for s in SPLITS} for c in CONDITIONS}
    heads = np.asarray([r["head_accuracy"] for r in rows])                      # (seeds, H)
    permuted = np.asarray([r["head_accuracy_permuted"] for r in rows])
    asked = np.asarray([r["head_accuracy_asked_agent"] for r in rows])
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
        "changed": {"false_belief": stats.summarize([r["false_belief_answers_changed"] for r in rows])},
        "validation": _best_validation_gain(rows),
        "chosen": {"k": [int(r["chosen_k"]) for r in rows], "alpha": [float(r["chosen_alpha"]) for r in rows]},
        "sanity": {"hook_identity_max_abs": float(max(r["hook_identity_max_abs"] for r in rows))},
    }
    per_seed = pd.DataFrame([{"seed": r["seed"], "k": r["chosen_k"], "alpha": r["chosen_alpha"],
                              "top_heads": " ".join(map(str, r["top_heads"])),
                              "random_heads": " ".join(map(str, r["random_heads"])),
                              **{f"{c}.{s}": r["accuracy"][c][s] for c in CONDITIONS for s in SPLITS}} for r in rows])
    probes = pd.DataFrame([{"seed": r["seed"], "layer": h // params.n_head, "head": h % params.n_head,
                            "false_belief": r["head_accuracy"][h], "permuted": r["head_accuracy_permuted"][h],
                            "asked_agent": r["head_accuracy_asked_agent"][h]}
                           for r in rows for h in range(len(r["head_accuracy"]))])
    grid = pd.DataFrame([{"seed": r["seed"], "setting": name, "val_balanced_accuracy": v["balanced"],
                          "val_false_belief_accuracy": v["false"], "val_true_belief_accuracy": v["true"]}
                         for r in rows for name, v in r["val_grid"].items()])
    plot = pd.DataFrame([{"x": s, "y": metrics["accuracy"][c][s]["mean"], "y_low": metrics["accuracy"][c][s]["ci_low"],
                          "y_high": metrics["accuracy"][c][s]["ci_high"], "series": c}
                         for c in CONDITIONS for s in SPLITS])
    return RunOutput(metrics=metrics, tables={"plot": plot, "per_seed": per_seed, "probes": probes,
                                              "validation_grid": grid},
                     figure=_figure(plot, heads.mean(axis=0), params), setup=_setup(params),
                     notes=_notes(params, metrics, per_seed))


def _best_validation_gain(rows: list[dict]) -> dict[str, float]:
    """Per seed, the (K, alpha) with the largest false-belief gain on validation; its gain and its true-belief
    change, averaged over seeds (reported: whether any setting helps false belief, at what cost)."""
    gains, costs = [], []
    for r in rows:
        none = r["val_grid"]["no intervention"]
        best = max((v for name, v in r["val_grid"].items() if name != "no intervention"), key=lambda v: v["false"])
        gains.append(best["false"] - none["false"])
        costs.append(best["true"] - none["true"])
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
        f"{p.seeds} seeds; 95% bootstrap intervals over seeds."
    )


def _fmt(s: dict, key: str = "mean") -> str:
    return f"{s[key]:.3f} [{s['ci_low']:.3f}, {s['ci_high']:.3f}]"


def _notes(p: Params, m: dict, per_seed: pd.DataFrame) -> str:
    a, d = m["accuracy"], m["diff"]
    rows = "\n".join(f"| {c.replace('_', ' ')} | " + " | ".join(_fmt(a[c][s]) for s in SPLITS) + " |"
                     for c in CONDITIONS)
    chosen = ", ".join(f"seed {r.seed}: K={r.k}, alpha={r.alpha:g}, heads {r.top_heads}" for r in per_seed.itertuples())
    return (
        "**Test accuracy (mean over seeds [95% CI]).**\n\n| intervention | " + " | ".join(s.replace("_", " ")
                                                                                     for s in SPLITS)
        + " |\n|---|" + "---|" * len(SPLITS) + "\n" + rows + "\n\n"
        f"**Probes.** Best head {_fmt(m['probe']['best_head'])}, median head {_fmt(m['probe']['median_head'])}; "
        f"permuted labels, best head {_fmt(m['probe']['best_head_permuted'])}; which agent is asked, median head "
        f"{_fmt(m['probe']['median_head_asked_agent'])}. Chosen on validation: {chosen} (head index = layer x "
        f"{p.n_head} + head).\n\n"
        f"**Steering effects (paired over seeds).** False belief: steered - none {_fmt(d['steered_minus_none']['false_belief'])}, "
        f"random heads - none {_fmt(d['random_heads_minus_none']['false_belief'])}, random directions - none "
        f"{_fmt(d['random_directions_minus_none']['false_belief'])}. True belief: steered - none "
        f"{_fmt(d['steered_minus_none']['true_belief'])}; share of false-belief answers the steering changes "
        f"{_fmt(m['changed']['false_belief'])}. Reality: none - steered {_fmt(d['none_minus_steered']['reality'])}, "
        f"none - the steered heads mean-ablated {_fmt(d['none_minus_steered_heads_ablated']['reality'])}; "
        f"second order: steered - none {_fmt(d['steered_minus_none']['second_order'])}. On validation, the largest "
        f"false-belief gain of any (K, alpha) over no intervention was {m['validation']['best_false_belief_gain']:+.3f} "
        f"(mean over seeds), at a true-belief change of {m['validation']['true_belief_change_there']:+.3f} "
        "(table validation_grid). The plan also asks the "
        "random controls to gain < 2 points; the claim's control is judged at the claim's own 5-point threshold "
        "(the framework's rule), and the two control gains are listed here for the stricter reading.\n\n"
        "**Choices made before the first run.** Answers are cells, not rooms (the plan's room id makes every "
        "question binary and lets a move inside a room go unnoticed); the per-agent masked views are part of the "
        "input, as GridToM provides perceptual information from each perspective; the probe label is false vs true "
        "first-order belief on a balanced split; (K, alpha) maximise balanced first-order accuracy on validation (a "
        "criterion on false belief alone would reward answering 'not reality' everywhere); the shift is added at the "
        "answer position only. **Changed after the first full run** (the issue: the steering chosen there changed "
        "nothing on false belief, and the all-heads mean ablation was a strawman control): steering_spares_reality "
        "now requires the sanity check steering_changes_false_belief (share of false-belief answers the steering "
        "changes > 0.05), and its control mean-ablates only the chosen top-K heads, decided before this run."
    )

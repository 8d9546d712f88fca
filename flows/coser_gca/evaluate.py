"""CoSER, the evaluation: every model's GCA metrics over seeds, the paired gains over the trait-ignoring baseline
(of the CoSER-style model and of the permuted-profile control) and of inner thoughts, from the records."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.coser_gca.claims import LABEL
from flows.coser_gca.params import Params
from paperflows.core import estimates as est
from paperflows.core import stats
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records
from paperflows.core.report import fmt

METRICS = ("bleu", "rouge_l", "fidelity", "anthropomorphism", "storyline_consistency", "life_choice",
           "nsp_invalid_per_scene", "rounds")
GAINED = METRICS[:6]  # the evaluation metrics; the last two count the simulation's mechanics
MODELS = ("authentic", "inauthentic", "no_thoughts", "authentic_permuted_profiles")
BASELINE = "inauthentic"


def evaluate(params: Params, records: Records) -> RunOutput:
    rows = records["runs"]
    gain = lambda a, b, k: est.paired(rows, k, {"model": a}, {"model": b})
    metrics: dict = {"models": {"ground_truth": {"fidelity": est.summary(rows, "fidelity", model="ground_truth")}}}
    for m in MODELS:
        metrics["models"][m] = {k: est.summary(rows, k, model=m) for k in METRICS}
    metrics["gain"] = {k: gain("authentic", BASELINE, k) for k in GAINED}
    metrics["control_gain"] = {k: gain("authentic_permuted_profiles", BASELINE, k) for k in GAINED}
    metrics["thoughts_gain"] = {k: gain("authentic", "no_thoughts", k) for k in GAINED}
    plot = pd.DataFrame([{"x": k, "y": metrics["models"][m][k]["mean"], "y_low": metrics["models"][m][k]["ci_low"],
                          "y_high": metrics["models"][m][k]["ci_high"], "series": m}
                         for m in MODELS for k in ("fidelity", "life_choice", "rouge_l")])
    per_seed_choice = ", ".join(fmt(x) for x in est.per_seed(rows, "life_choice", model="authentic"))
    notes = _measured(metrics) + f"\n\nLifeChoice analog of the CoSER-style model per seed: {per_seed_choice}."
    return RunOutput(metrics=metrics, tables={"plot": plot, "runs": rows}, figure=_figure(plot),
                     setup=_setup(params), notes=notes)


def _figure(plot: pd.DataFrame):
    fig, ax = plt.subplots(figsize=(8, 4.5))
    keys = list(dict.fromkeys(plot["x"]))
    width = 0.8 / len(MODELS)
    for i, m in enumerate(MODELS):
        g = plot[plot["series"] == m].set_index("x").loc[keys]
        pos = np.arange(len(keys)) + (i - (len(MODELS) - 1) / 2) * width
        ax.bar(pos, g["y"], width, yerr=[g["y"] - g["y_low"], g["y_high"] - g["y"]], capsize=3, label=LABEL[m])
    ax.set_xticks(np.arange(len(keys)), ["Character Fidelity", "LifeChoice analog", "ROUGE-L F"])
    ax.set(ylabel="mean over seeds (95% CI)", ylim=(0, 1), title="GCA evaluation on held-out invented books")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _interval(s: dict) -> str:
    return f"{fmt(s['mean'])} [{fmt(s['ci_low'])}, {fmt(s['ci_high'])}]"


def _measured(m: dict) -> str:
    mods = m["models"]

    def row(name: str) -> str:
        v = mods[name]
        return "| " + " | ".join([LABEL[name], *(fmt(v[k]["mean"]) for k in (
            "fidelity", "life_choice", "bleu", "rouge_l", "anthropomorphism", "storyline_consistency",
            "nsp_invalid_per_scene"))]) + " |"

    g, c, t = m["gain"], m["control_gain"], m["thoughts_gain"]
    table = "\n".join([
        "| model | fidelity | LifeChoice | BLEU | ROUGE-L | anthropomorphism | storyline consistency | invalid NSP / scene |",
        "|---|---|---|---|---|---|---|---|", *(row(x) for x in MODELS)])
    return (
        f"Measured:\n\n{table}\n\nFidelity of the held-out books' ground-truth utterances under the judge (its "
        f"ceiling): {fmt(mods['ground_truth']['fidelity']['mean'])}. Authentic minus baseline: fidelity "
        f"{_interval(g['fidelity'])}, LifeChoice {fmt(g['life_choice']['mean'])}, BLEU {fmt(g['bleu']['mean'])}, "
        f"ROUGE-L {fmt(g['rouge_l']['mean'])}; the permuted-profile control minus baseline: fidelity "
        f"{fmt(c['fidelity']['mean'])}, LifeChoice {fmt(c['life_choice']['mean'])}, BLEU {fmt(c['bleu']['mean'])}, "
        f"ROUGE-L {fmt(c['rouge_l']['mean'])}. Inner thoughts (authentic minus no-thoughts ablation, reported, no "
        f"claim declared): fidelity {_interval(t['fidelity'])}, LifeChoice {fmt(t['life_choice']['mean'])}, BLEU "
        f"{_interval(t['bleu'])}, ROUGE-L {fmt(t['rouge_l']['mean'])}."
    )


def _setup(p: Params) -> str:
    return (
        f"**World.** Per seed a fresh world: {p.train_books} training and {p.test_books} held-out books of "
        f"{p.characters_per_book} characters (traits: temperament of 3, verbosity of 2, catchphrase of 8, allegiance "
        f"of 2, drawn uniformly), {p.scenes_per_book} scenes per book with {p.scene_characters} major characters + the "
        f"Environment and {p.min_turns}-{p.max_turns} turns; each character turn has an inner thought `[ ... ]`, each "
        "scene one decision (fixed by temperament and allegiance) after the Environment calls for it.\n\n"
        f"**Persona models.** One GPT per corpus (`tasks.lm`, word level, {p.n_layer} layers, width {p.d_model}, "
        f"{p.n_head} heads), trained {p.epochs} epochs (AdamW, lr {p.lr}, batch {p.batch_size}) on GCA sequences: the "
        f"last {p.history_turns} broadcast turns + goal + the speaker's profile -> its turn; corpora: authentic "
        "(CoSER-style), inauthentic (each turn re-voiced with randomly redrawn traits and a random decision: generic "
        "synthetic role-play data), no-thoughts (authentic, thoughts removed). Weights cached in `data/coser_gca/`.\n\n"
        f"**GCA evaluation** (official `gca_evaluation/main.py`): every held-out scene simulated, one agent per major "
        f"character, rule-based Environment, logistic NSP; the first {p.continue_from} rounds replay the ground truth; "
        f"<END CHAT> accepted from round {p.end_min_round}; invalid NSP output -> random fallback; at most "
        f"{p.max_rounds} rounds; sampling temperature {p.temperature}. BLEU (sacrebleu sentence BLEU, 0-100) and "
        "ROUGE-L F (rouge_score) of the simulated vs the original turns after the prefix, thoughts removed. "
        "Character Fidelity = accuracy of the trait judge on the simulated non-decision character turns; LifeChoice "
        "analog = argmax-likelihood choice among 6 decisions at each held-out scene's decision point. Control: the "
        f"authentic model with every agent given a random other held-out character's profile. {p.seeds} seeds."
    )

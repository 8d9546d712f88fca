"""A2I, the evaluation: rationale F1 gains, attack success against each frozen predictor, the A/A and
untrained-attacker controls and the figure, from the per-seed records."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.a2i_rationale.claims import LABEL
from flows.a2i_rationale.params import Params
from paperflows.core import estimates as est
from paperflows.core import stats
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records
from paperflows.core.report import fmt

COLUMNS = ("f1", "precision", "recall", "accuracy", "sparsity", "asr", "flip_random", "untrained_asr",
           "untrained_flip_random", "sel_target", "sel_other_same", "sel_other_opposite", "sel_filler",
           "attack_sel_target", "attack_sel_other_same", "attack_sel_other_opposite", "attack_sel_filler")


def _col(rows: pd.DataFrame, m: str, col: str) -> np.ndarray:
    return est.per_seed(rows, col, method=m)


def _minus(rows: pd.DataFrame, a: str, b: str, col: str) -> dict[str, float]:
    """``col`` of method ``a`` minus that of method ``b``, seeds paired."""
    return est.paired(rows, col, {"method": a}, {"method": b})


def evaluate(params: Params, records: Records) -> RunOutput:
    rows = records["runs"]
    gains = {b: _minus(rows, f"a2i_{b}", b, "f1") for b in ("rnp", "fr")}
    metrics = {
        "by_method": stats.summarize_by(rows, "method", list(COLUMNS)),
        "gain": gains,
        "accuracy_per_seed": {m: _col(rows, m, "accuracy").tolist() for m in ("rnp", "a2i_rnp")},
        "attack": {"a2i_minus_rnp": _minus(rows, "a2i_rnp", "rnp", "asr"),
                   "a2i_fr_minus_fr": _minus(rows, "a2i_fr", "fr", "asr"),
                   "rnp_excess": stats.paired_difference(_col(rows, "rnp", "asr"), _col(rows, "rnp", "flip_random"))},
        "control": {"aa_f1": _minus(rows, "rnp_aa", "rnp", "f1"),
                    "aa_asr": _minus(rows, "rnp_aa", "rnp", "asr"),
                    "untrained_excess": stats.paired_difference(_col(rows, "rnp", "untrained_asr"),
                                                                _col(rows, "rnp", "untrained_flip_random"))},
    }
    plot = _plot_table(metrics)
    return RunOutput(metrics=metrics, tables={"plot": plot, "runs": rows}, figure=_figure(plot),
                     setup=_setup(params, rows), notes=_measured(metrics))


def _plot_table(metrics: dict) -> pd.DataFrame:
    out = []
    for i, m in enumerate(LABEL):
        for col in ("f1", "asr", "flip_random"):
            s = metrics["by_method"][m][col]
            scale = 1.0 if col == "f1" else 100.0
            out.append({"x": i, "y": s["mean"] * scale, "y_low": s["ci_low"] * scale, "y_high": s["ci_high"] * scale,
                        "series": col, "method": m})
    return pd.DataFrame(out)


def _figure(plot: pd.DataFrame):
    fig, ax = plt.subplots(figsize=(8, 4.4))
    names = {"f1": "rationale F1 (%)", "asr": "attack success rate (%)", "flip_random": "random-mask flip rate (%)"}
    for j, (series, g) in enumerate(plot.groupby("series", sort=False)):
        ax.bar(g["x"] + (j - 1) * 0.27, g["y"], width=0.27, label=names[series],
               yerr=[g["y"] - g["y_low"], g["y_high"] - g["y"]], capsize=3)
    ax.set_xticks(range(len(LABEL)), list(LABEL.values()), fontsize=8)
    ax.set(ylabel="% (mean over seeds, 95% CI)", ylim=(0, 100), title="A2I on synthetic reviews (test set)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _setup(p: Params, rows: pd.DataFrame) -> str:
    return (
        f"**Data.** Per seed, {p.n_train} training and {p.n_test} test reviews: four aspect sentences (look, "
        f"smell, taste, feel; templates such as 'the {{noun}} is {{adj}} .') at random places among neutral filler "
        f"sentences, {p.min_words}-{p.max_words} words; a sentence's adjective is the aspect's own (e.g. 'murky' / "
        f"'golden' for look) or, with probability {p.generic_share}, a generic one shared by all aspects "
        "('awful' / 'great'). The label is the sentiment of the target aspect (look), and its sentence, every "
        "WordPiece of it, is the ground-truth rationale; the other three sentiments are independent fair coins, so "
        "no token outside the rationale is correlated with the label. Tokens: MiniLM (all-MiniLM-L6-v2) WordPiece "
        f"pieces with its frozen 384-d input embeddings, projected on their {p.embed_dim} leading principal "
        "directions.\n\n"
        f"**Models** (official RNP_0908 / Adv_generator): generator = bi-GRU (hidden {p.hidden}) -> LayerNorm -> "
        f"dropout {p.dropout} -> 2-way linear, hard straight-through Gumbel-softmax mask (tau 1); predictor = bi-GRU "
        "over the selected embeddings, max-pool, dropout, linear. RNP: two encoders; FR: one shared encoder. "
        f"Adam lr {p.lr}, batch {p.batch_size}, {p.epochs} epochs; loss {p.cls_lambda} CE + {p.sparsity_lambda} "
        f"|sparsity - {p.sparsity}| + {p.continuity_lambda} continuity. **A2I** (official train_separate_two_head): "
        f"per minibatch, the generator + predictor step adds {p.adv_lambda} x {p.cls_lambda} x the "
        f"'{p.instruction}' instruction on the attacker's rationale, then the attacker (its own bi-GRU generator) "
        "takes a step, rationalizer frozen, toward the opposite label with the same sparsity and continuity terms. "
        "**Inspection**: after training, a fresh attacker is trained against each frozen predictor for "
        f"{p.attack_epochs} epochs; attack success rate = share of test reviews where the predictor outputs the "
        "opposite label on the attacker's rationale; the reference is random masks with the attacker's number of "
        "tokens per review. Test rationales are Gumbel samples without dropout (the official validation keeps "
        f"sampling). {p.seeds} seeds; RNP and A2I-RNP (and FR and A2I-FR) share their initialisation and noise "
        "stream, so each pair differs by the attack-and-instruction step alone (a unit test checks that A2I with "
        "adv_lambda = 0 trains the same weights). Intervals: 95% Student-t intervals over seeds, differences paired by seed."
    )


def _interval(s: dict, scale: float = 1.0, digits: int = 1) -> str:
    return f"{s['mean'] * scale:.{digits}f} [{s['ci_low'] * scale:.{digits}f}, {s['ci_high'] * scale:.{digits}f}]"


def _measured(metrics: dict) -> str:
    """The measured numbers behind the claims, for the notes (how to read them is in NOTES.md)."""
    bm = metrics["by_method"]
    table = ["| method | F1 | precision | recall | accuracy | sparsity | attack success | random flip | in target sentence | in other-aspect sentences |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for m, label in LABEL.items():
        b = bm[m]
        table.append(f"| {label} | {_interval(b['f1'])} | {b['precision']['mean']:.1f} | {b['recall']['mean']:.1f} | "
                     f"{_interval(b['accuracy'], 1, 3)} | {b['sparsity']['mean']:.3f} | {_interval(b['asr'], 100)} | "
                     f"{_interval(b['flip_random'], 100)} | {b['sel_target']['mean']:.2f} | "
                     f"{b['sel_other_same']['mean'] + b['sel_other_opposite']['mean']:.2f} |")
    g, a, c = metrics["gain"], metrics["attack"], metrics["control"]
    att = bm["rnp"]
    return (
        "\n".join(table) + "\n\n"
        f"**F1 gains** (points, paired): A2I-RNP - RNP {_interval(g['rnp'])}, A2I-FR - FR {_interval(g['fr'])}; A/A "
        f"control (RNP replicate - RNP) {_interval(c['aa_f1'])}. **Attack** (percentage points): A2I-RNP - RNP attack "
        f"success {_interval(a['a2i_minus_rnp'], 100)}, A2I-FR - FR {_interval(a['a2i_fr_minus_fr'], 100)}, A/A "
        f"{_interval(c['aa_asr'], 100)}; on RNP, attack success minus random masks {_interval(a['rnp_excess'], 100)}, "
        f"and for the untrained attacker {_interval(c['untrained_excess'], 100)}. Where the trained attacker's tokens "
        f"lie on RNP: target sentence {fmt(att['attack_sel_target']['mean'])}, other aspects with the label's "
        f"sentiment {fmt(att['attack_sel_other_same']['mean'])}, other aspects with the opposite sentiment "
        f"{fmt(att['attack_sel_other_opposite']['mean'])}, fillers {fmt(att['attack_sel_filler']['mean'])}."
    )

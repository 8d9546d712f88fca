"""A2I as a Prefect flow: RNP and FR rationalizers with and without the attack-and-instruction step on
synthetic multi-aspect reviews with exact ground-truth rationales; rationale F1, accuracy, and a fresh
attacker's success rate against every frozen predictor."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.a2i_rationale import method
from flows.a2i_rationale.params import SMOKE, Params
from tasks import stats
from tasks.contract import Claim, Control, Paper, RunContext, RunOutput, ci
from tasks.data import save_parquet
from tasks.paper import over_seeds, paper_flow

LABEL = {"rnp": "RNP", "a2i_rnp": "A2I-RNP", "fr": "FR", "a2i_fr": "A2I-FR", "rnp_aa": "RNP (A/A replicate)"}
COLUMNS = ("f1", "precision", "recall", "accuracy", "sparsity", "asr", "flip_random", "untrained_asr",
           "untrained_flip_random", "sel_target", "sel_other_same", "sel_other_opposite", "sel_filler",
           "attack_sel_target", "attack_sel_other_same", "attack_sel_other_opposite", "attack_sel_filler")
WHERE = ("on synthetic 4-aspect reviews whose label is the target aspect's sentiment, the other aspects' "
         "sentiments independent of it (a clean data set), bi-GRU generator and predictor")
LEARNS = ("rnp_learns_the_task", "a2i_rnp_learns_the_task")   # working-method gate of the A2I-RNP claims
AA = "RNP again with an independent initialisation and noise stream (A/A replicate) in A2I's place"

PAPER = Paper(
    slug="a2i_rationale",
    title="Adversarial Cooperative Rationalization: The Risk of Spurious Correlations in Even Clean Datasets",
    method="A2I: attack to inspection and instruction, on RNP and FR rationalizers",
    paper_class="B",
    source="abstracts-004.txt #1",
    official_code="jugechengzi/Rationalization-A2I (train_util.train_separate_two_head, model.RNP_0908 / Adv_generator)",
    claims=(
        Claim(id="a2i_rnp_f1_above_rnp",
              text=("we show that our method significantly outperforms recent rationalization methods -- token-level "
                    f"rationale F1 (test, vs the ground truth) of A2I-RNP minus RNP > 0, {WHERE}"),
              source="abstract; plan claim 1 (direction)", metric="gain.rnp.mean", comparison=">", threshold=0.0,
              kind="direction", role="claim", interval=ci("gain.rnp"),
              control=Control(name=AA, metric="control.aa_f1.mean", interval=ci("control.aa_f1")), requires=LEARNS),
        Claim(id="a2i_gain_3_points",
              text=("significantly outperforms -- the F1 gain of A2I over its base model is >= 3 points, on RNP (the "
                    "paper's main base, fixed in advance; FR's gain is reported in the notes, not judged), "
                    f"{WHERE}"),
              source="abstract; plan claim 2 (magnitude)", metric="gain.rnp.mean", comparison=">=", threshold=3.0,
              kind="magnitude", role="claim", interval=ci("gain.rnp"),
              control=Control(name=AA, metric="control.aa_f1.mean", interval=ci("control.aa_f1")), requires=LEARNS),
        Claim(id="attack_lower_after_instruction",
              text=("we further introduce an instruction to prevent the predictor from learning the correlations -- "
                    "a freshly trained attacker's success rate (predictor outputs the opposite label on its "
                    f"rationale, test) on the A2I-RNP predictor minus on the RNP predictor < 0, {WHERE}"),
              source="abstract; plan claim 3 (direction, the mechanism)", metric="attack.a2i_minus_rnp.mean",
              comparison="<", threshold=0.0, kind="direction", role="claim", interval=ci("attack.a2i_minus_rnp"),
              control=Control(name=f"{AA}: its attack success rate minus RNP's", metric="control.aa_asr.mean",
                              interval=ci("control.aa_asr")), requires=LEARNS),
        Claim(id="attack_inspects_bias_in_rnp",
              text=("such a cooperative game could unintentionally introduce a sampling bias ... Our findings suggest "
                    "a direction for inspecting these correlations through attacks -- the attacker flips the RNP "
                    "predictor on >= 20 pp more test reviews than random rationales with the same number of tokens "
                    f"per review, {WHERE}"),
              source="abstract; plan claim 3 (magnitude)", metric="attack.rnp_excess.mean", comparison=">",
              threshold=0.20, kind="magnitude", role="claim", interval=ci("attack.rnp_excess"),
              control=Control(name="the same attacker before any training step (its excess over random masks of its own size)",
                              metric="control.untrained_excess.mean", interval=ci("control.untrained_excess")),
              requires=("rnp_learns_the_task",)),
        # 0.9 as set for RNP before any claim run (the A2I-RNP twin added, same figure, before the rerun);
        # every_instance: one seed whose model did not learn the task (a collapse)
        # fails the check, and with it the gate of every claim that compares this model
        *(Claim(id=f"{m}_learns_the_task",
                text=(f"our {LABEL[m]} reaches test accuracy >= 0.9 on its own rationales on every seed (the model "
                      "learns the task; working-method gate)"),
                source="implementation check", metric=f"by_method.{m}.accuracy.mean", comparison=">=", threshold=0.9,
                kind="magnitude", role="sanity", interval=ci(f"by_method.{m}.accuracy"),
                per_seed=f"accuracy_per_seed.{m}", every_instance=True)
          for m in ("rnp", "a2i_rnp")),
    ),
    limitations=(
        "Text only, bi-GRU only: the BERT and GCN results, the six real text data sets (BeerAdvocate, HotelReview "
        "with human rationales) and the two graph data sets, and the comparison with Llama-3.1-8B are not run. "
        "The data are procedural reviews where the rationale is one sentence; the scale is far below the "
        "paper's (1,000 training reviews of 24-32 words, 15 epochs, against tens of thousands of reviews and "
        "hundreds of epochs), so the sampling bias the paper analyses may need longer training than here to "
        "appear. The MiniLM input embeddings (PCA to 64 dimensions) stand in for GloVe. The 3-point claim is judged "
        "on RNP alone, the paper's main base, fixed before the rerun (it used to take the better of RNP and FR "
        "after seeing both, a choice made with the results)."
    ),
)


def _col(rows: pd.DataFrame, m: str, col: str) -> np.ndarray:
    return rows[rows["method"] == m].sort_values("seed")[col].to_numpy(dtype=float)


@paper_flow(PAPER, Params, smoke=SMOKE)
def a2i_rationale_flow(params: Params, ctx: RunContext) -> RunOutput:
    method.wordpiece_vocabulary()                     # load MiniLM once, before the seed threads
    method.wordpiece_vocabulary(params.embed_dim)
    rows = pd.DataFrame([r for seed_rows in over_seeds(method.run_seed, ctx.seeds, p=params) for r in seed_rows])
    save_parquet(rows, ctx.data_dir / "per_seed.parquet")
    gains = {b: stats.paired_difference(_col(rows, f"a2i_{b}", "f1"), _col(rows, b, "f1")) for b in ("rnp", "fr")}
    metrics = {
        "by_method": stats.summarize_by(rows, "method", list(COLUMNS)),
        "gain": gains,
        "accuracy_per_seed": {m: _col(rows, m, "accuracy").tolist() for m in ("rnp", "a2i_rnp")},
        "attack": {"a2i_minus_rnp": stats.paired_difference(_col(rows, "a2i_rnp", "asr"), _col(rows, "rnp", "asr")),
                   "a2i_fr_minus_fr": stats.paired_difference(_col(rows, "a2i_fr", "asr"), _col(rows, "fr", "asr")),
                   "rnp_excess": stats.paired_difference(_col(rows, "rnp", "asr"), _col(rows, "rnp", "flip_random"))},
        "control": {"aa_f1": stats.paired_difference(_col(rows, "rnp_aa", "f1"), _col(rows, "rnp", "f1")),
                    "aa_asr": stats.paired_difference(_col(rows, "rnp_aa", "asr"), _col(rows, "rnp", "asr")),
                    "untrained_excess": stats.paired_difference(_col(rows, "rnp", "untrained_asr"),
                                                                _col(rows, "rnp", "untrained_flip_random"))},
    }
    plot = _plot_table(metrics)
    return RunOutput(metrics=metrics, tables={"plot": plot, "runs": rows}, figure=_figure(plot),
                     setup=_setup(params, rows), notes=_notes(metrics))


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
        "adv_lambda = 0 trains the same weights). Intervals: paired bootstrap over seeds."
    )


def _fmt(s: dict, scale: float = 1.0, digits: int = 1) -> str:
    return f"{s['mean'] * scale:.{digits}f} [{s['ci_low'] * scale:.{digits}f}, {s['ci_high'] * scale:.{digits}f}]"


def _notes(metrics: dict) -> str:
    bm = metrics["by_method"]
    table = ["| method | F1 | precision | recall | accuracy | sparsity | attack success | random flip | in target sentence | in other-aspect sentences |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for m, label in LABEL.items():
        b = bm[m]
        table.append(f"| {label} | {_fmt(b['f1'])} | {b['precision']['mean']:.1f} | {b['recall']['mean']:.1f} | "
                     f"{_fmt(b['accuracy'], 1, 3)} | {b['sparsity']['mean']:.3f} | {_fmt(b['asr'], 100)} | "
                     f"{_fmt(b['flip_random'], 100)} | {b['sel_target']['mean']:.2f} | "
                     f"{b['sel_other_same']['mean'] + b['sel_other_opposite']['mean']:.2f} |")
    g, a, c = metrics["gain"], metrics["attack"], metrics["control"]
    att = bm["rnp"]
    return (
        "\n".join(table) + "\n\n"
        f"**F1 gains** (points, paired): A2I-RNP - RNP {_fmt(g['rnp'])}, A2I-FR - FR {_fmt(g['fr'])}; A/A control "
        f"(RNP replicate - RNP) {_fmt(c['aa_f1'])}. **Attack** (percentage points): A2I-RNP - RNP attack success "
        f"{_fmt(a['a2i_minus_rnp'], 100)}, A2I-FR - FR {_fmt(a['a2i_fr_minus_fr'], 100)}, A/A {_fmt(c['aa_asr'], 100)}; "
        f"on RNP, attack success minus random masks {_fmt(a['rnp_excess'], 100)}, and for the untrained attacker "
        f"{_fmt(c['untrained_excess'], 100)}. Where the trained attacker's tokens lie on RNP: target sentence "
        f"{att['attack_sel_target']['mean']:.2f}, other aspects with the label's sentiment "
        f"{att['attack_sel_other_same']['mean']:.2f}, other aspects with the opposite sentiment "
        f"{att['attack_sel_other_opposite']['mean']:.2f}, fillers {att['attack_sel_filler']['mean']:.2f}. "
        "An attack that flips the predictor by selecting other aspects' opposite-sentiment words shows that the "
        "predictor reads sentiment words regardless of the aspect (which the cooperative game never asked it to "
        "avoid), not necessarily a label correlation created by the generator's sampling.\n\n"
        "**Deviations from the plan and the official code** (decided on a development seed, 100, looking at RNP's "
        "accuracy and F1 only, before any claim run): reviews of 24-32 words instead of 40-60, 1,000 training "
        "reviews instead of 3,000, hidden 64 and a 64-d PCA of the embeddings, for the CPU budget; sparsity weight 1 "
        "instead of the official 12 (with 12, RNP's selection stayed random and its accuracy near 0.57 after 15 "
        "epochs); lr 3e-3 (official 1e-4, for hundreds of epochs); the 'uniform' instruction of the plan (the "
        "official default is the hinge variant, also implemented); padding is excluded from the sparsity and "
        "continuity terms; the random reference masks place tokens uniformly, not in spans."
    )

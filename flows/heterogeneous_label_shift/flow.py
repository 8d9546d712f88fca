"""Heterogeneous Label Shift as a Prefect flow: HLSAN (reconstructed) against domain-adversarial HDA
without label-shift weighting, post-hoc BBSE, no alignment and target-only, on two synthetic
modalities of the digits under Dirichlet target priors (plus a no-shift setting as the control)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy.stats import binomtest

from flows.heterogeneous_label_shift import method
from flows.heterogeneous_label_shift.params import SMOKE, Params
from tasks import stats
from tasks.contract import Claim, Control, Paper, RunContext, RunOutput, ci
from tasks.data import save_parquet
from tasks.paper import over_seeds, paper_flow

LABEL = {"target_only": "target-only (logistic regression, labelled target)",
         "no_align": "source + labelled target, no alignment",
         "hda_adv": "HDA adversarial, w = 1", "hda_adv_bbse": "HDA adversarial + post-hoc BBSE",
         "hlsan": "HLSAN (BBSE w)", "hlsan_oracle": "HLSAN, true w (reference)",
         "hda_adv_rerun": "HDA adversarial, w = 1, other init (A/A control)",
         "hlsan_permuted": "HLSAN on permuted source labels (control)"}
WHERE = ("on the digits' two synthetic modalities (source: 64 pixels; target: ink profiles + projected DCT "
         "+ noise, 40 dims), 3 labelled target samples per class")
EVAL_SEED_OFFSET = 1000
"""Evaluation seed = run seed + this; the development runs used seeds 0 and 100 (decided before the rerun)."""


def _weaker_step(gain: dict[str, np.ndarray]) -> dict:
    """The rise of a per-seed gain from mild to moderate and from moderate to severe shift, paired over seeds:
    the step with the lower interval bound (strictly above 0 only if both steps are)."""
    steps = {f"{a}_to_{b}": stats.paired_difference(gain[b], gain[a])
             for a, b in (("mild", "moderate"), ("moderate", "severe"))}
    name = min(steps, key=lambda k: steps[k]["ci_low"])
    return {**steps[name], "step": name, "steps": {k: v["mean"] for k, v in steps.items()}}


PAPER = Paper(
    slug="heterogeneous_label_shift",
    title="Heterogeneous Label Shift: Theory and Algorithm",
    method="HLSAN (Heterogeneous Label Shift Adversarial Network), reconstructed from the abstract: BBSE "
           "label-shift weights + w-weighted source risk + class-conditional and w-weighted adversarial alignment",
    paper_class="B",
    source="abstracts-000.txt #3",
    official_code=None,
    claims=(
        Claim(id="label_shift_gain_severe",
              text=("we propose a bound minimization HLS framework that decouples and tackles feature heterogeneity "
                    "and label shift accordingly: under severe label shift (target prior ~ Dirichlet(0.3)) mean "
                    f"target accuracy(HLSAN) - accuracy(the same adversarial HDA with w = 1) >= 2 pp {WHERE}"),
              source="abstract; plan claim check 1 (magnitude)", metric="gain.severe.mean",
              comparison=">=", threshold=0.02, kind="magnitude", role="claim",
              interval=ci("gain.severe"),
              # with no label shift the weights are ~1 and there is nothing to correct
              control=Control(name="the same gain with no label shift (uniform target prior)",
                              metric="gain.uniform.mean", interval=ci("gain.uniform")),
              requires=("hda_baseline_works",)),
        Claim(id="gain_grows_with_shift",
              text=("This heterogeneity inherently induces label shift ... the label-shift correction matters more "
                    "as the shift grows: gain(HLSAN - HDA w = 1) rises at each step Dirichlet(10) -> Dirichlet(1) -> "
                    "Dirichlet(0.3), each step's rise paired over seeds > 0; the value is the step with the lower "
                    "interval bound, so the claim holds only if both steps do (severe minus mild alone would "
                    "repeat label_shift_gain_severe, the mild gain being ~0)"),
              source="abstract; plan claim check 2 (direction)", metric="shift_dependence.mean",
              comparison=">", threshold=0.0, kind="direction", role="claim",
              interval=ci("shift_dependence"),
              # an A/A pair (w = 1 from another init) in HLSAN's place: no correction, so no growth with shift
              control=Control(name="A/A: HDA w = 1 from another initialisation in HLSAN's place (same weaker step)",
                              metric="control.aa_shift_dependence.mean", interval=ci("control.aa_shift_dependence")),
              requires=("hda_baseline_works",)),
        Claim(id="transfer_beats_target_only",
              text=("cross-modal knowledge transfer ... Extensive experiments on various benchmarks for cross-modal "
                    "classification validate the effectiveness: at Dirichlet(1), mean target accuracy(HLSAN) - "
                    f"accuracy(target-only) >= 5 pp {WHERE}"),
              source="abstract; plan claim check 3 (magnitude)", metric="transfer.moderate.mean",
              comparison=">=", threshold=0.05, kind="magnitude", role="claim",
              interval=ci("transfer.moderate"),
              # a source with permuted labels carries no label information to transfer
              control=Control(name="HLSAN trained on permuted source labels - target-only",
                              metric="control.permuted_transfer.mean", interval=ci("control.permuted_transfer"))),
        Claim(id="bbse_weights_beat_no_correction",
              text=("the error in estimating w (a term of the bound): under Dirichlet(0.3), mean ||w_hat - w||_2 of "
                    "HLSAN's final BBSE weights / mean ||1 - w||_2 (no correction) < 1"),
              source="plan (BBSE); issue: report estimated against true label-shift weights",
              metric="weights.severe.hlsan_over_uniform.ratio", comparison="<", threshold=1.0,
              kind="direction", role="sanity", interval=ci("weights.severe.hlsan_over_uniform")),
        Claim(id="hda_baseline_works",
              text=("working-method gate of the claims against HDA (w = 1): under Dirichlet(0.3) its target accuracy "
                    "minus target-only's > -5 pp (the transfer claim's margin; fixed before any rerun). A transfer "
                    "method that loses more than that to ignoring the source altogether has collapsed, and a gain "
                    "over it measures the collapse, not the label-shift correction"),
              source="ours (implementation check)", metric="baseline_vs_target_only.severe.mean", comparison=">",
              threshold=-0.05, kind="magnitude", role="sanity", interval=ci("baseline_vs_target_only.severe")),
    ),
    limitations=(
        "HLSAN is reconstructed from the abstract and the plan (no official code, the paper's Algorithm 1 and "
        "its error-decomposition theorem were not available): modality projectors + shared classifier, BBSE "
        "weights from the source-validation confusion matrix, w-weighted source cross-entropy, a class-conditional "
        "centroid discrepancy and a w-weighted gradient-reversal discriminator. The paper's benchmarks (Multilingual "
        "Reuters, Wikipedia image-text) are not used: both modalities are synthetic encodings of scikit-learn's 8x8 "
        "digits (source pixels; target ink profiles + randomly projected DCT + noise), so the results say nothing "
        "about real text/image modalities. Target sets are drawn with replacement from about 43 images per class "
        "(per-draw noise makes duplicates differ). BBSE's confusion matrix comes from the *source* classifier, "
        "whose accuracy is higher than the target's, so it is biased in this heterogeneous setting; no other "
        "label-shift estimator (EM/MLLS, RLLS) is run. The plan's second synthetic task (make_classification "
        "through two random MLP encoders) is not run."
    ),
)


def _by(rows: pd.DataFrame, setting: str, m: str, col: str = "acc") -> np.ndarray:
    sel = rows[(rows["setting"] == setting) & (rows["method"] == m)].sort_values("seed")
    return sel[col].to_numpy(dtype=float)


def _figure(rows: pd.DataFrame, params: Params):
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.3))
    ax = axes[0]
    x_of = {s: 0.0 if np.isinf(method.setting_alpha(params, s)) else 1.0 / method.setting_alpha(params, s)
            for s in method.SETTINGS}
    plot = []
    for m in ("target_only", "no_align", "hda_adv", "hda_adv_bbse", "hlsan", "hlsan_oracle"):
        xs = [x_of[s] for s in method.SETTINGS]
        ys = [float(_by(rows, s, m).mean()) for s in method.SETTINGS]
        ax.plot(xs, ys, "o-", label=LABEL[m])
        plot += [{"x": x, "y": y, "series": m} for x, y in zip(xs, ys)]
    ax.set(xscale="symlog", xlabel="label shift 1/alpha (0 = uniform target prior)", ylabel="target test accuracy",
           title="A. Target accuracy vs label shift (mean over seeds)")
    ax.legend(fontsize=7)
    ax = axes[1]
    for s, marker in (("moderate", "o"), ("severe", "s")):
        sel = rows[(rows["setting"] == s) & (rows["method"] == "hlsan")]
        w_true = np.concatenate(sel["w_true"].map(np.asarray).to_list())
        w_hat = np.concatenate(sel["w_hat"].map(np.asarray).to_list())
        ax.scatter(w_true, w_hat, s=10, marker=marker, alpha=0.6, label=f"HLSAN, alpha = {method.setting_alpha(params, s):g}")
    top = float(max(1.0, ax.get_xlim()[1], ax.get_ylim()[1]))
    ax.plot([0, top], [0, top], "k--", lw=1, label="w_hat = w")
    ax.set(xlabel="true w(y) = p_T(y) / p_S(y)", ylabel="BBSE estimate w_hat(y)", title="B. Estimated vs true weights")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig, pd.DataFrame(plot)


def _fmt(s: dict) -> str:
    return f"{s['mean']:+.3f} [{s['ci_low']:+.3f}, {s['ci_high']:+.3f}]"


@paper_flow(PAPER, Params, smoke=SMOKE)
def heterogeneous_label_shift_flow(params: Params, ctx: RunContext) -> RunOutput:
    # seed 0 served in development (see the notes): the evaluation seeds are moved past every development seed
    per_seed = over_seeds(method.run_seed, [s + EVAL_SEED_OFFSET for s in ctx.seeds], p=params)
    rows = pd.DataFrame([r for seed_rows in per_seed for r in seed_rows])
    save_parquet(rows, ctx.data_dir / "per_seed.parquet")

    methods = [m for m in LABEL if m in set(rows["method"])]
    accuracy = {s: {m: stats.summarize(_by(rows, s, m)) for m in methods if len(_by(rows, s, m))}
                for s in method.SETTINGS}
    gains = {s: _by(rows, s, "hlsan") - _by(rows, s, "hda_adv") for s in method.SETTINGS}
    gain = {s: stats.paired_difference(_by(rows, s, "hlsan"), _by(rows, s, "hda_adv")) for s in method.SETTINGS}
    for s in method.SETTINGS:
        positive = int((gains[s] > 0).sum())
        nonzero = int((gains[s] != 0).sum())
        gain[s]["sign_test_p"] = float(binomtest(positive, nonzero).pvalue) if nonzero else float("nan")
    aa = {s: _by(rows, s, "hda_adv_rerun") - _by(rows, s, "hda_adv") for s in ("mild", "moderate", "severe")}
    transfer = {s: stats.paired_difference(_by(rows, s, "hlsan"), _by(rows, s, "target_only")) for s in method.SETTINGS}
    weights = {}
    for s in method.SETTINGS:
        uniform_err = _by(rows, s, "hlsan", "w_err_uniform")
        weights[s] = {"no_correction": stats.summarize(uniform_err),
                      **{m: stats.summarize(_by(rows, s, m, "w_err")) for m in ("hlsan", "hda_adv_bbse")},
                      "hlsan_over_uniform": stats.ratio_of_means(_by(rows, s, "hlsan", "w_err"), uniform_err),
                      "bbse_post_hoc_over_uniform": stats.ratio_of_means(_by(rows, s, "hda_adv_bbse", "w_err"), uniform_err),
                      "largest_target_prior": float(_by(rows, s, "hlsan", "prior_max").mean())}
    metrics = {
        "accuracy": accuracy, "gain": gain, "transfer": transfer, "weights": weights,
        "shift_dependence": _weaker_step(gains),
        "baseline_vs_target_only": {s: stats.paired_difference(_by(rows, s, "hda_adv"), _by(rows, s, "target_only"))
                                    for s in method.SETTINGS},
        "control": {"aa_shift_dependence": _weaker_step(aa),
                    "aa_gain": {s: stats.summarize(v) for s, v in aa.items()},
                    "permuted_transfer": stats.paired_difference(_by(rows, "moderate", "hlsan_permuted"),
                                                                 _by(rows, "moderate", "target_only"))},
        "oracle_gain": {s: stats.paired_difference(_by(rows, s, "hlsan_oracle"), _by(rows, s, "hda_adv"))
                        for s in method.SETTINGS},
    }
    figure, plot = _figure(rows, params)

    alphas = ", ".join(f"{s} ({'uniform' if np.isinf(method.setting_alpha(params, s)) else 'Dirichlet(%g)' % method.setting_alpha(params, s)})"
                       for s in method.SETTINGS)
    setup = (
        f"**Data** ({params.seeds} seeds; per seed a fresh split, encoding and target priors). scikit-learn's digits "
        "split in halves (stratified). Source modality: the 64 standardised pixels of one half "
        f"({1 - params.source_val_frac:.0%} for training, {params.source_val_frac:.0%} held out for BBSE's confusion "
        "matrix), label distribution nearly uniform. Target modality: the other half as row + column ink profiles "
        f"(16) and a random orthogonal projection of the 2-D DCT ({params.dct_dims}), standardised, plus N(0, "
        f"{params.target_noise:g}^2) noise per draw. {params.shots} labelled target samples per class; "
        f"{params.n_target_unlabelled} unlabelled and {params.n_target_test} test target samples drawn with the target "
        f"prior of each setting: {alphas}; unlabelled and test draws come from disjoint image pools.\n\n"
        f"**Methods.** Projectors g_S, g_T ({params.hidden}-unit hidden layer, ReLU latent of {params.latent}), shared "
        f"linear classifier, discriminator ({params.hidden} hidden). Every network method of a seed starts from the same "
        f"weights and takes {params.steps} full-batch Adam steps (lr {params.lr:g}, weight decay {params.weight_decay:g}); "
        f"the aligned ones train {params.warmup} steps on the cross-entropies alone, then add the class-conditional "
        f"centroid discrepancy (weight {params.cond_weight:g}, soft target labels) and the gradient-reversal domain loss "
        f"(weight {params.adv_weight:g}, DANN schedule). HLSAN estimates w by BBSE at step {params.warmup} and every "
        f"{params.reestimate_every} steps after, and weights the source cross-entropy and the discriminator's source side "
        "by w(y). " + "; ".join(f"`{m}`: {LABEL[m]}" for m in methods) + "."
    )
    acc_lines = "\n".join(
        f"| {s} | " + " | ".join(f"{accuracy[s][m]['mean']:.3f}" if m in accuracy[s] else "" for m in methods) + " |"
        for s in method.SETTINGS)
    header = "| setting | " + " | ".join(methods) + " |\n|" + "---|" * (len(methods) + 1)
    w = weights
    notes = (
        "**Target test accuracy** (mean over seeds):\n\n" + header + "\n" + acc_lines + "\n\n"
        "**HLSAN - HDA (w = 1)**, paired over seeds: "
        + "; ".join(f"{s}: {_fmt(gain[s])} (sign test p = {gain[s]['sign_test_p']:.3g})" for s in method.SETTINGS)
        + f". Growth with shift, the weaker step ({metrics['shift_dependence']['step']}): "
        f"{_fmt(metrics['shift_dependence'])} (both steps: {metrics['shift_dependence']['steps']}); A/A control "
        f"({metrics['control']['aa_shift_dependence']['step']}): {_fmt(metrics['control']['aa_shift_dependence'])}. "
        "HDA (w = 1) - target-only, the working-method gate: "
        + "; ".join(f"{s} {_fmt(metrics['baseline_vs_target_only'][s])}" for s in method.SETTINGS) + ". With the true weights (reference): "
        + "; ".join(f"{s} {_fmt(metrics['oracle_gain'][s])}" for s in method.SETTINGS) + ".\n\n"
        "**What the gain is made of.** Under shift the w = 1 adversarial model falls below the models that do not "
        "align at all (severe: HDA w = 1 " + f"{accuracy['severe']['hda_adv']['mean']:.3f}, no alignment "
        f"{accuracy['severe']['no_align']['mean']:.3f}, target-only {accuracy['severe']['target_only']['mean']:.3f}, "
        f"HLSAN {accuracy['severe']['hlsan']['mean']:.3f}, HLSAN with the true w {accuracy['severe']['hlsan_oracle']['mean']:.3f}): "
        "most of HLSAN's gain over HDA is the harm of unweighted alignment under label shift that the weights avoid, "
        "which is the paper's motivation, not a gain over every baseline. HLSAN - best of (target-only, no alignment), "
        "means over seeds: " + "; ".join(
            f"{s} {accuracy[s]['hlsan']['mean'] - max(accuracy[s]['target_only']['mean'], accuracy[s]['no_align']['mean']):+.3f}"
            for s in method.SETTINGS) + ". The BBSE estimate is the bottleneck: the true weights give the gains "
        "listed above as the reference.\n\n"
        "**HLSAN - target-only**: " + "; ".join(f"{s} {_fmt(transfer[s])}" for s in method.SETTINGS)
        + f"; the permuted-source control at the moderate setting: {_fmt(metrics['control']['permuted_transfer'])}.\n\n"
        "**Estimated vs true weights** (||w_hat - w||_2, mean over seeds; no correction = ||1 - w||_2): "
        + "; ".join(f"{s}: HLSAN {w[s]['hlsan']['mean']:.2f}, post-hoc BBSE on HDA {w[s]['hda_adv_bbse']['mean']:.2f}, "
                    f"no correction {w[s]['no_correction']['mean']:.2f}" for s in method.SETTINGS)
        + ". BBSE takes its confusion matrix from the source classifier h(g_S(x)); in a heterogeneous setting the "
        "target classifier h(g_T(x)) is less accurate, so the confusion matrices differ and the estimate is biased "
        "towards the source prior (panel B).\n\n"
        "**Development.** Three one-seed development runs fixed the method before this run: seed 0 (an evaluation "
        "seed) with the first design (alignment from step 0, adversarial term only), where every transfer method "
        "stayed below target-only, then seed 100 (not an evaluation seed) for the two changes: (1) with alignment from step 0 the w = 1 adversarial model pulled target samples "
        "onto wrong classes under shift, so BBSE, which reads that model's target predictions, returned weights no "
        "closer to the truth than w = 1; all aligned methods now start aligning after the warm-up (w = 1 and oracle "
        "share the schedule, so only w differs); (2) the class-conditional centroid term was added, after the plan's "
        "bound (importance-weighted risk + class-conditional discrepancy + weight error), because the purely "
        "adversarial model stayed below target-only even with the true weights. The thresholds are the plan's and did "
        f"not change. **Changes decided before the rerun:** the evaluation seeds are the run's seeds + "
        f"{EVAL_SEED_OFFSET} (seed 0, a development seed, had been among them); `gain_grows_with_shift` now needs "
        "both steps of growth (mild -> moderate -> severe) instead of severe - mild, which with a mild gain of "
        "~0 repeated `label_shift_gain_severe`; the A/A pair also runs at the moderate setting for it; and both "
        "gain claims require the HDA baseline not to have collapsed below target-only (`hda_baseline_works`)."
    )
    return RunOutput(metrics=metrics, tables={"plot": plot}, figure=figure, setup=setup, notes=notes)

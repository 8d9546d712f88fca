"""Heterogeneous Label Shift, the evaluation: accuracies, the paired gains of HLSAN over HDA (w = 1) and over
target-only per setting, their growth with the shift, the weight errors, the controls, the figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy.stats import binomtest

from flows.heterogeneous_label_shift import method
from flows.heterogeneous_label_shift.params import Params
from paperflows.core import estimates as est
from paperflows.core import stats
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records

LABEL = {"target_only": "target-only (logistic regression, labelled target)",
         "no_align": "source + labelled target, no alignment",
         "hda_adv": "HDA adversarial, w = 1", "hda_adv_bbse": "HDA adversarial + post-hoc BBSE",
         "hlsan": "HLSAN (BBSE w)", "hlsan_oracle": "HLSAN, true w (reference)",
         "hda_adv_rerun": "HDA adversarial, w = 1, other init (A/A control)",
         "hlsan_permuted": "HLSAN on permuted source labels (control)"}


def _weaker_step(gain: dict[str, np.ndarray]) -> dict:
    """The rise of a per-seed gain from mild to moderate and from moderate to severe shift, paired over seeds:
    the step with the lower interval bound (strictly above 0 only if both steps are)."""
    steps = {f"{a}_to_{b}": stats.paired_difference(gain[b], gain[a])
             for a, b in (("mild", "moderate"), ("moderate", "severe"))}
    name = min(steps, key=lambda k: steps[k]["ci_low"])
    return {**steps[name], "step": name, "steps": {k: v["mean"] for k, v in steps.items()}}


def _arm(setting: str, m: str) -> dict:
    return {"setting": setting, "method": m}


def _by(rows: pd.DataFrame, setting: str, m: str, col: str = "acc") -> np.ndarray:
    return est.per_seed(rows, col, **_arm(setting, m))


def _has(rows: pd.DataFrame, setting: str, m: str) -> bool:
    """Whether ``m`` ran at ``setting`` (the controls run at some settings only)."""
    return bool(((rows["setting"] == setting) & (rows["method"] == m)).any())


def evaluate(params: Params, records: Records) -> RunOutput:
    rows = records["per_seed"]
    acc_diff = lambda s, a, b: est.paired(rows, "acc", _arm(s, a), _arm(s, b))
    methods = [m for m in LABEL if m in set(rows["method"])]
    accuracy = {s: {m: est.summary(rows, "acc", **_arm(s, m)) for m in methods if _has(rows, s, m)}
                for s in method.SETTINGS}
    gains = {s: _by(rows, s, "hlsan") - _by(rows, s, "hda_adv") for s in method.SETTINGS}
    gain = {s: acc_diff(s, "hlsan", "hda_adv") for s in method.SETTINGS}
    for s in method.SETTINGS:
        positive = int((gains[s] > 0).sum())
        nonzero = int((gains[s] != 0).sum())
        gain[s]["sign_test_p"] = float(binomtest(positive, nonzero).pvalue) if nonzero else float("nan")
    aa = {s: _by(rows, s, "hda_adv_rerun") - _by(rows, s, "hda_adv") for s in ("mild", "moderate", "severe")}
    transfer = {s: acc_diff(s, "hlsan", "target_only") for s in method.SETTINGS}
    weights = {}
    for s in method.SETTINGS:
        uniform_err = _by(rows, s, "hlsan", "w_err_uniform")     # ||1 - w||, recorded on HLSAN's rows
        weights[s] = {"no_correction": stats.summarize(uniform_err),
                      **{m: est.summary(rows, "w_err", **_arm(s, m)) for m in ("hlsan", "hda_adv_bbse")},
                      "hlsan_over_uniform": stats.ratio_of_means(_by(rows, s, "hlsan", "w_err"), uniform_err),
                      "bbse_post_hoc_over_uniform": stats.ratio_of_means(_by(rows, s, "hda_adv_bbse", "w_err"),
                                                                         uniform_err),
                      "largest_target_prior": float(_by(rows, s, "hlsan", "prior_max").mean())}
    metrics = {
        "accuracy": accuracy, "gain": gain, "transfer": transfer, "weights": weights,
        "shift_dependence": _weaker_step(gains),
        "baseline_vs_target_only": {s: acc_diff(s, "hda_adv", "target_only") for s in method.SETTINGS},
        "control": {"aa_shift_dependence": _weaker_step(aa),
                    "aa_gain": {s: stats.summarize(v) for s, v in aa.items()},
                    "permuted_transfer": acc_diff("moderate", "hlsan_permuted", "target_only")},
        "oracle_gain": {s: acc_diff(s, "hlsan_oracle", "hda_adv") for s in method.SETTINGS},
    }
    figure, plot = _figure(rows, params)
    return RunOutput(metrics=metrics, tables={"plot": plot}, figure=figure, setup=_setup(params, methods),
                     notes=_measured(metrics, methods))


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



def _pp(s: dict) -> str:
    return f"{s['mean']:+.3f} [{s['ci_low']:+.3f}, {s['ci_high']:+.3f}]"


def _setup(params: Params, methods: list[str]) -> str:
    alphas = ", ".join(f"{s} ({'uniform' if np.isinf(method.setting_alpha(params, s)) else 'Dirichlet(%g)' % method.setting_alpha(params, s)})"
                       for s in method.SETTINGS)
    return (
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


def _measured(metrics: dict, methods: list[str]) -> str:
    """The measured numbers behind the claims, for the notes (how to read them is in NOTES.md)."""
    accuracy, gain, transfer, w = metrics["accuracy"], metrics["gain"], metrics["transfer"], metrics["weights"]
    acc_lines = "\n".join(
        f"| {s} | " + " | ".join(f"{accuracy[s][m]['mean']:.3f}" if m in accuracy[s] else "" for m in methods) + " |"
        for s in method.SETTINGS)
    header = "| setting | " + " | ".join(methods) + " |\n|" + "---|" * (len(methods) + 1)
    return (
        "**Target test accuracy** (mean over seeds):\n\n" + header + "\n" + acc_lines + "\n\n"
        "**HLSAN - HDA (w = 1)**, paired over seeds: "
        + "; ".join(f"{s}: {_pp(gain[s])} (sign test p = {gain[s]['sign_test_p']:.3g})" for s in method.SETTINGS)
        + f". Growth with shift, the weaker step ({metrics['shift_dependence']['step']}): "
        f"{_pp(metrics['shift_dependence'])} (both steps: {metrics['shift_dependence']['steps']}); A/A control "
        f"({metrics['control']['aa_shift_dependence']['step']}): {_pp(metrics['control']['aa_shift_dependence'])}. "
        "HDA (w = 1) - target-only, the working-method gate: "
        + "; ".join(f"{s} {_pp(metrics['baseline_vs_target_only'][s])}" for s in method.SETTINGS)
        + ". HLSAN with the true weights - HDA (w = 1), the reference: "
        + "; ".join(f"{s} {_pp(metrics['oracle_gain'][s])}" for s in method.SETTINGS) + ". HLSAN - best of "
        "(target-only, no alignment), means over seeds: " + "; ".join(
            f"{s} {accuracy[s]['hlsan']['mean'] - max(accuracy[s]['target_only']['mean'], accuracy[s]['no_align']['mean']):+.3f}"
            for s in method.SETTINGS) + ".\n\n"
        "**HLSAN - target-only**: " + "; ".join(f"{s} {_pp(transfer[s])}" for s in method.SETTINGS)
        + f"; the permuted-source control at the moderate setting: {_pp(metrics['control']['permuted_transfer'])}.\n\n"
        "**Estimated vs true weights** (||w_hat - w||_2, mean over seeds; no correction = ||1 - w||_2): "
        + "; ".join(f"{s}: HLSAN {w[s]['hlsan']['mean']:.2f}, post-hoc BBSE on HDA {w[s]['hda_adv_bbse']['mean']:.2f}, "
                    f"no correction {w[s]['no_correction']['mean']:.2f}" for s in method.SETTINGS) + "."
    )

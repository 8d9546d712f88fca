"""CLIMB's multitask-pretraining study, the evaluation: target AUC gains (seeds paired), few-shot gains per k,
fusion AUCs and the Spearman correlations, the figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.climb_multitask import method
from flows.climb_multitask.params import Params
from paperflows.core import estimates as est
from paperflows.core import stats
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records
from paperflows.core.report import fmt


def evaluate(params: Params, records: Records) -> RunOutput:
    scores = records["scores"]
    metrics = _summaries(scores)
    per_seed = _per_seed_table(scores)
    plot = pd.DataFrame(
        [{"x": f"{modality} target", "y": s["mean"], "series": m}
         for modality in ("ecg", "ultrasound") for m, s in metrics[modality]["target_auc"].items()]
        + [{"x": f"few-shot {k}", "y": s["mean"], "series": {"random_init": "single_task"}.get(m, m)}
           for k, by in metrics["ecg"]["few_shot_auc"].items() for m, s in by.items()])
    return RunOutput(metrics=metrics, tables={"plot": plot, "per_seed": per_seed}, figure=_figure(metrics),
                     setup=_setup(params), notes=_notes(metrics))


def _names(scores: pd.DataFrame, column: str, **where: str) -> list[str]:
    """The values of ``column`` among the rows matching ``where``, in record order."""
    rows = scores
    for key, value in where.items():
        rows = rows[rows[key] == value]
    return list(dict.fromkeys(rows[column]))


def _summaries(scores: pd.DataFrame) -> dict:
    def sel(modality: str, quantity: str, setting: str = "", arm: str = "") -> dict[str, str]:
        return {"modality": modality, "quantity": quantity, "setting": setting, "arm": arm}

    def col(*selection: str) -> np.ndarray:
        return est.per_seed(scores, "value", **sel(*selection))

    def diff(a: dict[str, str], b: dict[str, str]) -> dict[str, float]:
        return est.paired(scores, "value", a, b)

    ecg_arms = _names(scores, "arm", modality="ecg", quantity="target_auc")
    us_arms = _names(scores, "arm", modality="ultrasound", quantity="target_auc")
    few_shot_ks = _names(scores, "setting", quantity="few_shot")
    fusions = list(method.FUSIONS)
    encoders = _names(scores, "setting", quantity="fusion")
    few_gain = {k: diff(sel("ecg", "few_shot", k, "multitask"), sel("ecg", "few_shot", k, "random_init"))
                for k in few_shot_ks}
    few_gain_permuted = {k: diff(sel("ecg", "few_shot", k, "permuted"), sel("ecg", "few_shot", k, "random_init"))
                         for k in few_shot_ks}
    spearman = {f: col("ecg", "spearman", f).tolist() for f in fusions}
    spearman_shuffled = {f: col("ecg", "spearman_shuffled", f).tolist() for f in fusions}
    worst_k = min(few_gain, key=lambda k: few_gain[k]["ci_low"])
    best_k = max(few_gain_permuted, key=lambda k: few_gain_permuted[k]["ci_low"])
    worst_fusion = min(fusions, key=lambda f: np.mean(spearman[f]))
    best_shuffled = max(fusions, key=lambda f: np.mean(spearman_shuffled[f]))
    best = "multitask_finetuned"
    return {
        "ecg": {"target_auc": {m: stats.summarize(col("ecg", "target_auc", "", m)) for m in ecg_arms},
                "few_shot_auc": {k: {m: stats.summarize(col("ecg", "few_shot", k, m))
                                     for m in _names(scores, "arm", quantity="few_shot", setting=k)}
                                 for k in few_shot_ks},
                "fusion_auc": {e: {kind: stats.summarize(col("ecg", "fusion", e, kind))
                                   for kind in _names(scores, "arm", quantity="fusion", setting=e)}
                               for e in encoders},
                "ehr_only_auc": stats.summarize(col("ecg", "ehr_only_auc")),
                "spearman": {f: {"mean": float(np.mean(v)), "per_seed": v} for f, v in spearman.items()},
                "spearman_shuffled": {f: {"mean": float(np.mean(v)), "per_seed": v} for f, v in spearman_shuffled.items()},
                "pretrain_loss": stats.summarize(col("ecg", "pretrain_loss")),
                "control_pretrain_loss": stats.summarize(col("ecg", "control_pretrain_loss"))},
        "ultrasound": {"target_auc": {m: stats.summarize(col("ultrasound", "target_auc", "", m)) for m in us_arms}},
        "claims": {
            "ecg_gain": diff(sel("ecg", "target_auc", "", "multitask"), sel("ecg", "target_auc", "", "single_task")),
            "ecg_gain_permuted": diff(sel("ecg", "target_auc", "", "permuted"),
                                      sel("ecg", "target_auc", "", "single_task")),
            "ultrasound_gain": diff(sel("ultrasound", "target_auc", "", "multitask"),
                                    sel("ultrasound", "target_auc", "", "single_task")),
            "ultrasound_gain_permuted": diff(sel("ultrasound", "target_auc", "", "permuted"),
                                             sel("ultrasound", "target_auc", "", "single_task")),
            "few_shot_gain_by_k": {k: v["mean"] for k, v in few_gain.items()},
            "few_shot_gain_worst": {**few_gain[worst_k], "setting": worst_k},
            "few_shot_gain_permuted_best": {**few_gain_permuted[best_k], "setting": best_k},
            "spearman_by_fusion": {f: float(np.mean(v)) for f, v in spearman.items()},
            "spearman_worst": {"mean": float(np.mean(spearman[worst_fusion])), "per_seed": spearman[worst_fusion],
                               "setting": worst_fusion},
            "spearman_shuffled_best": {"mean": float(np.mean(spearman_shuffled[best_shuffled])),
                                       "per_seed": spearman_shuffled[best_shuffled], "setting": best_shuffled},
            "cross_attention_minus_concat": diff(sel("ecg", "fusion", best, "cross_attention"),
                                                 sel("ecg", "fusion", best, "concat")),
            "cross_attention_minus_concat_shuffled": diff(sel("ecg", "fusion", best, "cross_attention_shuffled_ecg"),
                                                          sel("ecg", "fusion", best, "concat_shuffled_ecg")),
            "fused_minus_ehr_only": diff(sel("ecg", "fusion", best, "concat"), sel("ecg", "ehr_only_auc", "", "")),
        },
    }


def _per_seed_table(scores: pd.DataFrame) -> pd.DataFrame:
    """One row per seed, one column per score (``ecg.target.<arm>``, ``few_shot.<k>.<arm>``, ...)."""
    names = {"target_auc": "target", "few_shot": "few_shot", "fusion": "fusion", "spearman": "spearman",
             "spearman_shuffled": "spearman_shuffled"}
    shown = scores[scores["quantity"].isin(list(names))]
    column = np.where(shown["quantity"] == "target_auc", shown["modality"] + ".target." + shown["arm"],
                      shown["quantity"].map(names) + "." + shown["setting"]
                      + np.where(shown["arm"] == "", "", "." + shown["arm"]))
    wide = shown.assign(column=column).pivot(index="seed", columns="column", values="value")
    return wide[list(dict.fromkeys(column))].reset_index().rename_axis(columns=None)


def _figure(m: dict):
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    groups = [("ECG target", m["ecg"]["target_auc"])] + [("US target", m["ultrasound"]["target_auc"])] + [
        (f"few-shot {k}", {"single_task": s["random_init"], "multitask": s["multitask"], "permuted": s["permuted"]})
        for k, s in m["ecg"]["few_shot_auc"].items()]
    for i, name in enumerate(("single_task", "multitask", "permuted")):
        mean = np.array([g[name]["mean"] for _, g in groups])
        err = np.array([[g[name]["mean"] - g[name]["ci_low"], g[name]["ci_high"] - g[name]["mean"]] for _, g in groups]).T
        left.bar(np.arange(len(groups)) + (i - 1) * 0.27, mean, 0.27, yerr=err, label=name.replace("_", " "))
    left.set(xticks=np.arange(len(groups)), ylabel="test AUC (95% CI over seeds)", ylim=(0.4, 1.0),
             title="pretraining vs single task (few-shot: random-init probe)")
    left.set_xticklabels([g for g, _ in groups])
    left.legend(fontsize=8)
    fusion = m["ecg"]["fusion_auc"]
    unimodal = [fusion[e]["ecg_only"]["mean"] for e in fusion]
    for kind, marker in zip(method.FUSIONS, "osD"):
        right.plot(unimodal, [fusion[e][kind]["mean"] for e in fusion], marker + "-", label=kind)
        right.plot(unimodal, [fusion[e][f"{kind}_shuffled_ecg"]["mean"] for e in fusion], marker + ":", alpha=0.5,
                   label=f"{kind}, shuffled ECG")
    right.axhline(m["ecg"]["ehr_only_auc"]["mean"], color="grey", lw=0.8, label="EHR only")
    right.set(xlabel="ECG-only AUC of the frozen encoder", ylabel="fused ECG + EHR AUC",
              title="four ECG encoders: unimodal vs fused")
    right.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _setup(p: Params) -> str:
    sources = "; ".join(f"{d.name} ({d.sampling_rate} Hz, labels {[method.CONDITIONS[c] for c in d.conditions]})"
                        for d in method.ECG_SOURCES)
    return (f"Mini-CLIMB, regenerated for each of {p.seeds} seeds. ECG: {p.ecg_seconds:g} s records resampled to "
            f"{p.ecg_rate} Hz; three source datasets of {p.ecg_source_records} records, each with its own label set "
            f"and head: {sources}; target {method.ECG_TARGET.name} (7 classes, gain {method.ECG_TARGET.gain}, more noise) "
            f"with {p.ecg_target_train} training and {p.ecg_target_test} test records. Images ({p.image_size} px): two "
            f"x-ray-like source tasks of {p.image_source_images} images (bright lesion present?; large or small?), an "
            f"ultrasound-like target (dark lesion present? under speckle) with {p.us_target_train} training and "
            f"{p.us_target_test} test images. Encoders: three-layer CNNs, embedding {p.width}. Multitask pretraining: "
            f"{p.pretrain_epochs} epochs, one mini-batch of {p.batch_size} per dataset per step, summed cross-entropy; "
            f"fine-tuning of every encoder (pretrained, random init = single task, permuted-label control): "
            f"{p.finetune_epochs} epochs; Adam lr {p.lr:g}, weight decay {p.weight_decay:g} throughout. Few-shot: "
            f"k in {p.few_shot_k} records per class of a held-out 3-way task, {p.few_shot_query} queries per class, "
            f"{p.few_shot_episodes} episodes, standardised logistic-regression probe (sklearn, C = 0.1) on frozen "
            f"embeddings. Fusion: {p.fusion_train} + {p.fusion_test} patients with a target-acquisition ECG and "
            f"{p.ehr_features} EHR columns; outcome = 2 severity + 0.8 x0 + 0.6 x1 + 1.5 severity x2 + noise above its "
            f"median; heads on the frozen encoder's {p.tokens} tokens (standardised): ECG only, late concat, gated, "
            f"cross-attention (EHR query over ECG tokens), {p.fusion_epochs} epochs each. AUC: sklearn roc_auc_score "
            "(macro one-vs-rest for several classes). Changes from the plan: lr 3e-3 rather than the paper's <= 1e-3 "
            "range (tiny CNNs from scratch, few epochs: at 1e-3 six epochs barely moved the pretraining loss); "
            f"{p.seeds} seeds (the plan: 3). Development history, all before the first multi-seed run with claims "
            "(one-seed runs, whose target AUCs we did see): lr raised from 1e-3 to 3e-3; the fusion heads got "
            "standardised tokens (a fix: unstandardised, every encoder's ECG-only AUC sat at 0.5) and the outcome's "
            "ECG weights were raised (severity 1 -> 2, interaction 1 -> 1.5) so that the ECG carries signal in the "
            "fused task; the few-shot probe's C went from 1 to 0.1 (L-BFGS was slow on separable supports); widened "
            "QRS complexes keep their height.")


def _notes(m: dict) -> str:
    """The measured numbers, for the notes (interpretation is in NOTES.md)."""
    c, ecg = m["claims"], m["ecg"]
    interval = lambda s: f"{fmt(s['mean'])} [{fmt(s['ci_low'])}, {fmt(s['ci_high'])}]"  # noqa: E731
    return "\n\n".join([
        "Target AUC, ECG: " + "; ".join(f"{k} {interval(v)}" for k, v in ecg["target_auc"].items())
        + ". Ultrasound: " + "; ".join(f"{k} {interval(v)}" for k, v in m["ultrasound"]["target_auc"].items()) + ".",
        "Relative gains (the paper's unit): ECG "
        f"{c['ecg_gain']['mean'] / ecg['target_auc']['single_task']['mean']:+.1%}, ultrasound "
        f"{c['ultrasound_gain']['mean'] / m['ultrasound']['target_auc']['single_task']['mean']:+.1%}.",
        "Few-shot AUC (held-out task): " + "; ".join(
            f"{k}: " + ", ".join(f"{e} {interval(v)}" for e, v in by.items()) for k, by in ecg["few_shot_auc"].items()) + ".",
        "Fusion AUC per encoder (ECG only / concat / gated / cross-attention): " + "; ".join(
            f"{e}: " + " / ".join(f"{s[k]['mean']:.3f}" for k in ("ecg_only", *method.FUSIONS))
            for e, s in ecg["fusion_auc"].items()) + f"; EHR only {interval(ecg['ehr_only_auc'])}.",
        "Spearman(ECG-only AUC, fused AUC) over the four encoders, per seed: " + "; ".join(
            f"{f}: {[round(v, 2) for v in s['per_seed']]}" for f, s in ecg["spearman"].items())
        + ". With a shuffled ECG partner: " + "; ".join(
            f"{f}: {[round(v, 2) for v in s['per_seed']]}" for f, s in ecg["spearman_shuffled"].items()) + ".",
        f"Final summed pretraining loss (chance {np.log(4) * 2 + np.log(7):.2f}): {interval(ecg['pretrain_loss'])}; "
        f"permuted-label control {interval(ecg['control_pretrain_loss'])}.",
    ])

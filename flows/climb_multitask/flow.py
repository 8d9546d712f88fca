"""CLIMB's multitask-pretraining study as a Prefect flow on a synthetic mini-CLIMB: multitask pretraining against
single-task training (ECG, ultrasound-like images), few-shot transfer to a held-out ECG task, and ECG + EHR fusion."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.climb_multitask import method
from flows.climb_multitask.params import SMOKE, Params
from tasks import stats
from tasks.contract import Claim, Control, Paper, RunContext, RunOutput, ci
from tasks.data import save_parquet
from tasks.paper import over_seeds, paper_flow

STAND_IN = ("on mini-CLIMB (ECGSYN-morphology ECGs of 9 conditions from three source datasets with their own label sets, "
            "rates and noise, and a small 7-class target; procedural x-ray-like and speckled ultrasound-like lesion images)")
PERMUTED = "pretraining on the same sources with labels permuted within each dataset, fine-tuned identically"


def _pretraining_claim(modality: str, paper_figure: str) -> Claim:
    return Claim(
        id=f"multitask_pretraining_improves_{modality}",
        text=(f"multitask pretraining significantly improves performance on understudied domains, achieving up to "
              f"{paper_figure} over single-task learning -- target test AUC of the multitask-pretrained encoder "
              f"fine-tuned on the small {modality} target minus that of the same encoder trained on the target alone "
              f"(random init, identical fine-tuning) > 0.05 {STAND_IN}"),
        source="abstract; plan claim check 1 (direction + magnitude, the plan's 0.05 AUC)",
        metric=f"claims.{modality}_gain.mean", comparison=">", threshold=0.05, kind="magnitude", role="claim",
        interval=ci(f"claims.{modality}_gain"),
        # an encoder that saw the same inputs but no usable labels: a gain here would be the extra epochs, not the tasks
        control=Control(name=f"{PERMUTED} - single-task", metric=f"claims.{modality}_gain_permuted.mean",
                        interval=ci(f"claims.{modality}_gain_permuted")))


PAPER = Paper(
    slug="climb_multitask",
    title="CLIMB: Data Foundations for Large Scale Multimodal Clinical Foundation Models",
    method="CLIMB multitask pretraining (shared modality encoder, per-dataset heads) -> fine-tuning; few-shot probes; fusion",
    paper_class="C",
    source="abstracts-004.txt #17",
    official_code="DDVD233/climb (not read)",
    claims=(
        # demoted: the ECG source diagnostic_100hz carries the target's own 7-class label set (SHARED), and the other
        # two sources are subsets of it, so "pretraining" here is more data for the same task, not transfer
        Claim(id="multitask_pretraining_improves_ecg",
              text=("multitask pretraining improves on single-task learning (paper: up to 23% in ECG analysis) -- ECG "
                    "target test AUC of the multitask-pretrained encoder fine-tuned on the small target minus that of "
                    f"the same encoder trained on the target alone > 0.05 {STAND_IN}. A sanity check, not the paper's "
                    "claim: the source diagnostic_100hz shares the target's label set (and the other sources are "
                    "subsets of it), so pretraining is more data for the same task; every ECG source in the code "
                    "shares labels with the target"),
              source="abstract; plan claim check 1 (the plan's 0.05 AUC; demoted: more data for the same task here)",
              metric="claims.ecg_gain.mean", comparison=">", threshold=0.05, kind="magnitude", role="sanity",
              interval=ci("claims.ecg_gain")),
        _pretraining_claim("ultrasound", "29% improvement in ultrasound"),
        Claim(id="pretraining_improves_few_shot_new_task",
              text=("pretraining on CLIMB also effectively improves models' generalization capability to new tasks -- "
                    "few-shot AUC of a linear probe on the frozen multitask-pretrained ECG encoder minus that on the "
                    "frozen random-init encoder, on a held-out 3-way task (normal / bundle branch block / AV block, "
                    "conditions absent from every pretraining set), > 0 at every k of the plan (5 and 10 per class; "
                    f"worst k) {STAND_IN}"),
              source="abstract; plan claim check 2 (direction)", metric="claims.few_shot_gain_worst.mean",
              comparison=">", threshold=0.0, kind="direction", role="claim",
              interval=ci("claims.few_shot_gain_worst"), per_setting="claims.few_shot_gain_by_k",
              control=Control(name=f"frozen encoder after {PERMUTED.split(',')[0]} - random init, its best k",
                              metric="claims.few_shot_gain_permuted_best.mean",
                              interval=ci("claims.few_shot_gain_permuted_best"))),
        Claim(id="unimodal_quality_translates_to_fusion",
              text=("strong unimodal encoder performance translates well to multimodal performance -- across four "
                    "frozen ECG encoders of different quality (random init, permuted-label pretraining, single-task, "
                    "multitask + fine-tuned), Spearman correlation between the ECG-only AUC and the ECG + EHR fused AUC "
                    "on a long-stay analogue >= 0.8 for every fusion (late concat, gated, cross-attention; worst "
                    "fusion's mean over seeds, every seed agreeing)"),
              source="abstract; plan claim check 3 (direction, exploratory)", metric="claims.spearman_worst.mean",
              comparison=">=", threshold=0.8, kind="direction", role="claim",
              per_seed="claims.spearman_worst.per_seed", per_setting="claims.spearman_by_fusion",
              # each patient's EHR paired with another patient's ECG: the encoder's quality has nothing to carry over
              control=Control(name="the same fusions with a shuffled ECG partner, best fusion",
                              metric="claims.spearman_shuffled_best.mean")),
        Claim(id="cross_attention_helps_complex_task",
              text=("cross-attention helps complex tasks such as length of stay -- on the long-stay analogue, whose "
                    "outcome has an ECG x EHR interaction, fused AUC with cross-attention minus late concatenation "
                    "(multitask + fine-tuned ECG encoder) > 0"),
              source="abstract ('task-appropriate fusion strategies'); plan methods (fusion comparison)",
              metric="claims.cross_attention_minus_concat.mean", comparison=">", threshold=0.0, kind="direction",
              role="claim", interval=ci("claims.cross_attention_minus_concat"),
              control=Control(name="the same difference with a shuffled ECG partner",
                              metric="claims.cross_attention_minus_concat_shuffled.mean",
                              interval=ci("claims.cross_attention_minus_concat_shuffled"))),
        Claim(id="single_task_target_learnable",
              text=("the ECG target is learnable from its own small training set: single-task test macro AUC > 0.6 "
                    "(otherwise a pretraining gain would only measure a failed baseline)"),
              source="ours", metric="ecg.target_auc.single_task.mean", comparison=">", threshold=0.6,
              kind="magnitude", role="sanity", interval=ci("ecg.target_auc.single_task")),
        Claim(id="ecg_adds_to_ehr",
              text=("the fused task needs the ECG: late-concat AUC with the multitask + fine-tuned encoder minus the "
                    "EHR-only AUC > 0 (the outcome is built from both)"),
              source="ours", metric="claims.fused_minus_ehr_only.mean", comparison=">", threshold=0.0,
              kind="direction", role="sanity", interval=ci("claims.fused_minus_ehr_only")),
    ),
    limitations=(
        "What the stand-in cannot show: anything about real clinical data, CLIMB's 44 datasets and 4.51M samples, large "
        "pretrained backbones or scale effects. The ECGs follow ECGSYN's five-wave morphology with hand-set rhythm and "
        "morphology changes per condition, and each dataset differs only by sampling rate, gain, noise and baseline "
        "wander; the images are blurred ellipses on sinusoid texture (x-ray-like) or under Rayleigh speckle "
        "(ultrasound-like); the EHR block is Gaussian and the fused outcome's formula is ours. Whether pretraining "
        "helps here depends on how much the synthetic sources share with the synthetic target, which we set; the "
        "numbers say the protocol works as described on such a world, not how large CLIMB's gains are. The encoders "
        "are three-layer CNNs trained from scratch for a few epochs at one learning rate (no search), so gaps of a "
        "few AUC points are within what a hyper-parameter search could move."
    ),
)


def _summaries(rows: list[dict]) -> dict:
    ecg, us = [r["ecg"] for r in rows], [r["ultrasound"] for r in rows]
    col = lambda runs, *path: [_get(r, path) for r in runs]
    few_shot_ks = list(ecg[0]["few_shot"])
    fusions = list(method.FUSIONS)
    encoders = list(ecg[0]["fusion"])
    few_gain = {k: stats.paired_difference(col(ecg, "few_shot", k, "multitask"), col(ecg, "few_shot", k, "random_init"))
                for k in few_shot_ks}
    few_gain_permuted = {k: stats.paired_difference(col(ecg, "few_shot", k, "permuted"),
                                                    col(ecg, "few_shot", k, "random_init")) for k in few_shot_ks}
    spearman = {f: col(ecg, "spearman", f) for f in fusions}
    spearman_shuffled = {f: col(ecg, "spearman_shuffled", f) for f in fusions}
    worst_k = min(few_gain, key=lambda k: few_gain[k]["ci_low"])
    best_k = max(few_gain_permuted, key=lambda k: few_gain_permuted[k]["ci_low"])
    worst_fusion = min(fusions, key=lambda f: np.mean(spearman[f]))
    best_shuffled = max(fusions, key=lambda f: np.mean(spearman_shuffled[f]))
    best = "multitask_finetuned"
    return {
        "ecg": {"target_auc": {m: stats.summarize(col(ecg, "target_auc", m)) for m in ecg[0]["target_auc"]},
                "few_shot_auc": {k: {m: stats.summarize(col(ecg, "few_shot", k, m)) for m in ecg[0]["few_shot"][k]}
                                 for k in few_shot_ks},
                "fusion_auc": {e: {kind: stats.summarize(col(ecg, "fusion", e, kind)) for kind in ecg[0]["fusion"][e]}
                               for e in encoders},
                "ehr_only_auc": stats.summarize(col(ecg, "ehr_only_auc")),
                "spearman": {f: {"mean": float(np.mean(v)), "per_seed": v} for f, v in spearman.items()},
                "spearman_shuffled": {f: {"mean": float(np.mean(v)), "per_seed": v} for f, v in spearman_shuffled.items()},
                "pretrain_loss": stats.summarize(col(ecg, "pretrain_loss")),
                "control_pretrain_loss": stats.summarize(col(ecg, "control_pretrain_loss"))},
        "ultrasound": {"target_auc": {m: stats.summarize(col(us, m)) for m in us[0]}},
        "claims": {
            "ecg_gain": stats.paired_difference(col(ecg, "target_auc", "multitask"), col(ecg, "target_auc", "single_task")),
            "ecg_gain_permuted": stats.paired_difference(col(ecg, "target_auc", "permuted"),
                                                         col(ecg, "target_auc", "single_task")),
            "ultrasound_gain": stats.paired_difference(col(us, "multitask"), col(us, "single_task")),
            "ultrasound_gain_permuted": stats.paired_difference(col(us, "permuted"), col(us, "single_task")),
            "few_shot_gain_by_k": {k: v["mean"] for k, v in few_gain.items()},
            "few_shot_gain_worst": {**few_gain[worst_k], "setting": worst_k},
            "few_shot_gain_permuted_best": {**few_gain_permuted[best_k], "setting": best_k},
            "spearman_by_fusion": {f: float(np.mean(v)) for f, v in spearman.items()},
            "spearman_worst": {"mean": float(np.mean(spearman[worst_fusion])), "per_seed": spearman[worst_fusion],
                               "setting": worst_fusion},
            "spearman_shuffled_best": {"mean": float(np.mean(spearman_shuffled[best_shuffled])),
                                       "per_seed": spearman_shuffled[best_shuffled], "setting": best_shuffled},
            "cross_attention_minus_concat": stats.paired_difference(col(ecg, "fusion", best, "cross_attention"),
                                                                    col(ecg, "fusion", best, "concat")),
            "cross_attention_minus_concat_shuffled": stats.paired_difference(
                col(ecg, "fusion", best, "cross_attention_shuffled_ecg"), col(ecg, "fusion", best, "concat_shuffled_ecg")),
            "fused_minus_ehr_only": stats.paired_difference(col(ecg, "fusion", best, "concat"), col(ecg, "ehr_only_auc")),
        },
    }


def _get(node: dict, path: tuple[str, ...]) -> float:
    for key in path:
        node = node[key]
    return float(node)


@paper_flow(PAPER, Params, smoke=SMOKE)
def climb_multitask_flow(params: Params, ctx: RunContext) -> RunOutput:
    rows = sorted(over_seeds(method.run_seed, ctx.seeds, p=params), key=lambda r: r["seed"])
    metrics = _summaries(rows)
    per_seed = pd.DataFrame([{"seed": r["seed"], **{f"ecg.target.{m}": v for m, v in r["ecg"]["target_auc"].items()},
                              **{f"ultrasound.target.{m}": v for m, v in r["ultrasound"].items()},
                              **{f"few_shot.{k}.{m}": v for k, s in r["ecg"]["few_shot"].items() for m, v in s.items()},
                              **{f"fusion.{e}.{kind}": v for e, s in r["ecg"]["fusion"].items() for kind, v in s.items()},
                              **{f"spearman.{f}": v for f, v in r["ecg"]["spearman"].items()},
                              **{f"spearman_shuffled.{f}": v for f, v in r["ecg"]["spearman_shuffled"].items()}}
                             for r in rows])
    save_parquet(per_seed, ctx.data_dir / "per_seed.parquet")
    plot = pd.DataFrame(
        [{"x": f"{modality} target", "y": s["mean"], "series": m}
         for modality in ("ecg", "ultrasound") for m, s in metrics[modality]["target_auc"].items()]
        + [{"x": f"few-shot {k}", "y": s["mean"], "series": {"random_init": "single_task"}.get(m, m)}
           for k, by in metrics["ecg"]["few_shot_auc"].items() for m, s in by.items()])
    return RunOutput(metrics=metrics, tables={"plot": plot, "per_seed": per_seed}, figure=_figure(metrics),
                     setup=_setup(params), notes=_notes(metrics))


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
    c, ecg = m["claims"], m["ecg"]
    fmt = lambda s: f"{s['mean']:.3f} [{s['ci_low']:.3f}, {s['ci_high']:.3f}]"
    return "\n\n".join([
        "Target AUC, ECG: " + "; ".join(f"{k} {fmt(v)}" for k, v in ecg["target_auc"].items())
        + ". Ultrasound: " + "; ".join(f"{k} {fmt(v)}" for k, v in m["ultrasound"]["target_auc"].items()) + ".",
        "Relative gains (the paper's unit): ECG "
        f"{c['ecg_gain']['mean'] / ecg['target_auc']['single_task']['mean']:+.1%}, ultrasound "
        f"{c['ultrasound_gain']['mean'] / m['ultrasound']['target_auc']['single_task']['mean']:+.1%} (the ECG gain is "
        "a sanity check, not counted: its sources carry the target's own labels on the same signal; the ultrasound "
        "target's sources are x-ray-like images, another look).",
        "Few-shot AUC (held-out task): " + "; ".join(
            f"{k}: " + ", ".join(f"{e} {fmt(v)}" for e, v in by.items()) for k, by in ecg["few_shot_auc"].items()) + ".",
        "Fusion AUC per encoder (ECG only / concat / gated / cross-attention): " + "; ".join(
            f"{e}: " + " / ".join(f"{s[k]['mean']:.3f}" for k in ("ecg_only", *method.FUSIONS))
            for e, s in ecg["fusion_auc"].items()) + f"; EHR only {fmt(ecg['ehr_only_auc'])}.",
        "Spearman(ECG-only AUC, fused AUC) over the four encoders, per seed: " + "; ".join(
            f"{f}: {[round(v, 2) for v in s['per_seed']]}" for f, s in ecg["spearman"].items())
        + ". With a shuffled ECG partner: " + "; ".join(
            f"{f}: {[round(v, 2) for v in s['per_seed']]}" for f, s in ecg["spearman_shuffled"].items()) + ".",
        f"Final summed pretraining loss (chance {np.log(4) * 2 + np.log(7):.2f}): {fmt(ecg['pretrain_loss'])}; "
        f"permuted-label control {fmt(ecg['control_pretrain_loss'])}.",
    ])

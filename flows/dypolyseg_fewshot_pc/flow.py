"""DyPolySeg as a Prefect flow: episodic few-shot segmentation of procedural 3-D scenes by DyPolySeg
(DyPolyConv + pure-torch selective SSM + PCM) against a PointNet prototype network and two ablations
(without PCM, without DyHoConv), with a re-initialised replicate of DyPolySeg as the null control."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.dypolyseg_fewshot_pc import method
from flows.dypolyseg_fewshot_pc.params import SMOKE, Params
from tasks import stats
from tasks.contract import Claim, Control, Paper, RunContext, RunOutput, ci
from tasks.data import save_parquet
from tasks.paper import paper_flow, run_mapped

LABEL = {"dypolyseg": "DyPolySeg", "dypolyseg_rep": "DyPolySeg (replicate: other init + episodes)",
         "no_pcm": "DyPolySeg without PCM", "no_dyho": "DyPolySeg without DyHoConv",
         "protonet_pointnet": "ProtoNet over a PointNet encoder"}
WHERE = ("novel-class mIoU (%) of 2-way 1-shot episodes on procedural 3-D scenes (12 primitive classes, "
         "6 base / 6 novel), paired over seeds")
# the same architecture trained from another initialisation and episode stream, in DyPolySeg's place:
# any gap between two identical models is training noise, so a claim whose control passes has no power.
# Which of the two is 'the method' is arbitrary, so the control takes the order with the larger mean gap
# (the one most able to pass): a one-sided null would pass or fail on the luck of the labelling.
NULL = Control(name="gap between DyPolySeg and its replicate (null: identical models; the order with the larger mean)",
               metric="gap.null_replicate.mean", interval=ci("gap.null_replicate"))
SCALED = ("laptop scale, decided before any run: 192-point synthetic scenes instead of S3DIS/ScanNet blocks, "
          "a ~50k-parameter network, 200 training episodes; the paper gives no figure in the abstract, the "
          "2 pp margin is the plan's")
# Working-method gate, fixed before any rerun: novel-class mIoU > 20 % on every seed. All-background scores
# 0 %, and 20 % is well under half of what the weakest prototype baseline reaches in the paper's setting
# (ProtoNet, S3DIS 2-way 1-shot: ~48 % in attMPTI's table), so an arm below it did not learn to segment
# novel classes and a comparison with it says nothing about the architectures.
LEARNED = 20.0


def _learned(arm: str, what: str) -> Claim:
    return Claim(id=f"{arm}_learned_task",
                 text=(f"{what} learned the task: novel-class mIoU > {LEARNED:g} % on every seed (all-background "
                       "scores 0 %; threshold fixed before any rerun, well under the paper's baselines)"),
                 source="implementation check (working-method gate)", metric=f"miou.{arm}.mean", comparison=">",
                 threshold=LEARNED, kind="magnitude", role="sanity", per_seed=f"miou_per_seed.{arm}",
                 every_instance=True)


PAPER = Paper(
    slug="dypolyseg_fewshot_pc",
    title="DyPolySeg: Taylor Series-Inspired Dynamic Polynomial Fitting Network for Few-shot Point Cloud Semantic Segmentation",
    method="DyPolySeg: DyPolyConv (LoConv + DyHoConv) + Mamba block + Prototype Completion Module",
    paper_class="B",
    source="abstracts-000.txt #19",
    official_code=None,
    claims=(
        Claim(id="beats_pointnet_protonet",
              text=("DyPolySeg achieves state-of-the-art performance [on few-shot point cloud semantic "
                    f"segmentation]: mIoU(DyPolySeg) - mIoU({LABEL['protonet_pointnet']}) >= 2 pp, {WHERE}"),
              source="abstract; plan claim 1 (baseline per the issue: PointNet-style ProtoNet)",
              metric="gap.vs_protonet_pointnet.mean", comparison=">=", threshold=2.0, kind="magnitude",
              role="claim", interval=ci("gap.vs_protonet_pointnet"), control=NULL, scaled=SCALED,
              requires=("dypolyseg_learned_task", "protonet_pointnet_learned_task")),
        Claim(id="pcm_helps",
              text=("a lightweight Prototype Completion Module (PCM) reduces structural differences through "
                    f"self-enhancement and interactive enhancement: mIoU(DyPolySeg) - mIoU(without PCM) > 0, {WHERE}"),
              source="abstract; plan claim 3 (direction)", metric="gap.vs_no_pcm.mean", comparison=">",
              threshold=0.0, kind="direction", role="claim", interval=ci("gap.vs_no_pcm"), control=NULL,
              scaled=SCALED, requires=("dypolyseg_learned_task", "no_pcm_learned_task")),
        Claim(id="dyho_helps",
              text=("DyPolyConv extracts flat and detailed features of local geometry through LoConv and "
                    f"DyHoConv: mIoU(DyPolySeg) - mIoU(without DyHoConv) > 0, {WHERE}"),
              source="abstract; plan claim 2 (direction)", metric="gap.vs_no_dyho.mean", comparison=">",
              threshold=0.0, kind="direction", role="claim", interval=ci("gap.vs_no_dyho"), control=NULL,
              scaled=SCALED, requires=("dypolyseg_learned_task", "no_dyho_learned_task")),
        Claim(id="dypolyseg_training_loss_falls",
              text=("our implementation learns: DyPolySeg's mean query cross-entropy over the last 20 training "
                    "episodes / over the first 20 < 1 (mean over seeds)"),
              source="implementation check", metric="sanity.loss_ratio.mean", comparison="<", threshold=1.0,
              kind="direction", role="sanity"),
        # the replicate is the null control of every claim: a collapsed replicate would make the null gap
        # the distance to an all-background model, so the full model's check covers both copies
        _learned("dypolyseg", "DyPolySeg (both the model and its replicate)"),
        _learned("protonet_pointnet", LABEL["protonet_pointnet"]),
        _learned("no_pcm", LABEL["no_pcm"]),
        _learned("no_dyho", LABEL["no_dyho"]),
    ),
    limitations=(
        "No S3DIS or ScanNet (downloads; hours of GPU training): procedural scenes of 12 primitive solids on a "
        "floor, xyz only (no colour), 192 points per scene, so 'state of the art' can only be read as 'beats a "
        "PointNet prototype network here'; the DGCNN/attMPTI/QGPA-style baselines of the paper are not run. "
        "The Mamba block is a pure-torch selective SSM with one scalar decay per head (Mamba-2's dual form, "
        "bidirectional over the Morton order), not the CUDA Mamba kernel. No official code was found: the "
        "DyHoConv exponent parameterisation (learnable + per-point offsets), the PCM (residual MLP + "
        "prototype-to-query cross-attention) and the layer widths are our reading of the abstract and of the "
        "plan's inferences from the group's TaylorSeg paper. 2-way 1-shot only; the ablation without the SSM "
        "and the 5-shot / 3-way settings are not run. Training is short (200 episodes) and unregularised, "
        "so ranking the arms may reflect under- or over-fitting at this scale rather than the architectures. "
        "The falling training loss only shows that the base classes are fitted: each claim also requires that "
        "both arms it compares exceed 20 % novel-class mIoU on every seed (the '*_learned_task' checks), "
        "otherwise it is inconclusive (implementation)."
    ),
)


def _figure(rows: pd.DataFrame, summary: dict) -> tuple[plt.Figure, pd.DataFrame]:
    fig, ax = plt.subplots(figsize=(8, 4.2))
    arms = list(method.ARMS)
    means = [summary[a]["mean"] for a in arms]
    err = np.array([[summary[a]["mean"] - summary[a]["ci_low"], summary[a]["ci_high"] - summary[a]["mean"]] for a in arms]).T
    ax.bar(range(len(arms)), means, yerr=err, capsize=4, color=["C3", "C1", "C0", "C2", "C7"])
    for i, a in enumerate(arms):
        y = rows.loc[rows["arm"] == a, "miou"].to_numpy()
        ax.plot(np.full(len(y), i) + np.linspace(-0.15, 0.15, len(y)), y, "k.", ms=4)
    ax.set_xticks(range(len(arms)), [LABEL[a].replace(" (", "\n(").replace(" over ", "\nover ").replace(" without ", "\nwithout ") for a in arms], fontsize=7)
    ax.set(ylabel="novel-class mIoU (%) [mean, 95% CI; dots = seeds]", title="2-way 1-shot, procedural scenes")
    fig.tight_layout()
    plot = pd.DataFrame({"x": range(len(arms)), "y": means, "series": arms})
    return fig, plot


@paper_flow(PAPER, Params, smoke=SMOKE)
def dypolyseg_fewshot_pc_flow(params: Params, ctx: RunContext) -> RunOutput:
    pairs = [(s, a) for s in ctx.seeds for a in method.ARMS]
    out = run_mapped(method.run_arm, {"seed": [s for s, _ in pairs], "arm": [a for _, a in pairs]}, p=params)
    rows = pd.DataFrame([{k: v for k, v in r.items() if k != "per_class"} for r in out])
    per_class = pd.DataFrame([{"seed": r["seed"], "arm": r["arm"], "class": c, "iou": v}
                              for r in out for c, v in r["per_class"].items()])
    save_parquet(rows, ctx.data_dir / "per_seed.parquet")

    def col(arm: str, name: str = "miou") -> np.ndarray:
        return rows[rows["arm"] == arm].sort_values("seed")[name].to_numpy(dtype=float)

    full = col("dypolyseg")
    summary = stats.summarize_by(rows, "arm", "miou")
    metrics = {
        "miou": summary,
        # per seed, the weaker of DyPolySeg and its replicate stands for DyPolySeg (see its learned-task check)
        "miou_per_seed": {**{a: col(a).tolist() for a in ("protonet_pointnet", "no_pcm", "no_dyho")},
                          "dypolyseg": np.minimum(full, col("dypolyseg_rep")).tolist()},
        "gap": {"vs_protonet_pointnet": stats.paired_difference(full, col("protonet_pointnet")),
                "vs_no_pcm": stats.paired_difference(full, col("no_pcm")),
                "vs_no_dyho": stats.paired_difference(full, col("no_dyho")),
                "null_replicate": max(stats.paired_difference(col("dypolyseg_rep"), full),
                                      stats.paired_difference(full, col("dypolyseg_rep")), key=lambda d: d["mean"])},
        "sanity": {"loss_ratio": stats.summarize(col("dypolyseg", "loss_last") / col("dypolyseg", "loss_first"))},
        "loss_last": {a: float(col(a, "loss_last").mean()) for a in method.ARMS},
        "n_params": {a: int(col(a, "n_params")[0]) for a in method.ARMS},
        "timings": {"cpu_s_per_arm": {a: float(col(a, "cpu_s").mean()) for a in method.ARMS},
                    "cpu_s_total": float(rows["cpu_s"].sum())},
    }
    figure, plot = _figure(rows, summary)
    table = rows.pivot(index="seed", columns="arm", values="miou").reset_index()
    class_table = per_class.groupby(["arm", "class"], as_index=False)["iou"].mean()
    return RunOutput(metrics=metrics, tables={"plot": plot, "miou_per_seed": table, "iou_per_class": class_table},
                     figure=figure, setup=_setup(params, metrics), notes=_notes(metrics))


def _setup(p: Params, m: dict) -> str:
    return (
        f"**Data** (`tasks/point_clouds.py`). Each scene: a floor plus {p.min_objects}-{p.max_objects} of 12 "
        "primitive solids (box, sphere, cylinder, cone, torus, pyramid, capsule, wedge, ring, slab, ellipsoid, "
        "tetrahedron), surface-sampled, randomly scaled, stretched and rotated about z, in separate cells of a "
        f"3 x 3 grid, jitter {p.noise}, {p.n_points} points, centred and scaled into the unit ball; per-point "
        f"labels. Per seed: a random split into {p.n_base_classes} base / {12 - p.n_base_classes} novel classes, "
        f"{p.train_scenes} training and {p.test_scenes} test scenes. **Episodes**: {p.n_way}-way {p.k_shot}-shot, "
        f"{p.n_query} query scene per way; training on base classes (other points background), "
        f"{p.train_episodes} episodes, Adam lr {p.lr}, query cross-entropy over background + ways; test: "
        f"{p.test_episodes} novel-class episodes on the test scenes, the same for every arm of a seed; mIoU = "
        "mean over the novel classes of IoU from TP/FP/FN accumulated over all test episodes (as attMPTI).\n\n"
        f"**Models** (parameters: " + ", ".join(f"{LABEL[a]} {n:,}" for a, n in m["n_params"].items()) + "). "
        f"DyPolySeg: linear embedding, two DyPolyConv layers (kNN k = {p.k_neighbors}; LoConv = MLP on "
        f"[p_j - p_i, f_j - f_i, f_i] + max; DyHoConv = MLP on sign(d)|d|^a_k of radius-normalised offsets, "
        f"K = {p.orders} exponents a_k = 0.5 + softplus(theta_k + w_k . f_i), initialised at 1..K, + max), a "
        f"bidirectional selective-SSM block ({p.ssm_heads} heads, state {p.d_state}) over the Morton order, a "
        f"head to {p.feature_dim}-d features; masked-average prototypes (background + ways), cosine x "
        f"{p.cosine_scale:g}; PCM = residual MLP on [P, mean P] + cross-attention from prototypes to each "
        "query scene's points (zero-initialised output). Baseline: the same prototype head over a PointNet "
        "encoder (shared per-point MLP, global max-pool, per-point MLP on [local, global]). Ablations drop "
        "PCM or DyHoConv. The replicate is DyPolySeg with another initialisation and training-episode "
        f"stream. {p.seeds} seeds; intervals: bootstrap over seeds of the paired per-seed differences."
    )


def _notes(m: dict) -> str:
    mi, g = m["miou"], m["gap"]

    def iv(x: dict) -> str:
        return f"{x['mean']:+.2f} pp [{x['ci_low']:+.2f}, {x['ci_high']:+.2f}]"

    return (
        "**Results.** Novel-class mIoU: " + ", ".join(f"{LABEL[a]} {mi[a]['mean']:.1f} % [{mi[a]['ci_low']:.1f}, "
                                                        f"{mi[a]['ci_high']:.1f}]" for a in method.ARMS)
        + f". DyPolySeg minus: ProtoNet-PointNet {iv(g['vs_protonet_pointnet'])}, without PCM {iv(g['vs_no_pcm'])}, "
        f"without DyHoConv {iv(g['vs_no_dyho'])}. Null control (DyPolySeg vs its replicate, larger-gap order): "
        f"{iv(g['null_replicate'])}: the seed-to-seed spread of two identical models sets how large a "
        "gap this run can resolve. Mean final training loss (last 20 episodes): "
        + ", ".join(f"{LABEL[a]} {v:.3f}" for a, v in m["loss_last"].items())
        + " (a lower training loss with a lower test mIoU means over-fitting to the base classes).\n\n"
        "**Reading the numbers.** Every arm is close to the all-background solution on the novel classes "
        "(mIoU far below what prototype networks reach on real benchmarks): at this scale the models learn the "
        "base classes (training loss falls) but transfer little; the models with PCM reach the lowest training "
        "loss and among the lowest novel-class mIoU, i.e. the interactive enhancement over-fits the base "
        "classes here. Verdicts therefore compare degenerate models and say little about the architectures "
        "at the paper's scale. **Change after the first full run (disclosed):** the null control was first "
        "one-sided (replicate minus DyPolySeg, -4.23 pp); since the order of two identical models is "
        "arbitrary it now takes the order with the larger gap. This can only make verdicts more cautious: it "
        "turned `dyho_helps` from reproduced and `pcm_helps` from not reproduced into inconclusive (the "
        "framework calls every claim whose control passes inconclusive, whatever the method scored); no "
        "setup, parameter or threshold was changed. For the record, PCM's gap "
        f"({iv(g['vs_no_pcm'])}) lies beyond the null spread in the direction *against* the paper, and "
        f"DyHoConv's ({iv(g['vs_no_dyho'])}) is of the size of the null gap.\n\n"
        "**Stand-ins.** The selective SSM is exact for its recurrence (tested against the sequential scan) but "
        "has a scalar decay per head (Mamba-2 style), not Mamba-1's per-channel diagonal A, and runs in O(L^2) "
        "memory, fine at 192 points. Mamba's depthwise causal convolution is left out."
    )

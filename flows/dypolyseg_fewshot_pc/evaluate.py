"""DyPolySeg few-shot segmentation, the evaluation: novel-class mIoU per arm, the paired gaps of the claims
and their replicate null, the training-loss check, the figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.dypolyseg_fewshot_pc import method
from flows.dypolyseg_fewshot_pc.claims import LABEL
from flows.dypolyseg_fewshot_pc.params import Params
from paperflows.core import estimates as est
from paperflows.core import stats
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records


def evaluate(params: Params, records: Records) -> RunOutput:
    rows, per_class = records["arms"], records["per_class"]

    def col(arm: str, name: str = "miou") -> np.ndarray:
        return est.per_seed(rows, name, arm=arm)

    def gap(a: str, b: str) -> dict:
        return est.paired(rows, "miou", {"arm": a}, {"arm": b})

    full = col("dypolyseg")
    summary = stats.summarize_by(rows, "arm", "miou")
    metrics = {
        "miou": summary,
        # per seed, the weaker of DyPolySeg and its replicate stands for DyPolySeg (see its learned-task check)
        "miou_per_seed": {**{a: col(a).tolist() for a in ("protonet_pointnet", "no_pcm", "no_dyho")},
                          "dypolyseg": np.minimum(full, col("dypolyseg_rep")).tolist()},
        "gap": {"vs_protonet_pointnet": gap("dypolyseg", "protonet_pointnet"),
                "vs_no_pcm": gap("dypolyseg", "no_pcm"),
                "vs_no_dyho": gap("dypolyseg", "no_dyho"),
                "null_replicate": max(gap("dypolyseg_rep", "dypolyseg"), gap("dypolyseg", "dypolyseg_rep"),
                                      key=lambda d: d["mean"])},
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
                     figure=figure, setup=_setup(params, metrics), notes=_measured(metrics))


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
        f"stream. {p.seeds} seeds; intervals: Student-t over seeds of the paired per-seed differences."
    )


def _measured(m: dict) -> str:
    """The measured numbers behind the claims, for the notes (interpretation is in NOTES.md)."""
    mi, g = m["miou"], m["gap"]

    def iv(x: dict) -> str:
        return f"{x['mean']:+.2f} pp [{x['ci_low']:+.2f}, {x['ci_high']:+.2f}]"

    return (
        "**Measured.** Novel-class mIoU: " + ", ".join(f"{LABEL[a]} {mi[a]['mean']:.1f} % [{mi[a]['ci_low']:.1f}, "
                                                         f"{mi[a]['ci_high']:.1f}]" for a in method.ARMS)
        + f". DyPolySeg minus: ProtoNet-PointNet {iv(g['vs_protonet_pointnet'])}, without PCM {iv(g['vs_no_pcm'])}, "
        f"without DyHoConv {iv(g['vs_no_dyho'])}. Null control (DyPolySeg vs its replicate, larger-gap order): "
        f"{iv(g['null_replicate'])}. Mean final training loss (last 20 episodes): "
        + ", ".join(f"{LABEL[a]} {v:.3f}" for a, v in m["loss_last"].items()) + "."
    )

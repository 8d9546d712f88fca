"""DD3D, the evaluation: test accuracy per arm, the paired differences of the claims and their controls, the
memory ratio, the figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.dd3d_pointcloud.claims import LABEL
from flows.dd3d_pointcloud.params import Params
from paperflows.core import estimates as est
from paperflows.core import stats
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records


def evaluate(params: Params, records: Records) -> RunOutput:
    rows, memory = records["accuracy"], records["memory"]
    arms = list(dict.fromkeys(rows["arm"]))

    def acc(arm: str) -> np.ndarray:
        return est.per_seed(rows, "accuracy", arm=arm)

    def diff(a: str, b: str) -> dict:
        return est.paired(rows, "accuracy", {"arm": a}, {"arm": b})

    first = memory[memory["seed"] == records.seeds[0]].iloc[0]
    mem_lo, mem_hi = est.per_seed(memory, "distill_res"), est.per_seed(memory, "eval_res")
    metrics = {
        "accuracy": {a: stats.summarize(acc(a)) for a in arms},
        "per_seed_accuracy": {a: acc(a).tolist() for a in arms},
        "diff": {"dd3d_minus_dm": diff("dd3d", "dm"), "untrained_minus_dm": diff("untrained_generator", "dm"),
                 "dd3d_minus_random": diff("dd3d", "random_real"),
                 "untrained_minus_random": diff("untrained_generator", "random_real"),
                 "rotator_gain": diff("dd3d", "dd3d_no_rotator"),
                 "rotator_gain_unrotated": diff("aligned_random_real", "aligned_random_real_no_rotator"),
                 "rotator_gain_random_real": diff("random_real", "random_real_no_rotator"),
                 "high_minus_low_res": diff("dd3d", "dd3d_at_distill_res"),
                 "untrained_high_minus_low_res": diff("untrained_generator", "untrained_generator_at_distill_res"),
                 "dd3d_minus_untrained": diff("dd3d", "untrained_generator")},
        "memory": {"bytes_distill_res": float(first["distill_res"]), "bytes_eval_res": float(first["eval_res"]),
                   "ratio": stats.summarize(mem_lo / mem_hi)},
        "chance": 1.0 / len(params.classes),
    }
    summary = rows.groupby("arm", sort=False)["accuracy"].agg(["mean", "std"]).reset_index()
    plot = pd.DataFrame({"x": range(len(arms)), "y": [metrics["accuracy"][a]["mean"] for a in arms],
                         "y_low": [metrics["accuracy"][a]["ci_low"] for a in arms],
                         "y_high": [metrics["accuracy"][a]["ci_high"] for a in arms],
                         "series": [LABEL.get(a, a) for a in arms]})
    return RunOutput(metrics=metrics, tables={"plot": plot, "per_seed": rows, "summary": summary},
                     figure=_figure(plot, metrics), setup=_setup(params), notes=_notes(metrics))


def _figure(plot: pd.DataFrame, metrics: dict):
    fig, ax = plt.subplots(figsize=(9, 4.8))
    ax.barh(plot["x"], plot["y"], xerr=[plot["y"] - plot["y_low"], plot["y_high"] - plot["y"]], color="C0", capsize=3)
    ax.axvline(metrics["chance"], color="k", ls="--", lw=1, label="chance")
    ax.set_yticks(plot["x"], plot["series"], fontsize=8)
    ax.invert_yaxis()
    ax.set(xlabel="test accuracy (mean over seeds, 95% CI)", xlim=(0, 1),
           title="Point-cloud dataset distillation, IPC per class, random SO(3) poses")
    ax.legend(loc="lower right")
    fig.tight_layout()
    return fig


def _setup(p: Params) -> str:
    return (
        f"{len(p.classes)} procedural shape classes ({', '.join(p.classes)}), {p.train_per_class} train / "
        f"{p.test_per_class} test clouds per class of {p.n_points} points: per-axis scale in [{p.scale_min}, "
        f"{p.scale_max}], uniform SO(3) pose, jitter std {p.jitter}, normalised into the unit ball. "
        f"**DD3D** (after the official code): rotator = PCA frame of every real cloud + per-axis sign rule "
        f"sign(mean sin({p.sign_w0} x)) inside the network; generator G(u, s) = tanh(W2 (sin({p.gen_w0} (W1 u + b1)) * "
        f"relu(e_s))), u ~ U(0,1)^{p.noise_dim}, hidden {p.gen_hidden}; gradient matching (layer-wise cosine) on "
        f"PointNet (instance norm, widths {list(p.widths)}) for {p.iterations} iterations x {p.outer_loop} matching "
        f"steps (inner loop {p.inner_loop} SGD steps, lr {p.lr_net}), {p.batch_real} real clouds per class per step, "
        f"Adam lr {p.lr_generator}; distilled at {p.distill_points} points, evaluated with clouds generated at "
        f"{p.n_points}. IPC = {p.ipc}. **DM**: per-class mean-embedding matching of fresh random PointNets on point "
        f"coordinates ({p.dm_iterations} Adam steps, lr {p.lr_points}, init from real clouds, {p.distill_points} points, "
        f"no rotator). **Evaluation**: a fresh PointNet per set, {p.eval_steps} Adam steps (lr {p.eval_lr}, batch "
        f"{p.eval_batch}, official scale + jitter augmentation), final test accuracy; the rotator is on for DD3D, "
        f"random real (rotator), the untrained generator and the full set. {p.seeds} seeds; differences paired "
        f"by seed, 95% Student-t intervals."
    )


def _notes(m: dict) -> str:
    """The measured numbers behind the claims (how to read them is in NOTES.md)."""
    a, d = m["accuracy"], m["diff"]

    def pct(x: float) -> str:
        return f"{100 * x:.1f}%"

    def pp(k: str) -> str:
        v = d[k]
        return f"{100 * v['mean']:+.1f} pp [{100 * v['ci_low']:+.1f}, {100 * v['ci_high']:+.1f}]"

    lines = [
        "Test accuracy (mean over seeds): " + "; ".join(f"{LABEL.get(k, k)} {pct(v['mean'])}" for k, v in a.items())
        + f" (chance {pct(m['chance'])}).",
        f"DD3D - DM: {pp('dd3d_minus_dm')} (control, untrained generator - DM: {pp('untrained_minus_dm')}).",
        f"DD3D - random real (rotator): {pp('dd3d_minus_random')} (control: {pp('untrained_minus_random')}).",
        f"Rotator gain for DD3D: {pp('rotator_gain')}; for random real clouds: {pp('rotator_gain_random_real')}; "
        f"on unrotated data (control): {pp('rotator_gain_unrotated')}.",
        f"Generated at n_points minus at the distillation resolution: {pp('high_minus_low_res')} (untrained "
        f"generator: {pp('untrained_high_minus_low_res')}).",
        f"DD3D minus its untrained generator (did distillation learn?): {pp('dd3d_minus_untrained')}.",
        f"Saved-tensor bytes of one matching step: {m['memory']['bytes_distill_res'] / 2**20:.1f} MiB at the "
        f"distillation resolution vs {m['memory']['bytes_eval_res'] / 2**20:.1f} MiB at n_points.",
    ]
    return "\n\n".join(lines)

"""DD3D as a Prefect flow: point-cloud dataset distillation with a PCA + sign rotator and a point-wise
generator trained by gradient matching, against DM, random real clouds, its ablations and the full set,
on procedural shapes in random SO(3) poses."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.dd3d_pointcloud import method
from flows.dd3d_pointcloud.params import SMOKE, Params
from tasks import stats
from tasks.contract import Claim, Control, Paper, RunContext, RunOutput, ci
from tasks.data import save_parquet
from tasks.paper import over_seeds, paper_flow

WHERE = ("IPC = 10, PointNet, procedural shapes in uniform random SO(3) poses at train and test; paired over "
         "seeds (same data, same evaluation-network initialisation)")
SCALED = ("laptop scale: ~75 generator steps (official ModelNet: 400 x 20 = 8,000) at 10x the official "
          "generator learning rate, PointNet widths 16-32-64, 80 evaluation steps; fixed before any run")
UNTRAINED = "DD3D's generator before any distillation step (same rotator and evaluation)"
# Working-method gate, fixed before any rerun from the chance level alone (10 classes: 0.10): a set that trains
# a PointNet to less than twice chance on some seed did not distil (or, for a baseline, did not learn) the task,
# so a comparison with it judges our budget, not the paper (the paper's IPC-10 accuracies are far above this).
LEARNED = 0.20
GATE = "per seed, test accuracy > 2 x chance (0.20 with 10 classes), fixed from chance before any rerun"

LABEL = {"dd3d": "DD3D (rotator + generator, GM)", "dd3d_at_distill_res": "DD3D at the distillation resolution",
         "dd3d_no_rotator": "DD3D w/o rotator", "untrained_generator": "untrained generator (control)",
         "untrained_generator_at_distill_res": "untrained generator, distillation resolution",
         "dm": "DM (points, no rotator)", "random_real": "random real (rotator)",
         "random_real_no_rotator": "random real (no rotator)", "full_data": "full real set (rotator)",
         "aligned_random_real": "unrotated data: random real (rotator)",
         "aligned_random_real_no_rotator": "unrotated data: random real (no rotator)"}

PAPER = Paper(
    slug="dd3d_pointcloud",
    title="Point Cloud Dataset Distillation",
    method="DD3D: PCA + sign rotator, point-wise SIREN generator, gradient matching",
    paper_class="B",
    source="abstracts-004.txt #13",
    official_code="bdy9527/DD3D (GitHub; gm_inr.py, CINR.py, utils.py read; apparently the first author's)",
    claims=(
        Claim(id="dd3d_beats_dm",
              text=("Compared to conventional DD methods, the proposed approach, termed DD3D ... Extensive experiments "
                    f"validate the effectiveness of DD3D in shape classification -- accuracy(DD3D) - accuracy(DM) > 0 ({WHERE})"),
              source="abstract; plan claim 1 (direction)", metric="diff.dd3d_minus_dm.mean", comparison=">",
              threshold=0.0, kind="direction", role="claim", interval=ci("diff.dd3d_minus_dm"), scaled=SCALED,
              # if even an untrained generator beats DM, the gap is the rotator/pipeline, not the distillation
              control=Control(name=f"{UNTRAINED} - DM", metric="diff.untrained_minus_dm.mean",
                              interval=ci("diff.untrained_minus_dm")),
              requires=("dd3d_learned_task", "distillation_learned", "dm_learned_task")),
        Claim(id="dd3d_beats_random_real",
              text=("DD aims to substitute large-scale real datasets with a small set of synthetic samples while "
                    "preserving model performance -- accuracy(DD3D) - accuracy(IPC random real clouds per class, "
                    f"same rotator) > 0 ({WHERE})"),
              source="abstract; plan claim 1 (direction)", metric="diff.dd3d_minus_random.mean", comparison=">",
              threshold=0.0, kind="direction", role="claim", interval=ci("diff.dd3d_minus_random"), scaled=SCALED,
              control=Control(name=f"{UNTRAINED} - random real", metric="diff.untrained_minus_random.mean",
                              interval=ci("diff.untrained_minus_random")),
              requires=("dd3d_learned_task", "distillation_learned", "random_real_learned_task")),
        Claim(id="rotator_helps",
              text=("We further propose a plug-and-play point cloud rotator to align the point cloud to a canonical "
                    "orientation -- accuracy(DD3D) - accuracy(DD3D without rotator) > 0 under random rotations "
                    f"({WHERE})"),
              source="abstract; plan claim 2 (direction)", metric="diff.rotator_gain.mean", comparison=">",
              threshold=0.0, kind="direction", role="claim", interval=ci("diff.rotator_gain"), scaled=SCALED,
              # where there is no rotation to undo, the rotator should not help
              control=Control(name="the rotator's gain on unrotated (canonical-pose) data, random real clouds",
                              metric="diff.rotator_gain_unrotated.mean", interval=ci("diff.rotator_gain_unrotated")),
              requires=("dd3d_learned_task", "distillation_learned")),
        Claim(id="rotator_gain_3pp",
              text=("matching rotation-invariant features ... is important for 3D distillation -- removing the rotator "
                    f"costs DD3D at least 3 percentage points of accuracy under random rotations ({WHERE})"),
              source="abstract; plan claim 2 (magnitude, threshold from the plan)", metric="diff.rotator_gain.mean",
              comparison=">=", threshold=0.03, kind="magnitude", role="claim", interval=ci("diff.rotator_gain"),
              scaled=SCALED,
              control=Control(name="the rotator's gain on unrotated (canonical-pose) data, random real clouds",
                              metric="diff.rotator_gain_unrotated.mean", interval=ci("diff.rotator_gain_unrotated")),
              requires=("dd3d_learned_task", "distillation_learned")),
        Claim(id="cross_resolution",
              text=("DD3D enables efficient training on low-resolution point clouds while generating high-resolution "
                    "data for evaluation -- accuracy(generated at n_points) - accuracy(generated at the distillation "
                    f"resolution) >= 0 ({WHERE})"),
              source="abstract; plan claim 3 (direction)", metric="diff.high_minus_low_res.mean", comparison=">=",
              threshold=0.0, kind="direction", role="claim", interval=ci("diff.high_minus_low_res"), scaled=SCALED,
              # more points of an uninformative generator should buy nothing
              control=Control(name=f"{UNTRAINED}: high minus low resolution",
                              metric="diff.untrained_high_minus_low_res.mean",
                              interval=ci("diff.untrained_high_minus_low_res")),
              requires=("dd3d_learned_task", "distillation_learned")),
        Claim(id="distillation_learned",
              text=("our distillation moved the generator: accuracy(DD3D) - accuracy(its untrained generator) > 0 "
                    "(a check that the run's budget taught the generator anything)"),
              source="ours (implementation check)", metric="diff.dd3d_minus_untrained.mean", comparison=">",
              threshold=0.0, kind="direction", role="sanity", interval=ci("diff.dd3d_minus_untrained")),
        *(Claim(id=f"{arm}_learned_task",
                text=f"{LABEL[arm]} learned the task: {GATE} (working-method gate of the claims comparing it)",
                source="ours (implementation check)", metric=f"accuracy.{arm}.mean", comparison=">",
                threshold=LEARNED, kind="magnitude", role="sanity", per_seed=f"per_seed_accuracy.{arm}",
                every_instance=True)
          for arm in ("dd3d", "dm", "random_real")),
        Claim(id="memory_low_res",
              text=("thereby significantly reducing memory requirements -- bytes autograd saves in one matching step at "
                    "the distillation resolution / at n_points < 1 (activations grow with the points: by construction)"),
              source="abstract; plan claim 3 (memory)", metric="memory.ratio.mean", comparison="<", threshold=1.0,
              kind="direction", role="sanity", interval=ci("memory.ratio")),
    ),
    limitations=(
        "Procedural shapes (10 primitives, anisotropic scale, SO(3) poses, jitter) stand in for ModelNet40 / "
        "ScanObjectNN / MVP; part segmentation, DGCNN / PointCNN cross-architecture runs, IPC 1 and 50, K-center "
        "and gradient matching on raw points are not run. The budget is ~1% of the official distillation steps "
        "(see scaled), so the generator may not have converged: the sanity checks 'distillation_learned' (better "
        "than its untrained start) and 'dd3d_learned_task' (above twice chance on every seed) gate every DD3D "
        "claim, and 'dm_learned_task' / 'random_real_learned_task' gate the comparisons with those baselines; "
        "where a gate fails the claim is inconclusive (implementation), since it would judge our budget, not "
        "the paper. The budget was not lengthened: a 1.5x longer run (~110 of the official 8,000 steps) could "
        "not be expected to close the gap, so it was kept as first fixed. Memory is measured as the bytes of tensors autograd saves in one matching "
        "step (deterministic), not an allocator's peak. Evaluation reports the final test accuracy, not the "
        "official best-over-epochs. The rotator's canonical frame may include a reflection (as in the official code)."
    ),
)


def _acc(per_seed: list[dict], arm: str) -> np.ndarray:
    return np.array([s["acc"][arm] for s in per_seed], dtype=float)


@paper_flow(PAPER, Params, smoke=SMOKE)
def dd3d_pointcloud_flow(params: Params, ctx: RunContext) -> RunOutput:
    per_seed = over_seeds(method.run_seed, ctx.seeds, p=params)
    arms = list(per_seed[0]["acc"])
    rows = pd.DataFrame([{"seed": s["seed"], "arm": a, "accuracy": s["acc"][a]} for s in per_seed for a in arms])
    save_parquet(rows, ctx.data_dir / "per_seed.parquet")

    def diff(a: str, b: str) -> dict:
        return stats.paired_difference(_acc(per_seed, a), _acc(per_seed, b))

    mem_lo = np.array([s["bytes"]["distill_res"] for s in per_seed], dtype=float)
    mem_hi = np.array([s["bytes"]["eval_res"] for s in per_seed], dtype=float)
    metrics = {
        "accuracy": {a: stats.summarize(_acc(per_seed, a)) for a in arms},
        "per_seed_accuracy": {a: _acc(per_seed, a).tolist() for a in arms},
        "diff": {"dd3d_minus_dm": diff("dd3d", "dm"), "untrained_minus_dm": diff("untrained_generator", "dm"),
                 "dd3d_minus_random": diff("dd3d", "random_real"),
                 "untrained_minus_random": diff("untrained_generator", "random_real"),
                 "rotator_gain": diff("dd3d", "dd3d_no_rotator"),
                 "rotator_gain_unrotated": diff("aligned_random_real", "aligned_random_real_no_rotator"),
                 "rotator_gain_random_real": diff("random_real", "random_real_no_rotator"),
                 "high_minus_low_res": diff("dd3d", "dd3d_at_distill_res"),
                 "untrained_high_minus_low_res": diff("untrained_generator", "untrained_generator_at_distill_res"),
                 "dd3d_minus_untrained": diff("dd3d", "untrained_generator")},
        "memory": {"bytes_distill_res": float(mem_lo[0]), "bytes_eval_res": float(mem_hi[0]),
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
        f"by seed, 95% bootstrap intervals."
    )


def _notes(m: dict) -> str:
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

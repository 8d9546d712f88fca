"""The claims of DD3D, fixed before any run: each names a metric of ``evaluate.py`` and its threshold."""

from __future__ import annotations

from paperflows.core.contract import Claim, Control, Paper, ci

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

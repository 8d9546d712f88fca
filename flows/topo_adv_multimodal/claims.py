"""The claims of the topological-signatures paper, fixed before any run: each names a metric of ``evaluate.py``
and its threshold."""

from __future__ import annotations

from paperflows.core.contract import Claim, Control, Paper, ci

NOISE = "random sign noise of the same L-inf budget (not adversarial) in place of the attack"


def _monotonic(loss: str, name: str) -> Claim:
    return Claim(
        id=f"monotonic_{loss}",
        text=("We observe a pattern of monotonic changes in the proposed topological losses emerging in a wide range "
              "of attacks on image-text alignments, as more adversarial samples are introduced in the data: the median "
              f"over seeds of Spearman(rho, {name}) over rho in {{0, 0.1, ..., 1}} has |value| >= 0.8 (sign consistent "
              "within an attack) for at least 2 of the 3 attacks (FGSM, PGD-10, targeted PGD-10; eps = 0.1); the metric "
              "is the second largest of the three sign-aligned medians"),
        source="abstract; plan claim check 1 (direction)", metric=f"monotonicity.{loss}.second_best.value",
        comparison=">=", threshold=0.8, kind="direction", role="claim",
        interval=ci(f"monotonicity.{loss}.second_best"), per_setting=f"monotonicity.{loss}.per_attack",
        # a perturbation that is not adversarial: if it moves the loss as monotonically, the trend is no signature
        control=Control(name=f"{NOISE}: sign-aligned median Spearman", metric=f"monotonicity.{loss}.noise.median",
                        interval=ci(f"monotonicity.{loss}.noise")))


def _power_gain(test: str, name: str) -> Claim:
    return Claim(
        id=f"{test}_mmd_power_gain",
        text=("By designing an algorithm to back-propagate these signatures to input samples, we are able to integrate "
              "these signatures into Maximum Mean Discrepancy tests, creating a novel class of tests that leverage "
              f"topological signatures for better adversarial detection: power({name}) - power(MMD on embeddings) >= "
              "0.05 at rho = 0.1 PGD images in the test batch, level 0.05, 200 permutations"),
        source="abstract; plan claim check 2 (magnitude)", metric=f"detection.gain.{test}.mean", comparison=">=",
        threshold=0.05, kind="magnitude", role="claim", interval=ci(f"detection.gain.{test}"),
        # any extra per-sample feature could change the kernel; a non-topological loss's gradient must not do as well
        control=Control(name="the same test with the gradient of a non-topological spread loss "
                             "|mean pairwise distance(X) - mean(Y)| in place of the TC loss",
                        metric="detection.gain.spread.mean", interval=ci("detection.gain.spread")))


PAPER = Paper(
    slug="topo_adv_multimodal",
    title="Topological Signatures of Adversaries in Multimodal Alignments",
    method=("Topological-Contrastive losses (Total Persistence TP, Multi-scale Kernel MK) between image and text "
            "embedding clouds, back-propagated to per-sample features for MMD adversarial-detection tests"),
    paper_class="B",
    source="abstracts-000.txt #4 (ICML 2025; arXiv 2501.18006)",
    official_code=None,
    claims=(
        _monotonic("tp", "L_TP^1"),
        _monotonic("mk", "L_MK^(sigma=0.1)"),
        _power_gain("tp", "TP-augmented MMD"),
        _power_gain("mk", "MK-augmented MMD"),
        Claim(id="fpr_at_rho_zero",
              text=("sanity: at rho = 0 (both batches clean) the TP-augmented permutation test's false-positive rate "
                    "is <= 0.1 (plan claim check 3)"),
              source="plan claim check 3 (sanity)", metric="detection.fpr.tp.mean", comparison="<=", threshold=0.1,
              kind="magnitude", role="sanity", interval=ci("detection.fpr.tp")),
        Claim(id="zero_shot_accuracy",
              text="sanity: the from-scratch dual encoder's zero-shot accuracy on held-out digits is >= 0.85 (plan)",
              source="plan reproduction setup (sanity)", metric="accuracy.clean.mean", comparison=">=", threshold=0.85,
              kind="magnitude", role="sanity", interval=ci("accuracy.clean")),
    ),
    limitations=(
        "No CLIP/BLIP weights offline: a tiny CLIP-style dual encoder (MLP towers, 32-d, learnable temperature) "
        "trained from scratch on 8x8 digits with generated bag-of-words captions stands in, so nothing here speaks "
        "for large pretrained multimodal models, real captions, or the paper's datasets (CIFAR-10/100, ImageNet, "
        "...) and attack zoo (only FGSM, PGD-10 and targeted PGD-10 at eps = 0.1). The text cloud of a batch is the "
        "embeddings of the batch's true captions (the plan's reading of X and Y; the paper's exact construction of "
        "the text cloud is not verified against its code, none was found). The detection tests are plain "
        "Gaussian-kernel MMD permutation tests (median heuristic per feature block), not the paper's trained "
        "deep-kernel / semantic-aware MMD; detection uses PGD only and 40 repetitions per seed (5 seeds, 200 "
        "tests per condition) instead of the plan's 100, for CPU time. Persistence is Vietoris-Rips H0 + H1 by "
        "gudhi."
    ),
)

"""Group-wise evaluation: per-group means of a per-sample score, the worst group, gaps, equity scaling.

The per-sample score is whatever the paper evaluates: correctness (0/1) for accuracy, one Dice per image for
segmentation, one silo id as the group for federated learning. Intervals over seeds come from
``paperflows.core.stats.summarize`` applied to each key across seeds.
"""

from __future__ import annotations

import numpy as np


def group_means(values: np.ndarray, groups: np.ndarray) -> dict[int, float]:
    """The mean of ``values`` (n,) within each group of ``groups`` (n,), keyed by group, in sorted order."""
    values, groups = np.asarray(values, dtype=float), np.asarray(groups)
    if values.shape != groups.shape or values.ndim != 1 or len(values) == 0:
        raise ValueError(f"values {values.shape} and groups {groups.shape} must be equal, non-empty 1-D arrays")
    return {int(g): float(values[groups == g].mean()) for g in np.unique(groups)}


def group_summary(values: np.ndarray, groups: np.ndarray) -> dict:
    """Overall mean, per-group means, the worst group, the max-min gap, and the equity-scaled score.

    ``es`` = overall / (1 + Σ_g |mean_g − overall|): ES-Dice / ES-Acc of the fairness literature (Tian et al.,
    FairSeg 2024), which equals the overall score when every group scores the same and falls as groups drift apart.
    """
    per_group = group_means(values, groups)
    overall = float(np.mean(values))
    means = np.array(list(per_group.values()))
    return {
        "overall": overall,
        "per_group": per_group,
        "worst": float(means.min()),
        "worst_group": int(list(per_group)[int(means.argmin())]),
        "gap": float(means.max() - means.min()),
        "es": overall / (1.0 + float(np.abs(means - overall).sum())),
    }

"""dynsel_aug: each piece of the method against an independent reference (smoke run, determinism and params
come from test_papers.py)."""

import itertools

import numpy as np
import pytest
import torch
from conftest import params_for
from scipy import ndimage

from flows.dynsel_aug import method
from tasks.embed import minilm_embed
from tasks.selection import SelectionState, random_subset


def test_affine_augment_matches_scipy_affine_transform():
    # scipy's map is output[o] = input[M o + offset] in (row, col) pixel coordinates; build M, offset from the
    # documented convention (rotate by a about the centre, then shift by (dx, dy)) independently of the code
    rng = np.random.default_rng(0)
    images = rng.uniform(-1, 1, size=(6, 1, 8, 8)).astype(np.float32)
    shifts = rng.uniform(-1.5, 1.5, size=(6, 2))
    angles = rng.uniform(-0.5, 0.5, size=6)
    out = method.affine_augment(torch.as_tensor(images), torch.as_tensor(shifts, dtype=torch.float32),
                                torch.as_tensor(angles, dtype=torch.float32)).numpy()
    centre = np.array([3.5, 3.5])
    for i in range(6):
        c, s = np.cos(angles[i]), np.sin(angles[i])
        inverse_xy = np.array([[c, s], [-s, c]])                  # R(-a) acting on (x = col, y = row)
        swap = np.array([[0, 1], [1, 0]])
        matrix = swap @ inverse_xy @ swap                          # the same map on (row, col)
        shift_rc = np.array([shifts[i, 1], shifts[i, 0]])
        offset = centre - matrix @ (centre + shift_rc)
        expected = ndimage.affine_transform(images[i, 0].astype(float), matrix, offset=offset, order=1,
                                            mode="grid-constant", cval=-1.0)
        np.testing.assert_allclose(out[i, 0], expected, atol=1e-5)


def test_affine_augment_identity_and_integer_shift():
    images = torch.rand(3, 1, 8, 8) * 2 - 1
    zero = torch.zeros(3)
    np.testing.assert_allclose(method.affine_augment(images, torch.zeros(3, 2), zero).numpy(), images.numpy(), atol=1e-6)
    # one pixel right: column j takes column j-1, the first column is background
    moved = method.affine_augment(images, torch.tensor([[1.0, 0.0]] * 3), zero).numpy()
    np.testing.assert_allclose(moved[..., 1:], images.numpy()[..., :-1], atol=1e-5)
    np.testing.assert_allclose(moved[..., 0], -1.0, atol=1e-6)


def _inclusion_probabilities(weights: np.ndarray, k: int) -> np.ndarray:
    """Exact inclusion probabilities of successive sampling without replacement (enumerate ordered draws)."""
    p = weights / weights.sum()
    out = np.zeros(len(p))
    for order in itertools.permutations(range(len(p)), k):
        prob, left = 1.0, 1.0
        for i in order:
            prob *= p[i] / left
            left -= p[i]
        out[list(order)] += prob
    return out


def test_select_per_class_sampling_matches_exact_inclusion_probabilities():
    scores = np.array([0.9, 0.1, 0.5, 0.0, 0.3, 1.0, 0.2, 0.7])
    labels = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    rng = np.random.default_rng(1)
    draws = 20000
    counts = np.zeros(8)
    for _ in range(draws):
        rows = method.select_per_class(scores, labels, 0.5, "sample", rng)
        assert len(rows) == 4 and np.array_equal(np.bincount(labels[rows]), [2, 2])
        counts[rows] += 1
    for c in (0, 1):
        idx = np.flatnonzero(labels == c)
        exact = _inclusion_probabilities(scores[idx] + method.SCORE_FLOOR, 2)
        np.testing.assert_allclose(counts[idx] / draws, exact, atol=0.015)


def test_select_per_class_topk_keeps_the_best_of_each_class():
    rng = np.random.default_rng(2)
    labels = rng.integers(0, 3, size=60)
    scores = rng.uniform(size=60)
    rows = method.select_per_class(scores, labels, 0.3, "topk", rng)
    for c in range(3):
        idx = np.flatnonzero(labels == c)
        k = max(1, round(0.3 * len(idx)))
        assert set(rows[labels[rows] == c]) == set(idx[np.argsort(-scores[idx])[:k]])


def test_joint_score_is_the_product_of_min_max_normalised_factors():
    density = np.array([2.0, 4.0, 3.0])
    cons = np.array([0.5, 0.1, 0.9])
    np.testing.assert_allclose(method.joint_score(density, cons), [0.0 * 0.5, 1.0 * 0.0, 0.5 * 1.0])
    np.testing.assert_allclose(method.joint_score(None, cons), [0.5, 0.0, 1.0])
    np.testing.assert_allclose(method.joint_score(density, None), [0.0, 1.0, 0.5])
    with pytest.raises(ValueError):
        method.joint_score(None, None)


def test_infobatch_budget_is_exact_and_its_rescaled_loss_unbiased():
    rng = np.random.default_rng(3)
    loss = rng.exponential(size=200)
    low = loss < loss.mean()
    total, draws = 0.0, 4000
    for _ in range(draws):
        sel = method.infobatch_selection(loss, 0.5, rng)
        assert len(sel.indices) == 100
        pruned = np.setdiff1d(np.arange(200), sel.indices)
        assert low[pruned].all()                                   # only below-mean rows are pruned
        assert np.all(sel.weights[~low[sel.indices]] == 1.0)
        # the kept below-mean rows carry exactly the pruned rows' weight: sum of weights over them is |L|
        assert sel.weights[low[sel.indices]].sum() == pytest.approx(low.sum())
        total += float((sel.weights * loss[sel.indices]).sum())
    assert total / draws == pytest.approx(loss.sum(), rel=0.01)    # E[weighted loss] = full-data loss


def test_infobatch_fills_the_quota_when_few_rows_lie_below_the_mean():
    loss = np.array([0.0] * 2 + [10.0] * 8)                        # 2 below the mean, 5 to prune
    sel = method.infobatch_selection(loss, 0.5, np.random.default_rng(0))
    assert len(sel.indices) == 5 and np.all(sel.weights == 1.0)
    assert not set(sel.indices) & {0, 1}


def test_aligned_projection_separates_classes_and_flags_wrong_labels():
    # synthetic features: class means far apart, so the aligned map must classify through the prompts
    p = params_for("dynsel_aug", smoke=False, proj_steps=100)
    rng = np.random.default_rng(4)
    text = torch.nn.functional.normalize(torch.as_tensor(rng.normal(size=(10, 32)), dtype=torch.float32) + 2.0, dim=1)
    means = rng.normal(scale=3.0, size=(10, 16))
    labels = np.repeat(np.arange(10), 30)
    features = torch.as_tensor(means[labels] + rng.normal(size=(300, 16)), dtype=torch.float32)
    projection = method.align_projection(features, labels, text, p, seed=0)
    test_labels = np.repeat(np.arange(10), 20)
    test_features = torch.as_tensor(means[test_labels] + rng.normal(size=(200, 16)), dtype=torch.float32)
    assert method.zero_shot_accuracy(projection, test_features, test_labels, text) > 0.95
    # the map's range is the prompts' span: its output has no component outside it
    out = projection(test_features)
    residual = out - (out @ torch.linalg.pinv(text)) @ text
    assert residual.norm() / out.norm() < 1e-4
    wrong = (test_labels + 1 + rng.integers(0, 9, size=200)) % 10
    right_c = method.consistency(projection, test_features, test_labels, text)
    wrong_c = method.consistency(projection, test_features, wrong, text)
    assert (right_c > wrong_c).mean() > 0.85                     # chance: 0.5 (|cos| lets a few anti-aligned pairs score high)


def test_split_is_a_stratified_partition_of_digits():
    p = params_for("dynsel_aug")
    split = method.split_digits(p, seed=0)
    sizes = len(split.y_pool), len(split.y_ref), len(split.y_test)
    assert sum(sizes) == 1797 and abs(sizes[0] - 0.6 * 1797) <= 1 and abs(sizes[1] - 0.1 * 1797) <= 1
    rows = torch.cat([split.X_pool, split.X_ref, split.X_test]).reshape(1797, 64)
    assert len(torch.unique(rows, dim=0)) == len(torch.unique(torch.as_tensor(
        method.digits_pixels()[0], dtype=torch.float32), dim=0))
    assert np.all(np.abs(np.bincount(split.y_pool) / len(split.y_pool) - 0.1) < 0.01)


def test_augmenting_marks_every_selected_row():
    state = SelectionState(0, None, 20, np.random.default_rng(0))
    sel = method.augmenting(random_subset(0.5))(state)
    assert len(sel.indices) == 10 and sel.augment is not None and sel.augment.all()


def test_runs_count_the_budget_and_the_method_drops_flipped_labels():
    p = params_for("dynsel_aug", epochs=3)
    split = method.split_digits(p, seed=0)
    flipped = np.zeros(len(split.y_pool), dtype=bool)
    flipped[::4] = True                                            # 25% of the pool mislabeled
    labels = np.where(flipped, (split.y_pool + 5) % 10, split.y_pool)
    text = torch.as_tensor(minilm_embed(method.class_prompts(p)))
    full = method.run_method("full", p, split, labels, flipped, text, seed=0)
    joint = method.run_method("selection_only", p, split, labels, flipped, text, seed=0)
    assert full["samples_seen"] == 3 * len(labels) and full["noisy_share"] == 1.0
    per_class = sum(max(1, round(0.5 * n)) for n in np.bincount(labels))
    assert joint["samples_seen"] == 3 * per_class
    assert joint["reference_passes"] == 3 * len(split.y_ref)
    assert 0 <= joint["noisy_share"] < 1.0


def test_checks_that_hold_by_construction_are_sanity_checks():
    """Only the method re-aligns on clean reference labels, and random selection's noisy share is ~1 by definition:
    counted as a claim, it could not have failed."""
    from flows.dynsel_aug.claims import PAPER
    roles = {c.id: c.role for c in PAPER.claims}
    assert all(roles[cid] == "sanity" for cid in ("suppresses_noisy_samples",))

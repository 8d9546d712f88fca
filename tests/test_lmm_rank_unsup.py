"""lmm_rank_unsup: the signals on hand cases and in closed form, the rank correlations against brute force, the kNN
member against scikit-learn's neighbour search, the target corruptions and the split by their invariants, and the
flow's claim metrics on hand-made rho tables (smoke run, determinism and params come from test_papers.py)."""

import itertools

import numpy as np
import pandas as pd
import pytest
from conftest import params_for
from sklearn.neighbors import NearestNeighbors

from flows.lmm_rank_unsup import evaluate, method
from tasks.train import torch_single_thread


def test_softmax_signals_on_a_hand_case():
    probs = np.array([[0.7, 0.2, 0.1], [0.4, 0.4, 0.2]])
    s = method.softmax_signals(probs)
    assert s["nll"] == pytest.approx((np.log(0.7) + np.log(0.4)) / 2)
    assert s["max_softmax"] == pytest.approx(0.55)
    assert s["margin"] == pytest.approx((0.5 + 0.0) / 2)
    h = lambda q: -sum(x * np.log(x) for x in q)
    assert s["entropy"] == pytest.approx(-(h([0.7, 0.2, 0.1]) + h([0.4, 0.4, 0.2])) / 2)
    assert method.softmax(np.log(probs) + 3.0) == pytest.approx(probs)  # logits up to a constant


def test_self_consistency_matches_its_closed_form():
    rng = np.random.default_rng(0)
    # two answers sampled from (0.9, 0.1): the same twice w.p. 0.82 (modal share 1), else 1/2 -> 0.91
    probs = np.tile([0.9, 0.1, 0.0], (40_000, 1))
    assert method.self_consistency(probs, 2, rng) == pytest.approx(0.91, abs=0.005)
    # a one-hot softmax always gives the same answer; K = 3 draws from a uniform 3-way softmax:
    # all equal 1/9 (share 1), all distinct 2/9 (share 1/3), else 2/3
    assert method.self_consistency(np.eye(3)[[0, 2, 1]], 7, rng) == 1.0
    uniform = np.full((60_000, 3), 1 / 3)
    assert method.self_consistency(uniform, 3, rng) == pytest.approx(1 / 9 + 2 / 9 / 3 + 6 / 9 * 2 / 3, abs=0.005)


def _kendall_by_pairs(x, y):
    signs = [np.sign(x[i] - x[j]) * np.sign(y[i] - y[j]) for i, j in itertools.combinations(range(len(x)), 2)]
    return sum(signs) / len(signs)


def test_rank_correlation_against_brute_force():
    rng = np.random.default_rng(1)
    scores, accuracy = rng.normal(size=12), rng.normal(size=12)
    rho, tau = method.rank_correlation(scores, accuracy)
    ranks = lambda v: np.argsort(np.argsort(v))
    assert rho == pytest.approx(np.corrcoef(ranks(scores), ranks(accuracy))[0, 1])
    assert tau == pytest.approx(_kendall_by_pairs(scores, accuracy))
    assert method.rank_correlation(accuracy * 3 + 1, accuracy) == pytest.approx((1.0, 1.0))
    assert all(np.isnan(method.rank_correlation(scores, np.ones(12))))


def test_knn_logits_match_a_neighbour_search_per_class():
    rng = np.random.default_rng(2)
    train_x, train_y, x = rng.normal(size=(200, 64)), rng.integers(0, 10, 200), rng.normal(size=(15, 64))
    logits = method.knn_class_logits(train_x, train_y, x, k=3)
    for c in range(10):
        distances, _ = NearestNeighbors(n_neighbors=3).fit(train_x[train_y == c]).kneighbors(x)
        assert logits[:, c] == pytest.approx(-distances.mean(axis=1))


def test_label_corruption_always_moves_to_another_class_at_the_given_rate():
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 10, 50_000)
    flipped = method.corrupt_labels(labels, 1.0, rng)
    assert np.all(flipped != labels)
    assert np.bincount((flipped - labels) % 10, minlength=10)[1:] / len(labels) == pytest.approx(np.full(9, 1 / 9), abs=0.01)
    assert np.mean(method.corrupt_labels(labels, 0.2, rng) != labels) == pytest.approx(0.2, abs=0.01)
    assert np.array_equal(method.corrupt_labels(labels, 0.0, rng), labels)


def test_corruptions_by_their_invariants():
    rng = np.random.default_rng(4)
    ones = np.ones((30, 8, 8))
    assert np.all((ones - method.occlude(ones, 3, rng)).sum(axis=(1, 2)) == 9)
    framed = np.zeros((40, 8, 8))
    framed[:, 2:6, 2:6] = rng.uniform(0, 16, (40, 4, 4))
    moved = method.shift_one_pixel(framed, rng)
    assert moved.sum(axis=(1, 2)) == pytest.approx(framed.sum(axis=(1, 2)))  # nothing falls off a blank border
    assert all(any(np.array_equal(m, np.roll(f, d, axis=a)) for a, d in ((0, 1), (0, -1), (1, 1), (1, -1)))
               for m, f in zip(moved, framed))
    grey = np.full((200, 8, 8), 8.0)
    assert (method.add_noise(grey, 0.1, rng) - grey).std() == pytest.approx(0.1 * method.INK, rel=0.05)
    p = params_for("lmm_rank_unsup", smoke=False)
    assert np.array_equal(method.make_target("invert", framed, p, rng), 16.0 - framed)
    assert method.rotate(framed, 1e-9, rng) == pytest.approx(framed, abs=1e-6)


def test_split_is_a_stratified_partition():
    images, labels = method.digit_images()
    assert images.shape == (1797, 8, 8) and images.min() == 0.0 and images.max() == 16.0
    p = params_for("lmm_rank_unsup", smoke=False)
    s = method.split_digits(images, labels, p, np.random.default_rng(5))
    sizes = [len(s.train_labels), len(s.proxy_labels), len(s.target_labels)]
    assert sum(sizes) == 1797
    assert len(s.target_labels) / 1797 == pytest.approx(p.target_share, abs=0.01)
    assert np.all(np.abs(np.bincount(s.target_labels) / np.bincount(labels) - p.target_share) < 0.02)
    seen = {img.tobytes() for part in (s.train_images, s.proxy_images, s.target_images) for img in part}
    assert len(seen) == len({img.tobytes() for img in images})  # no image in two parts


def test_members_share_one_interface_and_learn():
    p = params_for("lmm_rank_unsup")
    images, labels = method.digit_images()
    s = method.split_digits(images, labels, p, np.random.default_rng(6))
    accuracy = {}
    with torch_single_thread():  # as in run_seed: torch's own threads only spin on tensors this small
        for spec in p.zoo:  # (the smoke zoo: one or two members of every family, a few epochs)
            logits = method.train_member(spec, s, p, seed=7).logits(s.target_images)
            assert logits.shape == (len(s.target_labels), 10)
            accuracy[spec.name] = (logits.argmax(axis=1) == s.target_labels).mean()
    assert min(accuracy.values()) > 0.15 and max(accuracy.values()) > 0.9, accuracy  # chance is 0.1


def _records(rho_by_ranker, seeds=3):
    """The rankings and model_scores records of ``seeds`` seeds that all measured ``rho_by_ranker``."""
    rankings = pd.DataFrame([{"seed": i, "ranker": r, "target": t, "rho": rho, "tau": 0.0}
                             for i in range(seeds) for r, by_target in rho_by_ranker.items() for t, rho in by_target.items()])
    models = pd.DataFrame([{"seed": i, "target": "clean", "accuracy": a} for i in range(seeds) for a in (0.5, 0.9)])
    return rankings, models


def test_claim_metrics_on_a_hand_made_rho_table():
    p = params_for("lmm_rank_unsup", smoke=False, targets=["clean", "blur", "invert"])
    table = {"nll": {"clean": 0.9, "blur": 0.7, "invert": 0.5}, "max_softmax": {"clean": 0.9, "blur": 0.8, "invert": 0.7},
             "entropy": {"clean": 0.1, "blur": 0.9, "invert": 0.5}, "margin": {"clean": 0.0, "blur": 0.0, "invert": 0.6},
             "self_consistency": {"clean": 0.0, "blur": 0.0, "invert": 0.0}, "tta_agreement": {"clean": 0.0, "blur": 0.0, "invert": 0.0},
             "proxy_accuracy": {"clean": 1.0, "blur": 0.4, "invert": 0.2}, "nll_permuted": {"clean": 0.0, "blur": 0.3, "invert": -0.3}}
    c = evaluate._claims(*_records(table), p)
    assert c["nll_mean_rho"]["mean"] == pytest.approx(0.7)
    assert c["nll_minus_proxy_shifted"]["mean"] == pytest.approx((0.7 + 0.5) / 2 - (0.4 + 0.2) / 2)
    assert c["nll_minus_proxy_by_target"] == pytest.approx({"blur": 0.3, "invert": 0.3})
    std = lambda v: np.std(v, ddof=1)
    assert c["nll_std_minus_best_other"]["mean"] == pytest.approx(0.2 - std([0.9, 0.8, 0.7]))  # max_softmax is steadier
    assert c["nll_std_minus_other_by_signal"]["margin"] == pytest.approx(0.2 - std([0.0, 0.0, 0.6]))
    assert c["permuted_std_minus_best_other"]["mean"] == pytest.approx(0.3 - 0.1)
    assert c["proxy_clean_rho"]["mean"] == 1.0 and c["clean_accuracy_range"]["mean"] == pytest.approx(0.4)


def test_params_reject_a_zoo_with_repeated_names_and_targets_without_clean():
    with pytest.raises(ValueError, match="distinct"):
        params_for("lmm_rank_unsup", zoo=[{"name": "a", "family": "knn"}] * 4)
    with pytest.raises(ValueError, match="clean"):
        params_for("lmm_rank_unsup", targets=["blur", "invert", "noise_0.1"])
    with pytest.raises(ValueError, match="epochs"):
        params_for("lmm_rank_unsup", zoo=[{"name": "m", "family": "mlp", "hidden": [4]}] * 4)


def test_within_family_diagnostic_sees_a_ranking_that_the_pooled_zoo_hides():
    # within each family the score orders the models perfectly, but family b is accurate and unconfident
    p = params_for("lmm_rank_unsup", smoke=False, zoo=[{"name": f"{f}{i}", "family": f} for f in ("knn", "logreg") for i in range(3)])
    rows = [{"seed": 0, "target": "clean", "model": f"{f}{i}", "family": f, "accuracy": base + 0.01 * i,
             **{s: score + 0.01 * i for s in (*method.SIGNALS, method.BASELINE)}}
            for f, base, score in (("knn", 0.9, 0.1), ("logreg", 0.5, 0.9)) for i in range(3)]
    out = evaluate._within_subsets(pd.DataFrame(rows), p)
    assert set(out) == {"knn", "logreg"}  # no mlp or cnn member: no cross-entropy subset
    assert out["knn"]["nll"] == 1.0 and out["logreg"]["max_softmax"] == 1.0
    assert out["knn"]["clean_accuracy"] == pytest.approx(0.91) and out["knn"]["clean_max_softmax"] == pytest.approx(0.11)
    pooled = pd.DataFrame(rows)
    assert method.rank_correlation(pooled["nll"].to_numpy(), pooled["accuracy"].to_numpy())[0] < 0

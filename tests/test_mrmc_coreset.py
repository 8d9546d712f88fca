"""MRMC (reconstructed) and its baselines against independent references: closed forms, brute force on
tiny instances, plain-loop re-implementations and direct computations (the smoke run, determinism
and params come from test_papers.py)."""

import itertools

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from conftest import params_for

from flows.mrmc_coreset import method
from flows.mrmc_coreset.evaluate import _metrics, _paired_over_pools


@pytest.fixture(scope="module")
def p():
    return params_for("mrmc_coreset")


def test_contribution_is_the_telescoped_reduction_of_the_squared_loss():
    rng = np.random.default_rng(0)
    losses = rng.uniform(0.01, 3.0, size=(6, 50))
    c = method.mrmc_contribution(losses)
    np.testing.assert_allclose(c, losses[0] ** 2 - losses[-1] ** 2, rtol=1e-12, atol=1e-12)
    # a hand case: a sample whose loss rises gets a negative contribution, the fastest learner the largest
    hand = np.array([[2.0, 2.0, 2.0], [1.0, 2.5, 1.9], [0.5, 3.0, 1.8]])
    np.testing.assert_allclose(method.mrmc_contribution(hand), [3.75, -5.0, 0.76])
    assert method.top_k(method.mrmc_contribution(hand), 1, np.random.default_rng(0)).tolist() == [0]


def test_top_k_matches_sorting_and_breaks_ties_only_among_tied_scores():
    rng = np.random.default_rng(1)
    scores = rng.permutation(40).astype(float)
    assert method.top_k(scores, 7, rng).tolist() == sorted(np.argsort(-scores)[:7].tolist())
    tied = np.array([5.0, 3, 3, 3, 1, 3, 0])
    picks = {tuple(method.top_k(tied, 3, np.random.default_rng(s))) for s in range(40)}
    assert all(0 in sel and set(sel) <= {0, 1, 2, 3, 5} for sel in picks)
    assert len(picks) > 1, "ties must not always resolve the same way"


@pytest.mark.parametrize("k", [1, 7, 33, 100])
def test_class_quotas_sum_to_k_and_are_proportional(k):
    y = np.repeat([0, 1, 2, 3], [50, 30, 15, 5])
    quota = method.class_quotas(y, k)
    assert sum(quota.values()) == k
    share = {c: k * n / len(y) for c, n in zip(range(4), [50, 30, 15, 5])}
    assert all(abs(quota[c] - share[c]) < 1 for c in quota)


def test_top_per_class_equals_a_brute_force_over_subsets():
    rng = np.random.default_rng(2)
    y = np.array([0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2])
    scores = rng.standard_normal(len(y))
    k = 6
    quota = method.class_quotas(y, k)
    # brute force: among all k-subsets meeting the quotas, the one with the largest total score
    best = max((s for s in itertools.combinations(range(len(y)), k)
                if all(np.sum(y[list(s)] == c) == q for c, q in quota.items())),
               key=lambda s: scores[list(s)].sum())
    assert method.top_per_class(scores, y, k, rng).tolist() == list(best)


def test_strata_sample_takes_equal_shares_of_the_quantile_strata():
    rng = np.random.default_rng(3)
    scores = rng.standard_normal(1000)
    picked = method.strata_sample(scores, 230, 10, rng)
    assert len(picked) == 230 and len(np.unique(picked)) == 230
    strata = pd.qcut(scores, 10, labels=False)  # an independent quantile binning (no ties here)
    counts = np.bincount(strata[picked], minlength=10)
    assert counts.max() - counts.min() <= 1 and counts.sum() == 230
    # a stratum too small for its share passes the surplus on, and the size stays exact
    picked = method.strata_sample(scores[:25], 24, 4, rng)
    assert len(np.unique(picked)) == 24


def _herding_reference(F_: np.ndarray, q: int) -> list[int]:
    """A plain-loop herding for one class: add the candidate that keeps the selected mean closest to the class mean."""
    mu = F_.mean(axis=0)
    chosen: list[int] = []
    for _ in range(q):
        costs = {i: np.linalg.norm(mu - F_[chosen + [i]].mean(axis=0)) for i in range(len(F_)) if i not in chosen}
        chosen.append(min(costs, key=costs.get))
    return chosen


def test_herding_matches_a_plain_loop_and_beats_random_subsets_at_matching_the_mean():
    rng = np.random.default_rng(4)
    features = rng.standard_normal((60, 5))
    y = np.repeat([0, 1], [36, 24])
    picked = method.herding(features, y, 10)
    quota = method.class_quotas(y, 10)
    expected = []
    for c, q in quota.items():
        members = np.flatnonzero(y == c)
        expected += members[_herding_reference(features[members], q)].tolist()
    assert picked.tolist() == sorted(expected)
    members = np.flatnonzero(y == 0)
    mu = features[members].mean(0)
    herd = np.linalg.norm(features[picked[y[picked] == 0]].mean(0) - mu)
    random_errors = [np.linalg.norm(features[rng.choice(members, quota[0], replace=False)].mean(0) - mu)
                     for _ in range(200)]
    assert herd < np.quantile(random_errors, 0.05)


def test_kcenter_greedy_matches_a_plain_loop_and_is_within_twice_the_optimal_radius():
    rng = np.random.default_rng(8)
    points = rng.standard_normal((11, 2))
    k = 3
    picked = method.kcenter_greedy(points, k, np.random.default_rng(9))
    # plain loop: the same first centre, then the farthest point from the chosen ones
    chosen = [int(np.random.default_rng(9).integers(len(points)))]
    while len(chosen) < k:
        gaps = [min(np.linalg.norm(points[i] - points[c]) for c in chosen) for i in range(len(points))]
        chosen.append(int(np.argmax(gaps)))
    assert picked.tolist() == sorted(chosen)

    def radius(centres):
        return max(min(np.linalg.norm(x - points[c]) for c in centres) for x in points)

    optimum = min(radius(s) for s in itertools.combinations(range(len(points)), k))
    assert radius(picked) <= 2 * optimum + 1e-12
    # duplicates never give a repeated centre
    assert len(np.unique(method.kcenter_greedy(np.zeros((6, 2)), 4, rng))) == 4


@pytest.fixture(scope="module")
def pool(p):
    X, y, X_test, y_test = method.load_pool(p, "digits", seed=0)
    return X[:300], y[:300], X_test, y_test


def test_load_pool_is_a_stratified_standardised_split(p):
    X, y, X_test, y_test = method.load_pool(p, "synthetic", seed=1)
    assert len(X) + len(X_test) == p.synthetic_n and X.shape[1] == p.synthetic_features
    np.testing.assert_allclose(X.mean(0).numpy(), 0, atol=1e-5)
    pool_share = np.bincount(y.numpy(), minlength=10) / len(y)
    test_share = np.bincount(y_test.numpy(), minlength=10) / len(y_test)
    assert np.abs(pool_share - test_share).max() < 0.02


def test_trajectory_starts_at_the_fresh_model_and_its_prefix_is_the_short_run(p, pool):
    X, y, _, _ = pool
    long, _ = method.proxy_trajectory(p, X, y, p.full_epochs, seed=5)
    short, _ = method.proxy_trajectory(p, X, y, p.early_epochs, seed=5)
    losses = method.trajectory(long, "loss", len(y))
    assert losses.shape == (p.full_epochs + 1, len(y))
    # t = 0 is the untrained model's cross-entropy, computed here directly
    fresh = method.new_model(p, X.shape[1], 10, seed=5)
    with torch.no_grad():
        np.testing.assert_allclose(losses[0], F.cross_entropy(fresh(X), y, reduction="none").numpy(), rtol=1e-5)
    # MRMC's E_early epochs are the prefix of the full trajectory Forgetting uses (same seed: same run)
    np.testing.assert_allclose(method.trajectory(short, "loss", len(y)), losses[: p.early_epochs + 1], rtol=1e-6)
    assert losses[-1].mean() < losses[0].mean(), "the proxy learns"


def test_the_final_model_sees_only_its_coreset(p, pool):
    X, y, X_test, y_test = pool
    core = np.arange(0, len(y), 3)
    accuracy, seen = method.train_on_coreset(p, X, y, core, X_test, y_test, epochs=3, seed=7)
    assert seen == 3 * len(core)
    # corrupting every row outside the core-set changes nothing
    outside = np.setdiff1d(np.arange(len(y)), core)
    X2, y2 = X.clone(), y.clone()
    X2[outside] = 100.0
    y2[outside] = (y2[outside] + 1) % 10
    assert method.train_on_coreset(p, X2, y2, core, X_test, y_test, epochs=3, seed=7) == (accuracy, seen)


def test_every_method_returns_k_distinct_rows_and_the_balanced_ones_meet_their_quotas(p, pool):
    X, y, _, _ = pool
    signals, _ = method.proxy_trajectory(p, X, y, p.full_epochs, seed=0)
    _, early = method.proxy_trajectory(p, X, y, p.early_epochs, seed=0)
    y_np = y.numpy()
    cores = method.select_all(p, signals, method.penultimate(early, X), y_np, 90, seed=0)
    assert set(cores) == set(method.METHODS)
    quota = method.class_quotas(y_np, 90)
    for name, core in cores.items():
        assert len(np.unique(core)) == 90 and core.min() >= 0 and core.max() < len(y), name
        if name in ("mrmc", "balanced_random", "herding", "mrmc_from_epoch1"):
            assert {c: int(np.sum(y_np[core] == c)) for c in quota} == quota, name
    # MRMC keeps, within each class, the samples with the largest drop of the squared loss
    c = method.mrmc_contribution(method.trajectory(signals, "loss", len(y), upto=p.early_epochs))
    for cls in quota:
        members = np.flatnonzero(y_np == cls)
        chosen = np.intersect1d(cores["mrmc"], members)
        rest = np.setdiff1d(members, chosen)
        assert c[chosen].min() >= c[rest].max()
    # EL2N keeps the largest error norms after E_early epochs
    el2n = method.trajectory(signals, "el2n", len(y))[p.early_epochs]
    assert el2n[cores["el2n"]].min() >= np.delete(el2n, cores["el2n"]).max()


def test_paired_metrics_match_a_direct_computation(p):
    rng = np.random.default_rng(6)
    rows = pd.DataFrame([{"seed": s, "dataset": d, "method": m, "ratio": 0.3, "k": 10, "samples_seen": 300,
                          "accuracy": rng.uniform()} for s in range(4) for d in ("digits", "synthetic")
                         for m in ("mrmc", "random", "el2n")])
    summary, by_pool = _paired_over_pools(rows, ["digits", "synthetic"], "mrmc", {"digits": "random", "synthetic": "el2n"}, 0.3)
    acc = rows.set_index(["dataset", "method", "seed"])["accuracy"]
    direct = [(acc["digits", "mrmc", s] - acc["digits", "random", s] + acc["synthetic", "mrmc", s]
               - acc["synthetic", "el2n", s]) / 2 for s in range(4)]
    assert summary["mean"] == pytest.approx(np.mean(direct))
    assert by_pool["digits"] == pytest.approx(np.mean([acc["digits", "mrmc", s] - acc["digits", "random", s] for s in range(4)]))


def test_run_seed_rows_and_timing_have_equal_budgets(p):
    small = params_for("mrmc_coreset", datasets=["digits"], timing_dataset="digits", ratios=[0.1, 0.3, 0.5],
                       synthetic_n=300)
    out = method.run_seed(small, seed=0)
    rows = pd.DataFrame(out["rows"])
    assert len(out["diagnostics"]) == 1 and -1 <= out["diagnostics"][0]["spearman_c_minus_early_loss"] <= 1
    assert set(rows["method"]) == {*method.METHODS, "full"}
    sub = rows[rows["method"] != "full"]
    assert (sub["samples_seen"] == sub["k"] * small.train_epochs).all()
    assert sub.groupby("ratio")["samples_seen"].nunique().eq(1).all()
    timing = method.time_scorers(small, seed=0)
    assert len(timing) == 3 * small.timing_repeats and (timing["seconds"] > 0).all()
    metrics = _metrics(rows.assign(dataset="digits"), timing, small)
    assert metrics["sanity"]["samples_seen_spread"] == 0


def test_checks_that_hold_by_construction_are_sanity_checks():
    """The cost ratio follows from the proxy epoch counts we set (E_early against the full trajectory): counted as a
    claim, it could not have failed."""
    from flows.mrmc_coreset.claims import PAPER
    roles = {c.id: c.role for c in PAPER.claims}
    assert all(roles[cid] == "sanity" for cid in ("mrmc_scoring_cheaper_than_forgetting",))

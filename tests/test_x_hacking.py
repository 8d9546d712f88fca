"""x_hacking: SHAP shares against hand computations, the success / censoring / defensibility rules,
the redundancy measure on known cases, the speed-up statistic, and determinism of a search."""

import numpy as np
import pytest
from scipy import stats as sps
from conftest import params_for
from sklearn.linear_model import LogisticRegression
from sklearn.tree import DecisionTreeClassifier

from flows.x_hacking import evaluate
from flows.x_hacking import method as m

SETTINGS = dict(n_targets=2, n_trials=10, tpe_startup_trials=4, share_factor=0.5, test_size=0.2, val_fraction=0.25,
                shap_rows=100, baseline_trees=20, rf_max_trees=10, gb_max_trees=15, allow_drop_target=False,
                synth_n_samples=300, redundancy_trees=30)
P = params_for("x_hacking", **SETTINGS)


def test_linear_shap_matches_hand_formula():
    """Logistic regression with an independent masker: phi_j(x) = w_j (x_j - mean_bg_j), so
    mean |phi_j| = |w_j| * mean_i |x_ij - mean_bg_j|, computed here by hand."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 4))
    y = (X @ np.array([2.0, -1.0, 0.5, 0.0]) + 0.3 * rng.standard_normal(400) > 0).astype(int)
    model = LogisticRegression(C=10.0).fit(X[:300], y[:300])
    w, background, explain = model.coef_[0], X[:300], X[300:]
    by_hand = np.abs(w) * np.abs(explain - background.mean(axis=0)).mean(axis=0)
    got = m.mean_abs_shap(model, background, explain)
    np.testing.assert_allclose(got, by_hand, rtol=1e-8, atol=1e-12)
    assert m.feature_share(got, 0) == pytest.approx(by_hand[0] / by_hand.sum(), rel=1e-8)
    assert m.feature_share(got, 0) > m.feature_share(got, 3)


def test_tree_stump_puts_all_attribution_on_its_feature():
    """A depth-1 tree splitting on feature 2: share 1.0, and phi_2(x) = P(y=1 | leaf(x)) - the
    cover-weighted mean leaf value (path-dependent TreeSHAP of a stump), computed by hand."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((200, 5))
    y = (X[:, 2] + 0.5 * rng.standard_normal(200) > 0.3).astype(int)
    stump = DecisionTreeClassifier(max_depth=1, random_state=0).fit(X, y)
    assert stump.tree_.feature[0] == 2
    imp = m.mean_abs_shap(stump, X, X[:50])
    assert m.feature_share(imp, 2) == pytest.approx(1.0)
    assert np.all(imp[[0, 1, 3, 4]] == 0)
    left = X[:, 2] <= stump.tree_.threshold[0]
    p_left, p_right = y[left].mean(), y[~left].mean()
    expected = left.mean() * p_left + (1 - left.mean()) * p_right
    leaf_p = np.where(X[:50, 2] <= stump.tree_.threshold[0], p_left, p_right)
    assert imp[2] == pytest.approx(np.abs(leaf_p - expected).mean(), rel=1e-9)


def test_degenerate_importance_counts_as_unhacked():
    assert m.feature_share(np.zeros(4), 1) == 1.0
    assert m.feature_share(np.array([1.0, 3.0]), 0) == pytest.approx(0.25)


def test_trials_to_success_is_censored_at_budget_plus_one():
    assert m.trials_to_success([False, False, True, True], budget=4) == 3
    assert m.trials_to_success([True], budget=30) == 1
    assert m.trials_to_success([False] * 30, budget=30) == 31
    assert m.trials_to_success([], budget=30) == 31
    # a success after the budget does not count
    assert m.trials_to_success([False] * 5 + [True], budget=5) == 6


def test_defensibility_and_success_rules():
    assert m.is_defensible(0.95, 0.95)                # ties are defensible
    assert m.is_defensible(0.96, 0.95)
    assert not m.is_defensible(0.94, 0.95)
    assert m.is_success(0.95, share=0.10, acc0=0.95, s0=0.20, share_factor=0.5)   # exactly half
    assert not m.is_success(0.95, share=0.1001, acc0=0.95, s0=0.20, share_factor=0.5)
    assert not m.is_success(0.90, share=0.0, acc0=0.95, s0=0.20, share_factor=0.5)  # not defensible


def test_selection_protects_the_target_feature_unless_allowed():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((200, 6))
    y = (X[:, 0] > 0).astype(int)         # feature 5 is pure noise
    params = {"selector": "kbest", "k": 1}
    protected = m.selection_mask(params, X, y, target=5, seed=0, allow_drop_target=False)
    assert protected.tolist() == [True, False, False, False, False, True]
    dropped = m.selection_mask(params, X, y, target=5, seed=0, allow_drop_target=True)
    assert dropped.tolist() == [True, False, False, False, False, False]


def test_redundancy_high_for_a_duplicate_and_near_zero_for_an_independent_feature():
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal(300), rng.standard_normal(300)
    X = np.column_stack([a, a + 0.01 * rng.standard_normal(300), b])
    assert m.redundancy_r2(X, 0, n_estimators=50) > 0.95
    assert m.redundancy_r2(X, 2, n_estimators=50) < 0.1


def test_binarise_targets():
    assert m.binarise("wine", np.array([0, 1, 2, 0])).tolist() == [1, 0, 0, 1]
    assert m.binarise("diabetes", np.array([10.0, 20.0, 30.0, 40.0])).tolist() == [0, 0, 1, 1]


def test_speedup_summary_on_a_hand_made_case():
    """Pair A: per-seed ratios 2, 2, 3 (medians 20 vs 10 -> 2); pair B: 4 vs 1 -> 4 on every seed; pair C never
    succeeds (not susceptible). Per seed the mean log ratio is log(sqrt(8)), log(sqrt(8)), log(sqrt(12)): the
    headline is their exponentiated mean, and the interval the exponentiated t interval of those logs."""
    B = 30
    spec = {("A", 1): ([10, 20, 30], [5, 10, 10]), ("B", 1): ([4, 4, 4], [1, 1, 1]), ("C", 1): ([31] * 3, [31] * 3)}
    runs = [{"dataset": d, "rank": r, "seed": s, "searcher": name, "trials_to_success": tts[i]}
            for (d, r), pair in spec.items() for name, tts in zip(("random", "bo"), pair) for i, s in enumerate(range(3))]
    out = evaluate.speedup_summary(runs, B, min_success_rate=0.5)
    assert out["n_susceptible"] == 2
    logs = np.log([np.sqrt(8.0), np.sqrt(8.0), np.sqrt(12.0)])
    assert out["geomean"] == pytest.approx(np.exp(logs.mean()))
    half = sps.t.ppf(0.975, 2) * logs.std(ddof=1) / np.sqrt(3)
    assert (out["ci_low"], out["ci_high"]) == pytest.approx(np.exp([logs.mean() - half, logs.mean() + half]))
    by = {p["dataset"]: p for p in out["pairs"]}
    assert by["A"]["ratio"] == pytest.approx(2.0) and not by["C"]["susceptible"]


def test_speedup_censored_fraction_counts_searches_where_either_searcher_failed():
    B = 30
    spec = {("A", 1): ([10, 31, 31], [5, 10, 31]), ("C", 1): ([31] * 3, [31] * 3)}
    runs = [{"dataset": d, "rank": r, "seed": s, "searcher": name, "trials_to_success": tts[i]}
            for (d, r), pair in spec.items() for name, tts in zip(("random", "bo"), pair) for i, s in enumerate(range(3))]
    out = evaluate.speedup_summary(runs, B, min_success_rate=0.5)
    assert out["n_susceptible"] == 1                     # C is not susceptible and not counted
    assert out["censored"] == pytest.approx(2 / 3)       # seeds 1 and 2 of A have a censored searcher


def test_speedup_control_keeps_the_startup_and_reverses_the_rest():
    success = [False, False, True, False, False, False, True, False]   # random sampling's own trials
    assert m.control_trials_to_success(success, budget=8, startup=4) == 3    # success inside the startup: shared
    late = [False] * 4 + [True, False, False, False]
    assert m.trials_to_success(late, 8) == 5
    assert m.control_trials_to_success(late, budget=8, startup=4) == 8      # trials 5..8 reversed
    assert m.control_trials_to_success([False] * 8, budget=8, startup=4) == 9
    runs = [{"dataset": "A", "rank": 1, "seed": 0, "searcher": s, "trials_to_success": 5} for s in ("random", "bo")]
    trials = [{"dataset": "A", "rank": 1, "seed": 0, "searcher": "random", "trial": i + 1, "success": ok}
              for i, ok in enumerate(late)]
    control = m.control_runs(runs, trials, budget=8, startup=4)
    by = {r["searcher"]: r["trials_to_success"] for r in control}
    assert by == {"random": 5, "bo": 8} and len(control) == 2


def test_spearman_null_quantile_is_what_chance_reaches():
    x, y = np.arange(9.0), np.arange(9.0)
    q95 = m.spearman_null_quantile(x, y, q=0.95, n_perm=4000, seed=0)
    assert 0.45 < q95 < 0.7          # exact null of Spearman at n = 9: P(rho >= 0.6) is about 0.045
    assert m.spearman_null_quantile(x, y, q=0.5, n_perm=4000, seed=0) == pytest.approx(0.0, abs=0.05)


def test_search_is_deterministic_and_same_params_give_same_metrics():
    X, y, _ = m.load_problem("wine", 0, P.synth_n_samples)
    split = m.make_split(X, y, 0, P.test_size, P.val_fraction, P.shap_rows)
    args = dict(split=split, target=3, acc0=0.95, s0=0.3, seed=0, sampler_seed=m.sub_seed(0, "wine", 1), p=P)
    bo_1, bo_2 = m.run_search("bo", **args), m.run_search("bo", **args)
    assert bo_1 == bo_2
    # Same sampler seed: TPE's random startup trials are random sampling's first trials, and the
    # same pipeline gives the same metrics whichever searcher proposed it.
    rnd = m.run_search("random", **args)
    k = P.tpe_startup_trials
    assert rnd[:k] == bo_1[:k]
    assert len(bo_1) == P.n_trials
    assert all(0.0 <= r["share"] <= 1.0 for r in bo_1)


def test_run_unit_shapes_and_censoring():
    out = m.run_unit(params_for("x_hacking", **{**SETTINGS, "n_trials": 4, "n_targets": 1}), "synth_r4", seed=0)
    assert [r["searcher"] for r in out["runs"]] == ["bo"]       # synthetic: BO only
    run = out["runs"][0]
    assert 1 <= run["trials_to_success"] <= 5
    assert run["succeeded"] == (run["trials_to_success"] <= 4)
    assert len(out["trials"]) == 4


def test_liblinear_fits_in_concurrent_threads_match_serial_fits():
    """Seeds run in threads, and liblinear draws from one process-wide generator: without the
    lock in ``method.fit`` concurrent L1 fits interleave their draws and differ from serial ones."""
    from concurrent.futures import ThreadPoolExecutor

    X, y, _ = m.load_problem("breast_cancer", 0, P.synth_n_samples)
    X, y = X[:250], y[:250]

    def coef(seed: int) -> list[float]:
        return m.fit(m.logistic_regression(1.0, l1=True, seed=seed), X, y).coef_[0].tolist()

    serial = [coef(s) for s in range(6)]
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(coef, range(6))) == serial


def test_params_reject_inconsistent_config():
    from flows.x_hacking.params import SMOKE, Params

    good = P.model_dump()
    Params.model_validate({**good, **SMOKE})
    for bad in ({"datasets": ["wine", "wine"]}, {"datasets": ["iris"]}, {"synth_n_redundant": [9]},
                {"synth_n_redundant": [-1]}, {"synth_seeds": 2, "seeds": 1}):
        with pytest.raises(ValueError):
            Params.model_validate({**good, **bad})

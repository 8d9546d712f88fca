"""Unit tests of flows/pred_equiv_trees/method.py against independent references: truth tables,
brute force over completions of missing values, brute force over prime implicants and covers,
brute force over acquisition strategies, sympy and scikit-learn."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from conftest import params_for
from sklearn.tree import DecisionTreeClassifier

from flows.pred_equiv_trees import method as m
from flows.pred_equiv_trees.params import SMOKE, Params


# ------------------------------------------------------------------ helpers (independent references)
def random_tree(rng: np.random.Generator, n_features: int, depth: int) -> m.Tree:
    """A random full tree over binary features; a feature is never reused on a path."""
    nodes: list[list[int]] = []

    def add(d: int, avail: list[int]) -> int:
        idx = len(nodes)
        nodes.append([-1, -1, -1, -1])
        if d == depth or not avail or rng.random() < 0.15:
            nodes[idx][3] = int(rng.integers(2))
        else:
            f = int(rng.choice(avail))
            rest = [a for a in avail if a != f]
            zero, one = add(d + 1, rest), add(d + 1, rest)
            nodes[idx][:3] = [f, zero, one]
        return idx

    add(0, list(range(n_features)))
    return m._tree([tuple(n) for n in nodes])


def all_inputs(d: int) -> np.ndarray:
    return np.array(list(itertools.product([0, 1], repeat=d)), dtype=np.int8)


def truth_table(tree: m.Tree, d: int) -> np.ndarray:
    return m.tree_predict(tree, all_inputs(d))


def brute_decision(tree: m.Tree, x: np.ndarray) -> int:
    """1/0 if every completion of the missing entries (-1) of x gets that prediction, else -1."""
    miss = np.flatnonzero(x < 0)
    comps = np.repeat(x[None, :], 2 ** len(miss), axis=0)
    comps[:, miss] = all_inputs(len(miss)) if len(miss) else comps[:, miss]
    preds = set(m.tree_predict(tree, comps).tolist())
    return preds.pop() if len(preds) == 1 else -1


def brute_prime_implicants(table: np.ndarray, d: int) -> set[tuple[int, int]]:
    """Every term over d features that implies f and from which no literal can be dropped."""
    X = all_inputs(d)
    on = table == 1

    def implicant(pos: int, neg: int) -> bool:
        sat = np.ones(len(X), dtype=bool)
        for j in range(d):
            if (pos >> j) & 1:
                sat &= X[:, j] == 1
            if (neg >> j) & 1:
                sat &= X[:, j] == 0
        return bool(np.all(on[sat]))

    out = set()
    for lits in itertools.product([None, 0, 1], repeat=d):
        pos = sum(1 << j for j, v in enumerate(lits) if v == 1)
        neg = sum(1 << j for j, v in enumerate(lits) if v == 0)
        if not implicant(pos, neg):
            continue
        if all(not implicant(pos & ~(1 << j), neg) for j in m.bits(pos)) and \
           all(not implicant(pos, neg & ~(1 << j)) for j in m.bits(neg)):
            out.add((pos, neg))
    return out


# ------------------------------------------------------------------ faithfulness
def test_dnf_agrees_with_sklearn_tree_on_every_leaf_region_and_random_inputs():
    rng = np.random.default_rng(0)
    X = rng.integers(0, 2, size=(400, 10)).astype(np.int8)
    y = ((X[:, 0] & X[:, 1]) | (X[:, 2] & ~X[:, 3] & 1) | (rng.random(400) < 0.1)).astype(int)
    cart = DecisionTreeClassifier(max_depth=4, random_state=0).fit(X, y)
    tree = m.tree_from_sklearn(cart)
    bcf = m.blake_canonical_form(m.path_dnf(tree))
    mdnf = m.minimal_dnf(bcf)
    # Every leaf region: rows that satisfy the leaf's path and are random elsewhere.
    t = cart.tree_
    checked = 0

    def walk(node: int, fixed: dict[int, int]) -> None:
        nonlocal checked
        if t.children_left[node] < 0:
            rows = rng.integers(0, 2, size=(50, 10)).astype(np.int8)
            for f, v in fixed.items():
                rows[:, f] = v
            leaf_label = cart.classes_[np.argmax(t.value[node, 0])]
            assert np.all(m.dnf_predict(bcf, rows) == leaf_label)
            assert np.all(m.dnf_predict(mdnf, rows) == leaf_label)
            checked += 1
            return
        f = int(t.feature[node])
        walk(int(t.children_left[node]), {**fixed, f: 0})
        walk(int(t.children_right[node]), {**fixed, f: 1})

    walk(0, {})
    assert checked == cart.get_n_leaves()
    Xr = rng.integers(0, 2, size=(3000, 10)).astype(np.int8)
    assert np.array_equal(m.dnf_predict(bcf, Xr), cart.predict(Xr))
    assert np.array_equal(m.dnf_predict(mdnf, Xr), cart.predict(Xr))
    assert np.array_equal(m.tree_predict(tree, Xr), cart.predict(Xr))


def test_treefarms_trees_are_read_with_the_right_branch_semantics():
    import pandas as pd
    from treefarms.model.tree_classifier import TreeClassifier

    rng = np.random.default_rng(1)
    X = rng.integers(0, 2, size=(200, 6)).astype(np.int8)
    y = (X[:, 0] ^ (X[:, 1] & X[:, 2])).astype(int)
    config = {"depth_budget": 3, "regularization": 0.02, "rashomon_bound_adder": 0.05, "rashomon_bound_multiplier": 0,
              "rashomon_bound": 0, "rashomon_ignore_trivial_extensions": True, "verbose": False}
    trees, count = m.rashomon_set(X, y, config, max_trees=50, rng=rng)
    assert count >= 2 and len(trees) == min(count, 50)
    from treefarms import TREEFARMS
    # Rebuild the raw dicts for the reference: tree_from_dict(raw) must predict like TreeClassifier(raw).
    frame = pd.DataFrame(X.astype(int), columns=[f"b{j}" for j in range(6)])
    with m._TREEFARMS, m._silenced_stdout():
        model = TREEFARMS(dict(config))
        model.fit(frame, pd.Series(y, name="y"))
    for i in range(min(10, model.get_tree_count())):
        raw = model.model_set.get_tree_at_idx_raw(i)
        ref = np.asarray(TreeClassifier(raw).predict(frame)).astype(int).ravel()
        assert np.array_equal(m.tree_predict(m.tree_from_dict(raw), X), ref)


# ------------------------------------------------------------------ canonicity
def test_two_predictively_equivalent_trees_get_the_same_bcf_and_dnf():
    # f = (x0 & x1) | x2, once with x0 at the root and once with x2 at the root.
    a = m._tree([(0, 1, 4, -1),            # x0?
                 (2, 2, 3, -1), (-1, -1, -1, 0), (-1, -1, -1, 1),                 # x0=0: x2
                 (1, 5, 8, -1), (2, 6, 7, -1), (-1, -1, -1, 0), (-1, -1, -1, 1),  # x0=1: x1, then x2
                 (-1, -1, -1, 1)])
    b = m._tree([(2, 1, 6, -1),            # x2?
                 (0, 2, 3, -1), (-1, -1, -1, 0),                                  # x2=0: x0
                 (1, 4, 5, -1), (-1, -1, -1, 0), (-1, -1, -1, 1),
                 (-1, -1, -1, 1)])
    assert np.array_equal(truth_table(a, 3), truth_table(b, 3))
    assert m.path_dnf(a) != m.path_dnf(b)                                  # different structure
    bcf_a, bcf_b = m.blake_canonical_form(m.path_dnf(a)), m.blake_canonical_form(m.path_dnf(b))
    assert bcf_a == bcf_b == frozenset({(0b011, 0), (0b100, 0)})
    assert m.minimal_dnf(bcf_a) == m.minimal_dnf(bcf_b)
    assert m.function_key(a) == m.function_key(b)
    # Flip one leaf: a different function, a different BCF.
    c = m._tree([(2, 1, 6, -1), (0, 2, 3, -1), (-1, -1, -1, 0), (1, 4, 5, -1), (-1, -1, -1, 1), (-1, -1, -1, 1),
                 (-1, -1, -1, 1)])
    assert m.blake_canonical_form(m.path_dnf(c)) != bcf_a
    assert m.function_key(c) != m.function_key(a)


def test_bcf_equality_iff_truth_tables_equal_on_random_trees():
    rng = np.random.default_rng(2)
    trees = [random_tree(rng, 4, 3) for _ in range(150)]
    tables = [truth_table(t, 4).tobytes() for t in trees]
    bcfs = [m.blake_canonical_form(m.path_dnf(t)) for t in trees]
    keys = [m.function_key(t) for t in trees]
    n_equal = 0
    for i in range(len(trees)):
        for j in range(i + 1, len(trees)):
            same = tables[i] == tables[j]
            n_equal += same
            assert (bcfs[i] == bcfs[j]) == same
            assert (keys[i] == keys[j]) == same
    assert n_equal > 20            # the check saw equivalent pairs, not only distinct ones
    agreement = m.partition_agreement(bcfs, keys)
    assert agreement["mismatched_pairs"] == 0 and agreement["pair_agreement"] == 1.0


def test_bcf_is_exactly_the_set_of_prime_implicants():
    rng = np.random.default_rng(3)
    for _ in range(40):
        tree = random_tree(rng, 4, 4)
        table = truth_table(tree, 4)
        assert set(m.blake_canonical_form(m.path_dnf(tree))) == brute_prime_implicants(table, 4)
    assert m.blake_canonical_form([]) == m.FALSE
    assert m.blake_canonical_form([(1, 0), (0, 1)]) == m.TRUE       # x0 | ~x0


def test_minimal_dnf_is_a_minimum_cover_and_matches_sympy_size():
    from sympy import symbols
    from sympy.logic import SOPform

    rng = np.random.default_rng(4)
    syms = symbols("x0:5")
    for _ in range(25):
        tree = random_tree(rng, 5, 4)
        table = truth_table(tree, 5)
        bcf = m.blake_canonical_form(m.path_dnf(tree))
        mdnf = m.minimal_dnf(bcf)
        assert np.array_equal(m.dnf_predict(mdnf, all_inputs(5)), table)
        # brute force: the fewest prime implicants whose union is the ON-set
        primes = sorted(bcf)
        best = None
        for r in range(0 if not table.any() else 1, len(primes) + 1):
            for combo in itertools.combinations(primes, r):
                if np.array_equal(m.dnf_predict(frozenset(combo), all_inputs(5)), table):
                    best = r
                    break
            if best is not None:
                break
        assert len(mdnf) == best
        minterms = [list(map(int, row)) for row in all_inputs(5)[table == 1]]
        if minterms and len(minterms) < 32:
            sop = SOPform(syms, minterms)
            n_sympy = len(sop.args) if sop.func.__name__ == "Or" else 1
            assert len(mdnf) <= n_sympy


# ------------------------------------------------------------------ missing values
def test_partial_prediction_against_brute_force_over_completions():
    rng = np.random.default_rng(5)
    partial = np.array(list(itertools.product([-1, 0, 1], repeat=5)), dtype=np.int8)      # all 243 patterns
    for _ in range(30):
        tree = random_tree(rng, 5, 4)
        bcf = m.blake_canonical_form(m.path_dnf(tree))
        mdnf = m.minimal_dnf(bcf)
        truth = np.array([brute_decision(tree, x) for x in partial])
        got = m.dnf_predict_partial(bcf, partial)
        assert np.array_equal(got, truth)                              # BCF: exact
        for pred in (m.dnf_predict_partial(mdnf, partial), m.tree_predict(tree, partial),
                     m.conservative_predict(tree, partial)):
            decided = pred >= 0
            assert np.array_equal(pred[decided], truth[decided])       # sound ...
            assert np.all(got[decided] >= 0)                           # ... and never beyond the BCF
    # a case where path traversal is stuck but the BCF decides: f = x0 | x1, x0 missing, x1 = 1
    tree = m._tree([(0, 1, 4, -1), (1, 2, 3, -1), (-1, -1, -1, 0), (-1, -1, -1, 1), (-1, -1, -1, 1)])
    x = np.array([[-1, 1]], dtype=np.int8)
    assert m.tree_predict(tree, x)[0] == -1
    assert m.dnf_predict_partial(m.blake_canonical_form(m.path_dnf(tree)), x)[0] == 1


def test_binarizer_hides_all_bins_of_a_missing_raw_feature():
    b = m.Binarizer(orig_columns=(2, 0), thresholds=(0.5, 1.5, 3.0), groups=(0, 0, 1), names=("a", "b", "c"))
    X = np.array([[4.0, 9.0, 1.0], [np.nan, 9.0, 2.0], [1.0, 9.0, np.nan]])
    assert b.transform(X).tolist() == [[1, 0, 1], [1, 1, -1], [-1, -1, 0]]


# ------------------------------------------------------------------ cost-optimal order
def _brute_min_cost(tree: m.Tree, d: int, groups: np.ndarray, costs: np.ndarray, X: np.ndarray) -> float:
    """Enumerate every adaptive acquisition strategy (a tree of queries that stops exactly when all
    completions agree) and return the smallest mean cost on the rows X."""
    def decided(known: dict[int, int]) -> bool:
        x = np.full(d, -1, dtype=np.int8)
        for f, v in known.items():
            x[f] = v
        return brute_decision(tree, x) >= 0

    def strategies(known: dict[int, int]):
        if decided(known):
            return [None]
        out = []
        for a in tree.used_features:
            if a in known:
                continue
            for s0 in strategies({**known, a: 0}):
                for s1 in strategies({**known, a: 1}):
                    out.append((a, s0, s1))
        return out

    def cost_of(strategy, x) -> float:
        total, seen = 0.0, set()
        while strategy is not None:
            a, s0, s1 = strategy
            if groups[a] not in seen:
                total += costs[groups[a]]
                seen.add(groups[a])
            strategy = s1 if x[a] == 1 else s0
        return total

    all_s = strategies({})
    assert len(all_s) > 5
    return min(np.mean([cost_of(s, x) for x in X]) for s in all_s)


def test_optimal_policy_matches_brute_force_over_strategies_and_beats_fixed_orders():
    rng = np.random.default_rng(6)
    d = 4
    groups = np.array([0, 0, 1, 2])              # features 0 and 1 are two bins of one raw feature
    costs = np.array([3.0, 1.0, 5.0])
    checked = 0
    for _ in range(6):
        tree = random_tree(rng, d, 3)
        if len(tree.used_features) < 3:
            continue
        X = rng.integers(0, 2, size=(40, d)).astype(np.int8)
        X[:, 1] = X[:, 0] | X[:, 1]              # correlated bins, as for real thresholds
        problem = m.CostProblem(m.blake_canonical_form(m.path_dnf(tree)), tree.used_features, groups, costs, d)
        value, table = m.optimal_policy(problem, X)
        assert value == pytest.approx(_brute_min_cost(tree, d, groups, costs, X))
        cost_rows, preds = m.run_policy(problem, m.policy_from_table(problem, table), X)
        assert cost_rows.mean() == pytest.approx(value)
        assert np.array_equal(preds, m.tree_predict(tree, X))
        # never worse than the best fixed order (stop as soon as the BCF decides)
        best_fixed = min(np.mean(m.run_policy(problem, lambda s, o=order, problem=problem: next(a for a in o if a in problem.unknown(s)), X)[0])
                         for order in itertools.permutations(range(len(problem.used))))
        assert value <= best_fixed + 1e-12
        assert value <= m.path_cost(problem, tree, X).mean() + 1e-12
        checked += 1
    assert checked >= 3


def test_group_discount_and_q_learning_keeps_predictions():
    rng = np.random.default_rng(7)
    X = rng.integers(0, 2, size=(300, 6)).astype(np.int8)
    y = ((X[:, 0] & X[:, 1]) | X[:, 2]).astype(int)
    tree = m.tree_from_sklearn(DecisionTreeClassifier(max_depth=3, random_state=0).fit(X, y))
    groups = np.array([0, 0, 1, 2, 3, 4])
    costs = np.array([4.0, 1.0, 9.0, 2.0, 2.0])
    problem = m.CostProblem(m.blake_canonical_form(m.path_dnf(tree)), tree.used_features, groups, costs, 6)
    if 0 in problem.used and 1 in problem.used:
        a0, a1 = problem.used.index(0), problem.used.index(1)
        s = problem.reveal(problem.start, a0, X[0])
        assert problem.cost(a1, problem.start) == 4.0 and problem.cost(a1, s) == 0.0
    Q, seen = m.q_learning(problem, tree, X, np.random.default_rng(0), episodes=2000, alpha=0.1, gamma=0.9,
                           exploration=0.5)
    cost_q, preds = m.run_policy(problem, m.q_policy(problem, Q, seen), X)
    assert np.array_equal(preds, m.tree_predict(tree, X))
    opt, _ = m.optimal_policy(problem, X)
    assert cost_q.mean() >= opt - 1e-9
    assert cost_q.mean() <= m.path_cost(problem, tree, X).mean() + 1e-9


def test_random_order_control_keeps_predictions_and_lies_between_optimum_and_buying_everything():
    rng = np.random.default_rng(7)
    X = rng.integers(0, 2, size=(300, 6)).astype(np.int8)
    y = ((X[:, 0] & X[:, 1]) | X[:, 2]).astype(int)
    tree = m.tree_from_sklearn(DecisionTreeClassifier(max_depth=3, random_state=0).fit(X, y))
    problem = m.CostProblem(m.blake_canonical_form(m.path_dnf(tree)), tree.used_features, np.arange(6),
                            np.array([4.0, 1.0, 9.0, 2.0, 2.0, 3.0]), 6)
    cost_r, preds = m.run_policy(problem, m.random_order(problem, np.random.default_rng(1)), X)
    assert np.array_equal(preds, m.tree_predict(tree, X))          # same stopping rule: same predictions
    opt, _ = m.optimal_policy(problem, X)
    assert opt - 1e-9 <= cost_r.mean() <= m.all_used_cost(problem) + 1e-9
    # it is a random order: two streams choose differently on some row
    other, _ = m.run_policy(problem, m.random_order(problem, np.random.default_rng(2)), X)
    assert not np.array_equal(cost_r, other)


# ------------------------------------------------------------------ importance, determinism
def test_gini_importance_matches_sklearn():
    rng = np.random.default_rng(8)
    X = rng.integers(0, 2, size=(500, 7)).astype(np.int8)
    y = ((X[:, 0] & X[:, 3]) | (X[:, 5] & (rng.random(500) < 0.7))).astype(int)
    cart = DecisionTreeClassifier(max_depth=4, random_state=0).fit(X, y)
    got = m.gini_importance(m.tree_from_sklearn(cart), X, y, 7)
    assert np.allclose(got, cart.feature_importances_)


def test_model_reliance_is_identical_for_equivalent_trees():
    a = m._tree([(0, 1, 2, -1), (-1, -1, -1, 0), (1, 3, 4, -1), (-1, -1, -1, 0), (-1, -1, -1, 1)])   # x0 & x1
    b = m._tree([(1, 1, 2, -1), (-1, -1, -1, 0), (0, 3, 4, -1), (-1, -1, -1, 0), (-1, -1, -1, 1)])   # x1 & x0
    rng = np.random.default_rng(9)
    X = rng.integers(0, 2, size=(200, 3)).astype(np.int8)
    y = (X[:, 0] & X[:, 1]).astype(int)
    out = m.importance_over_set([a, a, a, b], np.array([0, 0, 0, 0]), X, y, rng)
    assert out["model_reliance"]["max_within_class_spread"] == 0.0
    assert out["gini"]["max_within_class_spread"] > 0.0         # structure-dependent


def test_run_unit_is_deterministic_and_faithful():
    p = params_for("pred_equiv_trees", planted_n=300, test_size=0.3, n_top_features=6, quantiles=[0.333333, 0.666667],
                   cart_depth=3, n_random_inputs=100, rset_depth=2, rset_regularization=0.02, rset_epsilon=0.03,
                   rset_max_trees=30, missing_ps=[0.2], missing_repeats=2, knn_repeats=1, knn_neighbors=5,
                   rset_missing_p=0.2, cost_depth=2, cost_low=1, cost_high=9, q_episodes=200, q_alpha=0.1,
                   q_gamma=0.9, q_exploration=0.5)
    a = m.run_unit(p, "planted_dnf", 3)
    b = m.run_unit(p, "planted_dnf", 3)
    def strip(r: dict) -> str:          # JSON text: NaN entries compare equal
        r = {k: v for k, v in r.items() if k != "timings"}
        r["cost"] = {k: v for k, v in r["cost"].items() if k != "q_seconds"}
        return json.dumps(r, sort_keys=True)
    assert strip(a) == strip(b)
    assert min(a["faithful"].values()) == 1.0
    assert a["rashomon"]["mismatched_pairs"] == 0
    assert a["cost"]["q_pred_agree"] == 1.0
    assert a["cost"]["test_random"] > 0                                  # the control is computed


def test_params_reject_inconsistent_config():
    good = params_for("pred_equiv_trees", smoke=False).model_dump()
    Params.model_validate({**good, **SMOKE})
    for bad in ({"missing_ps": [0.1, 0.3]}, {"missing_ps": [0.2, 1.0]}, {"quantiles": [0.0, 0.5]},
                {"cost_low": 5, "cost_high": 4}, {"knn_repeats": 30}, {"datasets": ["iris"]}):
        with pytest.raises(ValueError):
            Params.model_validate({**good, **bad})

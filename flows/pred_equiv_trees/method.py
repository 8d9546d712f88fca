"""Leveraging Predictive Equivalence in Decision Trees (McTavish, Boner, Donnelly, Seltzer, Rudin;
ICML 2025): a Boolean representation of a decision tree that does not depend on the tree's
structure, and three uses of it.

Read top to bottom:

1. data         -- bundled tables (breast_cancer, wine class 0 vs rest) binarised by train-set
                   quantile thresholds of their top features, and a synthetic task with a planted DNF;
2. trees        -- one array representation for scikit-learn CART trees and TreeFARMS trees
                   (``x[feature] == 1`` goes to ``child1``), path traversal that gets *stuck* on a
                   missing split, TreeFARMS Rashomon sets;
3. logic        -- terms as bitmask pairs; the path DNF of the positive leaves (Alg. 1), the Blake
                   canonical form = all prime implicants by iterated consensus (Alg. 4), a minimum
                   DNF = a minimum cover of the ON-set by prime implicants (Alg. 5: Quine-McCluskey's
                   covering step solved exactly as an integer program), prediction under missing
                   values (Alg. 2), and an independent truth-table key of the tree's function;
4. missingness  -- MCAR masks on the original features: which test rows the BCF, the minimal DNF,
                   path traversal and the "all used features observed" rule can predict, against
                   mean and k-NN imputation;
5. importance   -- model reliance and Gini importance over a Rashomon set, averaged over all trees
                   vs over predictive-equivalence classes (one weight per BCF);
6. cost         -- feature-acquisition cost until the BCF decides: path traversal, cheapest-first,
                   a random order (the negative control), every used feature, tabular Q-learning warm-started from the tree (Alg. 6), and
                   the exact optimum by dynamic programming over partial assignments;
7. one unit     -- ``run_unit(p, dataset, seed)`` runs 4-6 on one (dataset, seed), ``p`` the flow's
                   typed params.

A *term* is a pair ``(pos, neg)`` of int bitmasks over the binary features: the conjunction of
``x_j = 1`` for the bits of ``pos`` and ``x_j = 0`` for the bits of ``neg``. A DNF is a frozenset of
terms; ``frozenset()`` is the constant False and ``frozenset({(0, 0)})`` the constant True. Partial
inputs are int8 arrays with ``-1`` for a missing value. No Prefect, no DVC; randomness only through
``np.random.default_rng`` and scikit-learn ``random_state``.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import optimize, sparse
from scipy.stats import kendalltau
from sklearn.datasets import load_breast_cancer, load_wine
from sklearn.feature_selection import f_classif
from sklearn.impute import KNNImputer, SimpleImputer
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeClassifier
from sklearn.utils import resample

from flows.pred_equiv_trees.params import DATASETS, Params
Term = tuple[int, int]
DNF = frozenset  # frozenset[Term]
TRUE: DNF = frozenset({(0, 0)})
FALSE: DNF = frozenset()

# The TreeFARMS extension keeps its configuration in process-wide state and prints from C++:
# one fit at a time, with stdout silenced at the file-descriptor level.
_TREEFARMS = threading.Lock()


# ----------------------------------------------------------------------------------------------
# 1. Data
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Binarizer:
    """Binary columns ``x[:, orig] > threshold``; ``groups[b]`` is the original feature of column b."""

    orig_columns: tuple[int, ...]      # indices into the raw table
    thresholds: tuple[float, ...]      # one per binary column
    groups: tuple[int, ...]            # position in orig_columns of each binary column
    names: tuple[str, ...]

    @property
    def n_binary(self) -> int:
        return len(self.thresholds)

    def transform(self, X_raw: np.ndarray) -> np.ndarray:
        """(n, n_raw) float -> (n, n_binary) int8; NaN in a raw column -> -1 in all its bins."""
        cols = np.asarray(self.orig_columns)[np.asarray(self.groups)]
        values = X_raw[:, cols]
        out = (values > np.asarray(self.thresholds)[None, :]).astype(np.int8)
        out[np.isnan(values)] = -1
        return out


def load_raw(name: str, n_planted: int = 1000, seed: int = 0) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Raw features (n, d) float, binary labels (n,) int64 and feature names."""
    if name == "breast_cancer":
        b = load_breast_cancer()
        return b.data.astype(float), b.target.astype(np.int64), list(b.feature_names)
    if name == "wine":
        b = load_wine()
        return b.data.astype(float), (b.target == 0).astype(np.int64), list(b.feature_names)
    if name == "planted_dnf":
        return planted_dnf_data(n_planted, seed)
    raise ValueError(f"unknown dataset {name!r}; choose one of {DATASETS}")


PLANTED_TERMS: tuple[Term, ...] = ((0b11, 0), (0b1000, 0b100), (0b110000, 0b1000000))  # x0x1 | ~x2x3 | x4x5~x6


def planted_dnf_data(n: int, seed: int, n_features: int = 12, noise: float = 0.05
                     ) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Bernoulli(1/2) features (n, 12), label = (x0 & x1) | (~x2 & x3) | (x4 & x5 & ~x6), 5 % flipped."""
    rng = np.random.default_rng([seed, 7])
    X = rng.integers(0, 2, size=(n, n_features)).astype(np.int8)
    y = dnf_predict(frozenset(PLANTED_TERMS), X).astype(np.int64)
    flip = rng.random(n) < noise
    y[flip] = 1 - y[flip]
    return X.astype(float), y, [f"x{j}" for j in range(n_features)]


def fit_binarizer(name: str, X_train: np.ndarray, y_train: np.ndarray, feature_names: Sequence[str],
                  n_top: int, quantiles: Sequence[float]) -> Binarizer:
    """Train-set thresholds: the ``n_top`` features by ANOVA F, each cut at ``quantiles``
    (binary raw features are cut at 0.5)."""
    if name == "planted_dnf":
        d = X_train.shape[1]
        return Binarizer(tuple(range(d)), (0.5,) * d, tuple(range(d)), tuple(f"{n}" for n in feature_names))
    F, _ = f_classif(X_train, y_train)
    top = [int(j) for j in np.argsort(-np.nan_to_num(F), kind="stable")[:n_top]]
    thresholds, groups, names = [], [], []
    for g, j in enumerate(top):
        for t in sorted({float(np.quantile(X_train[:, j], q)) for q in quantiles}):
            if np.any(X_train[:, j] > t) and np.any(X_train[:, j] <= t):
                thresholds.append(t)
                groups.append(g)
                names.append(f"{feature_names[j]} > {t:.4g}")
    return Binarizer(tuple(top), tuple(thresholds), tuple(groups), tuple(names))


# ----------------------------------------------------------------------------------------------
# 2. Trees
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Tree:
    """A binary tree over binary features; node 0 is the root. Arrays of shape (n_nodes,):
    ``feature`` (-1 at leaves), ``child0``/``child1`` (taken when x[feature] is 0/1), ``value``
    (the leaf's label, -1 at internal nodes)."""

    feature: np.ndarray
    child0: np.ndarray
    child1: np.ndarray
    value: np.ndarray

    @property
    def used_features(self) -> list[int]:
        return sorted({int(f) for f in self.feature if f >= 0})

    @property
    def depth(self) -> int:
        def rec(node: int) -> int:
            if self.feature[node] < 0:
                return 0
            return 1 + max(rec(int(self.child0[node])), rec(int(self.child1[node])))
        return rec(0)


def _tree(nodes: list[tuple[int, int, int, int]]) -> Tree:
    arr = np.array(nodes, dtype=np.int64).reshape(-1, 4)
    return Tree(arr[:, 0].copy(), arr[:, 1].copy(), arr[:, 2].copy(), arr[:, 3].copy())


def tree_from_sklearn(model: DecisionTreeClassifier) -> Tree:
    """A fitted CART on 0/1 features: ``x <= threshold`` (threshold in (0, 1)) is the 0-branch."""
    t = model.tree_
    internal = t.children_left >= 0
    if np.any((t.threshold[internal] <= 0) | (t.threshold[internal] >= 1)):
        raise ValueError("tree_from_sklearn needs a tree fitted on 0/1 features")
    labels = np.asarray(model.classes_)[np.argmax(t.value[:, 0, :], axis=1)]
    return Tree(np.where(internal, t.feature, -1).astype(np.int64), t.children_left.astype(np.int64),
                t.children_right.astype(np.int64), np.where(internal, -1, labels).astype(np.int64))


def tree_from_dict(source: dict) -> Tree:
    """A TreeFARMS/GOSDT JSON tree (``"true"`` is the branch of ``x[feature] == 1``)."""
    nodes: list[list[int]] = []

    def add(node: dict) -> int:
        idx = len(nodes)
        nodes.append([-1, -1, -1, -1])
        if "prediction" in node:
            nodes[idx][3] = int(node["prediction"])
        else:
            zero, one = add(node["false"]), add(node["true"])
            nodes[idx][:3] = [int(node["feature"]), zero, one]
        return idx

    add(source)
    return _tree([tuple(n) for n in nodes])


def tree_predict(tree: Tree, X: np.ndarray) -> np.ndarray:
    """Path traversal on rows of X (n, d) int8 in {0, 1, -1}: the leaf label, or -1 where the path
    meets a missing split (it gets stuck). Returns (n,) int64."""
    n = X.shape[0]
    node = np.zeros(n, dtype=np.int64)
    stuck = np.zeros(n, dtype=bool)
    rows = np.arange(n)
    for _ in range(len(tree.feature)):
        f = tree.feature[node]
        active = (f >= 0) & ~stuck
        if not active.any():
            break
        v = X[rows, np.maximum(f, 0)]
        stuck |= active & (v < 0)
        go = active & (v >= 0)
        node = np.where(go, np.where(v == 1, tree.child1[node], tree.child0[node]), node)
    return np.where(stuck, -1, tree.value[node])


def conservative_predict(tree: Tree, X: np.ndarray) -> np.ndarray:
    """Predict only rows where every feature the tree uses is observed (-1 elsewhere)."""
    used = tree.used_features
    pred = tree_predict(tree, np.where(X < 0, 0, X).astype(np.int8))
    if used:
        pred[(X[:, used] < 0).any(axis=1)] = -1
    return pred


def path_features(tree: Tree, x: np.ndarray) -> list[int]:
    """The features path traversal reads, in order, on one complete row x (d,)."""
    out, node = [], 0
    while tree.feature[node] >= 0:
        f = int(tree.feature[node])
        out.append(f)
        node = int(tree.child1[node] if x[f] == 1 else tree.child0[node])
    return out


def _silenced_stdout():
    """Redirect the process's stdout fd to /dev/null (the TreeFARMS extension prints from C++)."""
    @contextlib.contextmanager
    def cm():
        sys.stdout.flush()
        saved = os.dup(1)
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, 1)
            with contextlib.redirect_stdout(open(os.devnull, "w")):
                yield
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
            os.close(devnull)
    return cm()


def rashomon_set(X: np.ndarray, y: np.ndarray, config: dict[str, Any], max_trees: int,
                 rng: np.random.Generator) -> tuple[list[Tree], int]:
    """TreeFARMS Rashomon set on binary X (n, d): the trees (at most ``max_trees``, drawn without
    replacement when the set is larger) and the full set's size."""
    from treefarms import TREEFARMS

    frame = pd.DataFrame(X.astype(int), columns=[f"b{j}" for j in range(X.shape[1])])
    with _TREEFARMS, _silenced_stdout():
        model = TREEFARMS(dict(config))
        model.fit(frame, pd.Series(np.asarray(y, dtype=int), name="y"))
    count = int(model.get_tree_count())
    idx = np.arange(count) if count <= max_trees else np.sort(rng.choice(count, size=max_trees, replace=False))
    return [tree_from_dict(model.model_set.get_tree_at_idx_raw(int(i))) for i in idx], count


# ----------------------------------------------------------------------------------------------
# 3. Logic: path DNF, Blake canonical form, minimum DNF, partial evaluation, truth tables
# ----------------------------------------------------------------------------------------------
def bits(mask: int) -> list[int]:
    out, j = [], 0
    while mask:
        if mask & 1:
            out.append(j)
        mask >>= 1
        j += 1
    return out


def term_str(term: Term, names: Sequence[str] | None = None) -> str:
    name = (lambda j: names[j]) if names is not None else (lambda j: f"x{j}")
    lits = [(j, 1) for j in bits(term[0])] + [(j, 0) for j in bits(term[1])]
    return " & ".join(name(j) if v else f"~{name(j)}" for j, v in sorted(lits)) or "True"


def dnf_str(dnf: DNF, names: Sequence[str] | None = None) -> str:
    if not dnf:
        return "False"
    return " | ".join(f"({term_str(t, names)})" for t in sorted(dnf, key=lambda t: ((t[0] | t[1]).bit_count(), t)))


def path_dnf(tree: Tree, label: int = 1) -> DNF:
    """Alg. 1: one term per leaf predicting ``label``, the conjunction of its path's tests."""
    terms = set()

    def walk(node: int, pos: int, neg: int) -> None:
        f = int(tree.feature[node])
        if f < 0:
            if tree.value[node] == label:
                terms.add((pos, neg))
            return
        if not (neg >> f) & 1:
            walk(int(tree.child1[node]), pos | (1 << f), neg)
        if not (pos >> f) & 1:
            walk(int(tree.child0[node]), pos, neg | (1 << f))

    walk(0, 0, 0)
    return frozenset(terms)


def _subsumes(a: Term, b: Term) -> bool:
    """a's literals are a subset of b's (so b implies a and b is redundant next to a)."""
    return (a[0] & ~b[0]) == 0 and (a[1] & ~b[1]) == 0


def absorb(terms: Iterable[Term]) -> set[Term]:
    """Drop every term implied by another (absorption: a | a&b = a)."""
    terms = sorted(set(terms), key=lambda t: ((t[0]).bit_count() + (t[1]).bit_count(), t))
    kept: list[Term] = []
    for t in terms:
        if not any(_subsumes(k, t) for k in kept):
            kept.append(t)
    return set(kept)


def blake_canonical_form(dnf: Iterable[Term]) -> DNF:
    """Alg. 4: all prime implicants of the function a DNF represents, by iterated consensus with
    absorption (the Blake canonical form; unique for a Boolean function)."""
    terms = absorb(t for t in dnf if not t[0] & t[1])
    while True:
        ordered = sorted(terms)
        new: set[Term] = set()
        for i, a in enumerate(ordered):
            for b in ordered[i + 1:]:
                clash = (a[0] & b[1]) | (a[1] & b[0])
                if clash == 0 or clash & (clash - 1):      # consensus needs exactly one opposition
                    continue
                c = ((a[0] | b[0]) & ~clash, (a[1] | b[1]) & ~clash)
                if not any(_subsumes(t, c) for t in terms) and not any(_subsumes(t, c) for t in new):
                    new = {t for t in new if not _subsumes(c, t)}
                    new.add(c)
        if not new:
            return frozenset(terms)
        terms = absorb(terms | new)


def _assignments(k: int) -> np.ndarray:
    """All 2^k assignments of k binary variables, (2^k, k) int8; column j is bit j of the row index."""
    idx = np.arange(2 ** k, dtype=np.int64)
    return ((idx[:, None] >> np.arange(k)) & 1).astype(np.int8)


def minimal_dnf(bcf: DNF) -> DNF:
    """Alg. 5 (Quine-McCluskey's covering step): the fewest prime implicants covering the ON-set,
    ties broken by fewest literals; solved exactly as a 0/1 integer program (scipy ``milp``).
    ``bcf`` must be the Blake canonical form (all prime implicants)."""
    primes = sorted(bcf)
    if len(primes) <= 1:
        return frozenset(primes)
    used = bits(int(np.bitwise_or.reduce([p | n for p, n in primes])))
    A = _assignments(len(used))
    col = {f: i for i, f in enumerate(used)}
    cover = np.stack([_term_mask(t, A, col) for t in primes], axis=1)      # (2^k, n_primes)
    rows = np.unique(cover[cover.any(axis=1)], axis=0)
    sizes = np.array([(p).bit_count() + (n).bit_count() for p, n in primes], dtype=float)
    cost = 1.0 + sizes / (sizes.sum() + 1.0)
    result = optimize.milp(cost, integrality=np.ones(len(primes)),
                           bounds=optimize.Bounds(0, 1),
                           constraints=optimize.LinearConstraint(sparse.csr_matrix(rows.astype(float)), lb=1))
    if not result.success:
        raise RuntimeError(f"minimum cover failed: {result.message}")
    return frozenset(p for p, z in zip(primes, result.x) if z > 0.5)


def _term_mask(term: Term, X: np.ndarray, col: dict[int, int] | None = None) -> np.ndarray:
    """Rows of complete X (n, d) that satisfy ``term``."""
    pos = [col[j] if col else j for j in bits(term[0])]
    neg = [col[j] if col else j for j in bits(term[1])]
    return (X[:, pos] == 1).all(axis=1) & (X[:, neg] == 0).all(axis=1)


def dnf_predict(dnf: DNF, X: np.ndarray) -> np.ndarray:
    """Value of a DNF on complete rows X (n, d) in {0, 1}: (n,) int64."""
    out = np.zeros(X.shape[0], dtype=bool)
    for t in dnf:
        out |= _term_mask(t, X)
    return out.astype(np.int64)


def dnf_predict_partial(dnf: DNF, X: np.ndarray) -> np.ndarray:
    """Alg. 2 on rows X (n, d) in {0, 1, -1}: 1 if the observed values satisfy a term, 0 if they
    falsify every term, -1 (abstain) otherwise. With the Blake canonical form this is exact: it
    abstains iff the completions of the missing values disagree. (n,) int64."""
    n = X.shape[0]
    sat = np.zeros(n, dtype=bool)
    all_false = np.ones(n, dtype=bool)
    for pos_mask, neg_mask in dnf:
        pos, neg = bits(pos_mask), bits(neg_mask)
        sat |= (X[:, pos] == 1).all(axis=1) & (X[:, neg] == 0).all(axis=1)
        all_false &= (X[:, pos] == 0).any(axis=1) | (X[:, neg] == 1).any(axis=1)
    return np.where(sat, 1, np.where(all_false, 0, -1)).astype(np.int64)


def function_key(tree: Tree) -> tuple[tuple[int, ...], bytes]:
    """An independent canonical key of the tree's function: the features it truly depends on and
    its truth table over them (enumerated from path traversal on all assignments of its used
    features). Two trees compute the same function iff their keys are equal."""
    used = tree.used_features
    k = len(used)
    A = _assignments(k)
    X = np.zeros((len(A), max(used, default=0) + 1), dtype=np.int8)
    X[:, used] = A
    table = tree_predict(tree, X).astype(np.int8)
    idx = np.arange(len(A))
    essential = [j for j in range(k) if np.any(table != table[idx ^ (1 << j)])]
    dropped = sum(1 << j for j in range(k) if j not in essential)
    reduced = table[(idx & dropped) == 0]
    return tuple(used[j] for j in essential), reduced.tobytes()


# ----------------------------------------------------------------------------------------------
# 4. Missingness
# ----------------------------------------------------------------------------------------------
def mcar_mask(n: int, n_orig: int, p: float, rng: np.random.Generator) -> np.ndarray:
    """(n, n_orig) bool: each original feature of each row missing independently with probability p."""
    return rng.random((n, n_orig)) < p


def missingness_eval(tree: Tree, bcf: DNF, min_dnf: DNF, binarizer: Binarizer, X_train_raw: np.ndarray,
                     X_test_raw: np.ndarray, y_test: np.ndarray, ps: Sequence[float], repeats: int,
                     knn_neighbors: int, knn_repeats: int, rng: np.random.Generator) -> list[dict[str, Any]]:
    """For each p and repeat: MCAR on the raw (original) features of the test rows, then the
    fraction of rows each abstaining predictor can predict, their accuracy there, and the
    accuracy of imputation baselines (mean / k-NN imputation of the raw features, then the tree;
    k-NN, the slow one, only in the first ``knn_repeats`` repeats, NaN after)."""
    cols = list(binarizer.orig_columns)
    train_sel = X_train_raw[:, cols]
    mean_imp = SimpleImputer(strategy="mean").fit(train_sel)
    scaler = StandardScaler().fit(train_sel)
    knn_imp = KNNImputer(n_neighbors=knn_neighbors).fit(scaler.transform(train_sel))
    complete_pred = tree_predict(tree, binarizer.transform(X_test_raw))
    complete_acc = float(np.mean(complete_pred == y_test))
    rows = []
    for p in ps:
        for r in range(repeats):
            mask = mcar_mask(len(y_test), len(cols), p, rng)
            raw = X_test_raw.copy()
            sel = raw[:, cols]
            sel[mask] = np.nan
            raw[:, cols] = sel
            Xb = binarizer.transform(raw)
            preds = {"bcf": dnf_predict_partial(bcf, Xb), "min_dnf": dnf_predict_partial(min_dnf, Xb),
                     "path": tree_predict(tree, Xb), "conservative": conservative_predict(tree, Xb)}

            def imputed(values: np.ndarray, raw: np.ndarray = raw) -> np.ndarray:
                full = raw.copy()
                full[:, cols] = values
                return tree_predict(tree, binarizer.transform(full))

            preds_mean = imputed(mean_imp.transform(sel))
            if r < knn_repeats:
                preds_knn = imputed(scaler.inverse_transform(knn_imp.transform(scaler.transform(sel))))
            else:
                preds_knn = None
            decided = preds["bcf"] >= 0
            row: dict[str, Any] = {"p": float(p), "repeat": r, "complete_acc": complete_acc,
                                   "bcf_agrees_with_complete": float(np.all(preds["bcf"][decided] == complete_pred[decided]))}
            for name, pr in preds.items():
                ok = pr >= 0
                row[f"frac_{name}"] = float(ok.mean())
                row[f"acc_{name}"] = float(np.mean(pr[ok] == y_test[ok])) if ok.any() else float("nan")
            for name, pr in (("mean_impute", preds_mean), ("knn_impute", preds_knn)):
                row[f"acc_{name}"] = float(np.mean(pr == y_test)) if pr is not None else float("nan")
                row[f"acc_{name}_on_bcf_abstained"] = (float(np.mean(pr[~decided] == y_test[~decided]))
                                                       if pr is not None and (~decided).any() else float("nan"))
            row["acc_bcf_then_knn"] = (float(np.mean(np.where(decided, preds["bcf"], preds_knn) == y_test))
                                       if preds_knn is not None else float("nan"))
            rows.append(row)
    return rows


# ----------------------------------------------------------------------------------------------
# 5. Variable importance over a Rashomon set
# ----------------------------------------------------------------------------------------------
def gini_importance(tree: Tree, X: np.ndarray, y: np.ndarray, n_features: int) -> np.ndarray:
    """Mean decrease in Gini impurity of each feature on (X, y), normalised to sum 1: (n_features,)."""
    imp = np.zeros(n_features)

    def gini(labels: np.ndarray) -> float:
        if len(labels) == 0:
            return 0.0
        q = labels.mean()
        return 2.0 * q * (1.0 - q)

    def walk(node: int, idx: np.ndarray) -> None:
        f = int(tree.feature[node])
        if f < 0 or len(idx) == 0:
            return
        one = X[idx, f] == 1
        i1, i0 = idx[one], idx[~one]
        imp[f] += len(idx) * gini(y[idx]) - len(i1) * gini(y[i1]) - len(i0) * gini(y[i0])
        walk(int(tree.child0[node]), i0)
        walk(int(tree.child1[node]), i1)

    walk(0, np.arange(len(y)))
    total = imp.sum()
    return imp / total if total > 0 else imp


def model_reliance(tree: Tree, X: np.ndarray, y: np.ndarray, perms: np.ndarray) -> np.ndarray:
    """Permutation model reliance: increase of the 0-1 loss on (X, y) when column j is permuted by
    ``perms[j]`` (the same permutations for every tree): (n_features,)."""
    base = np.mean(tree_predict(tree, X) != y)
    out = np.zeros(X.shape[1])
    for j in tree.used_features:
        Xp = X.copy()
        Xp[:, j] = X[perms[j], j]
        out[j] = np.mean(tree_predict(tree, Xp) != y) - base
    return out


def importance_over_set(trees: Sequence[Tree], classes: np.ndarray, X: np.ndarray, y: np.ndarray,
                        rng: np.random.Generator) -> dict[str, Any]:
    """Model reliance and Gini importance averaged (a) over all trees and (b) over predictive-
    equivalence classes (each class's mean counts once); Kendall tau between the two rankings and
    the spread of each measure inside the classes."""
    d = X.shape[1]
    perms = np.stack([rng.permutation(len(y)) for _ in range(d)])
    out: dict[str, Any] = {}
    for name, fn in (("model_reliance", lambda t: model_reliance(t, X, y, perms)),
                     ("gini", lambda t: gini_importance(t, X, y, d))):
        values = np.stack([fn(t) for t in trees])                       # (n_trees, d)
        labels = np.unique(classes)
        class_means = np.stack([values[classes == c].mean(axis=0) for c in labels])
        all_mean, dedup_mean = values.mean(axis=0), class_means.mean(axis=0)
        spread = max((np.ptp(values[classes == c], axis=0).max() for c in labels), default=0.0)
        active = (all_mean != 0) | (dedup_mean != 0)
        tau = kendalltau(all_mean[active], dedup_mean[active]).statistic if active.sum() >= 2 else float("nan")
        out[name] = {"all_trees": all_mean.tolist(), "per_class": dedup_mean.tolist(),
                     "kendall_tau": float(tau) if np.isfinite(tau) else float("nan"),
                     "top_feature_changed": float(np.argmax(all_mean) != np.argmax(dedup_mean)),
                     "max_within_class_spread": float(spread)}
    return out


# ----------------------------------------------------------------------------------------------
# 6. Cost of reaching a prediction
# ----------------------------------------------------------------------------------------------
class CostProblem:
    """Buy the tree's used features one at a time until the BCF decides. ``costs[g]`` is the price
    of original feature g; once one bin of g is known, its other bins are free (official code).

    A state is the ternary number sum_i digit_i 3^i over the k used features (digit 0/1: known
    value, 2: unknown). Every table is precomputed over all 3^k states (k <= 8): ``terminal`` (S,),
    ``prediction`` (S,), ``step_cost`` (S, k) and ``next_state`` (S, k, 2) (buying a known feature
    leaves the state unchanged)."""

    MAX_USED = 8

    def __init__(self, bcf: DNF, used: Sequence[int], groups: np.ndarray, costs: np.ndarray, n_features: int):
        self.bcf, self.used, self.n_features = bcf, list(used), n_features
        self.groups, self.costs = np.asarray(groups), np.asarray(costs, dtype=float)
        k = len(self.used)
        if k > self.MAX_USED:
            raise ValueError(f"the cost problem enumerates 3^k states; k = {k} used features is too many")
        self.k = k
        self.pow3 = 3 ** np.arange(k, dtype=np.int64)
        self.n_states = 3 ** k
        self.start = int(2 * self.pow3.sum())          # every used feature unknown
        states = np.arange(self.n_states, dtype=np.int64)
        self.digits = (states[:, None] // self.pow3[None, :]) % 3                  # (S, k)
        X = np.full((self.n_states, n_features), -1, dtype=np.int8)
        X[:, self.used] = np.where(self.digits < 2, self.digits, -1)
        self.prediction = dnf_predict_partial(bcf, X)                              # (S,)
        self.terminal = self.prediction >= 0
        g_of = self.groups[self.used]                                              # (k,)
        known = self.digits < 2
        same = g_of[:, None] == g_of[None, :]                                      # (k, k)
        group_known = (known.astype(int) @ same.astype(int)) > 0                   # (S, k)
        self.step_cost = np.where(group_known, 0.0, self.costs[g_of][None, :])
        unknown = self.digits == 2
        nxt = np.empty((self.n_states, k, 2), dtype=np.int64)
        for bit in (0, 1):
            nxt[:, :, bit] = np.where(unknown, states[:, None] - (2 - bit) * self.pow3[None, :], states[:, None])
        self.next_state = nxt
        self.cheapest_order = sorted(range(k), key=lambda a: (self.costs[g_of[a]], a))

    def unknown(self, state: int) -> list[int]:
        return [a for a in range(self.k) if self.digits[state, a] == 2]

    def cost(self, a: int, state: int) -> float:
        return float(self.step_cost[state, a])

    def reveal(self, state: int, a: int, x: np.ndarray) -> int:
        return int(self.next_state[state, a, int(x[self.used[a]])])


def run_policy(problem: CostProblem, choose, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cost per row and final (BCF) prediction per row of a policy ``choose(state) -> a``: (n,), (n,)."""
    costs, preds = np.zeros(len(X)), np.zeros(len(X), dtype=np.int64)
    for r, x in enumerate(X):
        state, total = problem.start, 0.0
        while not problem.terminal[state]:
            a = choose(state)
            total += problem.step_cost[state, a]
            state = problem.reveal(state, a, x)
        costs[r], preds[r] = total, problem.prediction[state]
    return costs, preds


def path_cost(problem: CostProblem, tree: Tree, X: np.ndarray) -> np.ndarray:
    """Cost of reading the features path traversal reads (with the same bin discount): (n,)."""
    out = np.zeros(len(X))
    index = {f: i for i, f in enumerate(problem.used)}
    for r, x in enumerate(X):
        state = problem.start
        for f in path_features(tree, x):
            out[r] += problem.step_cost[state, index[f]]
            state = problem.reveal(state, index[f], x)
    return out


def all_used_cost(problem: CostProblem) -> float:
    """Cost of buying every feature the tree uses (the maximum)."""
    return float(sum(problem.costs[g] for g in sorted({int(problem.groups[f]) for f in problem.used})))


def cheapest_first(problem: CostProblem):
    """Greedy baseline (official): the cheapest unknown used feature (list price) next."""
    def choose(state: int) -> int:
        return next(a for a in problem.cheapest_order if problem.digits[state, a] == 2)
    return choose


def random_order(problem: CostProblem, rng: np.random.Generator):
    """Negative control of the cost claim: the same BCF stopping rule, the next feature drawn
    uniformly among the unknown used ones (an acquisition order that optimises nothing)."""
    def choose(state: int) -> int:
        unknown = problem.unknown(state)
        return unknown[int(rng.integers(len(unknown)))]
    return choose


def optimal_policy(problem: CostProblem, X: np.ndarray) -> tuple[float, dict[int, int]]:
    """Exact minimum expected acquisition cost under the empirical distribution of rows X (n, d), by
    dynamic programming over partial assignments of the used features; returns the value and the
    optimal action per reachable state."""
    policy: dict[int, int] = {}
    memo: dict[int, float] = {}
    Xu = X[:, problem.used]

    def value(state: int, rows: np.ndarray) -> float:
        if problem.terminal[state] or len(rows) == 0:
            return 0.0
        if state in memo:
            return memo[state]
        best, best_a = np.inf, -1
        for a in problem.unknown(state):
            v = problem.step_cost[state, a]
            col = Xu[rows, a]
            for bit in (0, 1):
                sub = rows[col == bit]
                if len(sub):
                    v += len(sub) / len(rows) * value(int(problem.next_state[state, a, bit]), sub)
            if v < best - 1e-12:
                best, best_a = v, a
        memo[state], policy[state] = best, best_a
        return best

    return value(problem.start, np.arange(len(X))), policy


def policy_from_table(problem: CostProblem, table: dict[int, int]):
    fallback = cheapest_first(problem)
    return lambda state: table[state] if state in table and problem.digits[state, table[state]] == 2 else fallback(state)


def q_learning(problem: CostProblem, tree: Tree, X: np.ndarray, rng: np.random.Generator, episodes: int,
               alpha: float, gamma: float, exploration: float) -> tuple[np.ndarray, np.ndarray]:
    """Alg. 6 (the official QLearner): tabular Q over ternary partial-assignment states, actions =
    the tree's used features, reward -cost per purchase and ``max_cost`` on reaching a state where
    the BCF decides; Q warm-started from path traversal of the tree on X, episodes of at most 2k
    steps on rows of X. Returns Q (S, k) and which states were visited or prefilled (S,)."""
    k = problem.k
    max_cost = float(problem.costs.sum()) + 1e-5
    Q = np.zeros((problem.n_states, k))
    seen = np.zeros(problem.n_states, dtype=bool)
    index = {f: i for i, f in enumerate(problem.used)}

    def prefill(node: int, state: int, rows: np.ndarray) -> float:
        seen[state] = True
        f = int(tree.feature[node])
        if f < 0:
            Q[state] = max_cost
            return max_cost
        a = index[f]
        expected = -problem.step_cost[state, a]
        for bit, child in ((0, tree.child0[node]), (1, tree.child1[node])):
            sub = rows[X[rows, f] == bit]
            v = prefill(int(child), int(problem.next_state[state, a, bit]), sub) if len(sub) else max_cost
            expected += len(sub) / len(rows) * v
        Q[state] = 0.0
        Q[state, a] = expected
        return expected

    prefill(0, problem.start, np.arange(len(X)))
    # All random draws up front (same stream, same order for a given seed).
    rows = rng.integers(len(X), size=episodes)
    explore = rng.random((episodes, 2 * k)) < exploration
    random_a = rng.integers(k, size=(episodes, 2 * k))
    bits = X[:, problem.used].astype(np.int64)                      # (n, k)
    terminal, step_cost, nxt = problem.terminal, problem.step_cost, problem.next_state
    for e in range(episodes):
        xb = bits[rows[e]]
        state = problem.start
        for t in range(2 * k):
            seen[state] = True
            a = int(random_a[e, t]) if explore[e, t] else int(np.argmax(Q[state]))
            new = int(nxt[state, a, xb[a]])
            reward = max_cost if terminal[state] else -step_cost[state, a]
            if terminal[new]:
                seen[new] = True
                Q[new] = max_cost
                Q[state, a] += alpha * (reward + gamma * max_cost - Q[state, a])
                break
            Q[state, a] += alpha * (reward + gamma * Q[new].max() - Q[state, a])
            state = new
    return Q, seen


def q_policy(problem: CostProblem, Q: np.ndarray, seen: np.ndarray):
    """Greedy in Q over the *unknown* used features; unseen states fall back to cheapest-first."""
    fallback = cheapest_first(problem)

    def choose(state: int) -> int:
        if not seen[state]:
            return fallback(state)
        return max(problem.unknown(state), key=lambda a: (Q[state, a], -a))
    return choose


def cost_eval(tree: Tree, bcf: DNF, groups: np.ndarray, costs: np.ndarray, X_train: np.ndarray,
              X_test: np.ndarray, rng: np.random.Generator, *, episodes: int, alpha: float, gamma: float,
              exploration: float) -> dict[str, Any]:
    """Mean acquisition cost per row of every policy on the train and test rows, and whether the
    policies' predictions equal the tree's. ``episodes``, ``alpha``, ``gamma``, ``exploration``: the
    Q-learning of :func:`q_learning`."""
    problem = CostProblem(bcf, tree.used_features, groups, costs, X_train.shape[1])
    out: dict[str, Any] = {"n_used": len(problem.used), "all_used": all_used_cost(problem)}
    if problem.terminal[problem.start]:          # constant tree: nothing to buy
        for split in ("train", "test"):
            for name in ("path", "cheapest", "random", "q_learning", "optimal"):
                out[f"{split}_{name}"] = 0.0
        out["q_pred_agree"] = out["opt_pred_agree"] = 1.0
        return out
    t0 = time.perf_counter()
    Q, seen = q_learning(problem, tree, X_train, rng, episodes, alpha, gamma, exploration)
    out["q_seconds"] = time.perf_counter() - t0
    random_rng = np.random.default_rng(int(rng.integers(2**62)))         # drawn after Q-learning's draws: those are unchanged
    opt_value, table = optimal_policy(problem, X_train)
    out["optimal_value_train"] = float(opt_value)
    agree_q, agree_opt = [], []
    for split, X in (("train", X_train), ("test", X_test)):
        truth = tree_predict(tree, X)
        out[f"{split}_path"] = float(path_cost(problem, tree, X).mean())
        out[f"{split}_cheapest"] = float(run_policy(problem, cheapest_first(problem), X)[0].mean())
        out[f"{split}_random"] = float(run_policy(problem, random_order(problem, random_rng), X)[0].mean())
        c, p = run_policy(problem, q_policy(problem, Q, seen), X)
        out[f"{split}_q_learning"], _ = float(c.mean()), agree_q.append(np.mean(p == truth))
        c, p = run_policy(problem, policy_from_table(problem, table), X)
        out[f"{split}_optimal"], _ = float(c.mean()), agree_opt.append(np.mean(p == truth))
    out["q_pred_agree"], out["opt_pred_agree"] = float(min(agree_q)), float(min(agree_opt))
    return out


# ----------------------------------------------------------------------------------------------
# 7. One (dataset, seed) unit
# ----------------------------------------------------------------------------------------------
def prepare(p: Params, dataset: str, seed: int) -> dict[str, Any]:
    """Raw split and the train-fitted binarizer for one (dataset, seed); reads ``p.planted_n``,
    ``p.test_size``, ``p.n_top_features`` and ``p.quantiles``."""
    X, y, names = load_raw(dataset, p.planted_n, seed)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=p.test_size, stratify=y, random_state=seed)
    binarizer = fit_binarizer(dataset, X_tr, y_tr, names, p.n_top_features, p.quantiles)
    return {"X_train_raw": X_tr, "X_test_raw": X_te, "y_train": y_tr, "y_test": y_te, "binarizer": binarizer,
            "names": names}


def binary_table(p: Params, dataset: str, seed: int) -> pd.DataFrame:
    """The binarised train+test table of one (dataset, seed), with ``split`` and ``target`` columns."""
    d = prepare(p, dataset, seed)
    b = d["binarizer"]
    parts = []
    for split in ("train", "test"):
        frame = pd.DataFrame(b.transform(d[f"X_{split}_raw"]), columns=list(b.names))
        parts.append(frame.assign(split=split, target=d[f"y_{split}"]))
    return pd.concat(parts, ignore_index=True)


def run_unit(p: Params, dataset: str, seed: int) -> dict[str, Any]:
    """Everything for one (dataset, seed): faithfulness, canonicity over a Rashomon set, missingness,
    variable importance, cost. Reads every field of ``p`` but ``seeds`` and ``datasets``. Returns
    JSON-able scalars and row lists."""
    t0 = time.perf_counter()
    rng = np.random.default_rng([seed, DATASETS.index(dataset)])
    d = prepare(p, dataset, seed)
    b: Binarizer = d["binarizer"]
    Xtr, Xte = b.transform(d["X_train_raw"]), b.transform(d["X_test_raw"])
    ytr, yte = d["y_train"], d["y_test"]

    # Faithfulness of the representation on a CART tree.
    cart = DecisionTreeClassifier(max_depth=p.cart_depth, random_state=seed).fit(Xtr, ytr)
    tree = tree_from_sklearn(cart)
    bcf = blake_canonical_form(path_dnf(tree))
    mdnf = minimal_dnf(bcf)
    X_rand = rng.integers(0, 2, size=(p.n_random_inputs, b.n_binary)).astype(np.int8)
    truth_te, truth_rand = tree_predict(tree, Xte), tree_predict(tree, X_rand)
    faithful = {
        "bcf_test": float(np.mean(dnf_predict(bcf, Xte) == truth_te)),
        "min_dnf_test": float(np.mean(dnf_predict(mdnf, Xte) == truth_te)),
        "bcf_random": float(np.mean(dnf_predict(bcf, X_rand) == truth_rand)),
        "min_dnf_random": float(np.mean(dnf_predict(mdnf, X_rand) == truth_rand)),
        "sklearn_test": float(np.mean(cart.predict(Xte) == truth_te)),
    }
    t_faith = time.perf_counter()

    # Canonicity over a TreeFARMS Rashomon set.
    tf_config = {"depth_budget": p.rset_depth + 1, "regularization": p.rset_regularization,
                 "rashomon_bound_adder": p.rset_epsilon, "rashomon_bound_multiplier": 0, "rashomon_bound": 0,
                 "rashomon_ignore_trivial_extensions": True, "verbose": False}
    trees, set_size = rashomon_set(Xtr, ytr, tf_config, p.rset_max_trees, rng)
    bcfs = [blake_canonical_form(path_dnf(t)) for t in trees]
    keys = [function_key(t) for t in trees]
    canon = partition_agreement(bcfs, keys)
    rset_faithful = min(float(np.mean(dnf_predict(f, Xte) == tree_predict(t, Xte))) for f, t in zip(bcfs, trees))
    class_of = {f: i for i, f in enumerate(sorted(set(bcfs), key=lambda f: sorted(f)))}
    classes = np.array([class_of[f] for f in bcfs])
    t_canon = time.perf_counter()

    # Missingness: CART tree on the test rows; Rashomon-set trees at one p.
    miss_rows = missingness_eval(tree, bcf, mdnf, b, d["X_train_raw"], d["X_test_raw"], yte, p.missing_ps,
                                 p.missing_repeats, p.knn_neighbors, p.knn_repeats, rng)
    rset_missing = rashomon_missingness(trees, bcfs, classes, b, d["X_test_raw"], p.rset_missing_p, rng)
    t_miss = time.perf_counter()

    # Variable importance over the Rashomon set.
    importance = importance_over_set(trees, classes, Xtr, ytr, rng)
    t_vi = time.perf_counter()

    # Cost: the official setup, CART of depth cost_depth on a bootstrap resample of the train rows.
    Xbs, ybs = resample(Xtr, ytr, random_state=seed)
    cost_tree = tree_from_sklearn(DecisionTreeClassifier(max_depth=p.cost_depth, random_state=seed).fit(Xbs, ybs))
    costs = rng.integers(p.cost_low, p.cost_high + 1, size=len(b.orig_columns)).astype(float)
    cost = cost_eval(cost_tree, blake_canonical_form(path_dnf(cost_tree)), np.asarray(b.groups), costs, Xbs, Xte,
                     rng, episodes=p.q_episodes, alpha=p.q_alpha, gamma=p.q_gamma, exploration=p.q_exploration)
    t_cost = time.perf_counter()

    return {
        "dataset": dataset, "seed": seed, "n_binary": b.n_binary, "n_train": len(ytr), "n_test": len(yte),
        "cart": {"n_leaves": int((tree.feature < 0).sum()), "depth": tree.depth, "n_used": len(tree.used_features),
                 "n_path_terms": len(path_dnf(tree)), "n_bcf_terms": len(bcf), "n_min_dnf_terms": len(mdnf),
                 "min_dnf": dnf_str(mdnf, b.names), "test_acc": float(np.mean(truth_te == yte))},
        "faithful": faithful,
        "rashomon": {"set_size": set_size, "n_trees": len(trees), "n_bcf_classes": len(class_of),
                     "n_function_keys": len(set(keys)), "faithful_min": rset_faithful, **canon, **rset_missing},
        "missing_rows": miss_rows,
        "importance": importance,
        "cost": cost,
        "timings": {"faithful_s": t_faith - t0, "canonicity_s": t_canon - t_faith, "missing_s": t_miss - t_canon,
                    "importance_s": t_vi - t_miss, "cost_s": t_cost - t_vi, "total_s": t_cost - t0},
    }


def partition_agreement(bcfs: Sequence[DNF], keys: Sequence[Any]) -> dict[str, float]:
    """Pairs of trees grouped together by equal BCF vs by equal truth-table key: counts and the
    fraction of all pairs on which the two partitions agree."""
    def same_pairs(labels: Sequence[Any]) -> int:
        return sum(c * (c - 1) // 2 for c in pd.Series([hash_key(x) for x in labels]).value_counts())
    n = len(bcfs)
    total = n * (n - 1) // 2
    s_bcf, s_key = same_pairs(bcfs), same_pairs(keys)
    s_both = same_pairs(list(zip(bcfs, keys)))
    mismatched = s_bcf + s_key - 2 * s_both
    return {"pairs": total, "equivalent_pairs": s_key, "same_bcf_pairs": s_bcf, "mismatched_pairs": mismatched,
            "pair_agreement": 1.0 - mismatched / total if total else 1.0}


def hash_key(x: Any) -> str:
    """A deterministic string for a DNF / key / tuple of them (no salted hashes)."""
    if isinstance(x, frozenset):
        return repr(sorted(x))
    if isinstance(x, tuple):
        return "(" + ",".join(hash_key(v) for v in x) + ")"
    return repr(x)


def rashomon_missingness(trees: Sequence[Tree], bcfs: Sequence[DNF], classes: np.ndarray, binarizer: Binarizer,
                         X_test_raw: np.ndarray, p: float, rng: np.random.Generator) -> dict[str, float]:
    """One MCAR mask at probability p for every tree of the Rashomon set: the mean fraction of test
    rows path traversal vs the BCF predicts, and how much path traversal varies inside a class of
    predictively equivalent trees (the BCF cannot: it is one per class)."""
    cols = list(binarizer.orig_columns)
    raw = X_test_raw.copy()
    sel = raw[:, cols]
    sel[mcar_mask(len(raw), len(cols), p, rng)] = np.nan
    raw[:, cols] = sel
    Xb = binarizer.transform(raw)
    frac_path = np.array([np.mean(tree_predict(t, Xb) >= 0) for t in trees])
    cache: dict[str, float] = {}
    frac_bcf = np.array([cache.setdefault(hash_key(f), float(np.mean(dnf_predict_partial(f, Xb) >= 0))) for f in bcfs])
    spreads = [np.ptp(frac_path[classes == c]) for c in np.unique(classes) if (classes == c).sum() > 1]
    return {"missing_frac_path": float(frac_path.mean()), "missing_frac_bcf": float(frac_bcf.mean()),
            "missing_path_spread_within_class_max": float(max(spreads, default=0.0)),
            "missing_path_spread_within_class_mean": float(np.mean(spreads)) if spreads else 0.0}

"""X-hacking (Sharma et al., ICML 2025): an AutoML search for 'defensible' models whose SHAP
explanation says what the analyst wants.

Read top to bottom:

1. data        -- bundled tables binarised, a ``make_classification`` redundancy sweep, an
                  80/20 stratified split (the paper's 20 % test set) with an inner validation split;
2. explanation -- a feature's *share* of the total mean |SHAP| on <= 100 held-out rows;
3. pipelines   -- the search space (scaler -> feature selection -> model), encoded for optuna;
4. search      -- random sampling vs multi-objective Bayesian optimisation (TPE) on
                  (validation accuracy up, target share down); a trial *succeeds* when the model
                  is defensible (holdout accuracy >= the baseline's) and the target's share is at
                  most ``share_factor`` times the baseline's;
5. redundancy  -- how well the other features predict the target feature (5-fold CV R^2);
6. one unit    -- ``run_unit(p, dataset, seed)``: baseline, targets, both searches (``p``: the
                  flow's typed params);
7. statistics  -- trials-to-success (censored at B+1), the BO speed-up, rank correlations.

No Prefect, no DVC. All randomness goes through explicit seeds (sklearn ``random_state``,
optuna ``seed``), so the same seed gives bit-identical results and the same pipeline parameters
give identical metrics whichever searcher proposed them.
"""

from __future__ import annotations

import re
import threading
import time
import warnings
import zlib
from dataclasses import dataclass
from typing import Any, Sequence, get_args

import numpy as np
import optuna
import pandas as pd
import shap
import sklearn
from sklearn.datasets import make_classification
from sklearn.ensemble import GradientBoostingClassifier, GradientBoostingRegressor, RandomForestClassifier
from sklearn.exceptions import ConvergenceWarning
from sklearn.feature_selection import f_classif
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import KFold, cross_val_score, train_test_split
from sklearn.preprocessing import QuantileTransformer, StandardScaler

from flows.x_hacking.params import BundledTable, Params
from tasks.correlation import spearman

optuna.logging.set_verbosity(optuna.logging.WARNING)
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
warnings.filterwarnings("ignore", category=ConvergenceWarning)
warnings.filterwarnings("ignore", message=".*constant.*", category=UserWarning)  # f_classif on constant columns
warnings.filterwarnings("ignore", category=RuntimeWarning, module="sklearn.feature_selection")

REAL_DATASETS = get_args(BundledTable)
# liblinear draws from one process-wide random generator that each fit re-seeds: fits in concurrent
# threads would interleave their draws, so every liblinear fit holds this lock (determinism).
_LIBLINEAR = threading.Lock()
# scikit-learn 1.8 deprecated ``penalty=`` for LogisticRegression in favour of ``l1_ratio=``.
_L1_RATIO_API = tuple(int(v) for v in re.findall(r"\d+", sklearn.__version__)[:2]) >= (1, 8)
SEARCHERS = ("random", "bo")


# ----------------------------------------------------------------------------------------------
# 1. Data
# ----------------------------------------------------------------------------------------------
def binarise(name: str, y: np.ndarray) -> np.ndarray:
    """Binary labels (n,) int64 for a bundled dataset's raw target (n,).

    breast_cancer is already 0/1; wine: class 0 vs the rest; diabetes: target > median.
    """
    y = np.asarray(y)
    if name == "breast_cancer":
        return y.astype(np.int64)
    if name == "wine":
        return (y == 0).astype(np.int64)
    if name == "diabetes":
        return (y > np.median(y)).astype(np.int64)
    raise ValueError(f"unknown bundled dataset {name!r}")


def synthetic_name(n_redundant: int) -> str:
    return f"synth_r{n_redundant}"


def synthetic_dataset(n_redundant: int, seed: int, n_samples: int, n_features: int = 12,
                      n_informative: int = 4) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """``make_classification`` with ``n_redundant`` linear combinations of the informative
    features: X (n_samples, n_features) float64, y (n_samples,) int64, feature names.

    Columns are not shuffled: inf0..inf3, then red*, then noise*.
    """
    X, y = make_classification(n_samples=n_samples, n_features=n_features, n_informative=n_informative,
                               n_redundant=n_redundant, n_repeated=0, n_classes=2, shuffle=False,
                               random_state=seed)
    n_noise = n_features - n_informative - n_redundant
    names = ([f"inf{i}" for i in range(n_informative)] + [f"red{i}" for i in range(n_redundant)]
             + [f"noise{i}" for i in range(n_noise)])
    return X.astype(np.float64), y.astype(np.int64), names


def load_problem(dataset: str, seed: int, synth_n_samples: int, data_dir: str | None = None
                 ) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """X (n, p) float64, binary y (n,) int64 and feature names of ``dataset``.

    Bundled datasets are read from ``<data_dir>/<dataset>.parquet`` (features plus a ``target``
    column, written by the flow with ``tasks.data.save_bundled``), or straight from scikit-learn
    when ``data_dir`` is None. ``synth_r<k>`` datasets (``synth_n_samples`` rows) are generated from
    ``seed`` whatever ``data_dir`` is.
    """
    if dataset.startswith("synth_r"):
        return synthetic_dataset(int(dataset[len("synth_r"):]), seed, synth_n_samples)
    if data_dir is not None:
        frame = pd.read_parquet(f"{data_dir}/{dataset}.parquet")
        y_raw = frame.pop("target").to_numpy()
    else:
        import sklearn.datasets as skd
        bunch = getattr(skd, f"load_{dataset}")(as_frame=True)
        frame, y_raw = bunch.data, bunch.target.to_numpy()
    return frame.to_numpy(dtype=np.float64), binarise(dataset, y_raw), [str(c) for c in frame.columns]


@dataclass(frozen=True)
class Split:
    """Rows used for fitting (X_fit), validation (the searchers' accuracy objective), the 20 %
    holdout (defensibility: holdout accuracy) and the <= shap_rows holdout rows explained."""

    X_fit: np.ndarray
    y_fit: np.ndarray
    X_val: np.ndarray
    y_val: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    X_explain: np.ndarray


def make_split(X: np.ndarray, y: np.ndarray, seed: int, test_size: float, val_fraction: float,
               shap_rows: int) -> Split:
    """Stratified holdout (``test_size``), then a stratified validation part of the rest."""
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=test_size, stratify=y, random_state=seed)
    X_fit, X_val, y_fit, y_val = train_test_split(X_tr, y_tr, test_size=val_fraction, stratify=y_tr,
                                                  random_state=seed)
    return Split(X_fit, y_fit, X_val, y_val, X_te, y_te, X_te[:shap_rows])


# ----------------------------------------------------------------------------------------------
# 2. Explanation: a feature's share of total mean |SHAP|
# ----------------------------------------------------------------------------------------------
def mean_abs_shap(model: Any, X_background: np.ndarray, X_explain: np.ndarray) -> np.ndarray:
    """Mean |SHAP value| of each input column over the rows X_explain (m, q) -> (q,).

    Logistic regression: ``shap.LinearExplainer`` with an independent masker on X_background,
    i.e. phi_j(x) = w_j (x_j - mean_j) in log-odds. Trees: ``shap.TreeExplainer`` (path-dependent);
    for a random forest the attributions of P(y=1) are used (those of class 0 are their negatives).
    """
    if isinstance(model, LogisticRegression):
        masker = shap.maskers.Independent(X_background, max_samples=len(X_background))  # all rows, not 100
        values = shap.LinearExplainer(model, masker).shap_values(X_explain)
    else:
        values = shap.TreeExplainer(model).shap_values(X_explain, check_additivity=False)
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 3:  # (m, q, n_classes)
        values = values[:, :, 1]
    return np.abs(values).mean(axis=0)


def feature_share(importance: np.ndarray, feature: int) -> float:
    """Share of ``feature`` in the total importance (p,). A model with zero total attribution
    (a constant predictor) gets share 1.0: it is not counted as a hacked explanation."""
    total = float(importance.sum())
    return float(importance[feature] / total) if total > 0 else 1.0


# ----------------------------------------------------------------------------------------------
# 3. Pipelines: scaler -> feature selection (target protected) -> model
# ----------------------------------------------------------------------------------------------
def suggest_pipeline(trial: optuna.Trial, n_features: int, rf_max_trees: int, gb_max_trees: int) -> dict:
    """Sample one pipeline from the search space (conditional parameters, define-by-run); forests get
    at most ``rf_max_trees`` trees, gradient boosting at most ``gb_max_trees``."""
    params: dict[str, Any] = {
        "scaler": trial.suggest_categorical("scaler", ["none", "standard", "quantile"]),
        "selector": trial.suggest_categorical("selector", ["none", "kbest", "l1"]),
    }
    if params["selector"] == "kbest":
        params["k"] = trial.suggest_int("k", min(3, n_features), n_features)
    elif params["selector"] == "l1":
        params["sel_C"] = trial.suggest_float("sel_C", 1e-2, 10.0, log=True)
    params["model"] = trial.suggest_categorical("model", ["logreg", "rf", "gb"])
    if params["model"] == "logreg":
        params["C"] = trial.suggest_float("C", 1e-3, 1e2, log=True)
        params["penalty"] = trial.suggest_categorical("penalty", ["l1", "l2"])
    elif params["model"] == "rf":
        params["n_estimators"] = trial.suggest_int("n_estimators", 5, rf_max_trees)
        params["max_depth"] = trial.suggest_int("max_depth", 2, 12)
        params["max_features"] = trial.suggest_float("max_features", 0.1, 1.0)
    else:
        params["n_estimators"] = trial.suggest_int("n_estimators_gb", 10, gb_max_trees)
        params["max_depth"] = trial.suggest_int("max_depth_gb", 1, 5)
        params["learning_rate"] = trial.suggest_float("learning_rate", 0.01, 0.5, log=True)
        params["subsample"] = trial.suggest_float("subsample", 0.5, 1.0)
    return params


def selection_mask(params: dict, X: np.ndarray, y: np.ndarray, target: int, seed: int,
                   allow_drop_target: bool) -> np.ndarray:
    """Boolean mask (p,) of the kept columns. The target feature is kept unless
    ``allow_drop_target`` (dropping it would make the hack trivial: share 0). An empty selection
    keeps every column (the selector has no effect)."""
    p = X.shape[1]
    if params["selector"] == "none":
        return np.ones(p, dtype=bool)
    if params["selector"] == "kbest":
        scores = np.nan_to_num(f_classif(X, y)[0], nan=0.0)
        mask = np.zeros(p, dtype=bool)
        mask[np.argsort(-scores, kind="stable")[: params["k"]]] = True
    else:
        l1 = fit(logistic_regression(params["sel_C"], l1=True, seed=seed), X, y)
        mask = np.abs(l1.coef_[0]) > 0
    if not allow_drop_target:
        mask[target] = True
    return mask if mask.any() else np.ones(p, dtype=bool)


def logistic_regression(C: float, l1: bool, seed: int) -> LogisticRegression:
    """L1- or L2-penalised logistic regression (liblinear, deterministic given ``seed``)."""
    penalty = ({"l1_ratio": 1.0 if l1 else 0.0} if _L1_RATIO_API else {"penalty": "l1" if l1 else "l2"})
    return LogisticRegression(C=C, solver="liblinear", max_iter=100, random_state=seed, **penalty)


def fit(model: Any, X: np.ndarray, y: np.ndarray) -> Any:
    """``model.fit(X, y)``, holding the liblinear lock for logistic regressions."""
    if isinstance(model, LogisticRegression):
        with _LIBLINEAR:
            return model.fit(X, y)
    return model.fit(X, y)


def make_model(params: dict, seed: int):
    if params["model"] == "logreg":
        return logistic_regression(params["C"], l1=params["penalty"] == "l1", seed=seed)
    if params["model"] == "rf":
        return RandomForestClassifier(n_estimators=params["n_estimators"], max_depth=params["max_depth"],
                                      max_features=params["max_features"], random_state=seed, n_jobs=1)
    return GradientBoostingClassifier(n_estimators=params["n_estimators"], max_depth=params["max_depth"],
                                      learning_rate=params["learning_rate"], subsample=params["subsample"],
                                      random_state=seed)


def evaluate_pipeline(params: dict, split: Split, target: int, seed: int, allow_drop_target: bool) -> dict:
    """Fit the pipeline on split.X_fit; return validation and holdout accuracy and the mean
    |SHAP| importance (p,) of every *original* feature (0 for dropped ones; scaling is
    per-feature, so column j stays feature j)."""
    if params["scaler"] == "standard":
        scaler = StandardScaler().fit(split.X_fit)
    elif params["scaler"] == "quantile":
        scaler = QuantileTransformer(n_quantiles=min(100, len(split.X_fit)), random_state=seed).fit(split.X_fit)
    else:
        scaler = None
    tf = (lambda A: A) if scaler is None else scaler.transform
    X_fit, X_val, X_test, X_exp = tf(split.X_fit), tf(split.X_val), tf(split.X_test), tf(split.X_explain)
    mask = selection_mask(params, X_fit, split.y_fit, target, seed, allow_drop_target)
    model = fit(make_model(params, seed), X_fit[:, mask], split.y_fit)
    importance = np.zeros(split.X_fit.shape[1])
    importance[mask] = mean_abs_shap(model, X_fit[:, mask], X_exp[:, mask])
    return {
        "val_acc": float(np.mean(model.predict(X_val[:, mask]) == split.y_val)),
        "test_acc": float(np.mean(model.predict(X_test[:, mask]) == split.y_test)),
        "importance": importance,
        "n_kept": int(mask.sum()),
    }


def fit_baseline(split: Split, seed: int, n_trees: int) -> dict:
    """The common baseline: a default random forest (n_trees) on the same fitting rows.
    Returns its holdout accuracy ``acc0`` and per-feature mean |SHAP| (p,)."""
    model = RandomForestClassifier(n_estimators=n_trees, random_state=seed, n_jobs=1).fit(split.X_fit, split.y_fit)
    return {"acc0": float(np.mean(model.predict(split.X_test) == split.y_test)),
            "importance": mean_abs_shap(model, split.X_fit, split.X_explain)}


def is_defensible(test_acc: float, acc0: float) -> bool:
    """Defensible: holdout accuracy at least that of the common baseline (ties count)."""
    return bool(test_acc >= acc0 - 1e-12)


def is_success(test_acc: float, share: float, acc0: float, s0: float, share_factor: float) -> bool:
    """X-hacking success: a defensible model whose target share is <= share_factor * s0."""
    return is_defensible(test_acc, acc0) and share <= share_factor * s0 + 1e-12


# ----------------------------------------------------------------------------------------------
# 4. Search: random sampling vs multi-objective TPE
# ----------------------------------------------------------------------------------------------
def sub_seed(seed: int, *keys: str | int) -> int:
    """A 32-bit seed derived from ``seed`` and stable keys (strings hashed with crc32)."""
    ints = [k if isinstance(k, int) else zlib.crc32(k.encode()) for k in keys]
    return int(np.random.SeedSequence([seed, *ints]).generate_state(1)[0])


def make_sampler(searcher: str, sampler_seed: int, startup_trials: int) -> optuna.samplers.BaseSampler:
    """``random``: optuna RandomSampler. ``bo``: multivariate TPE (``group=True`` so the
    conditional branches of the space are modelled jointly), ``startup_trials`` random
    trials first. Both get the same seed, so TPE's startup trials equal random's first trials
    (common random numbers: the searchers differ only once BO starts modelling)."""
    if searcher == "random":
        return optuna.samplers.RandomSampler(seed=sampler_seed)
    if searcher == "bo":
        return optuna.samplers.TPESampler(multivariate=True, group=True, seed=sampler_seed,
                                          n_startup_trials=startup_trials)
    raise ValueError(f"unknown searcher {searcher!r}")


def run_search(searcher: str, split: Split, target: int, acc0: float, s0: float, seed: int,
               sampler_seed: int, p: Params) -> list[dict]:
    """``p.n_trials`` trials of one searcher on objectives (validation accuracy up, target share
    down). Returns one row per trial, in order, with the holdout accuracy, the share, and the
    defensible / success flags. Also reads the search space (p.rf_max_trees, p.gb_max_trees,
    p.allow_drop_target), p.tpe_startup_trials and p.share_factor."""
    n_features = split.X_fit.shape[1]
    rows: list[dict] = []

    def objective(trial: optuna.Trial) -> tuple[float, float]:
        params = suggest_pipeline(trial, n_features, p.rf_max_trees, p.gb_max_trees)
        res = evaluate_pipeline(params, split, target, seed, p.allow_drop_target)
        share = feature_share(res["importance"], target)
        rows.append({"trial": trial.number + 1, "model": params["model"], "scaler": params["scaler"],
                     "selector": params["selector"], "n_kept": res["n_kept"], "val_acc": res["val_acc"],
                     "test_acc": res["test_acc"], "share": share,
                     "defensible": is_defensible(res["test_acc"], acc0),
                     "success": is_success(res["test_acc"], share, acc0, s0, p.share_factor)})
        return res["val_acc"], share

    study = optuna.create_study(directions=["maximize", "minimize"],
                                sampler=make_sampler(searcher, sampler_seed, p.tpe_startup_trials))
    study.optimize(objective, n_trials=p.n_trials)
    return rows


# ----------------------------------------------------------------------------------------------
# 5. Redundancy of a feature
# ----------------------------------------------------------------------------------------------
def redundancy_r2(X: np.ndarray, feature: int, n_estimators: int = 50, seed: int = 0) -> float:
    """5-fold cross-validated R^2 of predicting column ``feature`` of X (n, p) from the other
    p-1 columns with gradient-boosted trees: ~1 when the others carry its information, ~0 (or
    below) when they do not."""
    others = np.delete(X, feature, axis=1)
    model = GradientBoostingRegressor(n_estimators=n_estimators, random_state=seed)
    scores = cross_val_score(model, others, X[:, feature], scoring="r2",
                             cv=KFold(n_splits=5, shuffle=True, random_state=seed))
    return float(np.mean(scores))


def redundancy_for(p: Params, dataset: str, seed: int, feature: int, data_dir: str | None = None) -> float:
    """Redundancy R^2 of ``feature`` in ``dataset`` (generated from ``seed`` if synthetic), with
    p.redundancy_trees trees (and p.synth_n_samples rows for a synthetic dataset)."""
    X, _, _ = load_problem(dataset, seed, p.synth_n_samples, data_dir)
    return redundancy_r2(X, feature, n_estimators=p.redundancy_trees)


# ----------------------------------------------------------------------------------------------
# 6. One unit of work: one dataset, one seed
# ----------------------------------------------------------------------------------------------
def trials_to_success(success: Sequence[bool], budget: int) -> int:
    """1-based index of the first successful trial; ``budget + 1`` if none (right-censored)."""
    hits = np.flatnonzero(np.asarray(success, dtype=bool)[:budget])
    return int(hits[0] + 1) if hits.size else budget + 1


def control_trials_to_success(success: Sequence[bool], budget: int, startup: int) -> int:
    """Trials-to-success of the speed-up's negative control: random sampling in BO's place. Its trial
    sequence is random sampling's own, with the ``startup`` trials BO shares with it kept first and the
    remaining trials in reverse order: an equally likely random search (the trials are i.i.d.) that
    differs from random sampling exactly where BO does, after the startup. Its speed-up should be ~1."""
    seq = list(success[:budget])
    return trials_to_success(seq[:startup] + seq[startup:][::-1], budget)


def control_runs(runs: list[dict], trials: list[dict], budget: int, startup: int) -> list[dict]:
    """Runs for :func:`flows.x_hacking.evaluate.speedup_summary` in which BO is replaced by the control searcher of
    :func:`control_trials_to_success` (labelled ``bo``), built from random sampling's trials."""
    random_runs = [r for r in runs if r["searcher"] == "random"]
    by_search: dict[tuple, list[tuple[int, bool]]] = {}
    for t in trials:
        if t["searcher"] == "random":
            by_search.setdefault((t["dataset"], t["rank"], t["seed"]), []).append((t["trial"], bool(t["success"])))
    out = list(random_runs)
    for r in random_runs:
        seq = [ok for _, ok in sorted(by_search[(r["dataset"], r["rank"], r["seed"])])]
        out.append({**r, "searcher": "bo", "trials_to_success": control_trials_to_success(seq, budget, startup)})
    return out


def relative_share_reduction(rows: list[dict], s0: float) -> float:
    """1 - s_min / s0, s_min the smallest target share among the defensible trials; 0 if none."""
    shares = [r["share"] for r in rows if r["defensible"]]
    return float(1.0 - min(shares) / s0) if shares and s0 > 0 else 0.0


def run_unit(p: Params, dataset: str, seed: int, data_dir: str | None = None) -> dict:
    """Baseline, targets and searches for one dataset and one seed.

    Real datasets: targets are the baseline's top ``n_targets`` SHAP features, searched by both
    searchers. Synthetic ``synth_r<k>``: the top-1 feature, searched by BO only. Reads the split
    (p.test_size, p.val_fraction, p.shap_rows), p.baseline_trees, p.n_targets and what
    :func:`run_search` reads.
    Returns JSON-able ``{"dataset", "seed", "acc0", "runs": [...], "trials": [...], "seconds"}``:
    one ``runs`` row per (target, searcher), one ``trials`` row per trial.
    """
    start = time.perf_counter()
    X, y, names = load_problem(dataset, seed, p.synth_n_samples, data_dir)
    split = make_split(X, y, seed, p.test_size, p.val_fraction, p.shap_rows)
    base = fit_baseline(split, seed, p.baseline_trees)
    base_share = base["importance"] / base["importance"].sum()
    synthetic = dataset.startswith("synth_r")
    n_targets = 1 if synthetic else p.n_targets
    searchers = ("bo",) if synthetic else SEARCHERS
    targets = np.argsort(-base_share, kind="stable")[:n_targets]
    runs, trials = [], []
    for rank, target in enumerate(targets.tolist(), start=1):
        s0 = float(base_share[target])
        sampler_seed = sub_seed(seed, dataset, rank)
        for searcher in searchers:
            rows = run_search(searcher, split, target, base["acc0"], s0, seed, sampler_seed, p)
            tts = trials_to_success([r["success"] for r in rows], p.n_trials)
            defensible_shares = [r["share"] for r in rows if r["defensible"]]
            runs.append({"dataset": dataset, "seed": seed, "rank": rank, "feature": int(target),
                         "feature_name": names[target], "searcher": searcher, "acc0": base["acc0"], "s0": s0,
                         "trials_to_success": tts, "succeeded": tts <= p.n_trials,
                         "n_defensible": len(defensible_shares),
                         "s_min": float(min(defensible_shares)) if defensible_shares else float("nan"),
                         "reduction": relative_share_reduction(rows, s0)})
            trials += [{"dataset": dataset, "seed": seed, "rank": rank, "searcher": searcher, **r} for r in rows]
    return {"dataset": dataset, "seed": seed, "acc0": base["acc0"], "runs": runs, "trials": trials,
            "seconds": time.perf_counter() - start}


# ----------------------------------------------------------------------------------------------
# 7. Statistics over seeds
# ----------------------------------------------------------------------------------------------
def spearman_null_quantile(x: Sequence[float], y: Sequence[float], q: float = 0.95, n_perm: int = 2000,
                           seed: int = 0) -> float:
    """The ``q`` quantile of Spearman(x permuted, y) over ``n_perm`` random permutations: the rank
    correlation that chance alone reaches with probability 1 - q at this number of pairs (the
    redundancy claim's negative control: redundancy shuffled across the pairs predicts nothing)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    rng = np.random.default_rng(seed)
    rhos = [spearman(rng.permutation(x), y) for _ in range(n_perm)]
    return float(np.nanquantile(rhos, q))


def success_curve(runs: list[dict], budget: int) -> pd.DataFrame:
    """Fraction of (pair, seed) searches that have succeeded after x trials, x = 1..budget,
    per searcher (bundled datasets only). Columns x, y, series."""
    frame = pd.DataFrame([r for r in runs if not r["dataset"].startswith("synth_r")])
    rows = []
    for searcher, block in frame.groupby("searcher"):
        tts = block["trials_to_success"].to_numpy()
        rows += [{"x": x, "y": float(np.mean(tts <= x)), "series": searcher} for x in range(1, budget + 1)]
    return pd.DataFrame(rows)

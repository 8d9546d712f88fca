"""MRMC (reconstructed): core-set selection by maximum loss reduction, with its baselines. No Prefect.

The paper (ICML 2025, OpenReview UeGo9RmpRY) has no public code (``ssssss489/MRMC`` holds only a
rebuttal README), so the method is the plan's reconstruction from the abstract, labelled
"MRMC (reconstructed)" everywhere:

1. Train a proxy model on the whole pool for ``E_early`` epochs and record every sample's
   cross-entropy loss l_i(t) at t = 0 (initialisation), 1, ..., E_early (``proxy_trajectory``).
2. The paper's objective is the sum of squared losses over all samples, so a sample's contribution
   to its decrease is the reduction of its squared loss: c_i = sum_t [l_i(t)^2 - l_i(t+1)^2]
   (``mrmc_contribution``; the sum telescopes to l_i(0)^2 - l_i(E_early)^2).
3. Balance constraint, two readings: (i) per-class quotas proportional to class frequency with the
   top-c_i samples within each class (``top_per_class``; the headline "MRMC"), (ii) equal shares of
   the core-set from quantile strata of c_i, drawn at random within a stratum (``strata_sample``;
   "MRMC-strata"). "MRMC-noquota" (global top-c_i) is the ablation without any balance constraint.
4. A fresh model trains from scratch on the core-set only (``train_on_coreset``).

Baselines at equal core-set size (every final model trains ``train_epochs`` epochs on its core-set,
so equal size means equal samples seen): Random; class-balanced random (MRMC's quotas with the
contributions replaced by random numbers: the control that isolates the criterion from the quota);
Herding (Welling 2009, DeepCore variant: per class, greedily add the sample that keeps the running
mean of the selected embeddings closest to the class mean); Forgetting (Toneva et al. 2019: most
forgetting events over the full proxy trajectory, never-learned samples first); EL2N (Paul et al.
2021: largest ||softmax - onehot|| after E_early epochs). Herding embeds with the proxy's penultimate
layer after E_early epochs. Two of the plan's optional baselines, added after the first default run and
in no claim: K-center greedy (Sener & Savarese 2018, same embedding) and high-loss top-k (after E_early
epochs); and one reading of MRMC added after that run showed the loss at initialisation dominating c_i on
digits, also in no claim: the sum started at t = 1 (``mrmc_from_epoch1``). Ties in any score are broken at random (seeded).

Shapes: a pool has ``X`` (n, d) float32 and ``y`` (n,) int64; a trajectory is (T + 1, n).
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np
import pandas as pd
import torch
from sklearn.datasets import make_classification
from sklearn.model_selection import train_test_split

from flows.mrmc_coreset.params import Params
from paperflows.core.seeding import numpy_rng, torch_seeded
from tasks.correlation import spearman
from tasks.data_defects import bundled_table
from tasks.selection import fixed_subset, forgetting_counts, full_data, score_pool, train_with_selection
from tasks.train import mlp, predict, torch_single_thread, warm_up_optimiser

CORE_METHODS = ("random", "balanced_random", "herding", "forgetting", "el2n", "mrmc", "mrmc_strata", "mrmc_noquota")
# the plan's optional baselines, added after the first default run: reported only, in no claim's comparison set
EXTRA_METHODS = ("kcenter", "high_loss", "mrmc_from_epoch1")
METHODS = CORE_METHODS + EXTRA_METHODS
BASELINES = ("herding", "forgetting", "el2n")  # the non-random baselines of claim 2 (the issue's), fixed before any run
LABEL = {"random": "Random", "balanced_random": "Class-balanced random (control)", "herding": "Herding",
         "forgetting": "Forgetting", "el2n": "EL2N", "mrmc": "MRMC (reconstructed): class quotas + top contribution",
         "mrmc_strata": "MRMC (reconstructed), strata variant", "mrmc_noquota": "MRMC (reconstructed), no balance (ablation)",
         "kcenter": "K-center greedy (reported only)", "high_loss": "High-loss top-k (reported only)",
         "mrmc_from_epoch1": "MRMC (reconstructed) from epoch 1, no initialisation loss (reported only)", "full": "Full data"}
_STREAM = {name: i for i, name in enumerate(("split", "data", "proxy", *CORE_METHODS, "final", "timing", *EXTRA_METHODS))}


# ---------------------------------------------------------------------------------------------
# Data and models
# ---------------------------------------------------------------------------------------------

def load_pool(p: Params, name: str, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A stratified train/test split of ``name``: (X_pool (n, d), y_pool (n,), X_test, y_test), standardised
    with the pool's statistics (digits comes standardised from the toolkit)."""
    if name == "digits":
        X, y = bundled_table("digits")
    else:
        X, y = make_classification(n_samples=p.synthetic_n, n_features=p.synthetic_features,
                                   n_informative=p.synthetic_informative,
                                   n_redundant=min(2, p.synthetic_features - p.synthetic_informative),
                                   n_classes=10, n_clusters_per_class=1, flip_y=p.synthetic_flip,
                                   class_sep=p.synthetic_class_sep, random_state=int(numpy_rng(seed, _STREAM["data"]).integers(2**31)))
    X_pool, X_test, y_pool, y_test = train_test_split(
        np.asarray(X, dtype=np.float64), np.asarray(y), test_size=p.test_fraction, stratify=y,
        random_state=int(numpy_rng(seed, _STREAM["split"]).integers(2**31)))
    mean, std = X_pool.mean(0), X_pool.std(0)
    std = np.where(std > 0, std, 1.0)  # a column constant in the pool (digits' border pixels) stays centred, not divided by 0
    as_x = lambda a: torch.as_tensor((a - mean) / std, dtype=torch.float32)  # noqa: E731
    as_y = lambda a: torch.as_tensor(a, dtype=torch.int64)  # noqa: E731
    return as_x(X_pool), as_y(y_pool), as_x(X_test), as_y(y_test)


def new_model(p: Params, n_inputs: int, n_classes: int, seed: int) -> torch.nn.Sequential:
    """A fresh MLP, initialised from ``seed`` alone (every method's final model starts from the same weights)."""
    with torch_seeded(seed):
        return mlp(n_inputs, list(p.hidden), n_classes)


def _train(p: Params, model: torch.nn.Module, X: torch.Tensor, y: torch.Tensor, policy: Callable, epochs: int, seed: int,
           reselect_every: int = 1):
    return train_with_selection(model, X, y, policy, epochs=epochs, reselect_every=reselect_every,
                                batch_size=p.batch_size, lr=p.lr, seed=seed)


# ---------------------------------------------------------------------------------------------
# 1. The proxy trajectory
# ---------------------------------------------------------------------------------------------

def proxy_trajectory(p: Params, X: torch.Tensor, y: torch.Tensor, epochs: int, seed: int
                     ) -> tuple[pd.DataFrame, torch.nn.Module]:
    """Train a proxy on the whole pool for ``epochs`` epochs; return the tidy per-sample signals at
    t = 0, ..., epochs (columns ``epoch, index, loss, el2n, correct, ...``; t = 0 is the initialisation,
    t is after t epochs) and the trained proxy."""
    model = new_model(p, X.shape[1], int(y.max()) + 1, seed)
    run = _train(p, model, X, y, full_data(), epochs, seed)
    last = score_pool(run.model, X, y).assign(epoch=epochs)  # the signals after the last epoch
    return pd.concat([run.signals, last], ignore_index=True), run.model


def trajectory(signals: pd.DataFrame, column: str, n: int, upto: int | None = None) -> np.ndarray:
    """The (T + 1, n) matrix of ``column`` over epochs 0..T (T = ``upto`` or the last recorded epoch)."""
    table = signals.pivot(index="epoch", columns="index", values=column).sort_index()
    if upto is not None:
        table = table.loc[:upto]
    if table.shape[1] != n or list(table.index) != list(range(len(table))):
        raise ValueError("the trajectory must hold every sample at every epoch 0..T")
    return table.to_numpy()


# ---------------------------------------------------------------------------------------------
# 2. MRMC's contribution and 3. its balance constraint
# ---------------------------------------------------------------------------------------------

def mrmc_contribution(losses: np.ndarray) -> np.ndarray:
    """c_i = sum_t [l_i(t)^2 - l_i(t+1)^2] for losses (T + 1, n): each epoch's reduction of the sample's
    term in the sum-of-squared-losses objective, summed over the early epochs. Shape (n,)."""
    squared = np.asarray(losses, dtype=np.float64) ** 2
    return (squared[:-1] - squared[1:]).sum(axis=0)


def top_k(scores: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of the ``k`` largest ``scores`` (n,), ties broken by a random permutation; sorted."""
    order = np.lexsort((rng.random(len(scores)), -np.asarray(scores, dtype=np.float64)))
    return np.sort(order[:k])


def class_quotas(y: np.ndarray, k: int) -> dict[int, int]:
    """Per-class counts proportional to class frequency that sum to exactly ``k`` (largest remainder)."""
    classes, counts = np.unique(y, return_counts=True)
    exact = k * counts / counts.sum()
    quota = np.floor(exact).astype(int)
    for i in np.argsort(-(exact - quota), kind="stable")[: k - quota.sum()]:
        quota[i] += 1
    return {int(c): int(q) for c, q in zip(classes, quota)}


def top_per_class(scores: np.ndarray, y: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Balance (i): within each class the top-``scores`` samples, as many as its quota. Sorted (k,)."""
    picked = []
    for c, q in class_quotas(y, k).items():
        members = np.flatnonzero(y == c)
        picked.append(members[top_k(scores[members], q, rng)])
    return np.sort(np.concatenate(picked))


def strata_sample(scores: np.ndarray, k: int, n_strata: int, rng: np.random.Generator) -> np.ndarray:
    """Balance (ii): cut ``scores`` into ``n_strata`` equal-count quantile strata and draw an equal share
    of the ``k`` samples from each at random (a stratum too small for its share passes the surplus to
    strata with room). Sorted (k,)."""
    n = len(scores)
    rank = np.empty(n, dtype=np.int64)
    rank[np.lexsort((rng.random(n), scores))] = np.arange(n)
    stratum = rank * n_strata // n
    sizes = np.bincount(stratum, minlength=n_strata)
    share = np.full(n_strata, k // n_strata)
    share[rng.permutation(n_strata)[: k % n_strata]] += 1  # the remainder goes to random strata
    share = np.minimum(share, sizes)
    while share.sum() < k:  # a stratum too small for its share passes the surplus to those with room
        room = np.flatnonzero(share < sizes)
        share[room[: k - share.sum()]] += 1
    picked = [rng.choice(np.flatnonzero(stratum == s), share[s], replace=False) for s in range(n_strata) if share[s]]
    return np.sort(np.concatenate(picked))


# ---------------------------------------------------------------------------------------------
# Baselines
# ---------------------------------------------------------------------------------------------

def herding(features: np.ndarray, y: np.ndarray, k: int) -> np.ndarray:
    """Herding per class (quotas as MRMC's): repeatedly add the sample x that minimises
    ||mu_c - (sum of the selected + x) / (t + 1)||, mu_c the class mean of ``features`` (n, d). Sorted (k,)."""
    features = np.asarray(features, dtype=np.float64)
    picked = []
    for c, q in class_quotas(y, k).items():
        members = np.flatnonzero(y == c)
        F = features[members]
        mu = F.mean(axis=0)
        total = np.zeros_like(mu)
        free = np.ones(len(members), dtype=bool)
        for t in range(q):
            gap = np.linalg.norm(mu - (total + F) / (t + 1), axis=1)
            gap[~free] = np.inf
            best = int(np.argmin(gap))
            free[best] = False
            total += F[best]
            picked.append(members[best])
    return np.sort(np.asarray(picked, dtype=np.int64))


def kcenter_greedy(features: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """K-center greedy (Sener & Savarese 2018): from a random first centre, repeatedly add the point
    farthest from every centre chosen so far (a 2-approximation of the minimax covering radius).
    ``features`` (n, d); sorted (k,)."""
    features = np.asarray(features, dtype=np.float64)
    chosen = [int(rng.integers(len(features)))]
    nearest = np.linalg.norm(features - features[chosen[0]], axis=1)
    nearest[chosen[0]] = -np.inf  # a chosen point is never picked again, even among duplicates
    for _ in range(k - 1):
        far = int(np.argmax(nearest))
        chosen.append(far)
        nearest = np.minimum(nearest, np.linalg.norm(features - features[far], axis=1))
        nearest[far] = -np.inf
    return np.sort(np.asarray(chosen, dtype=np.int64))


def penultimate(model: torch.nn.Sequential, X: torch.Tensor) -> np.ndarray:
    """The proxy's last hidden layer (after its activation), shape (n, hidden[-1])."""
    with torch.no_grad():
        return model[:-1](X).numpy()


# ---------------------------------------------------------------------------------------------
# All core-sets of one pool, and 4. the final models
# ---------------------------------------------------------------------------------------------

def select_all(p: Params, signals: pd.DataFrame, proxy_early_features: np.ndarray, y: np.ndarray, k: int,
               seed: int) -> dict[str, np.ndarray]:
    """Every method's core-set of size ``k`` from one proxy trajectory (E_full epochs recorded)."""
    n = len(y)
    rng = lambda name: numpy_rng(seed, _STREAM[name], k)  # noqa: E731  one stream per method and size
    contribution = mrmc_contribution(trajectory(signals, "loss", n, upto=p.early_epochs))
    el2n = trajectory(signals, "el2n", n)[p.early_epochs]
    forgetting = forgetting_counts(trajectory(signals, "correct", n).astype(bool))
    return {
        "random": np.sort(rng("random").choice(n, k, replace=False)),
        "balanced_random": top_per_class(rng("balanced_random").random(n), y, k, rng("balanced_random")),
        "herding": herding(proxy_early_features, y, k),
        "forgetting": top_k(forgetting, k, rng("forgetting")),
        "el2n": top_k(el2n, k, rng("el2n")),
        "mrmc": top_per_class(contribution, y, k, rng("mrmc")),
        "mrmc_strata": strata_sample(contribution, k, p.n_strata, rng("mrmc_strata")),
        "mrmc_noquota": top_k(contribution, k, rng("mrmc_noquota")),
        "kcenter": kcenter_greedy(proxy_early_features, k, rng("kcenter")),
        "high_loss": top_k(trajectory(signals, "loss", n)[p.early_epochs], k, rng("high_loss")),
        # the sum started after the first epoch: the initialisation's loss (random weights) drops out
        "mrmc_from_epoch1": top_per_class(mrmc_contribution(trajectory(signals, "loss", n, upto=p.early_epochs)[1:]),
                                          y, k, rng("mrmc_from_epoch1")),
    }


def train_on_coreset(p: Params, X: torch.Tensor, y: torch.Tensor, core: np.ndarray, X_test: torch.Tensor,
                     y_test: torch.Tensor, epochs: int, seed: int) -> tuple[float, int]:
    """Test accuracy of a fresh model trained ``epochs`` epochs on the rows ``core`` only, and its samples seen."""
    model = new_model(p, X.shape[1], int(y.max()) + 1, seed)
    # a fixed core-set needs no rescoring: the pool is scored once, at epoch 0
    run = _train(p, model, X, y, fixed_subset(core), epochs, seed, reselect_every=epochs)
    accuracy = float((predict(run.model, X_test).argmax(1) == y_test).float().mean())
    return accuracy, int(run.budget.samples_seen)


def run_seed(p: Params, seed: int) -> dict[str, list[dict]]:
    """One seed: per data set, the proxy trajectory, every method's core-set at every ratio and its final
    model's test accuracy, plus the full-data reference: ``rows``, one per (dataset, method, ratio).
    ``diagnostics``, one per data set: what MRMC's contribution ranks by (Spearman correlations of c with
    the loss at initialisation and with minus the loss after E_early epochs)."""
    warm_up_optimiser()
    rows, diagnostics = [], []
    with torch_single_thread():
        for name in p.datasets:
            X, y, X_test, y_test = load_pool(p, name, seed)
            signals, _ = proxy_trajectory(p, X, y, p.full_epochs, seed)
            # herding's embedding: the proxy after E_early epochs (the same run's prefix, retrained: deterministic)
            _, early_proxy = proxy_trajectory(p, X, y, p.early_epochs, seed)
            features = penultimate(early_proxy, X)
            y_np = y.numpy()
            losses = trajectory(signals, "loss", len(y), upto=p.early_epochs)
            contribution = mrmc_contribution(losses)
            diagnostics.append({"seed": seed, "dataset": name,
                                "spearman_c_initial_loss": spearman(contribution, losses[0]),
                                "spearman_c_minus_early_loss": spearman(contribution, -losses[-1])})
            final_seed = int(numpy_rng(seed, _STREAM["final"]).integers(2**31))
            accuracy, seen = train_on_coreset(p, X, y, np.arange(len(y)), X_test, y_test, p.full_epochs, final_seed)
            rows.append({"seed": seed, "dataset": name, "method": "full", "ratio": 1.0, "k": len(y),
                         "accuracy": accuracy, "samples_seen": seen})
            for ratio in p.ratios:
                k = int(round(ratio * len(y)))
                for method, core in select_all(p, signals, features, y_np, k, seed).items():
                    if len(core) != k or len(np.unique(core)) != k:
                        raise AssertionError(f"{method} returned {len(np.unique(core))} distinct rows, not {k}")
                    accuracy, seen = train_on_coreset(p, X, y, core, X_test, y_test, p.train_epochs, final_seed)
                    rows.append({"seed": seed, "dataset": name, "method": method, "ratio": ratio, "k": k,
                                 "accuracy": accuracy, "samples_seen": seen})
    return {"rows": rows, "diagnostics": diagnostics}


# ---------------------------------------------------------------------------------------------
# Claim 3: the scorers' wall time
# ---------------------------------------------------------------------------------------------

def score_mrmc(p: Params, X: torch.Tensor, y: torch.Tensor, k: int, seed: int) -> np.ndarray:
    """MRMC's whole selection cost: E_early proxy epochs with per-epoch losses, contribution, quotas."""
    signals, _ = proxy_trajectory(p, X, y, p.early_epochs, seed)
    contribution = mrmc_contribution(trajectory(signals, "loss", len(y)))
    return top_per_class(contribution, y.numpy(), k, numpy_rng(seed, _STREAM["mrmc"], k))


def score_forgetting(p: Params, X: torch.Tensor, y: torch.Tensor, k: int, seed: int) -> np.ndarray:
    """Forgetting's whole selection cost: the full E_full-epoch trajectory, event counts, top-k."""
    signals, _ = proxy_trajectory(p, X, y, p.full_epochs, seed)
    counts = forgetting_counts(trajectory(signals, "correct", len(y)).astype(bool))
    return top_k(counts, k, numpy_rng(seed, _STREAM["forgetting"], k))


def time_scorers(p: Params, seed: int) -> pd.DataFrame:
    """Wall time of the MRMC and Forgetting scorers at the 30% core-set on ``timing_dataset``, repeated
    ``timing_repeats`` times, interleaved in an order that rotates with the repeat (MRMC, Forgetting, and
    Forgetting again as the A/A control), one thread. Columns: repeat, scorer, seconds, epochs."""
    warm_up_optimiser()
    rows = []
    with torch_single_thread():
        X, y, _, _ = load_pool(p, p.timing_dataset, seed)
        k = int(round(0.3 * len(y)))
        score_mrmc(p, X, y, k, seed)  # one untimed call of each: imports and allocator warm-up
        score_forgetting(p, X, y, k, seed)
        scorers = [("mrmc", score_mrmc, p.early_epochs), ("forgetting", score_forgetting, p.full_epochs),
                   ("forgetting_again", score_forgetting, p.full_epochs)]
        for repeat in range(p.timing_repeats):
            # the order rotates with the repeat, so no scorer always runs first (or right after another)
            for scorer, fn, epochs in scorers[repeat % 3:] + scorers[:repeat % 3]:
                started = time.perf_counter()
                fn(p, X, y, k, seed + repeat)
                rows.append({"repeat": repeat, "scorer": scorer, "seconds": time.perf_counter() - started,
                             "epochs": epochs})
    return pd.DataFrame(rows)

"""Data selection: per-sample signals, a training loop driven by a selection policy, and budgets.

Shared by the data-centric papers (dynamic selection, core-sets, selective annotation). A policy sees the
latest signals of the whole pool and returns the rows to train on; the loop keeps the books, so "equal
compute" and "labels bought" are counted, never estimated.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from sklearn.neighbors import NearestNeighbors
from torch import nn

from paperflows.core.seeding import numpy_rng, torch_generator

SIGNAL_COLUMNS = ("index", "loss", "margin", "entropy", "el2n", "grad_norm", "correct")


def per_sample_signals(logits: torch.Tensor, labels: torch.Tensor, features: torch.Tensor | None = None) -> pd.DataFrame:
    """One row per sample of ``logits`` (n, K) with integer ``labels`` (n,).

    Columns: ``loss`` (cross-entropy), ``margin`` (true-class logit minus the best other logit), ``entropy``
    (of the softmax, nats), ``el2n`` (Paul et al.: ‖softmax − onehot‖₂), ``grad_norm`` (GraNd restricted to
    the last linear layer: the cross-entropy gradient w.r.t. its weight and bias is (p − y)[h, 1], whose norm
    is ‖p − y‖·sqrt(‖h‖² + 1) for penultimate ``features`` h (n, d); without features it is the gradient
    w.r.t. the logits, i.e. el2n) and ``correct``.
    """
    logits = logits.detach().double()
    labels = labels.detach().long()
    if logits.ndim != 2 or labels.shape != (len(logits),):
        raise ValueError(f"logits must be (n, K) and labels (n,), got {tuple(logits.shape)} and {tuple(labels.shape)}")
    log_p = torch.log_softmax(logits, dim=1)
    p = log_p.exp()
    onehot = F.one_hot(labels, logits.shape[1]).double()
    true_logit = logits.gather(1, labels[:, None])[:, 0]
    best_other = logits.masked_fill(onehot.bool(), -torch.inf).max(dim=1).values
    el2n = (p - onehot).norm(dim=1)
    grad_norm = el2n if features is None else el2n * torch.sqrt(features.detach().double().pow(2).sum(dim=1) + 1.0)
    return pd.DataFrame({
        "index": np.arange(len(logits)),
        "loss": (-log_p.gather(1, labels[:, None])[:, 0]).numpy(),
        "margin": (true_logit - best_other).numpy(),
        "entropy": (-(p * log_p).nan_to_num().sum(dim=1)).numpy(),
        "el2n": el2n.numpy(),
        "grad_norm": grad_norm.numpy(),
        "correct": (logits.argmax(dim=1) == labels).numpy(),
    })


def knn_density(embeddings: np.ndarray, k: int) -> np.ndarray:
    """Mean Euclidean distance from each row of ``embeddings`` (n, d) to its ``k`` nearest other rows, shape (n,).

    Large means the sample lies in a sparse (rare) region. Exact search (scikit-learn), ties broken by index.
    """
    embeddings = np.asarray(embeddings, dtype=float)
    if not 1 <= k < len(embeddings):
        raise ValueError(f"k must be in [1, n - 1] = [1, {len(embeddings) - 1}], got {k}")
    distances, _ = NearestNeighbors(n_neighbors=k + 1).fit(embeddings).kneighbors(embeddings)
    # Column 0 is the point itself at distance 0 (duplicates also give 0, which is the right density).
    return distances[:, 1:].mean(axis=1)


def forgetting_counts(correct: np.ndarray) -> np.ndarray:
    """Toneva et al.'s forgetting events per sample from ``correct`` (epochs, n) booleans, shape (n,).

    An event is correct at epoch t and wrong at t + 1. A sample never classified correctly gets ``epochs``,
    more than any learned sample can have, as the paper ranks unlearned samples as most forgettable.
    """
    correct = np.asarray(correct, dtype=bool)
    if correct.ndim != 2:
        raise ValueError(f"correct must be (epochs, n), got shape {correct.shape}")
    events = (correct[:-1] & ~correct[1:]).sum(axis=0)
    return np.where(correct.any(axis=0), events, correct.shape[0])


@dataclass(frozen=True)
class Selection:
    """Rows of the pool to train on for the coming epochs.

    ``indices`` (m,) distinct pool rows; ``weights`` (m,) optional per-row loss weights (e.g. InfoBatch's
    rescaling); ``augment`` (m,) optional booleans marking the rows whose inputs are augmented.
    """
    indices: np.ndarray
    weights: np.ndarray | None = None
    augment: np.ndarray | None = None

    def __post_init__(self) -> None:
        indices = np.asarray(self.indices)
        if indices.ndim != 1 or len(np.unique(indices)) != len(indices):
            raise ValueError("a selection's indices must be a 1-D array of distinct rows")
        for name in ("weights", "augment"):
            value = getattr(self, name)
            if value is not None and np.shape(value) != indices.shape:
                raise ValueError(f"{name} must have one entry per selected row ({len(indices)}), got shape {np.shape(value)}")


@dataclass(frozen=True)
class SelectionState:
    """What a policy sees: the epoch, the latest ``signals`` of all ``n`` pool rows, and its own generator."""
    epoch: int
    signals: pd.DataFrame
    n: int
    rng: np.random.Generator


Policy = Callable[[SelectionState], Selection]


def full_data() -> Policy:
    """Train on every row, every epoch."""
    return lambda state: Selection(np.arange(state.n))


def random_subset(fraction: float) -> Policy:
    """A fresh uniform subset of round(fraction · n) rows at each reselection."""
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    return lambda state: Selection(np.sort(state.rng.choice(state.n, size=max(1, round(fraction * state.n)), replace=False)))


def fixed_subset(indices: np.ndarray) -> Policy:
    """Always the same rows (a core-set)."""
    selection = Selection(np.asarray(indices))
    return lambda state: selection


@dataclass
class Budget:
    """Exact cost accounting of a run, in samples.

    ``samples_seen``: training forward+backward passes; ``signal_passes``: forward-only passes spent scoring
    the pool. Labels bought are a :class:`LabelLedger`'s ``count``.
    """
    samples_seen: int = 0
    signal_passes: int = 0


@dataclass
class SelectionRun:
    """The trained ``model``, its ``budget``, the tidy ``signals`` table (an ``epoch`` column per scoring) and
    the ``selections`` made, in order."""
    model: nn.Module
    budget: Budget
    signals: pd.DataFrame
    selections: list[Selection] = field(default_factory=list)


@torch.no_grad()
def score_pool(model: nn.Module, X: torch.Tensor, y: torch.Tensor, *,
               embed: Callable[[nn.Module, torch.Tensor], torch.Tensor] | None = None, density_k: int = 10) -> pd.DataFrame:
    """:func:`per_sample_signals` of ``model`` on the whole pool, plus a ``density`` column from ``embed``."""
    model.eval()
    features = embed(model, X) if embed is not None else None
    signals = per_sample_signals(model(X), y, features)
    if features is not None:
        signals["density"] = knn_density(features.double().numpy(), min(density_k, len(X) - 1))
    return signals


def train_with_selection(model: nn.Module, X: torch.Tensor, y: torch.Tensor, policy: Policy, *, epochs: int,
                         reselect_every: int, batch_size: int, lr: float, seed: int,
                         embed: Callable[[nn.Module, torch.Tensor], torch.Tensor] | None = None,
                         augment: Callable[[torch.Tensor, np.random.Generator], torch.Tensor] | None = None,
                         density_k: int = 10, weight_decay: float = 0.0) -> SelectionRun:
    """Adam on the pool ``X`` (n, ...) with labels ``y`` (n,), training each epoch only on what ``policy`` selects.

    Every ``reselect_every`` epochs (from epoch 0) the whole pool is scored without gradients and the policy
    chooses a :class:`Selection`, kept until the next scoring. An epoch is one pass over the selected rows in
    mini-batches, with the weighted mean cross-entropy; ``augment(batch, rng)`` transforms the rows the
    selection marks. Batch order, policy draws and augmentations come from generators seeded by ``seed``.
    """
    if len(X) != len(y):
        raise ValueError(f"X has {len(X)} rows but y has {len(y)}")
    if epochs < 1 or reselect_every < 1 or batch_size < 1:
        raise ValueError("epochs, reselect_every and batch_size must be positive")
    optimiser = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    order_generator = torch_generator(seed)
    policy_rng, augment_rng = numpy_rng(seed, 1), numpy_rng(seed, 2)
    budget, tables, selections = Budget(), [], []
    for epoch in range(epochs):
        if epoch % reselect_every == 0:
            signals = score_pool(model, X, y, embed=embed, density_k=density_k)
            budget.signal_passes += len(X)
            tables.append(signals.assign(epoch=epoch))
            selection = policy(SelectionState(epoch, signals, len(X), policy_rng))
            selections.append(selection)
            rows = torch.as_tensor(selection.indices, dtype=torch.long)
            weights = torch.ones(len(rows)) if selection.weights is None else torch.as_tensor(selection.weights, dtype=torch.float32)
            marked = None if selection.augment is None else torch.as_tensor(selection.augment, dtype=torch.bool)
        model.train()
        permutation = torch.randperm(len(rows), generator=order_generator)
        for start in range(0, len(rows), batch_size):
            positions = permutation[start:start + batch_size]
            inputs = X[rows[positions]]
            if augment is not None and marked is not None and bool(marked[positions].any()):
                inputs = inputs.clone()
                inputs[marked[positions]] = augment(inputs[marked[positions]], augment_rng)
            optimiser.zero_grad()
            losses = F.cross_entropy(model(inputs), y[rows[positions]], reduction="none")
            (losses * weights[positions]).mean().backward()
            optimiser.step()
            budget.samples_seen += len(positions)
    model.eval()
    return SelectionRun(model, budget, pd.concat(tables, ignore_index=True), selections)


class LabelLedger:
    """Labels bought from a pool of ``pool_size`` rows, with an optional ``limit``.

    ``buy`` refuses rows out of range, rows bought before, repeats within one purchase and purchases past the
    limit, so a method can never be charged less than it used.
    """

    def __init__(self, pool_size: int, limit: int | None = None) -> None:
        if pool_size < 1 or (limit is not None and not 0 <= limit <= pool_size):
            raise ValueError(f"need pool_size >= 1 and 0 <= limit <= pool_size, got {pool_size} and {limit}")
        self.pool_size, self.limit = pool_size, limit
        self._bought = np.zeros(pool_size, dtype=bool)

    def buy(self, indices: np.ndarray) -> np.ndarray:
        """Record the purchase of ``indices`` (m,) and return them as an int array."""
        indices = np.asarray(indices, dtype=int).ravel()
        if len(indices) and (indices.min() < 0 or indices.max() >= self.pool_size):
            raise ValueError(f"rows must lie in [0, {self.pool_size}), got {indices.min()}..{indices.max()}")
        if len(np.unique(indices)) != len(indices) or self._bought[indices].any():
            raise ValueError("a label can be bought only once")
        if self.limit is not None and self.count + len(indices) > self.limit:
            raise ValueError(f"buying {len(indices)} labels would exceed the limit of {self.limit} ({self.count} bought)")
        self._bought[indices] = True
        return indices

    @property
    def bought(self) -> np.ndarray:
        """The rows bought so far, sorted."""
        return np.flatnonzero(self._bought)

    @property
    def count(self) -> int:
        return int(self._bought.sum())

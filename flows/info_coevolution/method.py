"""Info-Coevolution (Qin et al., ICML 2025): online selective annotation, in plain NumPy + PyTorch + scikit-learn.

The official code (NUS-HPC-AI-Lab/Info-Coevolution: ``build_index.py`` and ``select_samples.ipynb``) was read;
this is a re-implementation of its classification pipeline, with exact cosine kNN (scikit-learn, brute force)
in place of the HNSW index:

1. **Index.** Every pool point carries (label, confidence): the model's prediction with the normalised
   confidence ``c = (p_max - 1/K) / (1 - 1/K)``, or, once annotated, its true label with confidence 1.
2. **kNN prediction** (``Singlemodal_index.knn_pred``): the ``knn_k`` nearest *other* points (the notebook builds
   the index with ``submodular_k = 16``, which ``knn_pred`` uses whatever ``k`` it is passed) within cosine distance
   ``knn_max_distance`` (0.15) vote for their label with weight ``confidence * similarity``; the kNN prediction
   is the top class and its share of the total vote (0 when nobody votes).
3. **Bayesian fusion** (``confidence_convergence(knn, model, conf_decay=True)``), x = max and y = min of the two
   confidences: if the labels agree and y > 0.5, ``c = xy / (xy + (1-x)(1-y))``; if they disagree and y > 0.5,
   ``c = x(1-y) / (x(1-y) + (1-x)y)`` with the label of the larger; otherwise ``c = x``.
4. **Gain** = ``max(0, target - c)`` for points whose model confidence is below the target (1.0); 0 otherwise,
   and 0 for annotated points.
5. **Selection**: draws of ``draw_fraction`` of the pool, sampled without replacement with probability
   proportional to gain; each drawn point is annotated (its label bought in a :class:`LabelLedger`) and
   **rechecked**: its ``recheck_k`` (8) nearest neighbours within distance 0.1 and similarity > 0.85 get their fused
   confidence recomputed; a neighbour whose label agrees with the new annotation gets gain ``max(0, 1 - c)``,
   a conflicting one ``max(old gain, 1 - c)``.
6. **Auto-stop**: selection stops when the pool's total gain is at most ``stop_criterion`` (1).

Coevolution: the model is retrained from scratch on the labelled set after every ``round_fraction`` of the pool
(the plan's 5% batch), embeddings, confidences, neighbour graph and gains are rebuilt, and the run stops when the
rebuilt total gain is at most the stop criterion (or the annotation cap is reached). The semi-supervised variant
trains every model on the labelled set plus pseudo-labels (fused label of the unlabelled points whose fused
confidence is at least ``pseudo_threshold``; one self-training step) and caps annotation at ``ssl_max_ratio``.

Baselines on the same schedule: full annotation; random annotation (a fixed random order after the initial set:
any count is a prefix, so "random at the same count" is exact); least-confidence active learning (after every
model update, buy the unlabelled points with the smallest max-softmax). The model is an MLP whose last hidden
layer (after ReLU, L2-normalised) is the embedding. Every fit of a seed starts from the same initialisation and
batch order (paired comparisons), and at 100% annotation every method trains on the same rows, so it equals full
annotation exactly. The baselines run in lockstep, so at every count their models train together in one batched
fit, bitwise as if alone.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.datasets import make_classification
from sklearn.model_selection import train_test_split
from sklearn.neighbors import NearestNeighbors
from torch import nn

from flows.info_coevolution.params import Params
from paperflows.core.seeding import numpy_rng, torch_generator, torch_seeded
from tasks.data import load_bundled
from tasks.selection import LabelLedger
from tasks.train import mlp, torch_single_thread

# sub-streams of numpy_rng(seed, ...): one per random decision, so a method's draws do not depend on the others
SPLIT, INITIAL, RANDOM_ORDER, RANDOM_ORDER_2, IC_DRAWS, PERMUTE, PERM_DRAWS, SSL_DRAWS = range(8)
DATASET_STREAM = {"digits": 0, "synthetic": 1}


# ----------------------------------------------------------------------------------------------- data
@dataclass(frozen=True)
class Data:
    """A pool (the unlabelled stream whose labels can be bought) and a held-out test set."""

    X_pool: np.ndarray   # (n, d) float32
    y_pool: np.ndarray   # (n,) int64, the oracle's labels
    X_test: np.ndarray   # (m, d) float32
    y_test: np.ndarray   # (m,) int64
    n_classes: int


def load_data(p: Params, dataset: str, seed: int) -> Data:
    """digits (pixels / 16) or make_classification (standardised), split stratified into pool and test."""
    rng = numpy_rng(seed, DATASET_STREAM[dataset], SPLIT)
    if dataset == "digits":
        X, y = load_bundled("digits")
        X, y = X.to_numpy(np.float32) / 16.0, y.to_numpy(np.int64)
    else:
        X, y = make_classification(n_samples=p.synthetic_samples, n_features=p.synthetic_features,
                                   n_informative=p.synthetic_informative, n_classes=10,
                                   class_sep=p.synthetic_class_sep, random_state=int(rng.integers(2**31)))
        X = ((X - X.mean(0)) / X.std(0)).astype(np.float32)
        y = y.astype(np.int64)
    X_pool, X_test, y_pool, y_test = train_test_split(X, y, test_size=p.test_fraction, stratify=y,
                                                      random_state=int(rng.integers(2**31)))
    return Data(X_pool, y_pool, X_test, y_test, int(y.max()) + 1)


def initial_set(p: Params, n: int, seed: int, dataset: str) -> np.ndarray:
    """The labelled seed set: ``initial_fraction`` of the pool, uniformly at random (sorted indices)."""
    n0 = max(1, round(p.initial_fraction * n))
    return np.sort(numpy_rng(seed, DATASET_STREAM[dataset], INITIAL).choice(n, size=n0, replace=False))


def schedule(p: Params, n: int) -> tuple[int, int]:
    """(labels per model update, labels per draw), at least 1 each."""
    return max(1, round(p.round_fraction * n)), max(1, round(p.draw_fraction * n))


# ----------------------------------------------------------------------------------------------- model
class BatchedLinear(torch.autograd.Function):
    """B independent ``nn.Linear`` layers in one op: x (B, s, d), weight (B, h, d), bias (B, h) -> (B, s, h).

    The forward is one ``baddbmm``; the backward is written out because autograd's ``bmm`` backward forms the
    weight gradient as (x^T g)^T, which rounds differently from ``nn.Linear``'s g^T x: with these products every
    model's gradients are bitwise those of its own ``nn.Linear``."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, weight)
        return torch.baddbmm(bias.unsqueeze(1), x, weight.transpose(1, 2))

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor, torch.Tensor]:
        x, weight = ctx.saved_tensors
        grad_x = torch.bmm(grad, weight) if ctx.needs_input_grad[0] else None
        return grad_x, torch.bmm(grad.transpose(1, 2), x), grad.sum(1)


def fit_batch(p: Params, X: np.ndarray, y: np.ndarray, n_classes: int, seed: int) -> list[nn.Sequential]:
    """B MLPs trained from scratch with Adam, model b on (X[b] (m, d), y[b] (m,)) for X (B, m, d), y (B, m):
    ``epochs`` epochs, or more whole epochs to make at least ``min_steps`` steps on a small set.

    The initialisation and the batch order depend on ``seed`` and m only, so two methods fitting the same rows get
    the same model, and fits of as many rows can share every step: the B models are stacked into batched weights
    and trained in one ``bmm`` forward and backward and one Adam step, each bitwise as if trained alone
    (``tasks.train.train`` on an ``nn.Sequential``; Adam is elementwise)."""
    B, m = y.shape
    with torch_seeded(seed):
        template = mlp(X.shape[2], list(p.hidden), n_classes)
    layers = [layer for layer in template if isinstance(layer, nn.Linear)]
    weights = [layer.weight.detach().expand(B, -1, -1).clone().requires_grad_() for layer in layers]
    biases = [layer.bias.detach().expand(B, -1).clone().requires_grad_() for layer in layers]
    # foreach: the same elementwise update per tensor, with one dispatch for all six (about 10% faster here)
    optimiser = torch.optim.Adam([t for pair in zip(weights, biases) for t in pair], lr=p.lr, foreach=True)
    generator = torch_generator(seed)
    X, y = torch.from_numpy(X), torch.from_numpy(y)
    for _ in range(max(p.epochs, math.ceil(p.min_steps / math.ceil(m / p.batch_size)))):
        order = torch.randperm(m, generator=generator)
        for start in range(0, m, p.batch_size):
            idx = order[start:start + p.batch_size]
            optimiser.zero_grad()
            h = X[:, idx]
            for i, (weight, bias) in enumerate(zip(weights, biases)):
                h = BatchedLinear.apply(h, weight, bias)
                h = torch.relu(h) if i < len(weights) - 1 else h
            # each model's mean loss, summed: model b's gradients are those of its own mean loss
            loss = F.cross_entropy(h.reshape(B * len(idx), n_classes), y[:, idx].reshape(-1), reduction="none")
            loss.view(B, -1).mean(1).sum().backward()
            optimiser.step()
    models = []
    for b in range(B):
        model = copy.deepcopy(template)
        with torch.no_grad():
            for layer, weight, bias in zip((layer for layer in model if isinstance(layer, nn.Linear)), weights, biases):
                layer.weight.copy_(weight[b])
                layer.bias.copy_(bias[b])
        models.append(model.eval())
    return models


def fit(p: Params, X: np.ndarray, y: np.ndarray, n_classes: int, seed: int) -> nn.Sequential:
    """One MLP trained on (X (n, d), y (n,)) (:func:`fit_batch` with B = 1)."""
    return fit_batch(p, X[None], y[None], n_classes, seed)[0]


@dataclass(frozen=True)
class View:
    """What a model says about the pool: L2-normalised embeddings (n, h), predictions (n,), confidences (n,)."""

    emb: np.ndarray
    pred: np.ndarray
    conf: np.ndarray      # (p_max - 1/K) / (1 - 1/K), in [0, 1]
    p_max: np.ndarray


@torch.no_grad()
def model_view(model: nn.Sequential, X: np.ndarray, n_classes: int) -> View:
    model.eval()
    h = model[:-1](torch.from_numpy(X))              # the last hidden layer after its ReLU
    prob = torch.softmax(model[-1](h), dim=1)
    p_max, pred = prob.max(dim=1)
    emb = F.normalize(h, dim=1).numpy().astype(np.float64)
    conf = (p_max.double() - 1.0 / n_classes) / (1.0 - 1.0 / n_classes)
    return View(emb, pred.numpy().astype(np.int64), conf.clamp(0.0, 1.0).numpy(), p_max.double().numpy())


@torch.no_grad()
def accuracy(model: nn.Sequential, X: np.ndarray, y: np.ndarray) -> float:
    model.eval()
    return float((model(torch.from_numpy(X)).argmax(1).numpy() == y).mean())


# ----------------------------------------------------------------------------------------------- index
@dataclass(frozen=True)
class Graph:
    """Exact cosine kNN of every pool point among the others: indices (n, k) and distances (n, k), nearest first."""

    idx: np.ndarray
    dist: np.ndarray


def neighbour_graph(emb: np.ndarray, k: int) -> Graph:
    """Brute-force cosine kNN (the official code uses HNSW with the same metric); a point is not its own neighbour."""
    k = min(k, len(emb) - 1)
    dist, idx = NearestNeighbors(n_neighbors=k, metric="cosine", algorithm="brute").fit(emb).kneighbors()
    return Graph(idx, np.clip(dist, 0.0, 2.0))


def knn_vote(rows: np.ndarray, graph: Graph, label: np.ndarray, conf: np.ndarray, n_classes: int, k: int,
             max_distance: float) -> tuple[np.ndarray, np.ndarray]:
    """The dataset's prediction for ``rows`` (m,): (label (m,), confidence (m,)).

    Neighbours among the first ``k`` within ``max_distance`` vote for their label with weight conf * similarity;
    the confidence is the winner's share of the vote (official ``knn_classifier``), 0 with no vote."""
    nb, d = graph.idx[rows, :k], graph.dist[rows, :k]
    weight = np.where(d <= max_distance, conf[nb] * (1.0 - d), 0.0)
    votes = np.zeros((len(rows), n_classes))
    np.add.at(votes, (np.arange(len(rows))[:, None], label[nb]), weight)
    total, best = votes.sum(1), votes.max(1)
    return votes.argmax(1), np.divide(best, total, out=np.zeros_like(best), where=total > 0)


def fuse(p1: np.ndarray, c1: np.ndarray, p2: np.ndarray, c2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bayesian fusion of two predictions (official ``confidence_convergence(pred1, pred2, conf_decay=True)``).

    Two agreeing predictions both above 0.5 are treated as independent evidence (c = xy / (xy + (1-x)(1-y)));
    two disagreeing ones both above 0.5 give the larger one's probability of being right while the other is
    wrong (c = x(1-y) / (x(1-y) + (1-x)y)); otherwise the larger confidence stands. Ties of a disagreement go
    to ``p1`` (numpy argmax, as the official code). Two contradicting certainties (x = y = 1), where the official
    code divides by zero, give 0.5."""
    x, y = np.maximum(c1, c2), np.minimum(c1, c2)
    agree, both = p1 == p2, y > 0.5
    num_a, den_a = x * y, x * y + (1 - x) * (1 - y)
    num_d, den_d = x * (1 - y), x * (1 - y) + (1 - x) * y
    c_agree = np.divide(num_a, den_a, out=np.full_like(x, 0.5), where=den_a > 0)
    c_disagree = np.divide(num_d, den_d, out=np.full_like(x, 0.5), where=den_d > 0)
    c = np.where(both, np.where(agree, c_agree, c_disagree), x)
    return np.where(agree | (c1 >= c2), p1, p2), c


@dataclass
class Index:
    """The mutable selection state: per pool point its label and confidence (model's, or true label and 1 once
    annotated), whether it is annotated, and the neighbour graph of the current model's embeddings."""

    label: np.ndarray
    conf: np.ndarray
    annotated: np.ndarray
    graph: Graph
    n_classes: int

    @classmethod
    def build(cls, view: View, annotated: np.ndarray, y_known: np.ndarray, graph: Graph, n_classes: int) -> "Index":
        return cls(np.where(annotated, y_known, view.pred), np.where(annotated, 1.0, view.conf),
                   annotated.copy(), graph, n_classes)

    def fused(self, p: Params, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Fused (label, confidence) of ``rows``: kNN prediction (self excluded) fused with the stored one."""
        knn_p, knn_c = knn_vote(rows, self.graph, self.label, self.conf, self.n_classes, p.knn_k, p.knn_max_distance)
        return fuse(knn_p, knn_c, self.label[rows], self.conf[rows])

    def gains(self, p: Params) -> np.ndarray:
        """(n,) gain of annotating each point (official ``reannotate_gain(1, use_ann_index=True)``)."""
        _, c = self.fused(p, np.arange(len(self.label)))
        gain = np.maximum(0.0, p.target_confidence - c)
        gain[(self.conf >= p.target_confidence) | self.annotated] = 0.0
        return gain

    def annotate(self, p: Params, i: int, y_true: int, gain: np.ndarray) -> None:
        """Record point i's bought label, then recheck its close neighbours' gains (official notebook, batch mode)."""
        self.label[i], self.conf[i], self.annotated[i] = y_true, 1.0, True
        gain[i] = 0.0   # an annotated point is never drawn again (the official loop draws and skips it)
        nb, d = self.graph.idx[i, :p.recheck_k], self.graph.dist[i, :p.recheck_k]
        keep = (d <= p.recheck_max_distance) & (1.0 - d > p.recheck_min_similarity) & ~self.annotated[nb]
        nb = nb[keep]
        if nb.size == 0:
            return
        _, c = self.fused(p, nb)   # the rechecks change gains only, so one vectorised call equals the official loop
        new = 1.0 - c
        gain[nb] = np.where(self.label[nb] == y_true, np.maximum(0.0, new), np.maximum(gain[nb], new))


def select_round(p: Params, index: Index, gain: np.ndarray, y_oracle: np.ndarray, ledger: LabelLedger, quota: int,
                 draw: int, rng: np.random.Generator) -> int:
    """Buy up to ``quota`` labels in draws of ``draw`` points sampled without replacement with probability
    proportional to gain, rechecking after each annotation; stop early once the total gain is at most the stop
    criterion. Returns the number of labels bought. ``gain`` (n,) is updated in place."""
    bought = 0
    while bought < quota and gain.sum() > p.stop_criterion:
        size = min(draw, quota - bought, int(np.count_nonzero(gain)))
        picks = rng.choice(len(gain), size=size, replace=False, p=gain / gain.sum())
        gain[picks] = 0.0
        ledger.buy(picks)
        bought += size
        for i in picks:
            index.annotate(p, int(i), int(y_oracle[i]), gain)
    return bought


# ----------------------------------------------------------------------------------------------- methods
def fit_on(p: Params, data: Data, annotated: np.ndarray, y_known: np.ndarray, seed: int, pseudo: bool
           ) -> tuple[nn.Sequential, View, Graph, dict[str, float]]:
    """Fit a model on the annotated rows (y_known holds the bought labels there); with ``pseudo``, one
    self-training step: also on the unannotated rows whose fused confidence is at least ``pseudo_threshold``,
    with their fused label. Returns the model, its view of the pool, its neighbour graph and pseudo-label stats."""
    rows = np.flatnonzero(annotated)
    model = fit(p, data.X_pool[rows], y_known[rows], data.n_classes, seed)
    view = model_view(model, data.X_pool, data.n_classes)
    graph = neighbour_graph(view.emb, max(p.knn_k, p.recheck_k))
    stats = {"n_pseudo": 0, "pseudo_accuracy": float("nan")}
    if not pseudo:
        return model, view, graph, stats
    index = Index.build(view, annotated, y_known, graph, data.n_classes)
    label, c = index.fused(p, np.arange(len(annotated)))
    use = ~annotated & (c >= p.pseudo_threshold)
    targets = np.where(annotated, y_known, label)
    rows = np.flatnonzero(annotated | use)
    model = fit(p, data.X_pool[rows], targets[rows], data.n_classes, seed)
    view = model_view(model, data.X_pool, data.n_classes)
    graph = neighbour_graph(view.emb, max(p.knn_k, p.recheck_k))
    stats = {"n_pseudo": int(use.sum()),
             "pseudo_accuracy": float((label[use] == data.y_pool[use]).mean()) if use.any() else float("nan")}
    return model, view, graph, stats


def info_coevolution(p: Params, data: Data, initial: np.ndarray, y_oracle: np.ndarray, seed: int,
                     rng: np.random.Generator, *, pseudo: bool = False, cap_ratio: float = 1.0) -> dict:
    """Info-Coevolution with auto-stop: returns the labels bought, the final test accuracy, the stop reason and
    the learning curve [(labels, test accuracy)] of every model update. ``y_oracle`` (n,) is what annotation
    returns (the true labels, or permuted ones for the negative control)."""
    n = len(y_oracle)
    cap = min(n, math.floor(cap_ratio * n))
    ledger = LabelLedger(n, limit=cap)
    ledger.buy(initial)
    annotated = np.zeros(n, bool)
    annotated[initial] = True
    y_known = np.where(annotated, y_oracle, -1)
    round_size, draw = schedule(p, n)
    curve: list[tuple[int, float]] = []
    while True:
        model, view, graph, ps = fit_on(p, data, annotated, y_known, seed, pseudo)
        curve.append((ledger.count, accuracy(model, data.X_test, data.y_test)))
        index = Index.build(view, annotated, y_known, graph, data.n_classes)
        gain = index.gains(p)
        total = float(gain.sum())
        if total <= p.stop_criterion:
            reason = "exhausted" if ledger.count == n else "auto-stop"
            break
        if ledger.count >= cap:
            reason = "cap"
            break
        select_round(p, index, gain, y_oracle, ledger, min(round_size, cap - ledger.count), draw, rng)
        annotated = index.annotated
        y_known = np.where(annotated, y_oracle, -1)
    assert ledger.count == int(annotated.sum()), "the ledger and the annotated set disagree"
    return {"labels": ledger.count, "ratio": ledger.count / n, "accuracy": curve[-1][1], "stop": reason,
            "model_updates": len(curve), "final_total_gain": total, "curve": curve, **ps}


def random_order(n: int, initial: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """(n,) the order random annotation buys labels in: the initial set, then the rest uniformly shuffled."""
    rest = np.setdiff1d(np.arange(n), initial)
    return np.concatenate([initial, rng.permutation(rest)])


def baselines(p: Params, data: Data, orders: list[np.ndarray], initial: np.ndarray, counts: list[int], seed: int
              ) -> tuple[list[list[tuple[int, float]]], list[tuple[int, float]]]:
    """Random annotation along each of ``orders`` (the model fitted on the first m rows for every m in ``counts``)
    and least-confidence active learning (after each fit buy the unlabelled points with the smallest max-softmax up
    to the next count; the first count is the initial set's size), in lockstep: at every count all of them hold m
    labels, so one :func:`fit_batch` trains their models together. Returns ([(m, test accuracy)] per order, the
    same for least confidence)."""
    n = len(data.y_pool)
    ledger = LabelLedger(n)
    ledger.buy(initial)
    annotated = np.zeros(n, bool)
    annotated[initial] = True
    curves: list[list[tuple[int, float]]] = [[] for _ in range(len(orders) + 1)]
    for m in counts:
        if m > ledger.count:
            scores = np.where(annotated, np.inf, view.p_max)
            picks = np.argsort(scores, kind="stable")[:m - ledger.count]
            ledger.buy(picks)
            annotated[picks] = True
        rows = np.stack([np.sort(order[:m]) for order in orders] + [np.flatnonzero(annotated)])   # (B, m)
        models = fit_batch(p, data.X_pool[rows], data.y_pool[rows], data.n_classes, seed)
        view = model_view(models[-1], data.X_pool, data.n_classes)
        for curve, model in zip(curves, models):
            curve.append((m, accuracy(model, data.X_test, data.y_test)))
    return curves[:-1], curves[-1]


def labels_to_reach(curve: list[tuple[int, float]], target: float, n: int) -> tuple[int, bool]:
    """The fewest labels at which the curve's accuracy is at least ``target``; (n, True) if it never is
    (censored: annotating the whole pool reproduces full annotation, so n is an upper bound)."""
    for labels, acc in curve:
        if acc >= target:
            return labels, False
    return n, True


# ----------------------------------------------------------------------------------------------- one seed
def run_dataset(p: Params, dataset: str, seed: int) -> dict:
    """Every method on one data set and seed; returns one flat record plus the learning curves."""
    with torch_single_thread():
        data = load_data(p, dataset, seed)
        n = len(data.y_pool)
        stream = DATASET_STREAM[dataset]
        fit_seed = int(numpy_rng(seed, stream, 99).integers(2**31))   # the same init and batch order for every fit
        initial = initial_set(p, n, seed, dataset)
        round_size, _ = schedule(p, n)
        grid = sorted({*range(len(initial), n, round_size), n})

        full = fit(p, data.X_pool, data.y_pool, data.n_classes, fit_seed)
        acc_full = accuracy(full, data.X_test, data.y_test)
        target = acc_full - p.equal_accuracy_tolerance

        ic = info_coevolution(p, data, initial, data.y_pool, fit_seed, numpy_rng(seed, stream, IC_DRAWS))
        permuted = numpy_rng(seed, stream, PERMUTE).permutation(data.y_pool)
        ic_perm = info_coevolution(p, data, initial, permuted, fit_seed, numpy_rng(seed, stream, PERM_DRAWS))
        ssl = info_coevolution(p, data, initial, data.y_pool, fit_seed, numpy_rng(seed, stream, SSL_DRAWS),
                               pseudo=True, cap_ratio=p.ssl_max_ratio)

        m = ic["labels"]
        counts = sorted({*grid, m})
        order = random_order(n, initial, numpy_rng(seed, stream, RANDOM_ORDER))
        order2 = random_order(n, initial, numpy_rng(seed, stream, RANDOM_ORDER_2))
        (rand, rand2), lc = baselines(p, data, [order, order2], initial, counts, fit_seed)
        annotated = np.zeros(n, bool)
        annotated[order[:ssl["labels"]]] = True
        model, *_ = fit_on(p, data, annotated, np.where(annotated, data.y_pool, -1), fit_seed, pseudo=True)
        rand_ssl = accuracy(model, data.X_test, data.y_test)

    at = lambda curve: dict(curve)[m]
    reach = {name: labels_to_reach(curve, target, n) for name, curve in
             (("ic", ic["curve"]), ("random", rand), ("random2", rand2), ("lc", lc))}
    record = {
        "dataset": dataset, "seed": seed, "pool": n, "initial": len(initial), "acc_full": acc_full,
        "ic_labels": m, "ic_ratio": ic["ratio"], "ic_acc": ic["accuracy"], "ic_stop": ic["stop"],
        "ic_model_updates": ic["model_updates"], "ic_final_total_gain": ic["final_total_gain"],
        "perm_ratio": ic_perm["ratio"], "perm_stop": ic_perm["stop"],
        "random_acc_same": at(rand), "random2_acc_same": at(rand2), "lc_acc_same": at(lc),
        "ssl_labels": ssl["labels"], "ssl_ratio": ssl["ratio"], "ssl_acc": ssl["accuracy"], "ssl_stop": ssl["stop"],
        "ssl_n_pseudo": ssl["n_pseudo"], "ssl_pseudo_accuracy": ssl["pseudo_accuracy"], "random_ssl_acc_same": rand_ssl,
        **{f"{k}_to_target": v[0] for k, v in reach.items()}, **{f"{k}_censored": v[1] for k, v in reach.items()},
    }
    curves = [{"dataset": dataset, "seed": seed, "method": name, "labels": c, "ratio": c / n, "accuracy": a}
              for name, curve in (("info_coevolution", ic["curve"]), ("info_coevolution_ssl", ssl["curve"]),
                                  ("random", rand), ("least_confidence", lc))
              for c, a in curve]
    return {"record": record, "curves": curves}


def run_seed(p: Params, seed: int) -> dict:
    """One seed on every data set: {"records": [...], "curves": [...]}."""
    out = [run_dataset(p, ds, seed) for ds in p.datasets]
    return {"records": [o["record"] for o in out], "curves": [c for o in out for c in o["curves"]]}

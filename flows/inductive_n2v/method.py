"""iN2V (Lell & Scherp, ICML 2025): node2vec embeddings for nodes unseen in training, in plain NumPy/SciPy/torch.

Setting (the paper's inductive split). A graph with train / val / test nodes. node2vec is trained on the subgraph
induced by the train nodes only. Validation runs on the subgraph of train + val nodes, test on the full graph: the
unseen nodes get embeddings *post hoc*, and a logistic-regression probe fitted on the train nodes' embeddings scores
the val or test nodes (official ``InductiveN2V.test``: ``LogisticRegression(max_iter=500)``).

Post-hoc extension (official ``extend2ind_fix`` / ``extend2ind_update``):

* alpha = 1: every node without an embedding that has at least one neighbour with an embedding gets the mean of
  those neighbours' embeddings; repeat until no node is added (at most ``max_iter`` rounds). Nodes never reached
  (other components) keep the zero vector.
* alpha < 1: the same additions, and in the same round every node that already has a value and has neighbours with
  values is updated to ``alpha * old + (1 - alpha) * mean(neighbours with values)`` -- the train nodes included; the
  rounds go on ``delay`` more times after the last addition. All quantities of a round come from the previous round.

Modified training (official ``train_epoch``; paper names in brackets): the skip-gram loss of PyG's Node2Vec, plus

* ``prob_replace`` (r): before the skip-gram loss of a batch, each node's embedding is replaced by the mean of its
  (train-graph) neighbours' embeddings with probability r (official ``loss_emb``);
* ``w_ms`` (alpha): ``w_ms * mean_v -log sigma(z_v . mean_{u in N(v)} z_u)`` over the batch's nodes, pulling a node
  toward its neighbour mean (official ``loss_mean_self``);
* ``w_ndiv`` (beta): ``w_ndiv * mean_v mean_{u, w in N(v)} cos(z_u, z_w)`` over the batch's nodes of degree > 1,
  the diagonal included (official ``neighbor_loss_full``, a loop there; here the closed form
  ``||sum_u z_u/|z_u| ||^2 / deg^2``), pushing a node's neighbours apart.

Baselines: feature propagation (Rossi et al. 2022; PyG ``T.FeaturePropagation``: ``x <- D^-1/2 A D^-1/2 x`` with the
known rows reset after every step) applied to the plain N2V embeddings, the official ``fp`` mode; and the plain
extension (plain N2V training, alpha = 1; the official frozen baseline ``ba``). Reference: transductive N2V trained on
the whole graph (official ``Act_tr`` etc.).

One training epoch follows PyG's loader: the nodes in shuffled batches of ``batch_size``, ``walks_per_node`` fresh
uniform walks of ``walk_length`` nodes from each, every pair at most ``context_size - 1`` apart a positive pair
(``tasks.walks.skipgram_pairs``), ``negatives`` uniform nodes per positive pair, SparseAdam. The official code early-
stops on validation accuracy (patience 50, up to 10,000 epochs); here every training runs the same fixed number of
optimiser steps ``p.steps`` (epochs of the shuffled nodes, cycled), decided before the run: early stopping would need
an extension and a probe per epoch per candidate, too costly at this budget.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn.functional as F
from threadpoolctl import threadpool_limits

from flows.inductive_n2v.params import Params
from paperflows.core.seeding import numpy_rng, torch_generator, torch_seeded
from tasks.graphs import Graph, block_probabilities, probe_accuracy, sbm
from tasks.train import torch_single_thread
from tasks.walks import random_walks, skipgram_loss, skipgram_pairs

# rng streams of one seed, so a seed's numbers do not depend on what else runs
STREAM = {"graph": 0, "split": 1, "walks": 2, "permute": 3}
TRAININGS = ("plain", "prob_replace", "mean_self")          # plain N2V and iN2V's two training variants


# =============================================================================================
# Graph helpers
# =============================================================================================
def adjacency_matrix(n: int, edge_index: np.ndarray) -> sp.csr_matrix:
    """Sparse (n, n) 0/1 adjacency of an edge list stored in both directions, shape (2, E)."""
    return sp.csr_matrix((np.ones(edge_index.shape[1]), (edge_index[0], edge_index[1])), shape=(n, n))


def induced_subgraph(graph: Graph, keep: np.ndarray) -> tuple[Graph, np.ndarray]:
    """The subgraph on the nodes ``keep`` (boolean (n,)), renumbered 0..m-1 in node order, and the old ids (m,)."""
    old = np.flatnonzero(keep)
    new = -np.ones(graph.n, dtype=np.int64)
    new[old] = np.arange(len(old))
    e = graph.edge_index[:, keep[graph.edge_index[0]] & keep[graph.edge_index[1]]]
    labels = None if graph.labels is None else graph.labels[old]
    return Graph(len(old), new[e], labels), old


# =============================================================================================
# node2vec training with iN2V's modifications
# =============================================================================================
def mean_neighbour_matrix(n: int, edge_index: np.ndarray) -> torch.Tensor:
    """Sparse (n, n) torch matrix M with M @ Z = mean of each node's neighbours (0 for an isolated node), as PyG's
    ``SimpleConv('mean')``."""
    A = adjacency_matrix(n, edge_index)
    degree = np.asarray(A.sum(axis=1)).ravel()
    M = sp.diags(np.where(degree > 0, 1.0 / np.maximum(degree, 1), 0.0)) @ A
    M = M.tocoo()
    return torch.sparse_coo_tensor(np.vstack([M.row, M.col]), M.data.astype(np.float32), (n, n), check_invariants=False).coalesce()


def replaced_embeddings(z: torch.Tensor, mean_matrix: torch.Tensor, prob_replace: float,
                        generator: torch.Generator) -> torch.Tensor:
    """The table (n, d) with each row replaced by its neighbour mean with probability ``prob_replace``
    (official ``loss_emb``; the mean is taken over the whole, un-replaced table)."""
    if prob_replace <= 0:
        return z
    replace = torch.rand(len(z), generator=generator) < prob_replace
    return torch.where(replace[:, None], torch.sparse.mm(mean_matrix, z), z)


def mean_self_loss(z: torch.Tensor, mean_matrix: torch.Tensor, nodes: torch.Tensor) -> torch.Tensor:
    """-mean_v log sigma(z_v . mean_{u in N(v)} z_u) over ``nodes`` (b,) (official ``loss_mean_self``)."""
    mean = torch.sparse.mm(mean_matrix, z)
    return -F.logsigmoid((z[nodes] * mean[nodes]).sum(-1)).mean()


def neighbour_diversity_loss(z: torch.Tensor, adjacency: torch.Tensor, degree: torch.Tensor,
                             nodes: torch.Tensor) -> torch.Tensor:
    """mean over ``nodes`` of degree > 1 of the mean pairwise cosine similarity of their neighbours (diagonal
    included), i.e. ||sum_{u in N(v)} z_u/|z_u| ||^2 / deg(v)^2 (official ``neighbor_loss_full``). 0 if none."""
    nodes = nodes[degree[nodes] > 1]
    if len(nodes) == 0:
        return z.sum() * 0.0
    summed = torch.sparse.mm(adjacency, F.normalize(z, dim=-1))[nodes]
    return ((summed * summed).sum(-1) / degree[nodes] ** 2).mean()


def in2v_loss(z: torch.Tensor, centers: torch.Tensor, contexts: torch.Tensor, negatives: torch.Tensor,
              nodes: torch.Tensor, graph_ops: dict[str, torch.Tensor], prob_replace: float, w_ms: float,
              w_ndiv: float, generator: torch.Generator) -> torch.Tensor:
    """The iN2V training loss of one batch: skip-gram (on the possibly replaced table) + w_ms * mean-self +
    w_ndiv * neighbour diversity. ``z`` (n, d) the whole table; ``centers``, ``contexts`` (b,), ``negatives`` (b, k);
    ``nodes`` the batch's start nodes (for the two extra terms, as the official ``ix`` chunks)."""
    table = replaced_embeddings(z, graph_ops["mean"], prob_replace, generator)
    loss = skipgram_loss(table[centers], table[contexts], table[negatives])
    if w_ms > 0:
        loss = loss + w_ms * mean_self_loss(z, graph_ops["mean"], nodes)
    if w_ndiv > 0:
        loss = loss + w_ndiv * neighbour_diversity_loss(z, graph_ops["adjacency"], graph_ops["degree"], nodes)
    return loss


def train_n2v(graph: Graph, p: Params, seed: int, prob_replace: float = 0.0, w_ms: float = 0.0,
              w_ndiv: float = 0.0) -> np.ndarray:
    """node2vec (uniform walks, p = q = 1) on ``graph`` with iN2V's optional training modifications; (n, dim).

    The initial table depends only on ``seed`` and n, so the plain and modified trainings of one setting start from
    the same embeddings (as the official code initialises inductive and transductive runs alike)."""
    n = graph.n
    indptr, indices = graph.csr()
    ei = torch.as_tensor(graph.edge_index)
    degree = torch.bincount(ei[0], minlength=n).float()
    graph_ops = {"mean": mean_neighbour_matrix(n, graph.edge_index),
                 "adjacency": torch.sparse_coo_tensor(ei.flip(0), torch.ones(ei.shape[1]), (n, n),
                                                      check_invariants=False).coalesce(),
                 "degree": degree}
    with torch_single_thread():
        with torch_seeded(seed):
            table = torch.nn.Embedding(n, p.dim, sparse=True)
        optimiser = torch.optim.SparseAdam(table.parameters(), lr=p.lr)
        generator = torch_generator(seed)
        rng = numpy_rng(seed, STREAM["walks"])
        all_nodes = torch.arange(n)
        modified = prob_replace > 0 or w_ms > 0 or w_ndiv > 0
        order, cursor = rng.permutation(n), 0
        for _ in range(p.steps):
            if cursor >= n:                       # a new epoch: reshuffle the start nodes
                order, cursor = rng.permutation(n), 0
            batch = order[cursor:cursor + p.batch_size]
            cursor += p.batch_size
            walks = random_walks(indptr, indices, np.tile(batch, p.walks_per_node), p.walk_length, 1.0, 1.0, rng)
            centers, contexts = (torch.as_tensor(a) for a in skipgram_pairs(walks, p.context_size - 1))
            negatives = torch.as_tensor(rng.integers(0, n, size=(len(centers), p.negatives)))
            optimiser.zero_grad()
            if modified:   # the whole table (official loss_emb / loss_mean_self): every row gets a gradient
                loss = in2v_loss(table(all_nodes), centers, contexts, negatives, torch.as_tensor(batch), graph_ops,
                                 prob_replace, w_ms, w_ndiv, generator)
            else:          # PyG's Node2Vec.loss: only the rows in the batch's pairs are touched (and moved by SparseAdam)
                loss = skipgram_loss(table(centers), table(contexts), table(negatives))
            loss.backward()
            optimiser.step()
        return table.weight.detach().numpy().copy()


# =============================================================================================
# Post-hoc extension and feature propagation
# =============================================================================================
def extend_posthoc(adjacency: sp.csr_matrix, known: np.ndarray, embeddings: np.ndarray, alpha: float = 1.0,
                   delay: int = 0, max_iter: int = 50) -> tuple[np.ndarray, np.ndarray]:
    """iN2V's post-hoc extension (official ``extend2ind_fix`` for alpha = 1, ``extend2ind_update`` otherwise).

    ``adjacency`` (n, n) 0/1, ``known`` (n,) bool, ``embeddings`` (known.sum(), d) in node order. Returns the
    features (n, d) and which nodes have a value (n,) (unreached nodes stay at zero)."""
    feats = np.zeros((len(known), embeddings.shape[1]))
    feats[known] = embeddings
    has = known.copy()
    for _ in range(max_iter):
        sums = adjacency @ feats
        count = adjacency @ has.astype(float)
        reached = count > 0
        added = reached & ~has
        if not added.any():                   # nothing new: alpha = 1 stops, alpha < 1 goes on `delay` more rounds
            if alpha == 1 or delay == 0:
                break
            delay -= 1
        new = feats.copy()
        new[added] = sums[added] / count[added, None]
        if alpha != 1:
            updated = reached & has
            new[updated] = alpha * feats[updated] + (1 - alpha) * sums[updated] / count[updated, None]
        feats, has = new, has | reached
    return feats, has


def feature_propagation(adjacency: sp.csr_matrix, known: np.ndarray, embeddings: np.ndarray,
                        iterations: int) -> np.ndarray:
    """Feature propagation (Rossi et al. 2022, PyG ``FeaturePropagation``): unknown rows start at 0; ``iterations``
    times ``x <- D^-1/2 A D^-1/2 x`` (no self-loops; isolated nodes contribute 0), the known rows reset to their
    values after each step. Shapes as :func:`extend_posthoc`; returns (n, d)."""
    degree = np.asarray(adjacency.sum(axis=1)).ravel()
    scale = np.where(degree > 0, 1.0 / np.sqrt(np.maximum(degree, 1)), 0.0)
    S = sp.diags(scale) @ adjacency @ sp.diags(scale)
    x = np.zeros((len(known), embeddings.shape[1]))
    x[known] = embeddings
    for _ in range(iterations):
        x = S @ x
        x[known] = embeddings
    return x


# =============================================================================================
# One seed: graphs, splits, trainings, extensions, probes
# =============================================================================================
@dataclass(frozen=True)
class Split:
    train: np.ndarray      # (n,) bool
    val: np.ndarray
    test: np.ndarray


def make_split(n: int, train_fraction: float, rng: np.random.Generator) -> Split:
    """Random train / val / test masks: ``train_fraction`` of the nodes for training, the rest halved (the
    official 10/45/45 ... 80/10/10 splits)."""
    order = rng.permutation(n)
    n_train = int(round(train_fraction * n))
    n_val = (n - n_train) // 2
    masks = [np.zeros(n, dtype=bool) for _ in range(3)]
    masks[0][order[:n_train]] = True
    masks[1][order[n_train:n_train + n_val]] = True
    masks[2][order[n_train + n_val:]] = True
    return Split(*masks)


def make_graph(p: Params, homophily: float, seed: int, regime: int) -> Graph:
    """An equal-block SBM with ``n_nodes`` nodes, ``n_classes`` blocks, the expected mean degree and edge homophily."""
    sizes = [p.n_nodes // p.n_classes + (c < p.n_nodes % p.n_classes) for c in range(p.n_classes)]
    return sbm(sizes, block_probabilities(p.n_nodes, p.n_classes, p.mean_degree, homophily),
               numpy_rng(seed, STREAM["graph"], regime))


def candidates(p: Params) -> list[tuple[float, int]]:
    """(alpha, delay) of the post-hoc extension searched for iN2V (official: delay only matters for alpha < 1)."""
    return [(1.0, 0)] + [(p.alpha, d) for d in p.delays]


def _extended(adjacency: sp.csr_matrix, known: np.ndarray, emb: np.ndarray, method: str, p: Params) -> np.ndarray:
    """Features of every node of the graph from the train embeddings ``emb`` by one named extension method."""
    if method.startswith("fp"):
        return feature_propagation(adjacency, known, emb, int(method[2:]))
    alpha, delay = method.split("_")[1:]
    return extend_posthoc(adjacency, known, emb, float(alpha), int(delay), p.max_iter)[0]


def method_names(p: Params) -> dict[str, list[str]]:
    """Extension methods per training: FP with each iteration count and the plain extension on the plain
    embedding, and the post-hoc candidates on each iN2V training."""
    posthoc = [f"ext_{a:g}_{d}" for a, d in candidates(p)]
    return {"plain": [f"fp{i}" for i in p.fp_iterations] + ["ext_1_0"],
            "prob_replace": posthoc, "mean_self": posthoc}


def evaluate_setting(graph: Graph, split: Split, embeddings: dict[str, np.ndarray], labels: np.ndarray,
                     p: Params) -> list[dict]:
    """Val and test accuracy of every (training, extension) pair; val on the train+val subgraph, test on the full
    graph; the probe always fits the train nodes' (extended) features. ``labels`` (n,) may be permuted."""
    A_full = adjacency_matrix(graph.n, graph.edge_index)
    val_graph, val_ids = induced_subgraph(graph, split.train | split.val)
    A_val = adjacency_matrix(val_graph.n, val_graph.edge_index)
    known_val = split.train[val_ids]
    rows = []
    for training, methods in method_names(p).items():
        emb = embeddings[training]
        for m in methods:
            fv = _extended(A_val, known_val, emb, m, p)
            val_acc = probe_accuracy(fv[known_val], labels[val_ids][known_val], fv[~known_val], labels[val_ids][~known_val])
            ft = _extended(A_full, split.train, emb, m, p)
            test_acc = probe_accuracy(ft[split.train], labels[split.train], ft[split.test], labels[split.test])
            rows.append({"training": training, "extension": m, "val_acc": val_acc, "test_acc": test_acc})
    return rows


def select(rows: list[dict], trainings: tuple[str, ...], extensions: list[str] | None = None) -> dict:
    """The row with the best validation accuracy among the given trainings (and extensions); ties: first listed."""
    pool = [r for r in rows if r["training"] in trainings and (extensions is None or r["extension"] in extensions)]
    return max(pool, key=lambda r: r["val_acc"])


def summarise_setting(rows: list[dict], p: Params) -> dict[str, float]:
    """iN2V (best on val over the two modified trainings x the post-hoc candidates), the baselines FP (best
    iteration count on val) and the plain extension, the better baseline on val, and gains in accuracy points."""
    in2v = select(rows, ("prob_replace", "mean_self"))
    fp = select(rows, ("plain",), [f"fp{i}" for i in p.fp_iterations])
    plain = select(rows, ("plain",), ["ext_1_0"])
    baseline = max((fp, plain), key=lambda r: r["val_acc"])
    return {"in2v_test": in2v["test_acc"], "in2v_choice": f"{in2v['training']}:{in2v['extension']}",
            "fp_test": fp["test_acc"], "fp_choice": fp["extension"], "plain_ext_test": plain["test_acc"],
            "baseline_test": baseline["test_acc"], "baseline_choice": baseline["extension"],
            "gain_pp": 100 * (in2v["test_acc"] - baseline["test_acc"]),
            "gain_vs_best_test_pp": 100 * (in2v["test_acc"] - max(fp["test_acc"], plain["test_acc"]))}


def run_seed(p: Params, seed: int) -> dict:
    """One seed: per regime a fresh SBM and its transductive N2V; per train fraction a fresh split, the plain and the
    two modified N2V trainings on the train subgraph, every extension evaluated with the true and with permuted
    labels (the negative control: no embedding can carry class information about permuted labels).

    Returns ``{"settings": [one dict per (regime, fraction)], "detail": [one dict per (regime, fraction, training,
    extension, labels)]}``."""
    with threadpool_limits(limits=1):   # one BLAS thread: seeds run in parallel, and LBFGS is 20x cheaper so
        return _run_seed(p, seed)       # on a shared machine


def _run_seed(p: Params, seed: int) -> dict:
    settings, detail = [], []
    for r, (regime, h) in enumerate(zip(p.regime_names, p.homophilies)):
        graph = make_graph(p, h, seed, r)
        full_emb = train_n2v(graph, p, seed * 1000 + 100 + r)
        permuted = numpy_rng(seed, STREAM["permute"], r).permutation(graph.labels)
        for f, fraction in enumerate(p.train_fractions):
            split = make_split(graph.n, fraction, numpy_rng(seed, STREAM["split"], r, f))
            train_graph, _ = induced_subgraph(graph, split.train)
            init_seed = seed * 1000 + 10 * r + f      # one initial table for the three trainings of a setting
            embeddings = {
                "plain": train_n2v(train_graph, p, init_seed),
                "prob_replace": train_n2v(train_graph, p, init_seed, prob_replace=p.prob_replace, w_ndiv=p.w_ndiv),
                "mean_self": train_n2v(train_graph, p, init_seed, w_ms=p.w_ms, w_ndiv=p.w_ndiv),
            }
            transductive = probe_accuracy(full_emb[split.train], graph.labels[split.train], full_emb[split.test],
                                          graph.labels[split.test])
            out = {"seed": seed, "regime": regime, "homophily": h, "train_fraction": fraction,
                   "edge_homophily": float(np.mean(graph.labels[graph.edge_index[0]] == graph.labels[graph.edge_index[1]])),
                   "train_isolated_frac": float(np.mean(train_graph.degrees() == 0)),
                   "transductive_test": transductive}
            for labels_name, labels in (("true", graph.labels), ("permuted", permuted)):
                rows = evaluate_setting(graph, split, embeddings, labels, p)
                summary = summarise_setting(rows, p)
                prefix = "" if labels_name == "true" else "perm_"
                out.update({prefix + k: v for k, v in summary.items()})
                detail += [{"seed": seed, "regime": regime, "train_fraction": fraction, "labels": labels_name, **row}
                           for row in rows]
            settings.append(out)
    return {"settings": settings, "detail": detail}

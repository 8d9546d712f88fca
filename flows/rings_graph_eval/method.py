"""RINGS (Coupette et al., ICML 2025): judge a graph-learning dataset by *mode perturbation*.

Read top to bottom:

1. graph-level datasets with a known answer, as padded dense tensors (:class:`GraphSet`);
2. the perturbations of the official ``rings.perturbations`` (Original, EmptyFeatures, CompleteFeatures,
   RandomFeatures with and without shuffle, EmptyGraph, CompleteGraph, RandomGraph);
3. a dense GIN and its performance distribution (stratified k-fold x repeats) per perturbation;
4. **performance separability**: ``KSComparator`` (``scipy.stats.ks_2samp`` statistic, permutation p-value,
   Bonferroni over all pairwise hypotheses) as in ``rings.separability``;
5. **mode complementarity**: lift features (Euclidean) and structure (shortest path / resistance) to metric
   spaces, normalise diameters, score ``||D_X - D_G||_{L1,1} / (n^2 - n)`` per connected component and take the
   size-weighted mean, as in ``rings.complementarity``.

Entry points take the frozen params ``p``; randomness only through explicit seeds.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import networkx as nx
import numpy as np
import pandas as pd
import torch
from scipy.stats import ks_2samp
from sklearn.metrics import pairwise_distances
from sklearn.model_selection import StratifiedKFold
from torch import nn

from flows.rings_graph_eval.params import Params
from paperflows.core.seeding import numpy_rng, torch_generator, torch_seeded
from tasks.graphs import real_graph
from tasks.train import torch_single_thread

DATASET_STREAM = {"atlas": 1, "feature_only": 2, "structure_only": 3, "both": 4}
MODE_STREAM = {"original": 0, "empty_features": 1, "random_features": 2, "shuffled_features": 3,
               "complete_features": 4, "empty_graph": 5, "complete_graph": 6, "random_graph": 7}


# ============================================================================ 1. datasets with a known answer
@dataclass(frozen=True)
class GraphSet:
    """B graphs padded to N nodes. ``adj`` (B, N, N) float32 with ``adj[b, v, u]`` = number of edges u -> v
    (undirected graphs hold both directions; RandomGraph may give a directed multigraph, as PyG's edge_index does);
    ``x`` (B, N, d) float32, zero on padding; ``mask`` (B, N) bool (real nodes); ``y`` (B,) int64."""
    adj: np.ndarray
    x: np.ndarray
    mask: np.ndarray
    y: np.ndarray

    @property
    def n_nodes(self) -> np.ndarray:
        return self.mask.sum(1)


def pad_graphs(graphs: list[nx.Graph], features: list[np.ndarray], labels: np.ndarray) -> GraphSet:
    """networkx graphs (nodes in their order) and per-graph features (n_b, d) -> a padded :class:`GraphSet`."""
    N = max(g.number_of_nodes() for g in graphs)
    d = features[0].shape[1]
    adj = np.zeros((len(graphs), N, N), np.float32)
    x = np.zeros((len(graphs), N, d), np.float32)
    mask = np.zeros((len(graphs), N), bool)
    for b, (g, f) in enumerate(zip(graphs, features)):
        n = g.number_of_nodes()
        adj[b, :n, :n] = nx.to_numpy_array(g, nodelist=list(g.nodes), dtype=np.float32)
        x[b, :n] = f
        mask[b, :n] = True
    return GraphSet(adj, x, mask, np.asarray(labels, np.int64))


@functools.cache
def _atlas() -> tuple[nx.Graph, ...]:
    return tuple(nx.graph_atlas_g()[1:])          # drop the 0-node graph


def atlas_dataset(p: Params, rng: np.random.Generator) -> GraphSet:
    """networkx's graph atlas (all graphs with 1-7 nodes), label = "has a triangle", node features pure N(0, I)
    noise: a structure-only dataset. The atlas is 86% triangle graphs, so a balanced random subsample of at most
    ``p.atlas_max_per_class`` graphs per class is used (accuracy then has a 0.5 chance level)."""
    graphs = _atlas()
    y = np.array([sum(nx.triangles(g).values()) > 0 for g in graphs], np.int64)
    keep = np.concatenate([rng.permutation(np.flatnonzero(y == c))[:p.atlas_max_per_class] for c in (0, 1)])
    keep = np.sort(keep)
    feats = [rng.normal(size=(graphs[i].number_of_nodes(), p.n_features)) for i in keep]
    return pad_graphs([graphs[i] for i in keep], feats, y[keep])


def sbm_dataset(p: Params, kind: str, rng: np.random.Generator) -> GraphSet:
    """Synthetic SBM sets with a structure bit s and a feature bit f per graph, both fair coins.

    s = 1: a two-block SBM (a dense block, a sparse block, sparse between them); s = 0: Erdos-Renyi with the same
    expected edge count. Only a structure-aware model sees s (the degree distribution is bimodal vs unimodal).
    f: node features N(+/- shift * e_1, I); only a feature-aware model sees f.
    Label: ``feature_only`` y = f (s random), ``structure_only`` y = s (no shift), ``both`` y = s XOR f.
    """
    n, B = p.sbm_nodes, p.sbm_graphs
    half = n // 2
    sizes = [half, n - half]
    P = np.array([[p.sbm_dense, p.sbm_sparse], [p.sbm_sparse, p.sbm_sparse]])
    expected_edges = (P[0, 0] * half * (half - 1) / 2 + P[1, 1] * sizes[1] * (sizes[1] - 1) / 2
                      + P[0, 1] * half * sizes[1])
    p_er = expected_edges / (n * (n - 1) / 2)
    s = rng.integers(0, 2, B)
    f = rng.integers(0, 2, B)
    graphs, feats = [], []
    for b in range(B):
        seed = int(rng.integers(2**31))
        g = (nx.stochastic_block_model(sizes, P.tolist(), seed=seed) if s[b]
             else nx.gnp_random_graph(n, p_er, seed=seed))
        x = rng.normal(size=(n, p.n_features))
        if kind != "structure_only":
            x[:, 0] += p.feature_shift * (2 * f[b] - 1)
        graphs.append(g)
        feats.append(x)
    y = {"feature_only": f, "structure_only": s, "both": s ^ f}[kind]
    return pad_graphs(graphs, feats, y)


def make_dataset(p: Params, name: str, seed: int) -> GraphSet:
    rng = numpy_rng(seed, DATASET_STREAM[name])
    return atlas_dataset(p, rng) if name == "atlas" else sbm_dataset(p, name, rng)


def dataset_table(p: Params, seed: int) -> list[dict]:
    """Every graph of every dataset of ``seed`` as a row (what data/ keeps): dataset, graph, label, nodes, the
    undirected edge list (u < v, flattened) and the node features (row-major, flattened)."""
    rows = []
    for name in p.datasets:
        gs = make_dataset(p, name, seed)
        for b, (n, y) in enumerate(zip(gs.n_nodes, gs.y)):
            u, v = np.nonzero(np.triu(gs.adj[b, :n, :n]))
            rows.append({"seed": seed, "dataset": name, "graph": b, "label": int(y), "nodes": int(n),
                         "edges": np.stack([u, v], 1).ravel().tolist(), "features": gs.x[b, :n].ravel().tolist()})
    return rows


# ============================================================================ 2. perturbations (rings.perturbations)
def _edge_count(adj: np.ndarray) -> np.ndarray:
    """Columns of a PyG edge_index per graph: the directed edge count (2 per undirected edge)."""
    return adj.sum(axis=(1, 2)).astype(np.int64)


def perturb(gs: GraphSet, mode: str, rng: np.random.Generator) -> GraphSet:
    """One RINGS perturbation of every graph of ``gs`` (features and structure of real nodes only).

    empty_features: a 1-d zero feature per node; complete_features: one-hot node ids (N = max nodes);
    random_features: N(0, 1) features of the original dimension (the official default, shuffle=False);
    shuffled_features: the graph's own feature rows permuted among its nodes (RandomFeatures(shuffle=True));
    empty_graph: no edges; complete_graph: all pairs u != v; random_graph: as many directed edges as the
    graph's edge_index has columns, endpoints uniform, self-loops redrawn (RandomGraph(p=None)).
    """
    B, N, d = gs.x.shape
    m = gs.mask
    if mode == "original":
        return gs
    if mode == "empty_features":
        return replace(gs, x=np.zeros((B, N, 1), np.float32))
    if mode == "complete_features":
        return replace(gs, x=(np.eye(N, dtype=np.float32)[None] * m[:, :, None]).astype(np.float32))
    if mode == "random_features":
        return replace(gs, x=(rng.normal(size=(B, N, d)) * m[:, :, None]).astype(np.float32))
    if mode == "shuffled_features":
        x = gs.x.copy()
        for b, n in enumerate(gs.n_nodes):
            x[b, :n] = x[b, rng.permutation(n)]
        return replace(gs, x=x)
    if mode == "empty_graph":
        return replace(gs, adj=np.zeros_like(gs.adj))
    if mode == "complete_graph":
        full = (m[:, :, None] & m[:, None, :]) & ~np.eye(N, dtype=bool)[None]
        return replace(gs, adj=full.astype(np.float32))
    if mode == "random_graph":
        adj = np.zeros_like(gs.adj)
        for b, (n, e) in enumerate(zip(gs.n_nodes, _edge_count(gs.adj))):
            if n < 2 or e == 0:
                continue
            src, dst = rng.integers(0, n, e), rng.integers(0, n, e)
            while (loops := src == dst).any():          # ensure_no_self_loops: redraw the targets of loops
                dst[loops] = rng.integers(0, n, loops.sum())
            np.add.at(adj[b], (dst, src), 1.0)
        return replace(gs, adj=adj)
    raise ValueError(f"unknown perturbation {mode!r}")


# ============================================================================ 3. dense GIN and performance samples
class DenseGIN(nn.Module):
    """GIN (eps = 0): h <- MLP(h + A h) per layer, padded nodes zeroed, sum readout, MLP head (as PyG's GIN example).
    ``forward(x (B, N, d), adj (B, N, N), mask (B, N)) -> logits (B, n_classes)``."""

    def __init__(self, n_inputs: int, hidden: int, layers: int, n_classes: int = 2):
        super().__init__()
        self.convs = nn.ModuleList(
            nn.Sequential(nn.Linear(n_inputs if i == 0 else hidden, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                          nn.ReLU()) for i in range(layers))
        self.head = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, n_classes))

    def forward(self, x: torch.Tensor, adj: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = x
        keep = mask.unsqueeze(-1).to(x.dtype)
        for conv in self.convs:
            h = conv(h + torch.bmm(adj, h)) * keep
        return self.head(h.sum(1))


def train_and_score(gs: GraphSet, train_idx: np.ndarray, test_idx: np.ndarray, p: Params, seed: int) -> float:
    """Train a :class:`DenseGIN` on ``train_idx`` (Adam, mini-batches, ``p.epochs``) and return the test accuracy."""
    x, adj, mask = (torch.from_numpy(a) for a in (gs.x, gs.adj, gs.mask))
    y = torch.from_numpy(gs.y)
    with torch_seeded(seed):
        model = DenseGIN(x.shape[-1], p.hidden, p.layers)
    opt = torch.optim.Adam(model.parameters(), lr=p.lr)
    gen = torch_generator(seed)
    tr = torch.from_numpy(train_idx)
    for _ in range(p.epochs):
        for batch in tr[torch.randperm(len(tr), generator=gen)].split(p.batch_size):
            loss = nn.functional.cross_entropy(model(x[batch], adj[batch], mask[batch]), y[batch])
            opt.zero_grad()
            loss.backward()
            opt.step()
    te = torch.from_numpy(test_idx)
    with torch.no_grad():
        pred = model(x[te], adj[te], mask[te]).argmax(1)
    return float((pred == y[te]).float().mean())


def performance_rows(p: Params, seed: int, dataset: str, permute_labels: bool) -> list[dict]:
    """The performance distribution of the GIN on every perturbation of one dataset: ``p.folds`` x ``p.repeats``
    test accuracies per mode (stratified folds; each repeat has its own split, perturbation draw and init).

    ``permute_labels``: the negative control, the same graphs with labels permuted (no mode carries the label).
    """
    gs = make_dataset(p, dataset, seed)
    if permute_labels:
        gs = replace(gs, y=numpy_rng(seed, 99, DATASET_STREAM[dataset]).permutation(gs.y))
    rows = []
    with torch_single_thread():
        for r in range(p.repeats):
            split_seed = int(numpy_rng(seed, 7, DATASET_STREAM[dataset], r).integers(2**31))
            folds = list(StratifiedKFold(p.folds, shuffle=True, random_state=split_seed).split(gs.y, gs.y))
            for mode in p.modes:
                pert = perturb(gs, mode, numpy_rng(seed, 11, DATASET_STREAM[dataset], MODE_STREAM[mode], r))
                for k, (tr, te) in enumerate(folds):
                    acc = train_and_score(pert, tr, te, p, seed=split_seed + 1000 * k + 17 * MODE_STREAM[mode])
                    rows.append({"seed": seed, "dataset": dataset, "labels": "permuted" if permute_labels else "true",
                                 "mode": mode, "repeat": r, "fold": k, "accuracy": acc})
    return rows


# ============================================================================ 4. performance separability
def ks_statistics(pooled: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Two-sample KS statistics of many splits of one pooled sample at once.

    ``pooled`` (n,), ``first`` (P, n) bool: True marks the first sample. Returns (P,): sup |F_1 - F_2| over the
    pooled values, evaluated at the end of every run of tied values (what ``scipy.stats.ks_2samp`` computes).
    """
    order = np.argsort(pooled, kind="stable")
    v = pooled[order]
    g = first[:, order]
    n1 = g.sum(1, keepdims=True)
    n2 = g.shape[1] - n1
    diff = np.cumsum(g, 1) / n1 - np.cumsum(~g, 1) / n2
    run_end = np.append(v[1:] != v[:-1], True)             # the ECDFs only jump after the last of equal values
    return np.abs(diff[:, run_end]).max(1)


def ks_permutation_test(x: np.ndarray, y: np.ndarray, n_permutations: int, alpha: float, n_hypotheses: int,
                        random_state: int = 42) -> dict:
    """``rings.separability.KSComparator``: KS statistic (scipy), permutation p-value
    mean(D_perm >= D_obs) over ``n_permutations`` shuffles of the pooled sample (drawn from
    ``np.random.RandomState(random_state)`` in the official order), Bonferroni ``min(1, p * n_hypotheses)``,
    significant iff the adjusted p < alpha. Identical samples: p = 1 (as the official shortcut)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) == 0 or len(y) == 0:
        raise ValueError("KS test needs non-empty samples")
    if np.array_equal(x, y):
        return {"score": 0.0, "pvalue": 1.0, "pvalue_adjusted": 1.0, "significant": False}
    observed = float(ks_2samp(x, y).statistic)
    pooled = np.concatenate([x, y])
    rng = np.random.RandomState(random_state)
    # rng.permutation(len) consumes the same draws as rng.permutation(array): same splits as the official loop
    perms = np.stack([rng.permutation(len(pooled)) for _ in range(n_permutations)])
    first = np.zeros_like(perms, dtype=bool)
    np.put_along_axis(first, perms[:, :len(x)], True, axis=1)
    permuted = ks_statistics(pooled, first)
    pvalue = float(np.mean(permuted >= observed - 1e-12))   # tolerance: float ECDF differences of equal splits
    adjusted = min(1.0, pvalue * n_hypotheses)
    return {"score": observed, "pvalue": pvalue, "pvalue_adjusted": adjusted, "significant": bool(adjusted < alpha)}


def accuracy_distributions(rows: pd.DataFrame) -> dict[tuple, dict[str, np.ndarray]]:
    """{(seed, dataset, labels): {mode: accuracies in (repeat, fold) order}}."""
    out: dict[tuple, dict[str, np.ndarray]] = {}
    for (seed, ds, lab), g in rows.groupby(["seed", "dataset", "labels"], sort=False):
        g = g.sort_values(["repeat", "fold"])
        out[(seed, ds, lab)] = {m: g[g["mode"] == m]["accuracy"].to_numpy(float) for m in g["mode"].unique()}
    return out


def separability(distributions: dict[str, np.ndarray], n_permutations: int, alpha: float,
                 random_state: int = 42) -> list[dict]:
    """``rings.separability.SeparabilityFunctor``: every pair of modes (``itertools.combinations`` order), each
    tested with :func:`ks_permutation_test` and Bonferroni over the number of pairs."""
    names = list(distributions)
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]
    return [{"mode1": a, "mode2": b, **ks_permutation_test(distributions[a], distributions[b], n_permutations,
                                                           alpha, len(pairs), random_state)} for a, b in pairs]


# The design: which comparisons with the original must (True) or must not (False) be separable.
EXPECTATIONS: dict[str, dict[str, bool]] = {
    "atlas": {"empty_graph": True, "random_features": False},            # structure-only
    "structure_only": {"empty_graph": True, "random_features": False},   # structure-only
    "feature_only": {"random_features": True, "empty_graph": False},     # the mirror image
    "both": {"empty_graph": True, "random_features": True},              # needs both modes
}


# ============================================================================ 5. mode complementarity
def normalize_diameter(D: np.ndarray) -> np.ndarray:
    """``maybe_normalize_diameter``: D / max(D) when max(D) > 0, else D unchanged."""
    D = np.asarray(D, float)
    diam = D.max() if D.size else 0.0
    return D / diam if diam > 0 else D


def matrix_norm_score(D_X: np.ndarray, D_G: np.ndarray, norm: str = "L11") -> float:
    """``MatrixNormComparator``: ||D_X - D_G||_{L1,1} / (n^2 - n), or Frobenius / sqrt(n^2 - n); divisor 1 for n = 1."""
    n = len(D_X)
    divisor = n * n - n if n > 1 else 1
    M = np.asarray(D_X, float) - np.asarray(D_G, float)
    if norm == "L11":
        return float(np.abs(M).sum() / divisor)
    if norm == "frobenius":
        return float(np.linalg.norm(M, "fro") / np.sqrt(divisor))
    raise RuntimeError(f"Unexpected norm '{norm}'")


def graph_distances(G: nx.Graph, metric: str) -> np.ndarray:
    """Structure lifted to a metric space (node order of ``G``): shortest paths (Floyd-Warshall) or resistance."""
    if G.number_of_edges() == 0:
        return np.zeros((G.number_of_nodes(),) * 2)
    if metric == "shortest_path":
        return nx.floyd_warshall_numpy(G, nodelist=list(G.nodes))
    if metric == "resistance":
        nodes = list(G.nodes)
        if len(nodes) == 1:
            return np.zeros((1, 1))
        R = nx.resistance_distance(G)
        return np.array([[R[u][v] for v in nodes] for u in nodes])
    raise RuntimeError(f"Unsupported metric: {metric}")


def complementarity(G: nx.Graph, X: np.ndarray, graph_metric: str = "shortest_path", norm: str = "L11") -> float:
    """``ComplementarityFunctor`` for one graph: features ``X`` (n, d), rows in ``G``'s node order. A disconnected
    graph (with edges) is scored per connected component and combined by the size-weighted mean; an edgeless graph
    is one component whose structure metric is all zeros. Lower = features and structure more aligned."""
    X = np.asarray(X, float)
    nodes = list(G.nodes)
    if len(nodes) == 0:
        return float("nan")
    position = {v: i for i, v in enumerate(nodes)}
    if G.number_of_edges() > 0 and not nx.is_connected(G):
        parts = [list(c) for c in nx.connected_components(G)]
    else:
        parts = [nodes]
    scores, sizes = [], []
    for part in parts:
        H = G.subgraph(part) if len(parts) > 1 else G
        D_G = normalize_diameter(graph_distances(H, graph_metric))
        D_X = normalize_diameter(pairwise_distances(X[[position[v] for v in H.nodes]], metric="euclidean"))
        scores.append(matrix_norm_score(D_X, D_G, norm))
        sizes.append(len(part))
    return float(np.average(scores, weights=sizes))


def spectral_coordinates(G: nx.Graph, dim: int = 2) -> np.ndarray:
    """Eigenvectors of the combinatorial Laplacian for the ``dim`` smallest nonzero eigenvalues (a connected
    ``G``), each standardised: node features aligned with the structure by design. Shape (n, dim)."""
    L = nx.laplacian_matrix(G, nodelist=list(G.nodes)).toarray().astype(float)
    _, vecs = np.linalg.eigh(L)
    V = vecs[:, 1:1 + dim]
    return (V - V.mean(0)) / V.std(0)


def alignment_graphs(p: Params, rng: np.random.Generator) -> list[nx.Graph]:
    """Connected graphs of three families (Watts-Strogatz rings, random trees, 2-D random geometric graphs),
    ``p.align_graphs`` in all, ``p.align_nodes`` nodes each."""
    n, out = p.align_nodes, []
    makers = [lambda s: nx.connected_watts_strogatz_graph(n, 4, 0.1, seed=s),
              lambda s: nx.random_labeled_tree(n, seed=s),
              lambda s: nx.random_geometric_graph(n, 0.45, seed=s)]
    while len(out) < p.align_graphs:
        G = makers[len(out) % 3](int(rng.integers(2**31)))
        if nx.is_connected(G):
            out.append(nx.convert_node_labels_to_integers(G))
    return out


def complementarity_rows(p: Params, seed: int) -> list[dict]:
    """The alignment experiment of one seed. Per graph: complementarity of spectral coordinates plus N(0, s^2)
    noise at every ``p.noise_levels`` s, of the lowest-noise features shuffled among the nodes, and the control:
    features that ignore the structure (pure N(0, 1) noise, drawn afresh at each level and for the shuffle)."""
    rng = numpy_rng(seed, 21)
    rows = []
    for i, G in enumerate(alignment_graphs(p, rng)):
        C = spectral_coordinates(G)
        base = C + p.noise_levels[0] * rng.normal(size=C.shape)
        for kind in ("spectral", "unaligned"):
            for level in p.noise_levels:
                X = C + level * rng.normal(size=C.shape) if kind == "spectral" else rng.normal(size=C.shape)
                rows.append({"seed": seed, "graph": i, "kind": kind, "noise": level,
                             "score": complementarity(G, X, p.graph_metric)})
            X0 = base if kind == "spectral" else rng.normal(size=C.shape)
            rows.append({"seed": seed, "graph": i, "kind": kind, "noise": -1.0, "original": complementarity(G, X0, p.graph_metric),
                         "shuffled": complementarity(G, X0[rng.permutation(len(X0))], p.graph_metric)})
    return rows


def real_graph_rows(p: Params, seed: int) -> list[dict]:
    """Descriptive: the four small real graphs networkx ships. Features: the known node label one-hot (karate: the
    club; davis: woman / event) where there is one, else spectral coordinates; complementarity of the original
    features and mean over ``p.shuffles`` within-graph shuffles (RandomFeatures(shuffle=True))."""
    rng = numpy_rng(seed, 31)
    rows = []
    for name in ("karate", "davis", "florentine", "les_miserables"):
        g = real_graph(name)
        G = g.to_networkx()
        for kind in ("label_onehot", "spectral"):
            if kind == "label_onehot":
                if g.labels is None:
                    continue
                X = np.eye(int(g.labels.max()) + 1)[g.labels]
            else:
                X = spectral_coordinates(G) if nx.is_connected(G) else None
                if X is None:
                    continue
            original = complementarity(G, X, p.graph_metric)
            shuffled = np.array([complementarity(G, X[rng.permutation(len(X))], p.graph_metric)
                                 for _ in range(p.shuffles)])
            rows.append({"graph": name, "features": kind, "nodes": G.number_of_nodes(), "edges": G.number_of_edges(),
                         "original": original, "shuffled_mean": float(shuffled.mean()),
                         "shuffled_higher": float((shuffled > original).mean())})
    return rows


# ============================================================================ 6. the official examples (sanity)
# Values the official code itself returns on the inputs of its docstrings (MatrixNormComparator and the
# ComplementarityFunctor path-graph example), obtained by running aidos-lab/rings@68a58a4's
# rings/complementarity/{comparator,utils,metrics}.py; the docstrings print other numbers (see DOCSTRING).
def official_examples() -> dict[str, float]:
    """Our implementation on the official examples' inputs: {example: value}."""
    D1 = np.array([[0, 1, 2], [1, 0, 1], [2, 1, 0]], float)
    a2, b2 = np.array([[0, 1], [1, 0]], float), np.array([[0, 2], [2, 0]], float)
    path = nx.path_graph(4)
    return {
        "matrix_L11_3x3": matrix_norm_score(D1, 2 * D1, "L11"),
        "matrix_frobenius_3x3": matrix_norm_score(D1, 2 * D1, "frobenius"),
        "matrix_L11_2x2": matrix_norm_score(a2, b2, "L11"),
        "matrix_frobenius_2x2": matrix_norm_score(a2, b2, "frobenius"),
        "larger_matrices_test": matrix_norm_score(np.array([[0, 1, 2], [1, 0, 3], [2, 3, 0]], float),
                                                  np.array([[0, 2, 4], [2, 0, 6], [4, 6, 0]], float)),
        "path_aligned": complementarity(path, np.array([[0], [1], [2], [3]], float)),
        "path_misaligned": complementarity(path, np.array([[3], [1], [2], [0]], float)),
    }


OFFICIAL_CODE_OUTPUT = {"matrix_L11_3x3": 4 / 3, "matrix_frobenius_3x3": np.sqrt(2.0), "matrix_L11_2x2": 1.0,
                        "matrix_frobenius_2x2": 1.0, "larger_matrices_test": 2.0, "path_aligned": 0.0,
                        "path_misaligned": 2 / 9}
DOCSTRING = {"matrix_L11_3x3": 0.6666666666666666, "matrix_frobenius_3x3": 0.5773502691896257,
             "matrix_L11_2x2": 0.5, "matrix_frobenius_2x2": 0.5, "path_aligned": 0.0, "path_misaligned": 0.5}

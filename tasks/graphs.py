"""Graphs with known ground truth: (contextual) stochastic block models, networkx families, the small real graphs
networkx ships, and an evolving temporal event stream with class drift; plus edge homophily and a linear probe.

A graph is an undirected edge list stored in both directions (``edge_index`` (2, E), no self-loops), which is what
message passing and random walks consume.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import networkx as nx
import numpy as np
from sklearn.linear_model import LogisticRegression


@dataclass(frozen=True)
class Graph:
    """``n`` nodes, ``edge_index`` (2, E) int64 with both directions of every undirected edge, optional node
    ``labels`` (n,) int and ``features`` (n, d) float."""
    n: int
    edge_index: np.ndarray
    labels: np.ndarray | None = None
    features: np.ndarray | None = None

    def csr(self) -> tuple[np.ndarray, np.ndarray]:
        """``indptr`` (n+1,) and ``indices`` (E,): the neighbours of v are ``indices[indptr[v]:indptr[v+1]]``, sorted."""
        order = np.lexsort((self.edge_index[1], self.edge_index[0]))
        indptr = np.concatenate([[0], np.cumsum(np.bincount(self.edge_index[0], minlength=self.n))])
        return indptr, self.edge_index[1][order]

    def degrees(self) -> np.ndarray:
        return np.bincount(self.edge_index[0], minlength=self.n)

    def to_networkx(self) -> nx.Graph:
        G = nx.Graph()
        G.add_nodes_from(range(self.n))
        G.add_edges_from(self.edge_index.T[self.edge_index[0] < self.edge_index[1]].tolist())
        return G


def undirected_edge_index(pairs: np.ndarray) -> np.ndarray:
    """Both directions of the undirected ``pairs`` (m, 2), without self-loops or repeats: (2, E) int64."""
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    pairs = np.sort(pairs[pairs[:, 0] != pairs[:, 1]], axis=1)
    pairs = np.unique(pairs, axis=0)
    return np.concatenate([pairs.T, pairs.T[::-1]], axis=1)


def from_networkx(G: nx.Graph, labels: np.ndarray | None = None, features: np.ndarray | None = None) -> Graph:
    """A :class:`Graph` of ``G``'s structure, nodes renumbered 0..n-1 in ``G``'s node order."""
    index = {v: i for i, v in enumerate(G.nodes)}
    pairs = np.array([(index[a], index[b]) for a, b in G.edges], dtype=np.int64).reshape(-1, 2)
    return Graph(G.number_of_nodes(), undirected_edge_index(pairs), labels, features)


def sbm(sizes: list[int], probabilities: np.ndarray, rng: np.random.Generator) -> Graph:
    """Stochastic block model: blocks of ``sizes``, an edge between u < v with ``probabilities[b(u), b(v)]``.

    Every pair is drawn independently (exact, vectorised over the n(n−1)/2 pairs); labels are the blocks.
    """
    probabilities = np.asarray(probabilities, dtype=float)
    k = len(sizes)
    if probabilities.shape != (k, k) or not np.allclose(probabilities, probabilities.T):
        raise ValueError(f"probabilities must be a symmetric ({k}, {k}) matrix")
    if np.any((probabilities < 0) | (probabilities > 1)):
        raise ValueError("edge probabilities must lie in [0, 1]")
    labels = np.repeat(np.arange(k), sizes)
    u, v = np.triu_indices(len(labels), k=1)
    keep = rng.random(len(u)) < probabilities[labels[u], labels[v]]
    return Graph(len(labels), undirected_edge_index(np.stack([u[keep], v[keep]], axis=1)), labels)


def block_probabilities(n: int, n_classes: int, mean_degree: float, homophily: float) -> np.ndarray:
    """Within/between probabilities of an equal-block SBM with expected ``mean_degree`` and expected edge
    ``homophily`` (the share of edges joining same-class nodes), shape (n_classes, n_classes)."""
    if not 0.0 <= homophily <= 1.0:
        raise ValueError(f"homophily must be in [0, 1], got {homophily}")
    block = n / n_classes
    p_in = homophily * mean_degree / (block - 1)
    p_out = (1 - homophily) * mean_degree / (n - block)
    if max(p_in, p_out) > 1:
        raise ValueError(f"mean_degree {mean_degree} with homophily {homophily} needs a probability above 1 at n={n}")
    return np.where(np.eye(n_classes, dtype=bool), p_in, p_out)


def csbm(n: int, n_classes: int, mean_degree: float, homophily: float, n_features: int, signal: float,
         rng: np.random.Generator) -> Graph:
    """Contextual SBM: an equal-block SBM (:func:`block_probabilities`) whose node features are
    ``signal`` · μ_class + N(0, I), with class means μ drawn uniformly on the unit sphere in ``n_features`` dims."""
    sizes = [n // n_classes + (c < n % n_classes) for c in range(n_classes)]
    graph = sbm(sizes, block_probabilities(n, n_classes, mean_degree, homophily), rng)
    means = rng.normal(size=(n_classes, n_features))
    means /= np.linalg.norm(means, axis=1, keepdims=True)
    features = signal * means[graph.labels] + rng.normal(size=(n, n_features))
    return Graph(graph.n, graph.edge_index, graph.labels, features)


def edge_homophily(edge_index: np.ndarray, labels: np.ndarray) -> float:
    """Share of edges whose two endpoints have the same label."""
    return float(np.mean(labels[edge_index[0]] == labels[edge_index[1]]))


FAMILIES: dict[str, Callable[..., nx.Graph]] = {
    "erdos_renyi": lambda n, seed, p=0.1: nx.gnp_random_graph(n, p, seed=seed),
    "barabasi_albert": lambda n, seed, m=2: nx.barabasi_albert_graph(n, m, seed=seed),
    "watts_strogatz": lambda n, seed, k=4, p=0.1: nx.watts_strogatz_graph(n, k, p, seed=seed),
    "random_regular": lambda n, seed, d=3: nx.random_regular_graph(d, n, seed=seed),
    "random_tree": lambda n, seed: nx.random_labeled_tree(n, seed=seed),
}


def family_graph(name: str, n: int, rng: np.random.Generator, **kwargs) -> Graph:
    """One graph of the networkx random family ``name`` (see ``FAMILIES``) on ``n`` nodes, seeded from ``rng``."""
    if name not in FAMILIES:
        raise ValueError(f"unknown family '{name}'; choose one of {', '.join(FAMILIES)}")
    return from_networkx(FAMILIES[name](n, int(rng.integers(2**31)), **kwargs))


def real_graph(name: str) -> Graph:
    """A small real graph networkx ships, with its known node partition where it has one:

    ``karate`` (34 nodes; label = the club each member joined after the split), ``davis`` (32 nodes, Davis's
    southern women and the events they attended; label = woman/event side), ``florentine`` (15 families, no
    labels), ``les_miserables`` (77 characters, co-appearance, no labels).
    """
    if name == "karate":
        G = nx.karate_club_graph()
        return from_networkx(G, np.array([G.nodes[v]["club"] != "Mr. Hi" for v in G.nodes], dtype=np.int64))
    if name == "davis":
        G = nx.davis_southern_women_graph()
        return from_networkx(G, np.array([G.nodes[v]["bipartite"] for v in G.nodes], dtype=np.int64))
    if name == "florentine":
        return from_networkx(nx.florentine_families_graph())
    if name == "les_miserables":
        return from_networkx(nx.les_miserables_graph())
    raise ValueError(f"unknown real graph '{name}'; choose one of karate, davis, florentine, les_miserables")


@dataclass(frozen=True)
class EventStream:
    """Timestamped interactions ``src`` → ``dst`` at times ``t`` (E,), sorted by time in [0, 1); each event carries
    ``features`` (E, d), the source node's class mean at that time plus noise. ``node_class`` (n,) and
    ``class_onset`` (n_classes,): a class's nodes take part only from its onset on."""
    src: np.ndarray
    dst: np.ndarray
    t: np.ndarray
    features: np.ndarray
    node_class: np.ndarray
    class_onset: np.ndarray


def drifting_class_means(n_classes: int, n_features: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Two orthonormal directions (a_c, b_c) per class, shapes (n_classes, n_features) each: μ_c(t) rotates in
    their plane, μ_c(t) = cos(θt) a_c + sin(θt) b_c."""
    if n_features < 2:
        raise ValueError("drifting class means need n_features >= 2")
    a, b = np.empty((n_classes, n_features)), np.empty((n_classes, n_features))
    for c in range(n_classes):
        q, _ = np.linalg.qr(rng.normal(size=(n_features, 2)))
        a[c], b[c] = q[:, 0], q[:, 1]
    return a, b


def temporal_stream(n_nodes: int, n_events: int, n_classes: int, homophily: float, drift: float, n_features: int,
                    noise: float, rng: np.random.Generator, class_onset: np.ndarray | None = None) -> EventStream:
    """An evolving interaction stream with class drift.

    Nodes get classes uniformly. Event times are uniform on [0, 1), sorted. Each event's source is a uniform node
    among the classes already active (onset ≤ t); its destination is, with probability ``homophily``, another
    active node of the same class, else an active node of a different class (when one exists). Event features are
    the source class's mean, rotated by the angle ``drift`` · t (radians) in its own plane, plus N(0, noise²):
    old classes keep evolving while new ones appear.
    """
    if class_onset is None:
        class_onset = np.zeros(n_classes)
    class_onset = np.asarray(class_onset, dtype=float)
    if class_onset.shape != (n_classes,) or class_onset.min() != 0.0:
        raise ValueError("class_onset needs one time per class, the earliest at 0")
    node_class = rng.integers(0, n_classes, size=n_nodes)
    if np.bincount(node_class, minlength=n_classes).min() < 2:
        raise ValueError(f"{n_nodes} nodes leave a class with fewer than 2 nodes; use more nodes or fewer classes")
    t = np.sort(rng.random(n_events))
    active_classes = class_onset[None, :] <= t[:, None]                        # (E, C)
    # Sources: a uniform active node, drawn by rejection (vectorised; the first class is always active).
    src = rng.integers(0, n_nodes, size=n_events)
    while (bad := ~active_classes[np.arange(n_events), node_class[src]]).any():
        src[bad] = rng.integers(0, n_nodes, size=int(bad.sum()))
    same = rng.random(n_events) < homophily
    dst = rng.integers(0, n_nodes, size=n_events)
    has_other = active_classes.sum(axis=1) > 1

    def wrong(d):
        is_same = node_class[d] == node_class[src]
        want_same = same | ~has_other
        return ~active_classes[np.arange(n_events), node_class[d]] | (is_same != want_same) | (d == src)

    while (bad := wrong(dst)).any():
        dst[bad] = rng.integers(0, n_nodes, size=int(bad.sum()))
    a, b = drifting_class_means(n_classes, n_features, rng)
    angle = drift * t[:, None]
    features = np.cos(angle) * a[node_class[src]] + np.sin(angle) * b[node_class[src]]
    features = features + noise * rng.normal(size=features.shape)
    return EventStream(src, dst, t, features, node_class, class_onset)


def probe_accuracy(train_x: np.ndarray, train_y: np.ndarray, test_x: np.ndarray, test_y: np.ndarray) -> float:
    """Test accuracy of a logistic-regression probe on frozen embeddings (n, d) (scikit-learn, max_iter=500,
    as node2vec evaluations use)."""
    probe = LogisticRegression(max_iter=500).fit(train_x, train_y)
    return float(probe.score(test_x, test_y))

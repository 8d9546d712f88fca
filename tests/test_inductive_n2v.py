"""inductive_n2v: the extension, feature propagation and the modified losses against independent references
(hand-computed cases, a layer-by-layer BFS, the harmonic closed form, brute-force loops, dense matrices); node2vec
against an easy SBM. The smoke run, determinism and params come from test_papers.py."""

import networkx as nx
import numpy as np
import pytest
import torch
from conftest import params_for

from flows.inductive_n2v import method
from tasks.graphs import Graph, from_networkx, probe_accuracy


def _random_graph(n=30, p=0.12, seed=0) -> Graph:
    return from_networkx(nx.gnp_random_graph(n, p, seed=seed))


def test_extension_alpha_one_matches_bfs_layers():
    """alpha = 1: a node at hop distance k from the known set gets the mean of its neighbours at distance k - 1
    (computed layer by layer with networkx); unreachable nodes keep zero and no value."""
    graph = _random_graph(40, 0.06, seed=3)
    rng = np.random.default_rng(0)
    known = rng.random(graph.n) < 0.2
    emb = rng.normal(size=(known.sum(), 3))
    feats, has = method.extend_posthoc(method.adjacency_matrix(graph.n, graph.edge_index), known, emb)
    G = graph.to_networkx()
    dist = nx.multi_source_dijkstra_path_length(G, set(np.flatnonzero(known).tolist()))
    ref = np.zeros_like(feats)
    ref[known] = emb
    for k in range(1, max(dist.values()) + 1):
        for v in [v for v, d in dist.items() if d == k]:
            ref[v] = np.mean([ref[u] for u in G[v] if dist.get(u) == k - 1], axis=0)
    assert np.allclose(feats, ref)
    assert set(np.flatnonzero(has)) == set(dist)
    assert len(dist) < graph.n  # the test covers unreachable nodes too


def test_extension_update_hand_computed():
    """Path 0-1-2, known 0 -> 0 and 2 -> 4, lambda = 0.5: delay 0 stops after node 1 gets 2 (the known nodes had no
    valued neighbour in that round); delay 1 runs one more round of a*old + (1-a)*mean: [1, 2, 3]."""
    A = method.adjacency_matrix(3, np.array([[0, 1, 1, 2], [1, 0, 2, 1]]))
    known = np.array([True, False, True])
    emb = np.array([[0.0], [4.0]])
    f0, _ = method.extend_posthoc(A, known, emb, alpha=0.5, delay=0)
    f1, _ = method.extend_posthoc(A, known, emb, alpha=0.5, delay=1)
    f5, _ = method.extend_posthoc(A, known, emb, alpha=0.5, delay=1, max_iter=2)
    assert np.allclose(f0.ravel(), [0, 2, 4])
    assert np.allclose(f1.ravel(), [1, 2, 3])
    assert np.allclose(f5.ravel(), [1, 2, 3])
    assert np.allclose(method.extend_posthoc(A, known, emb, alpha=0.5, delay=1, max_iter=1)[0].ravel(), [0, 2, 4])


def _update_reference(G, known, emb, alpha, delay, max_iter):
    """A per-node transcription of the official extend2ind_update semantics with dicts."""
    vals = {v: emb[i] for i, v in enumerate(np.flatnonzero(known))}
    for _ in range(max_iter):
        means = {v: np.mean([vals[u] for u in G[v] if u in vals], axis=0)
                 for v in G if any(u in vals for u in G[v])}
        added = [v for v in means if v not in vals]
        if not added:
            if delay == 0:
                break
            delay -= 1
        new = dict(vals)
        for v, mean in means.items():
            new[v] = mean if v not in vals else alpha * vals[v] + (1 - alpha) * mean
        vals = new
    return vals


@pytest.mark.parametrize("alpha,delay", [(0.5, 0), (0.2, 3), (0.8, 10)])
def test_extension_update_matches_a_per_node_loop(alpha, delay):
    graph = _random_graph(35, 0.08, seed=5)
    rng = np.random.default_rng(1)
    known = rng.random(graph.n) < 0.3
    emb = rng.normal(size=(known.sum(), 4))
    feats, has = method.extend_posthoc(method.adjacency_matrix(graph.n, graph.edge_index), known, emb, alpha, delay)
    ref = _update_reference(graph.to_networkx(), known, emb, alpha, delay, 50)
    assert set(np.flatnonzero(has)) == set(ref)
    for v, x in ref.items():
        assert np.allclose(feats[v], x)
    assert not np.allclose(feats[known], emb)  # alpha < 1 moves the train nodes too, as in the official code


def test_feature_propagation_converges_to_the_harmonic_extension():
    """FP's fixed point: x_U = (I - S_UU)^-1 S_UK x_K with S = D^-1/2 A D^-1/2; one step equals the dense product."""
    G = nx.connected_watts_strogatz_graph(30, 4, 0.3, seed=2)
    graph = from_networkx(G)
    A = method.adjacency_matrix(graph.n, graph.edge_index)
    rng = np.random.default_rng(2)
    known = rng.random(graph.n) < 0.4
    emb = rng.normal(size=(known.sum(), 2))
    D = np.diag(1 / np.sqrt(A.toarray().sum(1)))
    S = D @ A.toarray() @ D
    x_known = np.zeros((graph.n, 2))
    x_known[known] = emb
    one = S @ x_known
    one[known] = emb
    assert np.allclose(method.feature_propagation(A, known, emb, 1), one)
    U = ~known
    harmonic = np.linalg.solve(np.eye(U.sum()) - S[np.ix_(U, U)], S[np.ix_(U, known)] @ emb)
    assert np.allclose(method.feature_propagation(A, known, emb, 3000)[U], harmonic, atol=1e-6)


def _dense(graph):
    A = np.zeros((graph.n, graph.n))
    A[graph.edge_index[0], graph.edge_index[1]] = 1
    return A


def test_modified_losses_match_dense_and_loop_references():
    graph = _random_graph(25, 0.15, seed=7)
    A = _dense(graph)
    deg = A.sum(1)
    z = torch.randn(graph.n, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float32)
    M = method.mean_neighbour_matrix(graph.n, graph.edge_index)
    mean = np.where(deg[:, None] > 0, A @ z.numpy() / np.maximum(deg, 1)[:, None], 0)
    gen = torch.Generator().manual_seed(1)
    assert torch.equal(method.replaced_embeddings(z, M, 0.0, gen), z)
    assert np.allclose(method.replaced_embeddings(z, M, 1.0, gen).numpy(), mean, atol=1e-6)
    half = method.replaced_embeddings(z, M, 0.5, gen).numpy()
    replaced = ~np.isclose(half, z.numpy()).all(1)
    assert 0 < replaced.sum() < graph.n and np.allclose(half[replaced], mean[replaced], atol=1e-6)

    nodes = torch.arange(0, graph.n, 2)
    ms = -np.log(1 / (1 + np.exp(-(z.numpy() * mean).sum(1))))[nodes.numpy()].mean()
    assert np.isclose(method.mean_self_loss(z, M, nodes).item(), ms, rtol=1e-5)

    ei = torch.as_tensor(graph.edge_index)
    adj = torch.sparse_coo_tensor(ei.flip(0), torch.ones(ei.shape[1]), (graph.n, graph.n), check_invariants=False).coalesce()
    loop = []   # the official neighbor_loss_full: mean of each node's neighbours' cosine-similarity matrix
    for v in nodes.numpy():
        nb = np.flatnonzero(A[v])
        if len(nb) > 1:
            e = z.numpy()[nb] / np.linalg.norm(z.numpy()[nb], axis=1, keepdims=True)
            loop.append((e @ e.T).mean())
    got = method.neighbour_diversity_loss(z, adj, torch.as_tensor(deg, dtype=torch.float32), nodes).item()
    assert np.isclose(got, np.mean(loop), rtol=1e-5)


def test_n2v_separates_an_easy_sbm_and_is_deterministic():
    p = params_for("inductive_n2v", n_nodes=120, n_classes=2, steps=60, lr=0.1)
    graph = method.make_graph(p, 0.95, seed=0, regime=0)
    emb = method.train_n2v(graph, p, seed=4)
    train = np.arange(graph.n) % 2 == 0
    assert probe_accuracy(emb[train], graph.labels[train], emb[~train], graph.labels[~train]) > 0.9
    assert np.array_equal(emb, method.train_n2v(graph, p, seed=4))
    ms = method.train_n2v(graph, p, seed=4, w_ms=1.0)
    assert not np.array_equal(emb, ms)


def test_the_mean_self_loss_pulls_nodes_toward_their_neighbour_mean():
    """Training with a large w_ms leaves a much smaller mean-self loss -log sigma(z_v . mean N(v)) than plain N2V,
    and the sampling variant trains too (different table, finite)."""
    p = params_for("inductive_n2v", n_nodes=100, steps=40)
    graph = method.make_graph(p, 0.5, seed=1, regime=0)
    M = method.mean_neighbour_matrix(graph.n, graph.edge_index)
    nodes = torch.arange(graph.n)

    def ms(z):
        return method.mean_self_loss(torch.as_tensor(z), M, nodes).item()

    plain = method.train_n2v(graph, p, 0)
    assert ms(method.train_n2v(graph, p, 0, w_ms=10.0)) < 0.5 * ms(plain)
    sampled = method.train_n2v(graph, p, 0, prob_replace=0.5)
    assert np.isfinite(sampled).all() and not np.allclose(sampled, plain)


def test_split_and_subgraph():
    graph = _random_graph(50, 0.1, seed=9)
    split = method.make_split(graph.n, 0.2, np.random.default_rng(0))
    assert (split.train.sum(), split.val.sum(), split.test.sum()) == (10, 20, 20)
    assert not (split.train & split.val).any() and not (split.train & split.test).any() and not (split.val & split.test).any()
    sub, old = method.induced_subgraph(graph, split.train | split.val)
    ref = graph.to_networkx().subgraph(old.tolist())
    got = {tuple(sorted((old[a], old[b]))) for a, b in sub.edge_index.T}
    assert got == {tuple(sorted(e)) for e in ref.edges}


def test_share_claim_reversals_are_the_cells_without_a_positive_gain():
    """The share claim's per-cell list is on its own 0/1 scale: a cell gaining 0.3 points is no reversal."""
    from flows.inductive_n2v.claims import PAPER
    from paperflows.core.claims import check_claim

    claim = next(c for c in PAPER.claims if c.id == "gain_positive_in_most_cells")
    gains = {"a@0.1": 0.3, "b@0.1": 2.0, "a@0.8": -0.4}
    metrics = {"cells_positive_share": 2 / 3, "cell_positive": {k: float(v > 0) for k, v in gains.items()},
               "control": {"cells_positive_share": 0.0}}
    assert check_claim(claim, metrics, 3).reversed_settings == ["a@0.8"]

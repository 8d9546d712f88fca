"""tasks/graphs.py, tasks/walks.py and tasks/gnn.py against independent references: generator statistics against
their parameters, walk transitions against node2vec's formula (distances from networkx), message passing against
dense adjacency products, recent-event lookup against a loop."""

import networkx as nx
import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from tasks import gnn, graphs, walks


def test_csbm_matches_its_degree_homophily_and_feature_signal():
    rng = np.random.default_rng(0)
    g = graphs.csbm(1200, 4, mean_degree=10.0, homophily=0.7, n_features=8, signal=3.0, rng=rng)
    assert g.degrees().mean() == pytest.approx(10.0, rel=0.05)
    assert graphs.edge_homophily(g.edge_index, g.labels) == pytest.approx(0.7, abs=0.02)
    means = np.stack([g.features[g.labels == c].mean(axis=0) for c in range(4)])
    np.testing.assert_allclose(np.linalg.norm(means, axis=1), 3.0, rtol=0.08)
    assert (g.features - means[g.labels]).std() == pytest.approx(1.0, rel=0.03)


def test_sbm_edge_density_per_block_pair_matches_the_probabilities():
    P = np.array([[0.3, 0.05], [0.05, 0.1]])
    g = graphs.sbm([150, 100], P, np.random.default_rng(1))
    A = nx.to_numpy_array(g.to_networkx(), nodelist=range(g.n))
    blocks = [slice(0, 150), slice(150, 250)]
    for a in range(2):
        for b in range(2):
            sub = A[blocks[a], blocks[b]]
            pairs = sub.size - (sub.shape[0] if a == b else 0)
            assert sub.sum() / pairs == pytest.approx(P[a, b], rel=0.1)
    assert np.all(np.diag(A) == 0) and np.array_equal(A, A.T)


def test_generators_reject_impossible_parameters():
    with pytest.raises(ValueError, match="symmetric"):
        graphs.sbm([5, 5], np.array([[0.1, 0.2], [0.3, 0.1]]), np.random.default_rng(0))
    with pytest.raises(ValueError, match="probability above 1"):
        graphs.block_probabilities(20, 4, mean_degree=10, homophily=0.9)
    with pytest.raises(ValueError, match="unknown family"):
        graphs.family_graph("petersen", 10, np.random.default_rng(0))


def test_family_graphs_have_their_defining_structure():
    rng = np.random.default_rng(2)
    assert np.all(graphs.family_graph("random_regular", 20, rng, d=3).degrees() == 3)
    tree = graphs.family_graph("random_tree", 30, rng)
    assert tree.edge_index.shape[1] == 2 * 29 and nx.is_tree(tree.to_networkx())
    ba = graphs.family_graph("barabasi_albert", 50, rng, m=2)
    assert ba.edge_index.shape[1] == 2 * 2 * 48


def test_real_graphs_carry_their_known_partitions():
    karate = graphs.real_graph("karate")
    assert karate.n == 34 and karate.edge_index.shape[1] == 2 * 78 and karate.labels.sum() == 17
    davis = graphs.real_graph("davis")
    assert davis.n == 32 and graphs.edge_homophily(davis.edge_index, davis.labels) == 0.0  # bipartite
    assert graphs.real_graph("florentine").n == 15 and graphs.real_graph("les_miserables").n == 77
    with pytest.raises(ValueError, match="unknown real graph"):
        graphs.real_graph("cora")


def test_temporal_stream_respects_homophily_onsets_and_drift():
    rng = np.random.default_rng(3)
    onset = np.array([0.0, 0.0, 0.5])
    s = graphs.temporal_stream(300, 20000, 3, homophily=0.8, drift=np.pi / 2, n_features=6, noise=0.1, rng=rng,
                               class_onset=onset)
    assert np.all(np.diff(s.t) >= 0) and np.all(s.src != s.dst)
    assert np.all(s.t[s.node_class[s.src] == 2] >= 0.5) and np.all(s.t[s.node_class[s.dst] == 2] >= 0.5)
    late = s.t >= 0.5
    assert np.mean(s.node_class[s.src[late]] == s.node_class[s.dst[late]]) == pytest.approx(0.8, abs=0.02)
    # Class 0's mean at t≈0 and t≈1 are a quarter turn apart: orthogonal directions.
    c0 = s.node_class[s.src] == 0
    early_mean = s.features[c0 & (s.t < 0.05)].mean(axis=0)
    late_mean = s.features[c0 & (s.t > 0.95)].mean(axis=0)
    cosine = early_mean @ late_mean / np.linalg.norm(early_mean) / np.linalg.norm(late_mean)
    assert abs(cosine - np.cos(np.pi / 2 * 0.9)) < 0.1


def _node2vec_probabilities(G: nx.Graph, prev: int, cur: int, p: float, q: float) -> dict[int, float]:
    """Grover & Leskovec's transition: weight 1/p back to prev, 1 at distance 1 from prev, 1/q at distance 2."""
    weights = {}
    for x in G.neighbors(cur):
        d = nx.shortest_path_length(G, prev, x)
        weights[x] = {0: 1 / p, 1: 1.0, 2: 1 / q}[d]
    total = sum(weights.values())
    return {x: w / total for x, w in weights.items()}


@pytest.mark.parametrize("p,q", [(0.25, 4.0), (4.0, 0.25), (1.0, 1.0)])
def test_biased_walk_transitions_follow_node2vec_formula(p, q):
    G = nx.karate_club_graph()
    g = graphs.from_networkx(G)
    indptr, indices = g.csr()
    rng = np.random.default_rng(4)
    for prev, cur in [(0, 2), (33, 32), (5, 16)]:
        m = 30000
        nxt = walks.next_step(indptr, indices, np.full(m, prev), np.full(m, cur), p, q, rng)
        expected = _node2vec_probabilities(G, prev, cur, p, q)
        nodes = sorted(expected)
        observed = np.array([(nxt == x).sum() for x in nodes])
        assert observed.sum() == m  # never leaves the neighbourhood
        assert chisquare(observed, m * np.array([expected[x] for x in nodes])).pvalue > 1e-3


def test_random_walks_move_along_edges_and_stay_on_isolated_nodes():
    g = graphs.Graph(5, graphs.undirected_edge_index(np.array([[0, 1], [1, 2], [2, 3]])))
    indptr, indices = g.csr()
    w = walks.random_walks(indptr, indices, np.array([0, 1, 2, 3, 4] * 20), 8, 0.5, 2.0, np.random.default_rng(5))
    assert w.shape == (100, 8) and np.all(w[:, 0] == np.tile(np.arange(5), 20))
    A = nx.to_numpy_array(g.to_networkx(), nodelist=range(5))
    moved = w[:, :-1] != 4
    assert np.all(A[w[:, :-1], w[:, 1:]][moved] == 1)
    assert np.all(w[w[:, 0] == 4] == 4)


def test_skipgram_pairs_equal_a_loop_over_windows():
    w = np.array([[0, 1, 2, 3], [4, 5, 6, 7]])
    centers, contexts = walks.skipgram_pairs(w, 2)
    expected = sorted((int(r[i]), int(r[j])) for r in w for i in range(4) for j in range(i + 1, min(i + 3, 4)))
    assert sorted(zip(centers.tolist(), contexts.tolist())) == expected


def test_skipgram_loss_equals_its_formula():
    g = torch.Generator().manual_seed(0)
    zc, zo, zn = torch.randn(3, 4, generator=g), torch.randn(3, 4, generator=g), torch.randn(3, 2, 4, generator=g)
    sig = torch.sigmoid
    expected = -torch.log(sig((zc * zo).sum(1))).mean() - torch.log(sig(-torch.einsum("bd,bkd->bk", zc, zn))).mean()
    torch.testing.assert_close(walks.skipgram_loss(zc, zo, zn), expected)


def test_node2vec_separates_two_loosely_joined_communities_and_is_deterministic():
    G = nx.connected_caveman_graph(2, 12)
    g = graphs.from_networkx(G, np.repeat([0, 1], 12))
    indptr, indices = g.csr()
    kwargs = dict(dim=8, walk_length=10, walks_per_node=10, window=3, negatives=1, p=1.0, q=1.0, epochs=3,
                  batch_size=128, lr=0.05, seed=0)
    z = walks.node2vec(indptr, indices, **kwargs)
    np.testing.assert_array_equal(z, walks.node2vec(indptr, indices, **kwargs))
    train = np.arange(0, 24, 2)
    assert graphs.probe_accuracy(z[train], g.labels[train], z[train + 1], g.labels[train + 1]) == 1.0


def _dense(edge_index, n):
    A = torch.zeros(n, n)
    A[edge_index[1], edge_index[0]] = 1.0  # row = target, column = source
    return A


def test_message_passing_equals_dense_adjacency_products():
    g = graphs.csbm(60, 3, mean_degree=5.0, homophily=0.6, n_features=4, signal=1.0, rng=np.random.default_rng(6))
    edge_index = torch.as_tensor(g.edge_index)
    x = torch.as_tensor(g.features, dtype=torch.float32)
    A = _dense(edge_index, g.n)
    torch.testing.assert_close(torch.sparse.mm(gnn.adjacency(edge_index, g.n), x), A @ x)
    deg = A.sum(1, keepdim=True)
    torch.testing.assert_close(torch.sparse.mm(gnn.mean_adjacency(edge_index, g.n), x),
                               torch.where(deg > 0, A @ x / deg.clamp(min=1), 0.0))
    A_hat = A + torch.eye(g.n)
    d = A_hat.sum(1).rsqrt()
    torch.manual_seed(0)
    layer = gnn.GCNLayer(4, 5)
    expected = (d[:, None] * A_hat * d[None, :]) @ x @ layer.linear.weight.T + layer.linear.bias
    torch.testing.assert_close(layer(x, gnn.gcn_adjacency(edge_index, g.n)), expected)
    sage = gnn.SAGELayer(4, 5)
    expected = sage.root(x) + (A @ x / deg.clamp(min=1)) @ sage.neighbours.weight.T
    torch.testing.assert_close(sage(x, gnn.mean_adjacency(edge_index, g.n)), expected)
    x.requires_grad_()
    sparse_grad, = torch.autograd.grad(sage(x, gnn.mean_adjacency(edge_index, g.n)).square().sum(), x)
    dense_grad, = torch.autograd.grad((sage.root(x) + (A @ x / deg.clamp(min=1)) @ sage.neighbours.weight.T).square().sum(), x)
    torch.testing.assert_close(sparse_grad, dense_grad)


def test_recent_events_equal_a_loop_over_the_stream():
    rng = np.random.default_rng(7)
    src = rng.integers(0, 6, 80)
    dst = (src + rng.integers(1, 6, 80)) % 6  # no self-loops, as in a stream
    t = np.round(rng.random(80), 1)  # many tied times: "strictly before" must exclude them
    nodes, times = rng.integers(0, 6, 25), rng.random(25).round(1)
    neighbour, event, valid = gnn.recent_events(src, dst, t, nodes, times, k=4)
    for i, (v, tau) in enumerate(zip(nodes, times)):
        past = [(t[e], e, dst[e] if src[e] == v else src[e]) for e in range(80) if (src[e] == v or dst[e] == v) and t[e] < tau]
        past = sorted(past)[-4:]
        assert valid[i].sum() == len(past)
        assert sorted(event[i][valid[i]].tolist()) == sorted(e for _, e, _ in past)
        assert all(t[e] < tau for e in event[i][valid[i]])
        if past:
            assert t[event[i][valid[i]][-1]] == past[-1][0]  # the newest is last


def test_temporal_attention_ignores_masked_slots_and_neighbour_order():
    torch.manual_seed(0)
    layer = gnn.TemporalAttention(node_features=3, event_features=2, time_features=4, hidden=8, out_features=2)
    g = torch.Generator().manual_seed(1)
    h, hn, e, dt = torch.randn(5, 3, generator=g), torch.randn(5, 4, 3, generator=g), torch.randn(5, 4, 2, generator=g), torch.rand(5, 4, generator=g)
    valid = torch.tensor([[1, 1, 1, 1], [0, 1, 1, 1], [0, 0, 0, 1], [0, 0, 0, 0], [1, 0, 1, 0]], dtype=torch.bool)
    out = layer(h, hn, e, dt, valid)
    garbage = torch.where(valid[..., None], hn, torch.randn(5, 4, 3, generator=g) * 100)
    torch.testing.assert_close(layer(h, garbage, e, dt, valid), out)
    perm = torch.tensor([3, 1, 0, 2])
    torch.testing.assert_close(layer(h, hn[:, perm], e[:, perm], dt[:, perm], valid[:, perm]), out)
    # No past events: the message is zero, so the output is the MLP of [h, 0].
    torch.testing.assert_close(out[3], layer.out(torch.cat([h[3], torch.zeros(8)])))
    out.sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in layer.parameters() if p.grad is not None)

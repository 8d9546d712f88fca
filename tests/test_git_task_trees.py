"""git_task_trees: the method against independent references (smoke run, determinism and params come from test_papers.py)."""

import networkx as nx
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import params_for
from scipy.special import softmax
from scipy.stats import entropy

from flows.git_task_trees import method as M
from tasks.graphs import Graph, edge_homophily, undirected_edge_index


def _random_graph(n=12, p=0.3, seed=0) -> Graph:
    G = nx.gnp_random_graph(n, p, seed=seed)
    return Graph(n, undirected_edge_index(np.array(list(G.edges)).reshape(-1, 2)))


def test_task_tree_pooling_matches_loops_over_the_tree_definitions():
    g = _random_graph()
    z = torch.randn(g.n, 5, dtype=torch.float64)
    node = torch.sparse.mm(M.node_trees(g.edge_index, g.n).double(), z)
    G = g.to_networkx()
    for v in range(g.n):   # node task-tree: the mean over the node's neighbours (zero if it has none)
        nbrs = list(G.neighbors(v))
        expect = z[nbrs].mean(0) if nbrs else torch.zeros(5, dtype=torch.float64)
        assert torch.allclose(node[v], expect)
    pairs = np.array([[0, 3], [2, 7], [5, 5 + 6]])
    edge = torch.sparse.mm(M.edge_trees(pairs, g.n).double(), z)
    assert torch.allclose(edge, (z[pairs[:, 0]] + z[pairs[:, 1]]) / 2)
    member = np.array([0, 0, 1, 1, 1, 2, 2, 2, 2, 0, 1, 2])
    graph = torch.sparse.mm(M.graph_trees(member, 3).double(), z)
    for k in range(3):
        assert torch.allclose(graph[k], z[member == k].mean(0))


def test_encoder_pool_is_a_linear_map_of_the_tree_mean():
    enc = M.Encoder(6, 8, 2)
    z = torch.randn(10, 8)
    trees = M.graph_trees(np.repeat([0, 1], 5), 2)
    expect = torch.stack([z[:5].mean(0), z[5:].mean(0)]) @ enc.pooling_lin.weight.T + enc.pooling_lin.bias
    assert torch.allclose(enc.pool(z, trees), expect, atol=1e-6)


def test_semantic_loss_is_the_symmetric_stop_gradient_cosine_loss():
    torch.manual_seed(0)
    z1, z2 = torch.randn(7, 4, requires_grad=True), torch.randn(7, 4, requires_grad=True)
    identity = lambda z: z  # noqa: E731  with h = identity the loss is 1 - cos(z1, z2)
    loss = M.semantic_loss(z1, z2, identity)
    assert loss.item() == pytest.approx(float((1 - F.cosine_similarity(z1, z2)).mean().detach()), rel=1e-6)
    # stop-gradient: the gradient is that of the h-branch only, i.e. half of what the plain cosine would give
    loss.backward()
    a, b = z1.detach().clone().requires_grad_(), z2.detach().clone().requires_grad_()
    (1 - F.cosine_similarity(a, b)).mean().backward()
    assert torch.allclose(z1.grad, a.grad / 2, atol=1e-6) and torch.allclose(z2.grad, b.grad / 2, atol=1e-6)
    assert M.semantic_loss(z1, 3 * z1, identity).item() == pytest.approx(0.0, abs=1e-6)


def test_alignment_regulariser_is_the_kl_of_the_mean_against_each_row():
    z = np.random.default_rng(1).normal(size=(6, 5))
    q = softmax(z.mean(0))
    expect = np.mean([entropy(q, softmax(row)) for row in z])   # scipy: KL(q || p_i)
    assert M.align_regulariser(torch.tensor(z)).item() == pytest.approx(expect, rel=1e-9)
    assert M.align_regulariser(torch.ones(4, 3)).item() == pytest.approx(0.0, abs=1e-12)


def test_augmentation_masks_whole_columns_and_drops_edges_at_the_set_rates():
    p = params_for("git_task_trees", feature_mask=0.3, edge_drop=0.25)
    x = torch.ones(50, 2000)
    edges = np.random.default_rng(0).integers(0, 50, size=(2, 20000))
    xv, ev = M.augment(x, edges, p, torch.Generator().manual_seed(0), np.random.default_rng(0))
    masked = (xv == 0).all(0)
    assert torch.equal(masked, (xv == 0).any(0))                    # a column is masked for every node or none
    assert masked.float().mean().item() == pytest.approx(0.3, abs=0.04)
    assert ev.shape[1] / edges.shape[1] == pytest.approx(0.75, abs=0.02)


def test_domains_have_the_set_homophily_and_feature_means():
    p = params_for("git_task_trees", nodes_per_graph=1200, mean_degree=10.0, node_signal=6.0, shift_scale=2.0)
    world = M.make_world(p, 0)
    d = M.make_domain(p, world, 0.8, np.random.default_rng(0))
    g = d.node_graph
    assert edge_homophily(g.edge_index, g.labels) == pytest.approx(0.8, abs=0.03)
    means = np.stack([g.features[g.labels == c].mean(0) for c in range(p.n_classes)])
    P = world.class_prototypes
    # class means = 6 x (a distinct shared prototype) + a common shift of norm 2, up to noise
    assigned = []
    for c in range(p.n_classes):
        resid = [np.linalg.norm((means[c] - means[(c + 1) % p.n_classes]) / 6 - (P[a] - P[b]))
                 if a != b else np.inf for a in range(len(P)) for b in range(len(P))]
        assert min(resid) < 0.2
        assigned.append(int(np.argmin(resid)) // len(P))
    assert len(set(assigned)) == p.n_classes
    shift = (means - 6 * P[assigned]).mean(0)
    assert np.linalg.norm(shift) == pytest.approx(2.0, abs=0.15)
    noise = M.make_domain(p, world, 0.8, np.random.default_rng(0), noise=True).node_graph
    assert np.abs(noise.features.mean(0)).max() < 0.15                 # no prototype, no shift
    assert edge_homophily(noise.edge_index, noise.labels) == pytest.approx(1 / p.n_classes, abs=0.03)
    assert len(d.small_graphs) == 4 * p.graphs_per_family
    assert np.array_equal(np.bincount(d.small_labels), [p.graphs_per_family] * 4)


def test_few_shot_split_and_link_task_are_consistent():
    y = np.repeat(np.arange(3), [7, 9, 11])
    s, q = M.few_shot_split(y, 5, np.random.default_rng(0))
    assert np.array_equal(np.bincount(y[s]), [5, 5, 5]) and len(np.intersect1d(s, q)) == 0 and len(s) + len(q) == len(y)
    p = params_for("git_task_trees")
    d = M.make_domain(p, M.make_world(p, 0), 0.8, np.random.default_rng(3))
    task = M.link_task(p, d, np.random.default_rng(4))
    rows, cols = task.trees.coalesce().indices().numpy()
    pairs = np.stack([cols[rows == t] for t in range(len(task.y))])       # each edge task-tree's two endpoints
    edges = set(map(tuple, d.node_graph.edge_index.T.tolist()))
    message = set(map(tuple, task.mean_adj.coalesce().indices().flip(0).numpy().T.tolist()))
    for (u, v), label in zip(pairs, task.y):
        assert ((u, v) in edges) == bool(label)                         # positives are edges, negatives are not
        assert (u, v) not in message                                    # held-out edges are hidden from the GNN


def test_prototype_accuracy_matches_a_brute_force_nearest_class_mean():
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(3), 10)
    e = rng.normal(size=(30, 4)) + 1.5 * np.eye(4)[y]
    support, query = M.few_shot_split(y, 3, rng)
    task = M.Task("node", None, None, None, None, y, support, query, 3)
    expect = []
    for i in query:
        sims = [np.dot(e[i] / np.linalg.norm(e[i]), np.mean([e[j] / np.linalg.norm(e[j]) for j in support if y[j] == c], 0))
                for c in range(3)]
        expect.append(int(np.argmax(sims)) == y[i])
    assert M.prototype_accuracy(e, task) == pytest.approx(np.mean(expect))


def test_finetuning_learns_an_easy_node_task_and_pretraining_reduces_its_loss():
    p = params_for("git_task_trees", node_signal=4.0, finetune_steps=40, pretrain_steps=30)
    world = M.make_world(p, 0)
    d = M.make_domain(p, world, 0.9, np.random.default_rng(0))
    task = M.node_task(p, d, np.random.default_rng(1))
    acc = M.finetune_accuracy(p, M.new_encoder(p, 0), task, seed=0)
    assert acc > 0.85                                                   # chance is 0.25
    _, history = M.pretrain(p, [d], M.LEVELS, seed=0)
    assert np.mean(history[-5:]) < history[0]

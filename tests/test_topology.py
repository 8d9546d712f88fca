"""tasks.topology against independent references: the minimum spanning tree (H0), the Rips homotopy
type of points on a circle (H1), finite differences (gradients) and a direct double sum (kernel)."""

import gudhi
import numpy as np
import pytest
import torch
from scipy.sparse.csgraph import minimum_spanning_tree
from scipy.spatial.distance import cdist

from tasks import topology


def _cloud(n=40, d=3, seed=0):
    return np.random.default_rng(seed).standard_normal((n, d))


def test_h0_deaths_are_the_minimum_spanning_tree_edge_lengths():
    x = _cloud(60, 5, seed=1)
    h0 = topology.rips_diagrams(torch.tensor(x), max_dim=1)[0].detach().numpy()
    mst = minimum_spanning_tree(cdist(x, x)).toarray()
    assert np.all(h0[:, 0] == 0.0)
    np.testing.assert_allclose(np.sort(h0[:, 1]), np.sort(mst[mst > 0]), rtol=0, atol=1e-12)


def test_points_on_a_circle_give_one_dominant_h1_bar_of_known_size():
    # Adamaszek & Adams: the Rips complex of n evenly spaced points on a circle is a circle while edges join
    # points fewer than n/3 steps apart; the loop is born at the 1-step chord and dies at the n/3-step chord
    n = 12
    angles = 2 * np.pi * np.arange(n) / n
    x = torch.tensor(np.c_[np.cos(angles), np.sin(angles)])
    h1 = topology.rips_diagrams(x, max_dim=1)[1].detach().numpy()
    lengths = h1[:, 1] - h1[:, 0]
    top = np.argmax(lengths)
    np.testing.assert_allclose(h1[top], [2 * np.sin(np.pi / n), np.sqrt(3.0)], atol=1e-9)
    assert np.all(np.delete(lengths, top) < 1e-9)


def test_diagrams_equal_gudhis_own_intervals_without_the_radius_cut():
    x = _cloud(35, 4, seed=2)
    mine = topology.rips_diagrams(torch.tensor(x), max_dim=1)
    tree = gudhi.RipsComplex(points=x).create_simplex_tree(max_dimension=2)
    tree.persistence()
    for q in (0, 1):
        ref = tree.persistence_intervals_in_dimension(q)
        ref = ref[np.isfinite(ref[:, 1])]
        got = mine[q].detach().numpy()
        got = got[got[:, 1] - got[:, 0] > 0]
        key = lambda a: a[np.lexsort((a[:, 1], a[:, 0]))]
        np.testing.assert_allclose(key(got), key(ref), atol=1e-12)
    assert len(mine[1]) > 0  # the cloud has loops, so the H1 comparison is not vacuous


def test_total_persistence_matches_its_definition_and_the_mst_for_h0():
    x = _cloud(30, 3, seed=3)
    diagrams = topology.rips_diagrams(torch.tensor(x))
    mst = minimum_spanning_tree(cdist(x, x)).toarray()
    assert float(topology.total_persistence(diagrams[0], 1.0)) == pytest.approx(mst.sum(), abs=1e-10)
    assert float(topology.total_persistence(diagrams[0], 2.0)) == pytest.approx((mst ** 2).sum(), abs=1e-10)
    y = _cloud(30, 3, seed=4)
    dy = topology.rips_diagrams(torch.tensor(y))
    expected = sum(abs(float(((a[:, 1] - a[:, 0]) ** 2).sum() - ((b[:, 1] - b[:, 0]) ** 2).sum()))
                   for a, b in zip(diagrams, dy))
    assert float(topology.total_persistence_distance(diagrams, dy, 2.0)) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("alpha", [1.0, 2.0])
def test_total_persistence_gradient_matches_finite_differences(alpha):
    x0 = torch.tensor(_cloud(25, 3, seed=5))
    y = topology.rips_diagrams(torch.tensor(_cloud(25, 3, seed=6)))
    def loss(x):
        return topology.total_persistence_distance(topology.rips_diagrams(x), y, alpha)
    x = x0.clone().requires_grad_(True)
    grad, = torch.autograd.grad(loss(x), x)
    assert grad.abs().sum() > 0
    step = 1e-6
    rng = np.random.default_rng(0)
    for _ in range(6):  # directional derivatives along random directions
        v = torch.tensor(rng.standard_normal(x0.shape))
        numeric = (loss(x0 + step * v) - loss(x0 - step * v)) / (2 * step)
        assert float((grad * v).sum()) == pytest.approx(float(numeric), rel=1e-5, abs=1e-7)


def test_multiscale_distance_gradient_matches_finite_differences():
    x0 = torch.tensor(_cloud(20, 3, seed=7))
    y = topology.rips_diagrams(torch.tensor(_cloud(20, 3, seed=8)))
    def loss(x):
        return topology.multiscale_kernel_loss(topology.rips_diagrams(x), y, sigma=0.1)
    x = x0.clone().requires_grad_(True)
    grad, = torch.autograd.grad(loss(x), x)
    assert torch.isfinite(grad).all() and grad.abs().sum() > 0
    step = 1e-6
    rng = np.random.default_rng(1)
    for _ in range(6):
        v = torch.tensor(rng.standard_normal(x0.shape))
        numeric = (loss(x0 + step * v) - loss(x0 - step * v)) / (2 * step)
        assert float((grad * v).sum()) == pytest.approx(float(numeric), rel=1e-5, abs=1e-7)


def test_multiscale_kernel_equals_a_direct_double_sum():
    rng = np.random.default_rng(9)
    def diagram(k):
        b = rng.uniform(0, 1, k)
        return np.c_[b, b + rng.uniform(0.01, 1, k)]
    f, g = diagram(7), diagram(5)
    sigma = 0.2
    direct = 0.0
    for p in f:
        for q in g:
            qbar = q[::-1]
            direct += np.exp(-np.sum((p - q) ** 2) / (8 * sigma)) - np.exp(-np.sum((p - qbar) ** 2) / (8 * sigma))
    direct /= 8 * np.pi * sigma
    got = topology.multiscale_kernel(torch.tensor(f), torch.tensor(g), sigma)
    assert float(got) == pytest.approx(direct, rel=1e-12)
    # the induced distance: zero on a diagram and itself, symmetric, and equal to its defining expansion
    tf, tg = torch.tensor(f), torch.tensor(g)
    assert float(topology.multiscale_distance(tf, tf, sigma, squared=True)) == pytest.approx(0.0, abs=1e-12)
    d2 = (topology.multiscale_kernel(tf, tf, sigma) + topology.multiscale_kernel(tg, tg, sigma)
          - 2 * topology.multiscale_kernel(tf, tg, sigma))
    assert float(topology.multiscale_distance(tf, tg, sigma)) == pytest.approx(float(d2) ** 0.5, rel=1e-12)
    assert float(topology.multiscale_distance(tg, tf, sigma)) == pytest.approx(float(d2) ** 0.5, rel=1e-12)
    assert float(d2) > 0


def test_a_point_on_the_diagonal_adds_nothing_to_the_kernel():
    f = torch.tensor([[0.1, 0.6], [0.3, 0.4]], dtype=torch.float64)
    g = torch.tensor([[0.2, 0.5]], dtype=torch.float64)
    with_diagonal = torch.cat([g, torch.tensor([[0.35, 0.35]], dtype=torch.float64)])
    assert float(topology.multiscale_kernel(f, with_diagonal, 0.1)) == pytest.approx(
        float(topology.multiscale_kernel(f, g, 0.1)), rel=1e-12)

"""tasks.lipschitz against independent references: SVD, QR-orthogonal matrices, a brute-force linear case."""

import math

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from tasks import lipschitz as lip


def _matrix_map(A: torch.Tensor):
    return lambda x: x @ A.T


def test_margins_and_radius_by_hand():
    logits = torch.tensor([[3.0, 1.0, 0.5], [0.0, 2.0, 2.0], [1.0, 4.0, 0.0]])
    labels = torch.tensor([0, 1, 0])
    assert torch.allclose(lip.logit_margins(logits, labels), torch.tensor([2.0, 0.0, -3.0]))
    radius = lip.certified_radius(logits, labels, lipschitz=2.0)
    assert torch.allclose(radius, torch.tensor([2.0, 0.0, -3.0]) / (2 * math.sqrt(2)))
    # the tie (margin 0) and the error count as uncertified, even at radius 0
    assert np.allclose(lip.certified_accuracy(logits, labels, [0.0, 0.5, 0.8], lipschitz=2.0), [1 / 3, 1 / 3, 0.0])


def test_certificate_is_tight_for_an_orthonormal_linear_classifier():
    """For z = W x with orthonormal rows (L = 1), the smallest l2 perturbation that flips y to j is
    (z_y - z_j) / ||w_y - w_j|| = margin / sqrt(2): the certificate equals the closed-form worst case,
    and a perturbation just beyond it flips the prediction."""
    Q, _ = torch.linalg.qr(torch.randn(12, 12, dtype=torch.float64, generator=torch.Generator().manual_seed(0)))
    W = Q[:4]                       # 4 classes, orthonormal rows
    x = torch.randn(50, 12, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    z = x @ W.T
    y = z.argmax(1)
    radius = lip.certified_radius(z, y, lipschitz=lip.spectral_norm(_matrix_map(W), (12,)))
    for i in range(len(x)):
        # brute force over target classes: the distance to each decision boundary
        dists = [float((z[i, y[i]] - z[i, j]) / (W[y[i]] - W[j]).norm()) for j in range(4) if j != y[i]]
        assert radius[i].item() == pytest.approx(min(dists), rel=1e-9)
        j = [j for j in range(4) if j != y[i]][int(np.argmin(dists))]
        step = (W[j] - W[y[i]]) / (W[j] - W[y[i]]).norm()
        assert int(((x[i] + 1.001 * radius[i] * step) @ W.T).argmax()) != int(y[i])
        assert int(((x[i] + 0.999 * radius[i] * step) @ W.T).argmax()) == int(y[i])


def test_spectral_norm_matches_svd_for_a_matrix_and_a_conv():
    g = torch.Generator().manual_seed(2)
    A = torch.randn(7, 11, dtype=torch.float64, generator=g)
    sigma = lip.spectral_norm(_matrix_map(A), (11,), iters=500)
    assert sigma == pytest.approx(float(torch.linalg.svdvals(A)[0]), rel=1e-8)
    kernel = torch.randn(3, 2, 3, 3, dtype=torch.float64, generator=g)
    conv = lambda x: F.conv2d(x, kernel, padding=1)  # noqa: E731
    explicit = lip.explicit_matrix(conv, (1, 2, 5, 5))
    assert explicit.shape == (3 * 25, 2 * 25)
    sigma_conv = lip.spectral_norm(conv, (1, 2, 5, 5), iters=1000)
    assert sigma_conv == pytest.approx(float(torch.linalg.svdvals(explicit)[0]), rel=1e-6)


def test_orthogonality_checks_accept_qr_and_reject_a_perturbed_matrix():
    g = torch.Generator().manual_seed(3)
    Q, _ = torch.linalg.qr(torch.randn(9, 9, dtype=torch.float64, generator=g))
    bias = torch.randn(9, dtype=torch.float64, generator=g)
    affine = lambda x: x @ Q.T + bias  # noqa: E731
    assert lip.orthogonality_error(affine, (9,)) < 1e-12
    assert lip.is_orthogonal(affine, (9,))
    assert lip.jacobian_orthogonality_error(_matrix_map(Q), (9,)) < 1e-12
    # orthonormal columns (a tall isometry) pass too
    tall = Q[:, :5]
    assert lip.is_orthogonal(_matrix_map(tall), (5,))
    # 1e-4 away from orthogonal: both checks must fail at 1e-6
    bad = Q @ torch.diag(torch.tensor([1.0 + 1e-4] + [1.0] * 8, dtype=torch.float64))
    assert not lip.is_orthogonal(_matrix_map(bad), (9,), n_pairs=256)
    assert lip.jacobian_orthogonality_error(_matrix_map(bad), (9,)) > 1e-6
    # a generic matrix with spectral norm 1 is 1-Lipschitz but far from orthogonal
    A = torch.randn(9, 9, dtype=torch.float64, generator=g)
    A = A / torch.linalg.svdvals(A)[0]
    assert lip.orthogonality_error(_matrix_map(A), (9,)) > 0.1
    assert lip.jacobian_orthogonality_error(_matrix_map(A), (9,)) > 0.1

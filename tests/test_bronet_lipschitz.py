"""bronet_lipschitz: the layers and losses against independent references (explicit matrices, scipy's expm,
brute-force circular convolution, hand-computed losses). The smoke run, determinism and params come from
test_papers.py."""

import math
import time

import numpy as np
import pytest
import torch
from conftest import params_for
from scipy.linalg import expm
from torch.nn import functional as F

from flows.bronet_lipschitz import method
from tasks import lipschitz as lip

torch.set_num_threads(1)


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def test_block_reflector_is_the_reflection_across_range_v_complement():
    """Reference: with Q an orthonormal basis of range(V) (QR), the reflector is I - 2 Q Q^H."""
    V = torch.randn(3, 6, 2, dtype=torch.complex128, generator=_gen(0))
    W = method.block_reflector(V, eps_ratio=0.0)
    Q, _ = torch.linalg.qr(V)
    reference = torch.eye(6, dtype=V.dtype) - 2 * Q @ Q.mH
    assert torch.allclose(W, reference, atol=1e-12)
    assert torch.allclose(W.mH @ W, torch.eye(6, dtype=V.dtype).expand(3, 6, 6), atol=1e-12)
    assert torch.allclose(W, W.mH, atol=1e-12)  # symmetric (Hermitian) as well as orthogonal
    # the official eps regulariser keeps the norm at most 1 and moves the reflection slightly
    W_eps = method.block_reflector(V, eps_ratio=1e-5)
    assert float(torch.linalg.matrix_norm(W_eps, ord=2).max()) <= 1 + 1e-12
    assert 1e-9 < float((W_eps - W).abs().max()) < 1e-3


def test_fft_layer_is_a_circular_convolution():
    """Brute force: y[o, i, j] = sum_{c, a, b} K[o, c, a, b] x[c, (i - a) mod n, (j - b) mod n]."""
    n, c_in, c_out, k = 5, 2, 3, 3
    K = torch.randn(c_out, c_in, k, k, dtype=torch.float64, generator=_gen(1))
    x = torch.randn(1, c_in, n, n, dtype=torch.float64, generator=_gen(2))
    layer = method.FFTOrthoConv(c_in, c_out, k, n, pad=False).double()
    y = layer.circular(x, method.kernel_fft(K, n))
    reference = np.zeros((c_out, n, n))
    Kn, xn = K.numpy(), x[0].numpy()
    for o in range(c_out):
        for i in range(n):
            for j in range(n):
                reference[o, i, j] = sum(Kn[o, c, a, b] * xn[c, (i - a) % n, (j - b) % n]
                                         for c in range(c_in) for a in range(k) for b in range(k))
    assert np.allclose(y[0].numpy(), reference, atol=1e-10)


def _random_bro(c_in, c_out, size, eps, seed, rank=0.5, k=3):
    layer = method.BROConv(c_in, c_out, k, size, rank, eps).double()
    with torch.no_grad():
        layer.V.copy_(torch.randn(layer.V.shape, dtype=torch.float64, generator=_gen(seed)))
    return layer.eval()


def test_bro_conv_is_orthogonal_by_construction_and_the_padded_layer_is_only_one_lipschitz():
    layer = _random_bro(4, 4, 4, eps=0.0, seed=3)
    # the full circular operator on the padded grid: explicit Jacobian J^T J = I and random pairs
    assert lip.jacobian_orthogonality_error(layer.core, (1, 4, layer.n, layer.n)) < 1e-6
    assert lip.is_orthogonal(layer.core, (4, layer.n, layer.n), tol=1e-6)
    # pad + circular conv + crop (the official layer): spectral norm <= 1 by SVD, but not an isometry
    svals = torch.linalg.svdvals(lip.explicit_matrix(layer.linear, (1, 4, 4, 4)))
    assert float(svals[0]) <= 1 + 1e-9
    assert float(svals[-1]) < 0.99
    assert lip.spectral_norm(layer.linear, (1, 4, 4, 4), iters=300) == pytest.approx(float(svals[0]), rel=1e-4)
    # a rectangular layer c_out > c_in keeps orthonormal columns (circular operator restricted)
    wide = _random_bro(2, 6, 4, eps=0.0, seed=4)
    W = wide.matrices()[:, :, :2]
    assert torch.allclose(W.mH @ W, torch.eye(2, dtype=W.dtype).expand(len(W), 2, 2), atol=1e-10)
    # a 1x1 BRO layer on a 1x1 grid (the dense head): orthonormal rows, as a slice of an orthogonal matrix
    head = _random_bro(12, 4, 1, eps=0.0, seed=5, k=1)
    head_matrix = lip.explicit_matrix(head.linear, (1, 12, 1, 1))
    assert torch.allclose(head_matrix @ head_matrix.T, torch.eye(4, dtype=torch.float64), atol=1e-10)


def test_cayley_transform_is_orthogonal_and_matches_the_classic_formula():
    A = torch.randn(2, 5, 5, dtype=torch.complex128, generator=_gen(7))
    S = (A - A.mH)[0].numpy()
    # square case: (I + S)^{-1} (I - S) of the skew-Hermitian part, against numpy
    assert np.allclose(method.cayley(A)[0].numpy(), np.linalg.inv(np.eye(5) + S) @ (np.eye(5) - S), atol=1e-12)
    tall = method.cayley(torch.randn(3, 7, 4, dtype=torch.complex128, generator=_gen(8)))
    assert tall.shape == (3, 7, 4)
    assert torch.allclose(tall.mH @ tall, torch.eye(4, dtype=tall.dtype).expand(3, 4, 4), atol=1e-12)
    wide = method.cayley(torch.randn(3, 4, 7, dtype=torch.complex128, generator=_gen(9)))
    assert torch.allclose(wide @ wide.mH, torch.eye(4, dtype=wide.dtype).expand(3, 4, 4), atol=1e-12)


def test_cayley_conv_is_one_lipschitz_and_its_dense_head_orthonormal():
    layer = method.CayleyConv(3, 3, 3, 4).double()
    with torch.no_grad():
        layer.A.copy_(torch.randn(layer.A.shape, dtype=torch.float64, generator=_gen(10)))
        layer.alpha.fill_(3.0)
    layer.eval()
    W = layer.matrices()
    assert torch.allclose(W.mH @ W, torch.eye(3, dtype=W.dtype).expand(len(W), 3, 3), atol=1e-10)
    svals = torch.linalg.svdvals(lip.explicit_matrix(layer.linear, (1, 3, 4, 4)))
    assert float(svals[0]) <= 1 + 1e-9  # pad + crop: 1-Lipschitz, like BRO's layer
    head = method.CayleyConv(12, 4, 1, 1, dense=True).double().eval()
    M = lip.explicit_matrix(head.linear, (1, 12, 1, 1))
    assert torch.allclose(M @ M.T, torch.eye(4, dtype=torch.float64), atol=1e-10)


def test_soc_is_the_matrix_exponential_of_a_skew_symmetric_conv():
    layer = method.SOCConv(3, 3, 3, 4, train_terms=6, eval_terms=15, seed=0).double()
    layer.eval()
    skew = layer.scaled_skew().detach()
    S = lip.explicit_matrix(lambda x: F.conv2d(x, skew, padding=1), (1, 3, 4, 4))
    assert torch.allclose(S, -S.T, atol=1e-12)  # zero-padded conv with the flipped transpose kernel is its adjoint
    # scaled by the smallest of the four reshaped-kernel norms: a norm of order 1 (the bound is loose by <= k)
    assert 0.2 < float(torch.linalg.matrix_norm(S, ord=2)) < 3.0
    J = lip.explicit_matrix(layer.linear, (1, 3, 4, 4))
    assert np.allclose(J.numpy(), expm(S.numpy()), atol=1e-9)
    assert lip.jacobian_orthogonality_error(layer.linear, (1, 3, 4, 4)) < 1e-6


def _log_softmax(z):
    z = z - z.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def test_losses_against_hand_computation():
    p = params_for("bronet_lipschitz")
    z = torch.randn(6, 10, dtype=torch.float64, generator=_gen(8)) * 3
    y = torch.tensor([0, 3, 9, 2, 2, 7])
    offset = z.numpy().copy()
    offset[np.arange(6), y.numpy()] -= p.offset * math.sqrt(2)
    logp = _log_softmax(offset / p.temperature)[np.arange(6), y.numpy()]
    xent = -logp.mean() * p.temperature
    la = (p.la_alpha * (1 - np.exp(logp)) ** p.la_beta * -logp).mean() * p.temperature
    assert float(method.xent_loss(z, y, p)) == pytest.approx(xent, rel=1e-10)
    assert float(method.la_loss(z, y, p)) == pytest.approx(la, rel=1e-10)
    ce = -_log_softmax(z.numpy())[np.arange(6), y.numpy()].mean()
    assert float(method.ce_loss(z, y, p)) == pytest.approx(ce, rel=1e-10)
    # annealing: a point already classified with a large margin contributes (almost) nothing to LA, not to Xent
    big = torch.zeros(1, 10, dtype=torch.float64)
    big[0, 0] = 30.0
    assert float(method.la_loss(big, torch.tensor([0]), p)) < 1e-6 * float(method.xent_loss(z, y, p))


@pytest.mark.parametrize("kind", method.KINDS)
def test_networks_are_one_lipschitz(kind):
    p = params_for("bronet_lipschitz", channels=[4, 8], soc_eval_terms=15)
    model = method.build_model(kind, p, seed=11)
    if kind == "bro":  # move away from the identity-like init
        with torch.no_grad():
            for layer, _ in model.linear_layers():
                layer.V.add_(0.3 * torch.randn(layer.V.shape, generator=_gen(12)))
    model.eval()
    bound = model.lipschitz_bound(iters=100)
    assert bound <= 1 + 1e-4
    x = torch.rand(64, 64, generator=_gen(13))
    x2 = torch.rand(64, 64, generator=_gen(14))
    with torch.no_grad():
        ratio = (model(x) - model(x2)).norm(dim=1) / (x - x2).norm(dim=1)
    assert float(ratio.max()) <= 1 + 1e-4
    assert float(ratio.max()) > 0.05  # not a collapsed (constant) network


def test_run_config_certificate_is_sound_and_learns():
    p = params_for("bronet_lipschitz", epochs=3)
    out = method.run_config(p, seed=0, config="bro_la")
    assert out["clean_acc"] > 0.3  # well above chance (0.1) after 3 epochs
    assert out["violations"] == 0
    assert all(out["cert"][r] <= out["pgd"][r] + 1e-12 for r in p.radii_255)
    assert out["cert"][0] == pytest.approx(out["clean_acc"])
    assert out["orthogonality"]["core_error"] < 1e-4


def test_step_timing_interleaves_every_layer_and_ignores_waiting(monkeypatch):
    """The step clock is the thread's CPU time: a 100 ms wait inside every step (as another process's load
    would add) must not show up, while each layer still gets one positive time per repeat. The bound is the wait
    itself, not a guess at the CPU time: a loaded 2-core machine took 60 ms of CPU for these steps."""
    p = params_for("bronet_lipschitz", channels=[4], timing_repeats=3, timing_steps=2)
    loss = F.cross_entropy

    def waiting_loss(*args, **kwargs):
        time.sleep(0.1)
        return loss(*args, **kwargs)

    monkeypatch.setattr(method.F, "cross_entropy", waiting_loss)
    times = method.time_steps(p, seed=0)
    assert set(times) == {"bro", "cayley", "soc", "soc_twin"}
    assert all(len(v) == 3 and min(v) > 0 for v in times.values())
    assert max(max(v) for v in times.values()) < 0.1

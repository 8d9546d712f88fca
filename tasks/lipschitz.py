"""Lipschitz tools: margin certificates, spectral norms by power iteration, orthogonality checks.

* :func:`certified_radius` / :func:`certified_accuracy`: the Lipschitz-margin certificate of Tsuzuku et al.
  (2018) used by every orthogonal-network paper: an L-Lipschitz (l2) network whose logit margin
  ``z_y - max_{j != y} z_j`` is m cannot change its prediction within l2 radius ``m / (sqrt(2) L)``.
* :func:`spectral_norm`: the largest singular value of any linear map given as a function (a conv layer,
  an FFT-domain layer), by power iteration on ``A^T A`` with the adjoint from ``torch.func.vjp``.
* :func:`explicit_matrix`, :func:`orthogonality_error`, :func:`jacobian_orthogonality_error`,
  :func:`is_orthogonal`: checks that a layer is an isometry.

Shapes: a batch ``x`` is ``(n, ...)``; logits are ``(n, k)``; labels ``(n,)``. No Prefect here.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np
import torch

from paperflows.core.seeding import torch_generator

LinearMap = Callable[[torch.Tensor], torch.Tensor]


def logit_margins(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """``z_y - max_{j != y} z_j`` per sample, shape ``(n,)``: positive exactly where the prediction is
    right (a tie counts as wrong)."""
    logits = torch.as_tensor(logits)
    labels = torch.as_tensor(labels, dtype=torch.long)
    true = logits.gather(1, labels[:, None]).squeeze(1)
    others = logits.scatter(1, labels[:, None], -torch.inf)
    return true - others.max(dim=1).values


def certified_radius(logits: torch.Tensor, labels: torch.Tensor, lipschitz: float = 1.0) -> torch.Tensor:
    """The l2 radius ``margin / (sqrt(2) * L)`` within which an ``L``-Lipschitz network provably keeps its
    prediction, shape ``(n,)``; zero or negative where the clean prediction is already wrong.

    Why sqrt(2): a perturbation of size r moves each logit by at most L r in l2 jointly, so the
    difference of two logits ``(e_y - e_j)^T z`` moves by at most ``sqrt(2) L r``.
    """
    if lipschitz <= 0:
        raise ValueError(f"lipschitz must be positive, got {lipschitz}")
    return logit_margins(logits, labels) / (math.sqrt(2.0) * lipschitz)


def certified_accuracy(logits: torch.Tensor, labels: torch.Tensor, radii: Sequence[float],
                       lipschitz: float = 1.0) -> np.ndarray:
    """Fraction of samples whose certified radius is strictly above each radius, shape ``(len(radii),)``;
    at radius 0 this is the clean accuracy (ties count as wrong)."""
    radius = certified_radius(logits, labels, lipschitz)
    return np.array([float((radius > r).float().mean()) for r in radii])


def _unit(t: torch.Tensor) -> torch.Tensor:
    return t / t.norm().clamp_min(1e-30)


def spectral_norm(linear_fn: LinearMap, input_shape: Sequence[int], *, iters: int = 100, seed: int = 0,
                  dtype: torch.dtype = torch.float64, tol: float = 0.0) -> float:
    """Largest singular value of the linear map ``linear_fn`` on inputs of shape ``input_shape`` (one
    sample, batch dimension included if the function needs it, e.g. ``(1, c, h, w)``).

    Power iteration ``v <- A^T A v / ||A^T A v||`` from a seeded Gaussian start, the adjoint ``A^T``
    coming from ``torch.func.vjp`` (exact for any linear function, however it is implemented). Stops
    after ``iters`` steps or once the estimate changes by less than ``tol`` (relative). The estimate
    ``||A v||`` is a lower bound that converges to the norm from below.
    """
    v = _unit(torch.randn(tuple(input_shape), generator=torch_generator(seed), dtype=torch.float64).to(dtype))
    sigma = 0.0
    for _ in range(iters):
        out, pullback = torch.func.vjp(linear_fn, v)
        new_sigma = float(out.detach().norm())
        (back,) = pullback(out)
        v = _unit(back.detach())
        if tol > 0 and abs(new_sigma - sigma) <= tol * max(new_sigma, 1e-30):
            sigma = new_sigma
            break
        sigma = new_sigma
    with torch.no_grad():
        return max(sigma, float(linear_fn(v).norm()))


def explicit_matrix(linear_fn: LinearMap, input_shape: Sequence[int], dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """The matrix ``A`` (shape ``(out_dim, in_dim)``) of a linear function on inputs of ``input_shape``,
    column ``i`` being ``linear_fn(e_i)`` flattened: for tests on small layers only."""
    n = int(np.prod(input_shape))
    basis = torch.eye(n, dtype=dtype).reshape(n, *input_shape)
    with torch.no_grad():
        columns = [linear_fn(basis[i]).reshape(-1) for i in range(n)]
    return torch.stack(columns, dim=1)


def jacobian_orthogonality_error(linear_fn: LinearMap, input_shape: Sequence[int],
                                 dtype: torch.dtype = torch.float64) -> float:
    """``max |J^T J - I|`` (entrywise) for the explicit Jacobian ``J`` of a linear map: 0 for an isometry
    (orthogonal when square, orthonormal columns when the output is larger)."""
    J = explicit_matrix(linear_fn, input_shape, dtype)
    gram = J.T @ J
    return float((gram - torch.eye(gram.shape[0], dtype=gram.dtype)).abs().max())


def orthogonality_error(fn: Callable[[torch.Tensor], torch.Tensor], sample_shape: Sequence[int], *,
                        n_pairs: int = 64, seed: int = 0, dtype: torch.dtype = torch.float64) -> float:
    """``max |(||f(x) - f(x')|| / ||x - x'||) - 1|`` over ``n_pairs`` random Gaussian pairs; ``fn`` maps a
    batch ``(n, *sample_shape)`` to ``(n, ...)``. 0 for an isometry; works for affine maps (a bias
    cancels) and for nonlinear ones.
    """
    generator = torch_generator(seed)
    shape = (n_pairs, *tuple(sample_shape))
    x = torch.randn(shape, generator=generator, dtype=torch.float64).to(dtype)
    x2 = torch.randn(shape, generator=generator, dtype=torch.float64).to(dtype)
    with torch.no_grad():
        num = (fn(x) - fn(x2)).reshape(n_pairs, -1).norm(dim=1)
    den = (x - x2).reshape(n_pairs, -1).norm(dim=1)
    return float((num / den - 1.0).abs().max())


def is_orthogonal(fn: Callable[[torch.Tensor], torch.Tensor], sample_shape: Sequence[int], *, tol: float = 1e-6,
                  n_pairs: int = 64, seed: int = 0, dtype: torch.dtype = torch.float64) -> bool:
    """Whether the batched ``fn`` preserves distances to ``tol`` on random pairs (:func:`orthogonality_error`)."""
    return orthogonality_error(fn, sample_shape, n_pairs=n_pairs, seed=seed, dtype=dtype) <= tol

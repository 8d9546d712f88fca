"""Persistent homology of point clouds with gradients: Vietoris–Rips diagrams (H0, H1), total persistence
and the multi-scale (Reininghaus scale-space) persistence kernel, all differentiable in torch.

How the gradients flow (the standard way to back-propagate persistence, e.g. Gabrielsson et al. 2020,
Carrière et al. 2021): the persistence *pairing* is computed once by a library on the detached distances;
every finite bar of a flag (Rips) filtration is born and dies at the length of one edge, and the library
names the two vertices of each of those *critical edges*. Re-gathering these lengths as torch distances
between the named points gives the same diagram as a differentiable function of the points (piecewise
smooth: exact wherever the pairing does not change under a small move, i.e. for points in general position).

Why ``gudhi`` and not ``ripser``: ``gudhi.SimplexTree.flag_persistence_generators`` returns the vertex
indices of every pair's critical edges, which the gradient needs; ripser's Python API returns only the
(birth, death) values (its cocycles name simplices, not the edges that set the filtration values).

Shapes: a point cloud is ``(n, d)``; a diagram is ``(k, 2)`` rows of (birth, death), finite bars only (the
one essential H0 class, infinite, is dropped; a full Rips complex has no essential H1 class).
"""

from __future__ import annotations

from typing import Sequence

import gudhi
import numpy as np
import torch


def enclosing_radius(distances: np.ndarray) -> float:
    """min_i max_j d_ij: at this scale the Rips complex contains a cone (one vertex joined to all others), so
    every finite H0/H1 bar has died by then and none is born later (the threshold ripser uses)."""
    return float(np.min(np.max(distances, axis=1)))


def rips_critical_edges(distances: np.ndarray, max_dim: int = 1) -> dict[int, np.ndarray]:
    """The critical edges of the Vietoris–Rips persistence of a distance matrix ``(n, n)``, by gudhi.

    Returns ``{0: (k0, 2) int array [death edge u, v]}`` (H0 bars are born at 0, the vertex value) and, for
    ``q = 1..max_dim``, ``{q: (kq, 4) int array [birth edge u, v, death edge u, v]}``. Only finite bars.
    """
    if max_dim not in (0, 1, 2):
        raise ValueError(f"max_dim must be 0, 1 or 2, got {max_dim}")
    d = np.asarray(distances, dtype=float)
    if d.ndim != 2 or d.shape[0] != d.shape[1]:
        raise ValueError(f"need a square distance matrix, got shape {d.shape}")
    n = len(d)
    out: dict[int, np.ndarray] = {0: np.zeros((0, 2), dtype=np.int64)}
    out.update({q: np.zeros((0, 4), dtype=np.int64) for q in range(1, max_dim + 1)})
    if n < 2:
        return out
    # the enclosing radius bounds every finite death: cutting there gives the same finite diagram, faster
    complex_ = gudhi.RipsComplex(distance_matrix=d, max_edge_length=enclosing_radius(d))
    tree = complex_.create_simplex_tree(max_dimension=max_dim + 1)
    tree.compute_persistence(homology_coeff_field=2, persistence_dim_max=False)
    regular0, regular_higher, _, _ = tree.flag_persistence_generators()
    out[0] = np.asarray(regular0, dtype=np.int64).reshape(-1, 3)[:, 1:]
    for q, pairs in enumerate(regular_higher, start=1):
        if q <= max_dim:
            out[q] = np.asarray(pairs, dtype=np.int64).reshape(-1, 4)
    return out


def _edge_lengths(points: torch.Tensor, edges: np.ndarray) -> torch.Tensor:
    """|x_u - x_v| for each row (u, v) of ``edges`` ``(k, 2)``: shape (k,), differentiable in ``points``.
    Only the named pairs are formed, so a repeated point elsewhere cannot put a NaN into the gradient."""
    idx = torch.as_tensor(edges, dtype=torch.long)
    return (points[idx[:, 0]] - points[idx[:, 1]]).norm(dim=1)


def rips_diagrams(points: torch.Tensor, max_dim: int = 1) -> list[torch.Tensor]:
    """Vietoris–Rips persistence diagrams of a Euclidean point cloud ``(n, d)``, one ``(k_q, 2)`` tensor of
    (birth, death) per homology dimension ``q = 0..max_dim``, differentiable with respect to ``points``."""
    if points.dim() != 2:
        raise ValueError(f"points must be (n, d), got shape {tuple(points.shape)}")
    with torch.no_grad():
        distances = torch.cdist(points.detach().double(), points.detach().double()).numpy()
    edges = rips_critical_edges(distances, max_dim)
    deaths0 = _edge_lengths(points, edges[0])
    diagrams = [torch.stack([torch.zeros_like(deaths0), deaths0], dim=1)]
    for q in range(1, max_dim + 1):
        pairs = edges[q]
        diagrams.append(torch.stack([_edge_lengths(points, pairs[:, :2]), _edge_lengths(points, pairs[:, 2:])], dim=1))
    return diagrams


def total_persistence(diagram: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    """Pers^alpha = sum over the bars (b, d) of ``diagram`` ``(k, 2)`` of (d - b)^alpha; a scalar tensor."""
    return ((diagram[:, 1] - diagram[:, 0]).clamp_min(0.0) ** alpha).sum()


def total_persistence_distance(diagrams_x: Sequence[torch.Tensor], diagrams_y: Sequence[torch.Tensor],
                               alpha: float = 1.0) -> torch.Tensor:
    """sum_q |Pers^alpha_q(X) - Pers^alpha_q(Y)| over the homology dimensions of two lists of diagrams."""
    return sum(((total_persistence(a, alpha) - total_persistence(b, alpha)).abs()
                for a, b in zip(diagrams_x, diagrams_y, strict=True)), torch.zeros((), dtype=diagrams_x[0].dtype))


def _squared_distances(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """|a_i - b_j|^2, shape (k, m), from differences (no square root: smooth where two points coincide,
    as every p = q of k(F, F) does)."""
    return (a[:, None, :] - b[None, :, :]).pow(2).sum(-1)


def multiscale_kernel(diagram_f: torch.Tensor, diagram_g: torch.Tensor, sigma: float) -> torch.Tensor:
    """The persistence scale-space kernel of Reininghaus et al. (CVPR 2015) between diagrams ``(k, 2)`` and
    ``(m, 2)``:

        k_sigma(F, G) = 1 / (8 pi sigma) * sum_{p in F, q in G} exp(-|p - q|^2 / (8 sigma)) - exp(-|p - q'|^2 / (8 sigma)),

    with q' = (d, b) the mirror image of q = (b, d) in the diagonal (the heat-diffusion solution with the
    diagonal as a zero boundary). A scalar tensor, differentiable in both diagrams."""
    scale = 8.0 * sigma
    direct = torch.exp(-_squared_distances(diagram_f, diagram_g) / scale)
    mirror = torch.exp(-_squared_distances(diagram_f, diagram_g.flip(1)) / scale)
    return (direct - mirror).sum() / (np.pi * scale)


def multiscale_distance(diagram_f: torch.Tensor, diagram_g: torch.Tensor, sigma: float,
                        squared: bool = False) -> torch.Tensor:
    """The distance the kernel induces: d^2 = k(F, F) + k(G, G) - 2 k(F, G) (>= 0: the kernel is an inner
    product of feature maps). ``squared=False`` returns d (with its gradient kept finite at d = 0)."""
    d2 = (multiscale_kernel(diagram_f, diagram_f, sigma) + multiscale_kernel(diagram_g, diagram_g, sigma)
          - 2.0 * multiscale_kernel(diagram_f, diagram_g, sigma))
    return d2.clamp_min(0.0) if squared else d2.clamp_min(1e-18).sqrt()


def multiscale_kernel_loss(diagrams_x: Sequence[torch.Tensor], diagrams_y: Sequence[torch.Tensor],
                           sigma: float) -> torch.Tensor:
    """sum_q d_sigma(PD_q(X), PD_q(Y)) over the homology dimensions of two lists of diagrams."""
    return sum((multiscale_distance(a, b, sigma) for a, b in zip(diagrams_x, diagrams_y, strict=True)),
               torch.zeros((), dtype=diagrams_x[0].dtype))

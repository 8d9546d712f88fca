"""Minimum width for universal approximation with squashable activations (Shin, Kim, Hwang, Park,
ICML 2025), illustrated with trained deep narrow networks and exact lower bounds.

The theorem: with a *squashable* activation sigma (one that, alternately composed with affine maps,
approximates both the identity and the binary step), deep networks of width
``max(d_x, d_y, 2)`` are dense in L^p([0,1]^d_x, R^d_y), and width ``max(d_x, d_y, 2) - 1`` is not
(unless d_x = d_y = 1, where the bound needs sigma monotone).

Read top to bottom:

1. activations   -- the activations of the paper's examples and the controls (ReLU, ReLU6, ...);
2. squashability -- a numerical test of the sufficient condition (an interval where sigma is
                    strictly monotone and not affine) plus the two explicit constructions it
                    enables: identity by small-scale linearisation, binary step by iterating a
                    normalised S-shaped composition; their L^p errors against scale;
3. widths        -- the closed-form minimum widths (this paper; ReLU's max(d_x + 1, d_y));
4. targets       -- the three L^p targets on midpoint grids and the L^p error by midpoint quadrature;
5. lower bounds  -- exact best errors of width-(w* - 1) networks: isotonic (monotone) fits in 1-D,
                    the best monotone ridge function in 2-D, the best line for a 2-D output;
6. networks      -- a batch of independent narrow MLPs trained at once (stacked weight tensors,
                    one activation group per slice of the batch), full-batch Adam on a coarse
                    training grid, evaluation on the fine grid;
7. one job       -- ``run_job(p, target, depth, seeds)``: every activation x width x restart
                    for one target and one depth (``p`` the flow's typed params); ``run_bounds(p)``,
                    ``run_squash_demo(p)``.

No Prefect, no DVC. All randomness goes through explicit ``torch.Generator`` objects seeded from
(restart seed, target, activation, width, depth), so the same inputs give bit-identical results.
Shapes: R nets in a batch, B points, W = the largest width in the batch.
"""

from __future__ import annotations

import functools
import math
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from scipy.optimize import brentq
from sklearn.isotonic import IsotonicRegression

from flows.min_width_squashable.params import Params
from tasks.train import torch_single_thread

# --------------------------------------------------------------------------------------------
# 1. Activations
# --------------------------------------------------------------------------------------------

LEAKY_SLOPE = 0.1


def _step(x: torch.Tensor) -> torch.Tensor:
    return (x >= 0).to(x.dtype)


ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    # squashable by the paper's Lemma 4 (non-affine analytic) ...
    "sigmoid": torch.sigmoid,
    "tanh": lambda x: 2.0 * torch.sigmoid(2.0 * x) - 1.0,  # = tanh(x); torch.tanh is ~6x slower on this CPU
    "softplus": F.softplus,
    "gelu": F.gelu,
    "sin": torch.sin,
    "exp": torch.exp,
    "square": torch.square,                      # a non-affine polynomial
    # ... and by its Lemma 5 (piecewise continuously differentiable)
    "leaky_relu": lambda x: F.leaky_relu(x, LEAKY_SLOPE),
    "hardswish": F.hardswish,
    "elu": F.elu,
    # controls: not squashable (strictly monotone only where affine, or nowhere)
    "relu": torch.relu,
    "relu6": F.relu6,
    "hardtanh": F.hardtanh,
    "identity": lambda x: x,
    "affine": lambda x: 2.0 * x + 1.0,
    "step": _step,
}

# The paper's classification (Lemmas 4 and 5 for the first group): what the numerical test must find.
PAPER_SQUASHABLE = ("sigmoid", "tanh", "softplus", "gelu", "sin", "exp", "square", "leaky_relu", "hardswish", "elu")
NOT_SQUASHABLE = ("relu", "relu6", "hardtanh", "identity", "affine", "step")


def activation(name: str) -> Callable[[torch.Tensor], torch.Tensor]:
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation '{name}'; choose one of {', '.join(ACTIVATIONS)}")
    return ACTIVATIONS[name]


def _on_grid(name: str, x: np.ndarray) -> np.ndarray:
    return activation(name)(torch.as_tensor(x, dtype=torch.float64)).numpy()


SCAN = np.linspace(-8.0, 8.0, 16001)  # where the activation is inspected (step 1e-3)


def is_monotone(name: str, grid: np.ndarray = SCAN) -> bool:
    """True when sigma is non-decreasing or non-increasing on ``grid`` (the theorem's d_x = d_y = 1 case)."""
    d = np.diff(_on_grid(name, grid))
    return bool(np.all(d >= 0) or np.all(d <= 0))


# --------------------------------------------------------------------------------------------
# 2. Squashability: the sufficient condition and the two constructions
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class MonotonePiece:
    """An interval [lo, hi] where sigma is strictly monotone, and how far from affine it is there:
    ``nonaffinity`` = max |u(t) - t| of the normalised map u: [0,1] -> [0,1] (0 for an affine piece)."""

    lo: float
    hi: float
    nonaffinity: float


@functools.lru_cache(maxsize=64)
def strictly_monotone_pieces(name: str, min_points: int = 50) -> tuple[MonotonePiece, ...]:
    """Maximal runs of the scan grid (step 1e-3 on [-8, 8]) on which sigma is strictly increasing or
    strictly decreasing, each shortened by one grid step at both ends."""
    grid = SCAN
    y = _on_grid(name, grid)
    d = np.diff(y)
    scale = max(float(np.max(np.abs(y))), 1.0)
    sign = np.where(d > 1e-13 * scale, 1, np.where(d < -1e-13 * scale, -1, 0))
    pieces, start = [], 0
    for i in range(1, len(sign) + 1):
        if i == len(sign) or sign[i] != sign[start]:
            if sign[start] != 0 and i - start >= min_points:
                # drop one grid step at each end: a turning point lies within one step of a run's end
                a, b = start + 1, i - 1
                lo, hi = grid[a], grid[b]
                t = (grid[a:b + 1] - lo) / (hi - lo)
                u = (y[a:b + 1] - y[a]) / (y[b] - y[a])
                pieces.append(MonotonePiece(float(lo), float(hi), float(np.max(np.abs(u - t)))))
            start = i
    return tuple(pieces)


def normalised_map(name: str, piece: MonotonePiece) -> Callable[[np.ndarray], np.ndarray]:
    """u(t) = (sigma(lo + (hi - lo) t) - sigma(lo)) / (sigma(hi) - sigma(lo)): affine o sigma o affine,
    strictly increasing from [0,1] onto [0,1] (also for a decreasing piece)."""
    s_lo, s_hi = _on_grid(name, np.array([piece.lo, piece.hi]))

    def u(t: np.ndarray) -> np.ndarray:
        return (_on_grid(name, piece.lo + (piece.hi - piece.lo) * np.asarray(t)) - s_lo) / (s_hi - s_lo)

    return u


def _single_repelling_crossing(g: Callable[[np.ndarray], np.ndarray], n: int = 20001) -> float | None:
    """The interior fixed point c when g(t) < t on (0, c) and g(t) > t on (c, 1), else None.

    Then 0 and 1 attract every point of [0, c) and (c, 1]: the iterates g^k converge to the step
    1[t > c] on [0, 1] minus {c}."""
    t = np.linspace(0.0, 1.0, n)[1:-1]
    diff = g(t) - t
    tol = 1e-12
    neg, pos = diff < -tol, diff > tol
    if not neg.any() or not pos.any():
        return None
    last_neg, first_pos = np.nonzero(neg)[0].max(), np.nonzero(pos)[0].min()
    if last_neg >= first_pos:  # more than one crossing, or the wrong order
        return None
    lo, hi = float(t[last_neg]), float(t[first_pos])
    if first_pos - last_neg > 2:  # g(t) = t on a whole stretch: the fixed point is not isolated
        return None
    return float(brentq(lambda s: float(g(np.array([s]))[0]) - s, lo, hi, xtol=1e-15))


@dataclass(frozen=True)
class SquashMap:
    """g: [0,1] -> [0,1], strictly increasing, a composition of ``sigma_per_map`` normalised sigma maps
    with a single repelling interior fixed point ``c``; ``form`` names it (u, v, v o u, u o v)."""

    g: Callable[[np.ndarray], np.ndarray]
    c: float
    form: str
    sigma_per_map: int
    piece: MonotonePiece


def main_piece(name: str) -> MonotonePiece | None:
    """The longest strictly monotone piece on which sigma is not affine (ties: the more non-affine);
    the longest strictly monotone piece at all when sigma is affine wherever it is strictly monotone."""
    pieces = strictly_monotone_pieces(name)
    if not pieces:
        return None
    curved = [p for p in pieces if p.nonaffinity > NONAFFINE_TOL]
    return max(curved or pieces, key=lambda p: (round(p.hi - p.lo, 9), p.nonaffinity))


NONAFFINE_TOL = 1e-6


@functools.lru_cache(maxsize=64)
def find_squash_map(name: str) -> SquashMap | None:
    """Build the S-shaped map from the most non-affine strictly monotone piece of sigma.

    u is sigma on the piece, normalised; v(t) = 1 - u(1 - t) is its point reflection (also
    affine o sigma o affine). An S-shaped u (sigmoid, tanh, sin) is used as it is; a convex or
    concave one (softplus, exp, GELU, leaky ReLU) becomes S-shaped as v o u or u o v.
    Returns None when sigma has no strictly monotone, non-affine piece (ReLU, hard tanh, step, affine).
    """
    piece = main_piece(name)
    if piece is None or piece.nonaffinity <= NONAFFINE_TOL:
        return None
    u = normalised_map(name, piece)

    def v(t):
        return 1.0 - u(1.0 - np.asarray(t))

    candidates = [("u", u, 1), ("v", v, 1), ("v o u", lambda t: v(u(t)), 2), ("u o v", lambda t: u(v(t)), 2)]
    for form, g, k in candidates:
        c = _single_repelling_crossing(g)
        if c is not None:
            return SquashMap(g, c, form, k, piece)
    return None


def is_squashable(name: str) -> bool:
    """The numerical squashability test: sigma has an interval where it is strictly monotone and not
    affine, and from it an S-shaped composition (hence a binary-step approximant) can be built.
    The identity is then approximated by linearising sigma inside that interval."""
    return find_squash_map(name) is not None


def lp_norm_1d(values: np.ndarray, length: float, p: float = 2.0) -> float:
    """(integral |values|^p)^(1/p) over an interval of ``length`` sampled at midpoints (shape (n,))."""
    return float((np.mean(np.abs(values) ** p) * length) ** (1.0 / p))


def identity_approximation(name: str, eps: float, x: np.ndarray) -> np.ndarray | None:
    """phi(x) = (sigma(x0 + eps x) - sigma(x0)) / (eps sigma'(x0)) with x0 the point of largest |sigma'|
    inside ``main_piece``: affine o sigma o affine, strictly monotone while x0 + eps [-1, 1] stays in
    the piece; converges to x as eps -> 0 wherever sigma is differentiable at x0 with sigma' != 0."""
    piece = main_piece(name)
    if piece is None:
        return None
    inner = np.linspace(piece.lo, piece.hi, 2001)[100:-100]
    h = 1e-6
    slopes = (_on_grid(name, inner + h) - _on_grid(name, inner - h)) / (2 * h)
    k = int(np.argmax(np.abs(slopes)))
    x0, s0 = float(inner[k]), float(slopes[k])
    return (_on_grid(name, x0 + eps * x) - _on_grid(name, np.array([x0]))[0]) / (eps * s0)


def step_approximation(squash: SquashMap, iterations: int, x: np.ndarray) -> np.ndarray:
    """g^iterations(A x) with A(x) = c + x min(c, 1 - c): maps K = [-1, 1] into [0, 1] with 0 -> c, so
    the result approximates the binary step 1[x >= 0] on K (uses iterations * sigma_per_map sigmas)."""
    t = squash.c + np.asarray(x, dtype=float) * min(squash.c, 1.0 - squash.c)
    for _ in range(iterations):
        t = squash.g(t)
    return t


def squash_demo(name: str, epsilons: Sequence[float], iterations: Sequence[int], n_points: int = 4000,
                p: float = 2.0) -> dict:
    """L^p([-1, 1]) errors of the identity approximants (per eps) and of the step approximants (per
    number of iterations) for one activation; ``None`` entries where no construction exists."""
    x = -1.0 + 2.0 * (np.arange(n_points) + 0.5) / n_points
    squash = find_squash_map(name)
    out = {"activation": name, "squashable": squash is not None, "monotone": is_monotone(name),
           "form": squash.form if squash else None, "fixed_point": squash.c if squash else None,
           "piece": [squash.piece.lo, squash.piece.hi] if squash else None, "identity": [], "step": []}
    for eps in epsilons:
        phi = identity_approximation(name, eps, x)
        out["identity"].append({"eps": eps, "lp_error": None if phi is None else lp_norm_1d(phi - x, 2.0, p)})
    target = (x >= 0).astype(float)
    for k in iterations:
        if squash is None:
            out["step"].append({"iterations": k, "sigmas": None, "lp_error": None, "increasing": None})
            continue
        phi = step_approximation(squash, k, x)
        out["step"].append({"iterations": k, "sigmas": k * squash.sigma_per_map,
                            "lp_error": lp_norm_1d(phi - target, 2.0, p),
                            "increasing": bool(np.all(np.diff(phi) >= -1e-12))})
    return out


# --------------------------------------------------------------------------------------------
# 3. Closed-form minimum widths
# --------------------------------------------------------------------------------------------

def min_width_squashable(d_x: int, d_y: int, monotone: bool = True) -> int | None:
    """The paper's minimum width for L^p universal approximation with a squashable activation:
    max(d_x, d_y, 2); for d_x = d_y = 1 only when sigma is monotone (None: not covered)."""
    if d_x < 1 or d_y < 1:
        raise ValueError("dimensions must be positive")
    if d_x == d_y == 1 and not monotone:
        return None
    return max(d_x, d_y, 2)


def min_width_relu(d_x: int, d_y: int) -> int:
    """ReLU's minimum width for L^p universal approximation, max(d_x + 1, d_y) (Park et al., ICLR 2021)."""
    return max(d_x + 1, d_y)


# --------------------------------------------------------------------------------------------
# 4. Targets and the L^p error by midpoint quadrature
# --------------------------------------------------------------------------------------------

TARGETS = {
    # name: (d_x, d_y, description)
    "a": (1, 1, "sin(4 pi x) on [0,1]"),
    "b": (2, 1, "sin(pi x1) sin(pi x2) on [0,1]^2"),
    "c": (1, 2, "(cos 2 pi x, sin 2 pi x) on [0,1] (the circle)"),
}


def midpoint_grid(d: int, n_per_axis: int) -> np.ndarray:
    """Cell midpoints of the uniform grid on [0,1]^d, shape (n_per_axis^d, d)."""
    g = (np.arange(n_per_axis) + 0.5) / n_per_axis
    mesh = np.meshgrid(*([g] * d), indexing="ij")
    return np.stack([m.ravel() for m in mesh], axis=1)


def target_values(target: str, x: np.ndarray) -> np.ndarray:
    """f(x) for x of shape (n, d_x); returns shape (n, d_y)."""
    if target == "a":
        return np.sin(4 * np.pi * x[:, :1])
    if target == "b":
        return (np.sin(np.pi * x[:, 0]) * np.sin(np.pi * x[:, 1]))[:, None]
    if target == "c":
        return np.stack([np.cos(2 * np.pi * x[:, 0]), np.sin(2 * np.pi * x[:, 0])], axis=1)
    raise ValueError(f"unknown target '{target}'")


def target_grid(target: str, n_points_1d: int, n_per_axis_2d: int) -> tuple[np.ndarray, np.ndarray]:
    d_x = TARGETS[target][0]
    x = midpoint_grid(d_x, n_points_1d if d_x == 1 else n_per_axis_2d)
    return x, target_values(target, x)


def lp_error(pred: np.ndarray, truth: np.ndarray, p: float = 2.0) -> float:
    """||pred - truth||_{L^p([0,1]^d)} by the midpoint rule on a uniform grid (the unit cube has volume 1):
    (mean_i |pred_i - truth_i|_2^p)^(1/p), rows are grid points, columns output coordinates."""
    r = np.linalg.norm(np.atleast_2d((pred - truth).T).T, axis=1)
    return float(np.mean(r ** p) ** (1.0 / p))


# --------------------------------------------------------------------------------------------
# 5. Exact lower bounds for width w* - 1 (on the same grid, L^2)
# --------------------------------------------------------------------------------------------

def _isotonic_rmse(t: np.ndarray, y: np.ndarray, increasing: bool) -> float:
    """RMS residual of the best monotone function of t (ties in t share one value) fitted to y."""
    t = np.round(t, 12)  # exact ties in exact arithmetic stay ties in floating point
    fit = IsotonicRegression(increasing=increasing).fit(t, y)
    return float(np.sqrt(np.mean((fit.predict(t) - y) ** 2)))


def monotone_bound_1d(x: np.ndarray, y: np.ndarray) -> float:
    """(a) d_x = d_y = 1, width 1, monotone sigma: the network is a monotone function of x, so its
    L^2 error is at least that of the best non-decreasing or non-increasing fit (isotonic regression)."""
    return min(_isotonic_rmse(x[:, 0], y[:, 0], True), _isotonic_rmse(x[:, 0], y[:, 0], False))


def ridge_monotone_bound(x: np.ndarray, y: np.ndarray, n_angles: int = 360, refine: int = 3,
                         refine_steps: int = 101) -> dict:
    """(b) d_x = 2, d_y = 1, width 1, monotone sigma: the network is g(theta . x) with g monotone.
    Lower bound = min over directions theta of the best non-decreasing fit of y against theta . x
    (theta and -theta cover non-increasing g). Directions: a grid of ``n_angles`` on the circle,
    then a finer grid (``refine_steps`` over +- one grid step) around the ``refine`` best ones."""
    def rmse(angle: float) -> float:
        return _isotonic_rmse(x @ np.array([math.cos(angle), math.sin(angle)]), y[:, 0], True)

    angles = 2 * np.pi * np.arange(n_angles) / n_angles
    values = np.array([rmse(a) for a in angles])
    best_angle, best = float(angles[values.argmin()]), float(values.min())
    step = 2 * np.pi / n_angles
    for a0 in angles[np.argsort(values)[:refine]]:
        for a in a0 + np.linspace(-step, step, refine_steps):
            r = rmse(float(a))
            if r < best:
                best, best_angle = r, float(a)
    return {"bound": best, "angle_deg": math.degrees(best_angle) % 360.0, "grid_bound": float(values.min())}


def line_bound(y: np.ndarray) -> float:
    """(c) d_y = 2 with width 1: every output lies on one line a z + c, so the L^2 error is at least
    the RMS distance of the targets to their best line: sqrt(smallest eigenvalue of their covariance)."""
    cov = np.cov(y.T, bias=True)
    return float(np.sqrt(max(np.linalg.eigvalsh(cov)[0], 0.0)))


def width_deficit_bound(target: str, x: np.ndarray, y: np.ndarray, n_angles: int = 360) -> dict:
    """The lower bound on the L^2 error of any width-(w* - 1) network (monotone sigma for a, b)."""
    if target == "a":
        return {"bound": monotone_bound_1d(x, y), "kind": "best monotone fit (isotonic, both directions)"}
    if target == "b":
        out = ridge_monotone_bound(x, y, n_angles)
        return {**out, "kind": f"best monotone ridge function, {n_angles} directions + local refinement"}
    if target == "c":
        return {"bound": line_bound(y), "kind": "RMS distance to the best line (smallest principal axis)"}
    raise ValueError(f"unknown target '{target}'")


# --------------------------------------------------------------------------------------------
# 6. A batch of independent narrow MLPs
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class NetSpec:
    activation: str
    width: int
    seed: int


def linearisation(name: str, h: float = 1e-4) -> tuple[float, float, float]:
    """(x0, sigma'(x0), sigma(x0)) with x0 = 0 where sigma is differentiable at 0 with sigma'(0) != 0
    (one-sided slopes agree), else x0 = 1 (ReLU, leaky ReLU: their linear piece): sigma(x) ~ sigma(x0)
    + sigma'(x0) (x - x0) near x0, the paper's identity approximant at small scale."""
    for x0 in (0.0, 1.0):
        v = _on_grid(name, np.array([x0 - h, x0, x0 + h]))
        left, right = (v[1] - v[0]) / h, (v[2] - v[1]) / h
        if abs(left - right) <= 1e-2 * max(abs(left), abs(right)) and abs(left + right) > 1e-6:
            return x0, float((v[2] - v[0]) / (2 * h)), float(v[1])
    raise ValueError(f"{name}: no point of {{0, 1}} where it is differentiable with a non-zero slope")


def net_seed(seed: int, target: str, act: str, width: int, depth: int) -> int:
    """A 63-bit seed for one network, from the restart seed and the network's identity."""
    return (seed * 1_000_003 + zlib.crc32(f"{target}|{act}|{width}|{depth}".encode())) % (2 ** 63)


def layer_shapes(d_x: int, d_y: int, width: int, depth: int) -> list[tuple[int, int]]:
    """(fan_in, fan_out) of every affine map of a width-``width`` network with ``depth`` hidden layers:
    d_x -> width, (depth - 1) x width -> width, width -> d_y."""
    if width < 1 or depth < 1:
        raise ValueError("width and depth must be positive")
    return [(d_x, width)] + [(width, width)] * (depth - 1) + [(width, d_y)]


class NarrowMLPBatch(torch.nn.Module):
    """R independent fully connected networks x (d_x) -> [affine -> sigma] x depth -> affine (d_y).

    Net r has ``specs[r].width`` units per hidden layer; it is stored in a W-wide slot (W = the
    largest width) whose extra units have zero weights into and out of them, kept at zero by masking
    their gradients (:meth:`mask_gradients`), so they never influence the output. Nets are grouped by activation in
    contiguous slices of the batch dimension. Points run along the last axis (B), which keeps the
    tiny batched matrix products fast. Parameters per net: w_in (W, d_x), b_in (W, 1), for each of
    the depth - 1 hidden-to-hidden maps w (W, W) and b (W, 1), w_out (d_y, W), b_out (d_y, 1); the hidden maps are stacked along a leading depth-1 axis.

    ``init="identity"`` starts every hidden-to-hidden map at sigma's linearisation at x0 (0, or 1 for
    ReLU-like kinks at 0; :func:`linearisation`), the paper's identity approximant: pre-activation
    (h - sigma(x0)) / sigma'(x0) + x0 so that sigma(pre) ~ h, plus
    Gaussian noise of scale ``noise``; ``init="glorot"`` is the usual Glorot-normal start (``init`` may
    map activation names to either). The first and last maps are Glorot-normal in both cases.
    """

    def __init__(self, specs: Sequence[NetSpec], d_x: int, d_y: int, depth: int, target: str,
                 init: str | dict[str, str] = "identity", noise: float = 0.3):
        super().__init__()
        names = [s.activation for s in specs]
        if any(names.index(n) < i and names[i - 1] != n for i, n in enumerate(names)):
            raise ValueError("specs must be grouped by activation")
        self.specs, self.depth, self.d_x, self.d_y = list(specs), depth, d_x, d_y
        R, W = len(specs), max(s.width for s in specs)
        self.group_sizes: list[int] = []
        self.group_fns: list[Callable] = []
        for i, n in enumerate(names):
            if i and names[i - 1] == n:
                self.group_sizes[-1] += 1
            else:
                self.group_sizes.append(1)
                self.group_fns.append(activation(n))
        unit = torch.zeros(R, W, 1)
        w_in, b_in = torch.zeros(R, W, d_x), torch.zeros(R, W, 1)
        w_hid, b_hid = torch.zeros(depth - 1, R, W, W), torch.zeros(depth - 1, R, W, 1)
        w_out, b_out = torch.zeros(R, d_y, W), torch.zeros(R, d_y, 1)
        for r, s in enumerate(specs):
            g = torch.Generator().manual_seed(net_seed(s.seed, target, s.activation, s.width, depth))
            w = s.width
            how = init if isinstance(init, str) else init.get(s.activation, "identity")
            if how not in ("identity", "glorot"):
                raise ValueError(f"unknown init '{how}'")
            unit[r, :w, 0] = 1.0
            w_in[r, :w, :] = torch.randn(w, d_x, generator=g) * math.sqrt(2.0 / (d_x + w))
            b_in[r, :w, 0] = 0.1 * torch.randn(w, generator=g)
            x0, s0, c0 = linearisation(s.activation)
            for layer in range(depth - 1):
                if how == "identity":  # pre = (h - sigma(x0)) / sigma'(x0) + x0, so sigma(pre) ~ h
                    w_hid[layer, r, :w, :w] = torch.eye(w) / s0 + noise * torch.randn(w, w, generator=g) / math.sqrt(w)
                    b_hid[layer, r, :w, 0] = x0 - c0 / s0 + noise * torch.randn(w, generator=g)
                else:
                    w_hid[layer, r, :w, :w] = torch.randn(w, w, generator=g) * math.sqrt(1.0 / w)
                    b_hid[layer, r, :w, 0] = 0.1 * torch.randn(w, generator=g)
            w_out[r, :, :w] = torch.randn(d_y, w, generator=g) * math.sqrt(2.0 / (w + d_y))
        self.register_buffer("mask_in", unit.clone())                          # (R, W, 1): rows
        self.register_buffer("mask_hid", unit * unit.transpose(1, 2))          # (R, W, W): rows and columns
        self.register_buffer("mask_out", unit.transpose(1, 2).clone())         # (R, 1, W): columns
        self.w_in, self.b_in = torch.nn.Parameter(w_in), torch.nn.Parameter(b_in)
        self.w_hid, self.b_hid = torch.nn.Parameter(w_hid), torch.nn.Parameter(b_hid)  # (depth-1, R, ...)
        self.w_out, self.b_out = torch.nn.Parameter(w_out), torch.nn.Parameter(b_out)

    def _act(self, z: torch.Tensor) -> torch.Tensor:
        if len(self.group_fns) == 1:
            return self.group_fns[0](z)
        return torch.cat([fn(part) for fn, part in zip(self.group_fns, z.split(self.group_sizes))])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (d_x, B), the same points for every net; returns (R, d_y, B).

        A padded unit j of a narrower net has zero weights in and out (and zero bias): it computes
        sigma(0) and passes nothing on. ``mask_gradients`` keeps those weights at zero in training."""
        h = self._act(torch.baddbmm(self.b_in, self.w_in, x.expand(len(self.specs), *x.shape)))
        for w, b in zip(self.w_hid, self.b_hid):
            h = self._act(torch.baddbmm(b, w, h))
        return torch.baddbmm(self.b_out, self.w_out, h)

    def mask_gradients(self) -> None:
        """Zero the gradients of every weight into or out of a padded unit (call after backward)."""
        for p, mask in ((self.w_in, self.mask_in), (self.b_in, self.mask_in), (self.w_hid, self.mask_hid),
                        (self.b_hid, self.mask_in), (self.w_out, self.mask_out)):
            if p.grad is not None:
                p.grad.mul_(mask)


def train_batch(model: NarrowMLPBatch, x_train: np.ndarray, y_train: np.ndarray, x_eval: np.ndarray,
                y_eval: np.ndarray, *, steps: int, lr: float, betas: tuple[float, float] = (0.9, 0.999),
                eps: float = 1e-8) -> np.ndarray:
    """Full-batch Adam with a cosine learning-rate decay from lr to lr/100 on the sum over nets of each
    net's mean squared error on the training grid (so every net follows its own gradient); returns
    each net's L^2 error on the evaluation grid, shape (R,). Deterministic: nothing is sampled.

    Adam is written out (Kingma & Ba, with bias correction) rather than taken from torch.optim, whose
    first step imports torch._dynamo (seconds per process)."""
    X = torch.as_tensor((2.0 * x_train - 1.0).T, dtype=torch.float32)  # (d_x, B), centred on [-1, 1]^d_x
    Y = torch.as_tensor(y_train.T, dtype=torch.float32)  # (d_y, B)
    params = list(model.parameters())
    m1 = [torch.zeros_like(p) for p in params]
    m2 = [torch.zeros_like(p) for p in params]
    b1, b2 = betas
    for step in range(1, steps + 1):
        for p in params:
            p.grad = None
        loss = ((model(X) - Y) ** 2).sum(dim=1).mean(dim=1).sum()
        loss.backward()
        model.mask_gradients()
        rate = lr / 100 + (lr - lr / 100) * 0.5 * (1 + math.cos(math.pi * (step - 1) / steps))
        step_size = rate * math.sqrt(1 - b2 ** step) / (1 - b1 ** step)
        with torch.no_grad():
            for p, a, v in zip(params, m1, m2):
                a.mul_(b1).add_(p.grad, alpha=1 - b1)
                v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                p.addcdiv_(a, v.sqrt().add_(eps * math.sqrt(1 - b2 ** step)), value=-step_size)
    with torch.no_grad():
        pred = model(torch.as_tensor((2.0 * x_eval - 1.0).T, dtype=torch.float32)).double().numpy()
    pred = pred.transpose(0, 2, 1)  # (R, N, d_y)
    errors = np.array([lp_error(pred[r], y_eval, 2.0) for r in range(len(model.specs))])
    return np.where(np.isfinite(errors), errors, np.inf)


# --------------------------------------------------------------------------------------------
# 7. One job: one target, one depth, every activation x width x restart
# --------------------------------------------------------------------------------------------

def job_specs(target: str, activations: Sequence[str], width_offsets: Sequence[int], seeds: Sequence[int],
              nonmonotone_activation: str | None = None) -> list[NetSpec]:
    """The nets of one (target, depth) job: widths w* + offset (those >= 1) for every activation of
    ``activations`` (all monotone), and width 1 with ``nonmonotone_activation`` on target (a) (the
    theorem's d_x = d_y = 1 exception). Grouped by activation, as :class:`NarrowMLPBatch` needs."""
    d_x, d_y, _ = TARGETS[target]
    w_star = min_width_squashable(d_x, d_y)
    specs = [NetSpec(a, w, s) for a in activations for w in (w_star + o for o in width_offsets) if w >= 1 for s in seeds]
    if target == "a" and nonmonotone_activation:
        specs += [NetSpec(nonmonotone_activation, 1, s) for s in seeds]
    return specs


def run_job(p: Params, target: str, depth: int, seeds: Sequence[int]) -> dict:
    """Train every net of ``job_specs`` at ``depth`` on the grid of ``target``, one torch thread.

    Reads from ``p``: activations, width_offsets, nonmonotone_activation, n_points_1d, n_per_axis_2d
    (evaluation grids), n_train_1d, n_train_2d (training grids), steps, lr, init (activation ->
    "identity" / "glorot"), init_noise. Returns {"target", "depth", "seconds", "rows"}, one row per
    net: target, depth, activation, width, seed, l2_error (on the evaluation grid).
    """
    started = time.perf_counter()
    d_x, d_y, _ = TARGETS[target]
    x, y = target_grid(target, p.n_points_1d, p.n_per_axis_2d)
    x_train, y_train = target_grid(target, p.n_train_1d, p.n_train_2d)
    specs = job_specs(target, p.activations, p.width_offsets, seeds, p.nonmonotone_activation)
    with torch_single_thread():
        model = NarrowMLPBatch(specs, d_x, d_y, depth, target, p.init, p.init_noise)
        errors = train_batch(model, x_train, y_train, x, y, steps=p.steps, lr=p.lr)
    rows = [{"target": target, "depth": depth, "activation": s.activation, "width": s.width, "seed": s.seed,
             "l2_error": float(e)} for s, e in zip(specs, errors)]
    return {"target": target, "depth": depth, "seconds": time.perf_counter() - started, "rows": rows}


def run_bounds(p: Params) -> dict:
    """The width-(w* - 1) lower bound and the target's own L^2 norm for each target, on the evaluation
    grids of ``p`` (n_points_1d, n_per_axis_2d) with ``p.lb_angles`` directions for target (b)."""
    out = {}
    for target, (d_x, d_y, text) in TARGETS.items():
        x, y = target_grid(target, p.n_points_1d, p.n_per_axis_2d)
        bound = width_deficit_bound(target, x, y, p.lb_angles)
        out[target] = {**bound, "d_x": d_x, "d_y": d_y, "description": text, "n_grid": len(x),
                       "w_star": min_width_squashable(d_x, d_y), "relu_width": min_width_relu(d_x, d_y),
                       "target_l2_norm": lp_error(y, np.zeros_like(y)),
                       "best_constant_error": lp_error(y, np.broadcast_to(y.mean(0), y.shape))}
    return out


def run_squash_demo(p: Params) -> list[dict]:
    """``squash_demo`` for every activation of ``p.demo_activations`` at ``p.demo_epsilons`` and
    ``p.demo_iterations``."""
    return [squash_demo(a, p.demo_epsilons, p.demo_iterations) for a in p.demo_activations]

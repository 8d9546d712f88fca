"""Sharpness dynamics of the minimalist model (Yoo, Song, Yun, ICML 2025): a deep linear network with
one neuron per layer, trained by GD / SGD, with its exact Hessian at every step; plus a small tanh MLP
on digits whose sharpness comes from power iteration on Hessian-vector products.

The minimalist model of depth D on inputs x in R^d (parameters theta = (w, v), P = d + D - 1 numbers):

    f(x) = p * <w, x>,   w in R^d (first layer),   v in R^(D-1) (the scalar layers),   p = prod_j v_j
    L(theta) = 1/(2n) * sum_i (f(x_i) - y_i)^2 = 1/(2n) ||p X w - y||^2          X: (n, d), y: (n,)

Everything the full-batch loss needs is the sufficient statistic (G, c, yy) = (X^T X / n, X^T y / n,
y^T y / n), so loss, gradient and the exact P x P Hessian cost O(d^2) per run, whatever n is.

Closed forms used as references (derived here, see the flow's notes):
* every global minimum has end-to-end vector p w = beta* = X^+ y; the dataset difficulty is
  Q = ||beta*||^2 (= y^T (X X^T)^{-1} y when n <= d);
* gradient flow conserves ||w||^2 - v_j^2, so a balanced start (||w|| = |v_j|) ends at the balanced
  minimum ||w|| = |v_j| = Q^(1/(2D)), whose sharpness is
      S*(Q, D) = Q^((D-1)/D) * lambda_max( (X X^T + (D-1) X u u^T X^T) / n ),   u = beta*/||beta*||;
  the residual part of the Hessian vanishes there because X^T r = 0 at a least-squares solution;
* GD with step eta cannot stay where the sharpness exceeds 2/eta, so the terminal sharpness of GD is
  predicted to be min(S*, 2/eta) (progressive sharpening, then the edge of stability).

Randomness comes only from explicit generators (``np.random.default_rng``, ``torch.Generator``).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from flows.sharpness_minimalist.params import Params
from tasks.train import torch_single_thread

# ----------------------------------------------------------------------------------------------
# Data and closed-form predictions
# ----------------------------------------------------------------------------------------------


def make_inputs(n: int, d: int, decay: float, rng: np.random.Generator) -> np.ndarray:
    """Inputs X (n, d), rows ~ N(0, Sigma) with Sigma = diag(k^-decay), k = 1..d (decay 0: isotropic)."""
    scales = np.arange(1, d + 1, dtype=float) ** (-decay / 2.0)
    return rng.standard_normal((n, d)) * scales


def make_labels(X: np.ndarray, beta_norms: list[float], noise_levels: list[float], rng: np.random.Generator
                ) -> np.ndarray:
    """Labels (len(noise_levels), n): y = X beta_k + sigma_k * eps for level k, with one teacher direction
    (random, scaled to norm beta_norms[k]) and one eps ~ N(0, I_n) shared by all levels, so a level differs
    only by its teacher norm and its noise."""
    direction = rng.standard_normal(X.shape[1])
    direction /= np.linalg.norm(direction)
    eps = rng.standard_normal(X.shape[0])
    return np.stack([X @ (b * direction) + s * eps for b, s in zip(beta_norms, noise_levels)])


def optimum(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    """Minimum-norm least-squares end-to-end vector beta* = X^+ y (d,) and the difficulty Q = ||beta*||^2."""
    beta = np.linalg.lstsq(X, y, rcond=None)[0]
    return beta, float(beta @ beta)


def predicted_sharpness(X: np.ndarray, y: np.ndarray, depth: int) -> float:
    """S*(Q, D): the top Hessian eigenvalue at the balanced global minimum (closed form, see module doc)."""
    n = X.shape[0]
    beta, Q = optimum(X, y)
    Xu = X @ (beta / np.sqrt(Q))
    M = (X @ X.T + (depth - 1) * np.outer(Xu, Xu)) / n
    return float(Q ** ((depth - 1) / depth) * np.linalg.eigvalsh(M)[-1])


def balanced_minimum(X: np.ndarray, y: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """The balanced global minimum (w (d,), v (D-1,)): ||w|| = v_j = Q^(1/(2D)), p w = beta*."""
    beta, Q = optimum(X, y)
    s = Q ** (1.0 / (2 * depth))
    return beta / np.sqrt(Q) * s, np.full(depth - 1, s)


# ----------------------------------------------------------------------------------------------
# The minimalist model, batched over runs: B runs, each with its own data, depth, step size.
# Depths are padded to m = max(D) - 1 scalar layers; a padded layer holds v = 1 and never moves.
# ----------------------------------------------------------------------------------------------


def _exclusive_products(V: np.ndarray) -> np.ndarray:
    """q_j = prod_{k != j} v_k for V (B, m) -> (B, m), without dividing (v may be 0)."""
    left = np.ones_like(V)
    right = np.ones_like(V)
    left[:, 1:] = np.cumprod(V[:, :-1], axis=1)
    right[:, :-1] = np.cumprod(V[:, :0:-1], axis=1)[:, ::-1]
    return left * right


def _pair_products(V: np.ndarray) -> np.ndarray:
    """q_jk = prod_{l != j, k} v_l for j != k and 0 on the diagonal: (B, m) -> (B, m, m)."""
    m = V.shape[1]
    idx = np.arange(m)
    skip = (idx[None, None, :] == idx[:, None, None]) | (idx[None, None, :] == idx[None, :, None])
    Q2 = np.where(skip[None], 1.0, V[:, None, None, :]).prod(-1)
    Q2[:, idx, idx] = 0.0
    return Q2


def sufficient_stats(X: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(G, c, yy) = (X^T X/n (B, d, d), X^T y/n (B, d), y^T y/n (B,)) for X (B, n, d), Y (B, n)."""
    n = X.shape[1]
    G = np.matmul(X.transpose(0, 2, 1), X) / n
    c = np.matmul(Y[:, None, :], X)[:, 0] / n
    return G, c, (Y * Y).sum(1) / n


def loss(W: np.ndarray, V: np.ndarray, G: np.ndarray, c: np.ndarray, yy: np.ndarray) -> np.ndarray:
    """Full-batch loss (B,) of runs W (B, d), V (B, m) from their sufficient statistics."""
    p = V.prod(1)
    Gw = np.matmul(G, W[:, :, None])[:, :, 0]
    return 0.5 * (p * p * (W * Gw).sum(1) - 2 * p * (W * c).sum(1) + yy)


def gradient(W: np.ndarray, V: np.ndarray, X: np.ndarray, Y: np.ndarray, weights: np.ndarray,
             layer_mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Gradient of the weighted loss 1/2 sum_i a_i (f(x_i) - y_i)^2 for X (B, n, d), Y (B, n),
    weights a (B, n) (1/n for GD, 1/b on a mini-batch for SGD): returns (dW (B, d), dV (B, m))."""
    p = V.prod(1)
    z = np.matmul(X, W[:, :, None])[:, :, 0]
    ar = weights * (p[:, None] * z - Y)
    dW = p[:, None] * np.matmul(ar[:, None, :], X)[:, 0]
    dV = _exclusive_products(V) * (z * ar).sum(1)[:, None] * layer_mask
    return dW, dV


def hessian(W: np.ndarray, V: np.ndarray, G: np.ndarray, c: np.ndarray, layer_mask: np.ndarray) -> np.ndarray:
    """Exact Hessian (B, P, P), P = d + m, of the full-batch loss; rows/columns of padded layers are 0.

    With z = X w, r = p z - y:  H = J^T J / n + sum_i r_i/n * Hess f(x_i), J = [p X, z q^T], so
      H_ww = p^2 G,   H_wv = (p G w + X^T r/n) q^T,   H_vv = (w^T G w) q q^T + (z^T r/n) Q2,
    with X^T r/n = p G w - c and z^T r/n = p w^T G w - w^T c.
    """
    B, d = W.shape
    m = V.shape[1]
    p = V.prod(1)
    q = _exclusive_products(V) * layer_mask
    Gw = np.matmul(G, W[:, :, None])[:, :, 0]
    wGw = (W * Gw).sum(1)
    xr = p[:, None] * Gw - c
    zr = p * wGw - (W * c).sum(1)
    H = np.empty((B, d + m, d + m))
    H[:, :d, :d] = (p * p)[:, None, None] * G
    Hwv = (p[:, None] * Gw + xr)[:, :, None] * q[:, None, :]
    H[:, :d, d:] = Hwv
    H[:, d:, :d] = Hwv.transpose(0, 2, 1)
    pair = _pair_products(V) * (layer_mask[:, :, None] & layer_mask[:, None, :])
    H[:, d:, d:] = wGw[:, None, None] * q[:, :, None] * q[:, None, :] + zr[:, None, None] * pair
    return H


def top_eigenvalue(H: np.ndarray) -> np.ndarray:
    """Sharpness lambda_max of each symmetric matrix in H (B, P, P) -> (B,). Padded zero rows only add
    zero eigenvalues, and trace(H) = ||J||^2/n >= 0 keeps lambda_max >= 0, so they never change it."""
    return np.linalg.eigvalsh(H)[:, -1]


def initial_parameters(depths: np.ndarray, d: int, init_norm: float, rng: np.random.Generator
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Balanced small init per run: ||w|| = v_j = alpha with alpha^D = init_norm (end-to-end norm).
    Returns W (B, d) (random directions), V (B, m) (padded with ones), layer mask (B, m) bool."""
    B, m = len(depths), int(max(depths)) - 1
    alpha = init_norm ** (1.0 / depths.astype(float))
    direction = rng.standard_normal((B, d))
    W = direction / np.linalg.norm(direction, axis=1, keepdims=True) * alpha[:, None]
    mask = np.arange(m)[None, :] < (depths[:, None] - 1)
    V = np.where(mask, alpha[:, None], 1.0)
    return W, V, mask


def train_minimalist(X: np.ndarray, Y: np.ndarray, depths: np.ndarray, etas: np.ndarray, batch_sizes: np.ndarray,
                     steps: int, init_norm: float, rng: np.random.Generator, record_every: int = 1) -> dict:
    """GD (batch size = n) or SGD (mini-batches of b distinct examples, fresh every step) on B runs at once.

    X (B, n, d), Y (B, n), depths / etas / batch_sizes (B,). The exact full-batch sharpness and loss are
    recorded at steps 0, record_every, ... and at the last step. A run whose parameters become non-finite
    or whose end-to-end norm |p| ||w|| exceeds 1e6 is frozen (sharpness and loss NaN) and marked diverged. Returns arrays: steps (R,), sharpness (R, B),
    loss (R, B), diverged (B,), W (B, d), V (B, m).
    """
    B, n, d = X.shape
    G, c, yy = sufficient_stats(X, Y)
    W, V, mask = initial_parameters(depths, d, init_norm, rng)
    stochastic = batch_sizes < n
    alive = np.ones(B, bool)
    weights = np.full((B, n), 1.0 / n)
    rec_steps, rec_sharp, rec_loss = [], [], []
    record_at = set(range(0, steps + 1, record_every)) | {steps}
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(steps + 1):
            if t in record_at:
                rec_steps.append(t)
                rec_loss.append(np.where(alive, loss(W, V, G, c, yy), np.nan))
                sharp = np.full(B, np.nan)
                if alive.any():
                    sharp[alive] = top_eigenvalue(hessian(W[alive], V[alive], G[alive], c[alive], mask[alive]))
                rec_sharp.append(sharp)
            if t == steps:
                break
            if stochastic.any():
                ranks = rng.random((int(stochastic.sum()), n)).argsort(1).argsort(1)
                bs = batch_sizes[stochastic][:, None]
                weights[stochastic] = (ranks < bs) / bs
            dW, dV = gradient(W, V, X, Y, weights, mask)
            W = W - np.where(alive, etas, 0.0)[:, None] * dW
            V = V - np.where(alive, etas, 0.0)[:, None] * dV
            bad = ~np.isfinite(W).all(1) | ~np.isfinite(V).all(1) | (np.abs(V.prod(1)) * np.linalg.norm(W, axis=1) > 1e6)
            if (bad & alive).any():
                alive &= ~bad
                W = np.where(alive[:, None], W, 0.0)
                V = np.where(alive[:, None], V, 0.0)
    return {"steps": np.array(rec_steps), "sharpness": np.array(rec_sharp), "loss": np.array(rec_loss),
            "diverged": ~alive, "W": W, "V": V}


# ----------------------------------------------------------------------------------------------
# Power iteration on Hessian-vector products (any torch loss), and a tanh MLP on digits
# ----------------------------------------------------------------------------------------------


def power_iteration(hvp, v0: torch.Tensor, iters: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Top eigenvalue of blocks of a symmetric operator by power iteration.

    ``hvp(v)`` maps v (L, P) to (H_1 v_1, ..., H_L v_L) for L independent P x P blocks. Returns the Rayleigh
    quotients (L,) and the last unit vectors (L, P). Power iteration converges to the eigenvalue of largest
    magnitude; near a minimum of a training loss that is the top (positive) eigenvalue, the sharpness.
    """
    v = v0 / v0.norm(dim=1, keepdim=True)
    eig = torch.zeros(v.shape[0], dtype=v.dtype)
    for _ in range(iters):
        hv = hvp(v)
        eig = (hv * v).sum(1)
        v = hv / hv.norm(dim=1, keepdim=True).clamp_min(1e-30)
    return eig, v


def init_mlp(n_in: int, hidden: int, levels: int, generator: torch.Generator) -> torch.Tensor:
    """One 3-layer tanh MLP (n_in -> hidden -> hidden -> 1) copied for each of L levels (paired starts),
    PyTorch's default uniform(+-1/sqrt(fan_in)) init. Returns the flat parameters (L, P), laid out as
    W1 (n_in, hidden), b1, W2 (hidden, hidden), b2, W3 (hidden, 1), b3 (see ``mlp_loss``)."""
    shapes = [(n_in, hidden), (hidden,), (hidden, hidden), (hidden,), (hidden, 1), (1,)]
    fans = [n_in, n_in, hidden, hidden, hidden, hidden]
    parts = [(torch.rand(int(np.prod(s)), generator=generator, dtype=torch.float64) * 2 - 1) / np.sqrt(f)
             for s, f in zip(shapes, fans)]
    flat = torch.cat(parts)
    return flat.repeat(levels, 1)


def mlp_loss(theta: torch.Tensor, X: torch.Tensor, Y: torch.Tensor, n_in: int, hidden: int) -> torch.Tensor:
    """Sum over L levels of each level's MSE 1/(2n) ||f(X) - y_l||^2; theta (L, P), X (n, n_in), Y (L, n).
    The levels share nothing, so the Hessian of the sum is block-diagonal with one block per level."""
    L = theta.shape[0]
    sizes = [n_in * hidden, hidden, hidden * hidden, hidden, hidden, 1]
    W1, b1, W2, b2, W3, b3 = torch.split(theta, sizes, dim=1)
    h = torch.tanh(torch.matmul(X, W1.reshape(L, n_in, hidden)) + b1[:, None, :])
    h = torch.tanh(torch.bmm(h, W2.reshape(L, hidden, hidden)) + b2[:, None, :])
    out = torch.bmm(h, W3.reshape(L, hidden, 1))[:, :, 0] + b3
    return 0.5 * ((out - Y) ** 2).mean(1).sum()


def mlp_sharpness(theta: torch.Tensor, X: torch.Tensor, Y: torch.Tensor, n_in: int, hidden: int,
                  v0: torch.Tensor, iters: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Sharpness of each level's loss at theta (L, P) by power iteration on exact HVPs (double backward)."""
    theta = theta.detach().requires_grad_(True)
    grad = torch.autograd.grad(mlp_loss(theta, X, Y, n_in, hidden), theta, create_graph=True)[0]

    def hvp(v: torch.Tensor) -> torch.Tensor:
        return torch.autograd.grad(grad, theta, grad_outputs=v, retain_graph=True)[0]

    return power_iteration(hvp, v0, iters)


def digits_task(X_all: np.ndarray, y_all: np.ndarray, classes: tuple[int, int], n_train: int,
                flip_fractions: list[float], rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A two-class digits subset: inputs (n_train, 64) scaled to [0, 1], labels (L, n_train) in {-1, +1}
    with a fraction of labels flipped per level (nested: the examples flipped at a level include those
    of every lower level), the same examples for all levels."""
    keep = np.flatnonzero(np.isin(y_all, classes))
    idx = rng.choice(keep, size=min(n_train, keep.size), replace=False)
    X = X_all[idx] / 16.0
    y = np.where(y_all[idx] == classes[0], 1.0, -1.0)
    order = rng.permutation(len(idx))
    Y = np.tile(y, (len(flip_fractions), 1))
    for level, frac in enumerate(flip_fractions):
        flipped = order[: int(round(frac * len(idx)))]
        Y[level, flipped] *= -1
    return X, Y


def train_mlp(X: np.ndarray, Y: np.ndarray, hidden: int, lr: float, steps: int, record_every: int,
              power_iters: int, seed: int, dtype: torch.dtype = torch.float32) -> dict:
    """Full-batch GD on the MSE of a tanh MLP, one copy per label set Y (L, n), from one shared init.
    Sharpness by power iteration every ``record_every`` steps (warm-started). float32 by default: its
    Hessian-vector products are >10x faster on CPU than float64's double backward."""
    gen = torch.Generator().manual_seed(seed)
    Xt = torch.as_tensor(X, dtype=dtype)
    Yt = torch.as_tensor(Y, dtype=dtype)
    n_in = X.shape[1]
    theta = init_mlp(n_in, hidden, Y.shape[0], gen).to(dtype)
    v = torch.randn(theta.shape, generator=gen, dtype=torch.float64).to(dtype)
    rows = []
    for t in range(steps + 1):
        if t % record_every == 0 or t == steps:
            sharp, v = mlp_sharpness(theta, Xt, Yt, n_in, hidden, v, power_iters)
            with torch.no_grad():
                per_level = [float(mlp_loss(theta[i:i + 1], Xt, Yt[i:i + 1], n_in, hidden)) for i in range(Y.shape[0])]
            rows += [{"step": t, "level": i, "sharpness": float(sharp[i]), "loss": per_level[i]} for i in range(Y.shape[0])]
        if t == steps:
            break
        theta = theta.detach().requires_grad_(True)
        grad = torch.autograd.grad(mlp_loss(theta, Xt, Yt, n_in, hidden), theta)[0]
        theta = (theta - lr * grad).detach()
    return {"rows": rows}


# ----------------------------------------------------------------------------------------------
# One seed: every experiment
# ----------------------------------------------------------------------------------------------


def _tail(values: np.ndarray, tail_frac: float) -> np.ndarray:
    """The last ``tail_frac`` of a recorded series (at least one point)."""
    k = max(1, int(np.ceil(tail_frac * len(values))))
    return values[-k:]


SPECTRA = ("isotropic", "power_law")
"""Input spectra: isotropic (primary) and power-law diag(k^-p.spectrum_decay) (secondary: chosen after
exploratory isotropic runs did not settle at the edge of stability, so it is reported beside, never instead)."""


def synthetic_data(p: Params, seed: int) -> dict[str, dict[str, np.ndarray]]:
    """The seed's synthetic regression data for each input spectrum: X (p.n, p.d), the labels of every
    difficulty level Y_levels (len(p.noise_levels), n) (teacher norm p.level_beta_norms[k], noise
    p.noise_levels[k]) and the labels Y_base (n,) of the EoS, depth and SGD runs (p.beta_norm, p.base_noise)."""
    out = {}
    for k, spectrum in enumerate(SPECTRA):
        rng = np.random.default_rng([seed, 0, k])
        X = make_inputs(p.n, p.d, 0.0 if spectrum == "isotropic" else p.spectrum_decay, rng)
        out[spectrum] = {"X": X, "Y_levels": make_labels(X, p.level_beta_norms, p.noise_levels, rng),
                         "Y_base": make_labels(X, [p.beta_norm], [p.base_noise], rng)[0]}
    return out


def minimalist_loss_torch(theta: torch.Tensor, X: torch.Tensor, y: torch.Tensor, depth: int) -> torch.Tensor:
    """The same loss written directly in torch for a flat theta = (w (d,), v (D-1,)): an independent
    implementation used to check the analytic Hessian and the closed form with autograd."""
    d = X.shape[1]
    w, v = theta[:d], theta[d:d + depth - 1]
    return 0.5 * ((torch.prod(v) * (X @ w) - y) ** 2).mean()


def closed_form_error(X: np.ndarray, y: np.ndarray, depth: int) -> float:
    """|S*(Q, D) / lambda_max(autograd Hessian at the balanced minimum) - 1|, and the gradient norm there
    must vanish: returns the larger of the relative eigenvalue error and the gradient norm."""
    w, v = balanced_minimum(X, y, depth)
    theta = torch.tensor(np.concatenate([w, v]), dtype=torch.float64, requires_grad=True)
    Xt, yt = torch.as_tensor(X), torch.as_tensor(y)
    H = torch.autograd.functional.hessian(lambda t: minimalist_loss_torch(t, Xt, yt, depth), theta)
    g = torch.autograd.grad(minimalist_loss_torch(theta, Xt, yt, depth), theta)[0]
    top = float(torch.linalg.eigvalsh(H)[-1])
    return max(abs(predicted_sharpness(X, y, depth) / top - 1.0), float(g.norm()))


def _train_group(p: Params, runs: list[dict], steps: int, rng: np.random.Generator) -> dict:
    """One vectorised training loop over ``runs`` (dicts with X, y, depth, eta, batch_size)."""
    return train_minimalist(np.stack([r["X"] for r in runs]), np.stack([r["y"] for r in runs]),
                            np.array([r["depth"] for r in runs]), np.array([r["eta"] for r in runs]),
                            np.array([r["batch_size"] for r in runs]), steps, p.init_norm, rng, p.record_every)


def run_seed(p: Params, seed: int, digits_path: str | None = None) -> dict:
    """All experiments for one seed; returns per-run summaries and downsampled trajectories (plain rows).

    Every synthetic run is done on both input spectra (``SPECTRA``). Two vectorised training loops:

    at the step size relative to the closed form, eta = r * 2 / S* (r = eta S*/2 says where S* sits
    relative to the edge 2/eta, the condition of the edge-of-stability claim), ``p.steps`` updates:
      eos     GD at depth_main, labels Y_base, for r in eos_step_ratios
      linear  negative control of progressive sharpening: the depth ablated (D = 1, plain linear
              regression, whose Hessian X^T X/n never moves) at eta = r * 2 / lambda_max(X^T X/n) for
              every r < 1 of eos_step_ratios (above its edge a linear model diverges)
      sgd     SGD with each batch size, and GD, at eta = r * 2 / S* for r in sgd_step_ratios
      gd2     negative control of SGD < GD: a second GD run (another initial direction) at each of those eta
    at one fixed step size ``p.fixed_eta`` for every level, depth and seed, ``p.fixed_eta_steps`` updates:
      diff    GD at depth_main for every difficulty level (teacher norm, noise)
      depth   GD with labels Y_base for every depth
    and, when ``digits_path`` (Parquet of load_digits: 64 pixel columns + "target") is given, the tanh MLP
    on two digit classes ``p.mlp_classes`` at every label-noise level ``p.mlp_label_noise`` (the other
    ``p.mlp_*`` fields set its size and training).
    """
    data = synthetic_data(p, seed)
    n, D0 = p.n, p.depth_main
    relative: list[dict] = []
    fixed: list[dict] = []

    def add(into: list, spectrum: str, group: str, y: np.ndarray, depth: int, batch: int = n,
            ratio: float | None = None, **extra: Any) -> None:
        X = data[spectrum]["X"]
        run = {"spectrum": spectrum, "group": group, "X": X, "y": y, "depth": depth, "batch_size": batch, **extra}
        _, run["Q"] = optimum(X, y)
        run["S_pred"] = predicted_sharpness(X, y, depth)
        run["eta"] = ratio * 2.0 / run["S_pred"] if ratio is not None else p.fixed_eta
        run["ratio"] = ratio if ratio is not None else p.fixed_eta * run["S_pred"] / 2.0
        into.append(run)

    for spectrum in SPECTRA:
        sd = data[spectrum]
        for r in p.eos_step_ratios:
            add(relative, spectrum, "eos", sd["Y_base"], D0, ratio=r)
            if r < 1:
                add(relative, spectrum, "linear", sd["Y_base"], 1, ratio=r)
        for r in p.sgd_step_ratios:
            for b in [*p.sgd_batch_sizes, n]:
                add(relative, spectrum, "sgd", sd["Y_base"], D0, b, ratio=r)
            add(relative, spectrum, "gd2", sd["Y_base"], D0, ratio=r)
        for level, y in enumerate(sd["Y_levels"]):
            add(fixed, spectrum, "diff", y, D0, level=level, noise=p.noise_levels[level],
                teacher_norm=p.level_beta_norms[level])
        for D in p.depths:
            add(fixed, spectrum, "depth", sd["Y_base"], D)

    started, cpu_started = time.perf_counter(), time.thread_time()
    outs = [_train_group(p, relative, p.steps, np.random.default_rng([seed, 1])),
            _train_group(p, fixed, p.fixed_eta_steps, np.random.default_rng([seed, 3]))]
    minimalist_s, minimalist_cpu_s = time.perf_counter() - started, time.thread_time() - cpu_started

    summaries, curves = [], []
    for runs, out in zip((relative, fixed), outs):
        keep = np.unique(np.linspace(0, len(out["steps"]) - 1, p.curve_points).round().astype(int))
        for i, run in enumerate(runs):
            sharp, lossv = out["sharpness"][:, i], out["loss"][:, i]
            tail = _tail(sharp, p.tail_frac)
            edge = 2.0 / run["eta"]
            diverged = bool(out["diverged"][i])
            summaries.append({
                "seed": seed, "run": len(summaries), "spectrum": run["spectrum"], "group": run["group"],
                "depth": run["depth"], "ratio": run["ratio"], "eta": run["eta"], "batch_size": run["batch_size"],
                "level": run.get("level", -1), "noise": run.get("noise", p.base_noise),
                "teacher_norm": run.get("teacher_norm", p.beta_norm),
                "Q": run["Q"], "S_pred": run["S_pred"], "edge": edge,
                "S_pred_terminal": min(run["S_pred"], edge),
                "S0": float(sharp[0]), "terminal": float(np.mean(tail)), "tail_min": float(np.min(tail)),
                "tail_max": float(np.max(tail)), "tail_max_rel_dev_edge": float(np.max(np.abs(tail / edge - 1.0))),
                "max_sharpness": float(np.nanmax(sharp)), "final_loss": float(lossv[-1]),
                "min_loss": float(np.nanmin(lossv)), "diverged": diverged,
                "final_balance": float(np.linalg.norm(out["W"][i]) / np.abs(out["V"][i, :run["depth"] - 1]).mean())
                if not diverged and run["depth"] > 1 else float("nan"),
            })
            # each stored point also summarises the records since the previous one (an oscillation at the edge
            # of stability would otherwise alias into a false pattern when the curve is thinned)
            starts = np.r_[0, keep[:-1] + 1]
            lo, hi = np.fmin.reduceat(sharp, starts), np.fmax.reduceat(sharp, starts)
            mean = np.add.reduceat(sharp, starts) / np.diff(np.r_[starts, len(sharp)])
            curves += [{"seed": seed, "run": summaries[-1]["run"], "spectrum": run["spectrum"], "group": run["group"],
                        "ratio": run["ratio"], "batch_size": run["batch_size"], "depth": run["depth"],
                        "level": run.get("level", -1), "step": int(out["steps"][k]), "sharpness": float(sharp[k]),
                        "window_mean": float(mean[j]), "window_min": float(lo[j]), "window_max": float(hi[j]),
                        "loss": float(lossv[k]), "edge": edge, "S_pred": run["S_pred"]} for j, k in enumerate(keep)]

    closed_form = max(closed_form_error(data[sp]["X"], data[sp]["Y_base"], D) for sp in SPECTRA for D in p.depths)
    result = {"seed": seed, "runs": summaries, "curves": curves, "closed_form_error": closed_form,
              "timings": {"minimalist_s": minimalist_s, "minimalist_cpu_s": minimalist_cpu_s}}
    if digits_path is not None:
        import pandas as pd

        frame = pd.read_parquet(digits_path)
        started, cpu_started = time.perf_counter(), time.thread_time()
        Xd, Yd = digits_task(frame.drop(columns="target").to_numpy(float), frame["target"].to_numpy(),
                             tuple(p.mlp_classes), p.mlp_n_train, p.mlp_label_noise,
                             np.random.default_rng([seed, 2]))
        with torch_single_thread():
            mlp = train_mlp(Xd, Yd, p.mlp_hidden, p.mlp_lr, p.mlp_steps, p.mlp_record_every, p.mlp_power_iters, seed)
        for row in mlp["rows"]:
            row["seed"] = seed
            row["label_noise"] = p.mlp_label_noise[row["level"]]
        result["mlp"] = mlp["rows"]
        result["timings"]["mlp_s"] = time.perf_counter() - started
        result["timings"]["mlp_cpu_s"] = time.thread_time() - cpu_started
    return result

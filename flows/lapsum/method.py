"""LapSum (gmum, ICML 2025): soft top-k and soft rank from the sum of Laplace CDFs, plus baselines.

Read top to bottom:

1. ``laplace_cdf`` and the LapSum function  L(b) = sum_i F(b - s_i),  F the Laplace(0, 1) CDF.
2. ``lapsum_solve_b``: the closed-form inverse of L (sort, two ``logcumsumexp`` passes,
   ``searchsorted`` for the bracket, then a quadratic in e^b solved in log space).  O(n log n).
3. ``SoftTopK`` (``lapsum_topk``): p_i = F(r_i / alpha - b) with b chosen so that sum_i p_i = k
   exactly; an ``autograd.Function`` whose backward is the closed form (no autograd through the
   solve), with gradients for r, k and alpha.
4. ``lapsum_rank``: soft rank_i = sum_{j != i} F((r_i - r_j) / alpha), i.e. LapSum evaluated at each
   item, from the same sorted prefix sums (autograd through sort + logcumsumexp; O(n log n)).
5. Baselines: softmax relaxation, entropic-OT/Sinkhorn top-k (Xie et al. 2020), NeuralSort and
   SoftSort top-k (only the k rows of the relaxed permutation matrix that top-k needs).
6. ``bisection_topk``: a naive, independent reference (bisection on b + one differentiable
   Newton step, so autograd yields the implicit-function gradient) used by the tests.
7. Experiments: A (correctness, runtime scaling), B (learn-to-select with k in {20, 200, 1000} at equal
   steps, and at the largest k with an equal CPU budget per method),
   C (top-2 loss on ``load_digits``), and ``run_seed(p, seed)`` with ``p`` the flow's typed params.

Conventions: scores ``r`` have shape (B, n) (a batch of B vectors of n items); larger scores get
larger membership probabilities; ``k`` is a float in (0, n) or a tensor of shape (B,);
``alpha > 0`` is the Laplace scale (temperature).  All randomness goes through explicit
``torch.Generator`` / ``np.random.default_rng`` objects.
"""

from __future__ import annotations

import functools
import math
import time
from typing import Callable

import numpy as np
import torch

from flows.lapsum.params import Params
from tasks.timing import cpu_clock, interleaved_seconds, interleaved_until_budget

# ---------------------------------------------------------------------------------------------
# 1. The Laplace CDF and LapSum
# ---------------------------------------------------------------------------------------------


def laplace_cdf(x: torch.Tensor) -> torch.Tensor:
    """F(x) = e^x / 2 for x <= 0, 1 - e^{-x} / 2 for x > 0 (standard Laplace CDF), elementwise."""
    half = 0.5 * torch.exp(-x.abs())
    return torch.where(x > 0, 1.0 - half, half)


def _sorted_prefix_sums(s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """For ascending ``s`` (B, n): eB_j = sum_{l<=j} e^{s_l - s_j} and eA_j = sum_{l>=j} e^{s_j - s_l}.

    Every term is <= 1, so 1 <= eB_j <= j + 1 and 1 <= eA_j <= n - j: nothing overflows whatever
    the spread of ``s``.  Cost O(n) after the sort.
    """
    eB = torch.exp(torch.logcumsumexp(s, dim=1) - s)
    eA = torch.exp(s + torch.logcumsumexp(-s.flip(1), dim=1).flip(1))
    return eA, eB


# ---------------------------------------------------------------------------------------------
# 2. Closed-form inverse of LapSum
# ---------------------------------------------------------------------------------------------


def lapsum_solve_b(s_sorted: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Solve L(b) = sum_i F(b - s_i) = w for b.  ``s_sorted`` (B, n) ascending, ``w`` (B, 1) in (0, n).

    At an item, 2 L(s_j) = 2j + 1 + eA_j - eB_j (0-based j), a non-decreasing sequence, so
    ``searchsorted`` finds i with s_{i-1} < b <= s_i.  On that bracket
        L(b) = i + (A e^b - B e^{-b}) / 2,   A = sum_{l>=i} e^{-s_l},  B = sum_{l<i} e^{s_l},
    a quadratic in y = e^b:  A y^2 - 2 e y - B = 0 with e = w - i, whose positive root is
    y = (e + sqrt(e^2 + AB)) / A = B / (sqrt(e^2 + AB) - e).  We use the first form for e > 0 and
    the second for e <= 0 (no cancellation), with log z = log(|e| + sqrt(e^2 + c)) computed as
    log(sqrt c) + asinh(|e| / sqrt c) in log space, so that c = A B underflowing (tiny alpha,
    integer k) cannot produce log(0) = -inf as the plain formula does.  Returns b (B, 1).
    """
    n = s_sorted.shape[1]
    eA, eB = _sorted_prefix_sums(s_sorted)
    ar = torch.arange(n, device=s_sorted.device, dtype=s_sorted.dtype)
    two_L = (eA - eB + (2.0 * ar + 1.0)).contiguous()
    i = torch.searchsorted(two_L, (2.0 * w).contiguous())  # (B, 1), int64 in [0, n]
    lo = (i - 1).clamp(0, n - 1)
    hi = i.clamp(0, n - 1)
    s_lo, s_hi = s_sorted.gather(1, lo), s_sorted.gather(1, hi)
    a = torch.where(i < n, eA.gather(1, hi), torch.zeros_like(s_lo))   # A = a e^{-s_hi}
    bb = torch.where(i > 0, eB.gather(1, lo), torch.zeros_like(s_lo))  # B = bb e^{s_lo}
    e = w - i.to(s_sorted.dtype)
    abs_e = e.abs()
    half_log_c = 0.5 * (torch.log(a) + torch.log(bb) + (s_lo - s_hi))  # log sqrt(AB) in y-units
    u = torch.exp(torch.log(abs_e) - half_log_c)  # |e| / sqrt(c); e = 0 gives 0 even when sqrt(c) underflows
    log_z = torch.where(u > 1e8, torch.log(2.0 * abs_e), half_log_c + torch.asinh(u))
    return torch.where(e > 0, s_hi + log_z - torch.log(a), s_lo - log_z + torch.log(bb))


# ---------------------------------------------------------------------------------------------
# 3. Soft top-k with the closed-form backward
# ---------------------------------------------------------------------------------------------


class SoftTopK(torch.autograd.Function):
    """p = F(r / alpha - b(r, k, alpha)), sum_i p_i = k.  r (B, n), k (B, 1), alpha 0-dim tensor.

    Backward (implicit differentiation of sum_i F(x_i) = k with x_i = r_i / alpha - b):
    with f_i = e^{-|x_i|} / 2, q = f / sum f = softmax(-|x|) and upstream gradient g,
        dL/dr     = (sum f / alpha) * q * (g - <q, g>)
        dL/dk     = <q, g>
        dL/dalpha = -(sum f / alpha^2) * sum_i q_i g_i (r_i - <q, r>)
    all O(n).  (Same formulas as the official notebook ``soft_topk.ipynb``, derived independently.)
    """

    @staticmethod
    def forward(ctx, r: torch.Tensor, k: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
        n = r.shape[1]
        s = r / alpha
        b = lapsum_solve_b(torch.sort(s, dim=1).values, n - k)  # sum F(b - s) = n - k
        x = s - b
        f = 0.5 * torch.exp(-x.abs())
        p = torch.where(x > 0, 1.0 - f, f)
        ctx.save_for_backward(r, x, f.sum(dim=1, keepdim=True), alpha)
        return p

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        r, x, sum_f, alpha = ctx.saved_tensors
        q = torch.softmax(-x.abs(), dim=1)
        qg = (q * g).sum(dim=1, keepdim=True)
        grad_r = grad_k = grad_alpha = None
        if ctx.needs_input_grad[0]:
            grad_r = (sum_f / alpha) * q * (g - qg)
        if ctx.needs_input_grad[1]:
            grad_k = qg
        if ctx.needs_input_grad[2]:
            r_bar = (q * r).sum(dim=1, keepdim=True)
            grad_alpha = (-(sum_f / alpha**2) * (q * g * (r - r_bar)).sum(dim=1, keepdim=True)).sum()
            grad_alpha = grad_alpha.reshape(alpha.shape)
        return grad_r, grad_k, grad_alpha


def _as_k(k, r: torch.Tensor) -> torch.Tensor:
    """k as a (B, 1) tensor of r's dtype (a float, or a tensor of shape (B,) or (B, 1))."""
    if not torch.is_tensor(k):
        return torch.full((r.shape[0], 1), float(k), dtype=r.dtype, device=r.device)
    k = k.to(r.dtype).reshape(-1, 1)
    return k.expand(r.shape[0], 1) if k.numel() == 1 else k


def lapsum_topk(r: torch.Tensor, k, alpha=1.0) -> torch.Tensor:
    """LapSum soft top-k: r (B, n) -> p (B, n) in (0, 1) with sum_i p_i = k (0 < k < n).

    ``k``: float or tensor (B,) (differentiable); ``alpha``: float or 0-dim tensor > 0 (differentiable).
    As alpha -> 0, p tends to the indicator of the k largest entries.
    """
    kk = _as_k(k, r)
    a = alpha if torch.is_tensor(alpha) else torch.tensor(float(alpha), dtype=r.dtype, device=r.device)
    return SoftTopK.apply(r, kk, a)


# ---------------------------------------------------------------------------------------------
# 4. Soft rank
# ---------------------------------------------------------------------------------------------


def lapsum_rank(r: torch.Tensor, alpha: float = 1.0, descending: bool = False) -> torch.Tensor:
    """Soft rank (0-based): rank_i = sum_{j != i} F((r_i - r_j) / alpha), r (B, n) -> (B, n).

    This is LapSum evaluated at each item minus its own 1/2, exactly what the official CPU kernel
    ``soft_rank.cpp`` computes; as alpha -> 0 it is the hard 0-based rank (ascending, or
    descending with ``descending=True``).  Computed from the sorted prefix sums in O(n log n);
    the gradient is autograd through sort/logcumsumexp (also O(n log n)).
    """
    s = (-r if descending else r) / alpha
    s_sorted, idx = torch.sort(s, dim=1)
    eA, eB = _sorted_prefix_sums(s_sorted)
    ar = torch.arange(s.shape[1], device=r.device, dtype=r.dtype)
    rank_sorted = ar + 0.5 * (eA - eB)  # = L(s_j) - 1/2
    return torch.zeros_like(rank_sorted).scatter(1, idx, rank_sorted)


def naive_rank(r: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    """O(n^2) reference of ``lapsum_rank`` (ascending): the pairwise sum written out, (B, n) -> (B, n)."""
    F = laplace_cdf((r.unsqueeze(2) - r.unsqueeze(1)) / alpha)  # (B, n, n): F((r_i - r_j)/alpha)
    return F.sum(dim=2) - 0.5


# ---------------------------------------------------------------------------------------------
# 5. Baselines (all return (B, n) memberships that sum to k over n)
# ---------------------------------------------------------------------------------------------


def softmax_topk(r: torch.Tensor, k, tau: float = 1.0) -> torch.Tensor:
    """Softmax relaxation k * softmax(r / tau): sums to k, but an entry may exceed 1.  O(n)."""
    return _as_k(k, r) * torch.softmax(r / tau, dim=1)


def sinkhorn_topk(r: torch.Tensor, k, eps: float = 2.0, n_iter: int = 100) -> torch.Tensor:
    """Entropic-OT top-k (Xie et al., NeurIPS 2020), log-domain Sinkhorn unrolled for autograd.

    Transport mu = 1/n on the scores to nu = ((n - k)/n, k/n) on the anchors y = (0, 1) with cost
    C_ij = (r_i - y_j)^2 and entropy eps; membership A_i = n * Gamma_i1.  The loop ends with the
    column update, so sum_i A_i = k exactly; row sums (A_i <= 1) hold at convergence.  With two
    anchors the plan is A_i = sigmoid((2 r_i - 1 + g_1 - g_0) / eps): eps = 2 tau gives the
    logistic a slope 1/tau in r.  O(n * n_iter) time and autograd memory.
    """
    n = r.shape[1]
    kk = _as_k(k, r)  # (B, 1)
    C0, C1 = r**2, (r - 1.0) ** 2  # (B, n) costs to the anchors 0 and 1
    log_mu = -math.log(n)
    log_nu0, log_nu1 = torch.log(n - kk) - math.log(n), torch.log(kk) - math.log(n)  # (B, 1)
    g0, g1 = torch.zeros_like(kk), torch.zeros_like(kk)
    for _ in range(n_iter):
        f = eps * log_mu - eps * torch.logaddexp((g0 - C0) / eps, (g1 - C1) / eps)  # (B, n)
        g0 = eps * log_nu0 - eps * torch.logsumexp((f - C0) / eps, dim=1, keepdim=True)
        g1 = eps * log_nu1 - eps * torch.logsumexp((f - C1) / eps, dim=1, keepdim=True)
    return n * torch.exp((f + g1 - C1) / eps)


def _abs_diff_rowsum(s: torch.Tensor) -> torch.Tensor:
    """A_s 1: sum_m |s_j - s_m| for every j, exactly, in O(n log n) by sorting.  (B, n) -> (B, n).

    At sorted position p (0-based) with prefix sum P_p: v_p (2p + 2 - n) - 2 P_p + total.
    """
    n = s.shape[1]
    v, idx = torch.sort(s, dim=1)
    P = torch.cumsum(v, dim=1)
    p = torch.arange(n, device=s.device, dtype=s.dtype)
    row = v * (2.0 * p + 2.0 - n) - 2.0 * P + P[:, -1:]
    return torch.zeros_like(row).scatter(1, idx, row)


def neuralsort_topk(r: torch.Tensor, k: int, tau: float = 1.0) -> torch.Tensor:
    """NeuralSort (Grover et al., ICLR 2019) top-k: sum of the first k rows of the relaxed
    descending permutation  P[i, :] = softmax(((n + 1 - 2i) r - A_r 1) / tau),  i = 1..k.

    Only the k rows top-k needs are built (B, k, n) and A_r 1 uses the O(n log n) sorting identity,
    so this is O(nk) time and memory (``difftopk.NeuralSort`` builds all n rows with an n x n x n
    matmul).  Each row sums to 1, so the output sums to k; an entry may exceed 1.
    """
    n = r.shape[1]
    k = int(k)
    scaling = (n + 1 - 2 * torch.arange(1, k + 1, device=r.device, dtype=r.dtype))  # (k,)
    logits = (scaling.view(1, k, 1) * r.unsqueeze(1) - _abs_diff_rowsum(r).unsqueeze(1)) / tau
    return torch.softmax(logits, dim=2).sum(dim=1)


def softsort_topk(r: torch.Tensor, k: int, tau: float = 1.0) -> torch.Tensor:
    """SoftSort (Prillo & Eisenschlos, ICML 2020) top-k: sum of the first k rows of
    P[i, :] = softmax(-|r - sort_desc(r)_i| / tau).  O(nk) time and memory; sums to k."""
    k = int(k)
    top = torch.topk(r, k, dim=1).values  # (B, k), descending
    logits = -(r.unsqueeze(1) - top.unsqueeze(2)).abs() / tau
    return torch.softmax(logits, dim=2).sum(dim=1)


def hard_topk(r: torch.Tensor, k: int) -> torch.Tensor:
    """Indicator (B, n) of the k largest entries of each row."""
    out = torch.zeros_like(r)
    return out.scatter(1, torch.topk(r, int(k), dim=1).indices, 1.0)


# ---------------------------------------------------------------------------------------------
# 6. Naive reference: bisection on b, then one differentiable Newton step
# ---------------------------------------------------------------------------------------------


def bisection_topk(r: torch.Tensor, k, alpha, n_bisect: int = 200) -> torch.Tensor:
    """Reference soft top-k sharing no code with ``lapsum_solve_b``: r (B, n) -> p (B, n).

    b0 solves sum_i F(r_i/alpha - b) = k by bisection (no grad); one Newton step
    b = b0 + (sum F(x) - k) / sum f(x), taken with autograd on, has value b0 (the residual is ~0)
    and, by the implicit function theorem, the exact first derivatives of b(r, k, alpha).
    """
    kk = _as_k(k, r)
    s = r / alpha
    with torch.no_grad():
        lo = s.min(dim=1, keepdim=True).values - 50.0
        hi = s.max(dim=1, keepdim=True).values + 50.0
        target = kk.detach()
        for _ in range(n_bisect):
            mid = 0.5 * (lo + hi)
            too_many = laplace_cdf(s - mid).sum(dim=1, keepdim=True) > target  # b too small
            lo = torch.where(too_many, mid, lo)
            hi = torch.where(too_many, hi, mid)
        b0 = 0.5 * (lo + hi)
    x0 = s - b0
    residual = laplace_cdf(x0).sum(dim=1, keepdim=True) - kk
    b = b0 + residual / (0.5 * torch.exp(-x0.abs())).sum(dim=1, keepdim=True)
    return laplace_cdf(s - b)


# ---------------------------------------------------------------------------------------------
# 7. Experiments
# ---------------------------------------------------------------------------------------------

METHODS = ("lapsum", "softmax", "sinkhorn", "neuralsort", "softsort")
QUADRATIC = ("neuralsort", "softsort")


def topk_fn(method: str, tau: float, sinkhorn_iter: int) -> Callable[[torch.Tensor, int], torch.Tensor]:
    """The soft top-k of ``method`` at one shared temperature ``tau`` (Sinkhorn: eps = 2 tau)."""
    if method == "lapsum":
        return lambda r, k: lapsum_topk(r, float(k), tau)
    if method == "softmax":
        return lambda r, k: softmax_topk(r, float(k), tau)
    if method == "sinkhorn":
        return lambda r, k: sinkhorn_topk(r, float(k), 2.0 * tau, sinkhorn_iter)
    if method == "neuralsort":
        return lambda r, k: neuralsort_topk(r, k, tau)
    if method == "softsort":
        return lambda r, k: softsort_topk(r, k, tau)
    raise ValueError(f"unknown method {method!r}; choose one of {METHODS}")


# --- A: correctness ------------------------------------------------------------------------------


def _jacobian_rel_error(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, h: float = 1e-6) -> float:
    """||J_backward - J_fd||_F / ||J_fd||_F for fn: R^m -> R^p, central differences of step h."""
    x = x.detach().clone().requires_grad_(True)
    J_an = torch.autograd.functional.jacobian(fn, x).reshape(-1, x.numel())
    J_fd = torch.empty_like(J_an)
    flat = x.detach().reshape(-1)
    for j in range(flat.numel()):
        e = torch.zeros_like(flat)
        e[j] = h
        J_fd[:, j] = ((fn((flat + e).reshape(x.shape)) - fn((flat - e).reshape(x.shape))) / (2 * h)).reshape(-1)
    return float((J_an - J_fd).norm() / J_fd.norm())


def correctness(seed: int, n: int = 200, batch: int = 4, n_grad: int = 24, alpha_hard: float = 1e-3) -> dict:
    """Experiment A checks in float64 on random inputs (seeded).

    Returns max |sum p - k| over random (r, k, alpha); relative Frobenius errors of the Jacobians
    d p / d r, d p / d k, d p / d alpha from the closed-form backward vs central finite differences
    (n_grad items); the same vs autograd of the bisection reference; the max |p - p_bisection|;
    and the L1 distance to the hard top-k at alpha = ``alpha_hard`` on distinct values (a random
    permutation of 0..n-1: gaps of 1 = 1/alpha_hard scales), plus an alpha sweep on N(0,1) scores.
    """
    g = torch.Generator().manual_seed(seed)
    dt = torch.float64
    sum_err, ref_err = 0.0, 0.0
    for _ in range(8):
        r = torch.randn(batch, n, generator=g, dtype=dt) * (10 ** (4 * torch.rand(1, generator=g, dtype=dt) - 2))
        k = 1 + (n - 2) * torch.rand(batch, generator=g, dtype=dt)
        alpha = float(10 ** (3 * torch.rand(1, generator=g, dtype=dt) - 2))
        p = lapsum_topk(r, k, alpha)
        sum_err = max(sum_err, float((p.sum(1) - k).abs().max()))
        ref_err = max(ref_err, float((p - bisection_topk(r, k, alpha)).abs().max()))
    # gradients: closed-form backward vs finite differences and vs the bisection reference's autograd
    r = torch.randn(2, n_grad, generator=g, dtype=dt)
    k = torch.tensor([3.5, 11.0], dtype=dt)
    alpha = torch.tensor(0.3, dtype=dt)
    errs = {
        "r": _jacobian_rel_error(lambda x: lapsum_topk(x, k, alpha), r),
        "k": _jacobian_rel_error(lambda x: lapsum_topk(r, x, alpha), k),
        "alpha": _jacobian_rel_error(lambda x: lapsum_topk(r, k, x), alpha),
    }
    ref = {}
    for name, (f_ours, f_ref, x) in {
        "r": (lambda x: lapsum_topk(x, k, alpha), lambda x: bisection_topk(x, k, alpha), r),
        "k": (lambda x: lapsum_topk(r, x, alpha), lambda x: bisection_topk(r, x, alpha), k),
        "alpha": (lambda x: lapsum_topk(r, k, x), lambda x: bisection_topk(r, k, x), alpha),
    }.items():
        J1 = torch.autograd.functional.jacobian(f_ours, x.clone())
        J2 = torch.autograd.functional.jacobian(f_ref, x.clone())
        ref[name] = float((J1 - J2).norm() / J2.norm())
    # hard limit
    perm = torch.stack([torch.randperm(n, generator=g) for _ in range(batch)]).to(dt)
    kh = n // 10
    l1_hard = float((lapsum_topk(perm, float(kh), alpha_hard) - hard_topk(perm, kh)).abs().sum(1).max())
    z = torch.randn(batch, n, generator=g, dtype=dt)
    sweep = [{"alpha": a, "l1_to_hard": float((lapsum_topk(z, float(kh), a) - hard_topk(z, kh)).abs().sum(1).mean())}
             for a in (1.0, 0.1, 0.01, 1e-3, 1e-4)]
    # the hard-limit check proper: N(0,1) scores, whose gaps near the k-th value are comparable to alpha, at
    # alpha_hard; its negative control is the softmax relaxation k softmax(r / alpha) at the same temperature,
    # which also sums to k but tends to k times the argmax, not to the top-k
    l1_normal = float((lapsum_topk(z, float(kh), alpha_hard) - hard_topk(z, kh)).abs().sum(1).mean())
    l1_softmax = float((softmax_topk(z, float(kh), alpha_hard) - hard_topk(z, kh)).abs().sum(1).mean())
    rank_err = float((lapsum_rank(z, 0.5) - naive_rank(z, 0.5)).abs().max())
    return {
        "max_abs_sum_error": sum_err,
        "max_abs_diff_vs_bisection": ref_err,
        "grad_rel_error_fd": max(errs.values()),
        "grad_rel_error_fd_r": errs["r"], "grad_rel_error_fd_k": errs["k"], "grad_rel_error_fd_alpha": errs["alpha"],
        "grad_rel_error_vs_bisection_autograd": max(ref.values()),
        "l1_to_hard_alpha_1e-3": l1_hard,
        "l1_to_hard_normal_at_alpha_hard": l1_normal,
        "l1_softmax_to_hard_normal_at_alpha_hard": l1_softmax,
        "alpha_sweep_normal_scores": sweep,
        "rank_max_abs_error_vs_naive": rank_err,
    }


# --- A: runtime scaling ----------------------------------------------------------------------------


def time_interleaved(cells: list[tuple[str, int]], batch: int = 4, reps: int = 3, tau: float = 1.0,
                     sinkhorn_iter: int = 100, seed: int = 0, dtype=torch.float32) -> dict[tuple[str, int], tuple[float, float]]:
    """``{(method, n): (cpu_s, wall_s)}``: one forward + backward of each method at k = n // 10 on (batch, n)
    scores, each the minimum over ``reps`` timed calls after one warm-up round.

    The cells are interleaved (:func:`tasks.timing.interleaved_seconds`): every round times each (method, n)
    once, so a change in machine load during the run hits every method and size alike, and a ratio of two
    cells compares calls made side by side. cpu_s is :func:`tasks.timing.cpu_clock` (the calling thread's CPU
    time when torch runs on one thread): unlike wall-clock time it does not grow when other processes compete
    for the cores of a shared machine. Each timed call includes cloning its input (O(n), like the methods).
    """
    g = torch.Generator().manual_seed(seed)
    inputs = {n: (torch.randn(batch, n, generator=g, dtype=dtype), torch.randn(batch, n, generator=g, dtype=dtype))
              for n in sorted({n for _, n in cells})}
    fns = {method: topk_fn(method, tau, sinkhorn_iter) for method in {method for method, _ in cells}}

    def forward_backward(method: str, n: int) -> None:
        r, v = inputs[n]
        x = r.clone().requires_grad_(True)
        (fns[method](x, max(1, n // 10)) * v).sum().backward()

    cpu = cpu_clock()
    seconds = interleaved_seconds({cell: functools.partial(forward_backward, *cell) for cell in cells}, reps,
                                  clock=lambda: np.array([cpu(), time.perf_counter()]))
    return {cell: tuple(float(t) for t in np.min(seconds[cell], axis=0)) for cell in cells}


def scaling_rows(ns: list[int], methods: list[str], quadratic_cap: int, sinkhorn_cap: int, batch: int = 4,
                 reps: int = 3, tau: float = 1.0, sinkhorn_iter: int = 100, threads: int | None = 1) -> list[dict]:
    """Rows {method, n, cpu_s, wall_s} of forward+backward time (k = n/10, float32, min over ``reps`` interleaved
    rounds: :func:`time_interleaved`); quadratic baselines up to ``quadratic_cap`` items, Sinkhorn (autograd
    memory O(n * iterations)) up to ``sinkhorn_cap``.  ``threads``: torch intra-op threads while timing
    (process-wide; restored afterwards; None keeps the current setting)."""
    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        caps = {method: quadratic_cap if method in QUADRATIC else sinkhorn_cap if method == "sinkhorn" else None
                for method in methods}
        cells = [(method, int(n)) for method in methods for n in ns if caps[method] is None or n <= caps[method]]
        timed = time_interleaved(cells, batch, reps, tau, sinkhorn_iter)
        return [{"method": method, "n": n, "cpu_s": timed[(method, n)][0], "wall_s": timed[(method, n)][1]}
                for method, n in cells]
    finally:
        torch.set_num_threads(previous)


def run_scaling(p: Params) -> list[dict]:
    """Experiment A's runtime scaling at the flow's params: :func:`scaling_rows` over ``p.scaling_ns``."""
    return scaling_rows(p.scaling_ns, p.methods, p.quadratic_cap, p.sinkhorn_cap, p.scaling_batch, p.scaling_reps,
                        p.tau, p.sinkhorn_iter_timing, p.timing_threads)


# --- B: learn-to-select ------------------------------------------------------------------------------


def _mlp_init(sizes: list[int], g: torch.Generator) -> list[torch.Tensor]:
    """Weights and biases of an MLP with ``sizes`` (uniform +-1/sqrt(fan_in), like nn.Linear)."""
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        bound = 1.0 / math.sqrt(fan_in)
        params.append((torch.rand(fan_in, fan_out, generator=g) * 2 - 1) * bound)
        params.append((torch.rand(fan_out, generator=g) * 2 - 1) * bound)
    return params


def _mlp(params: list[torch.Tensor], x: torch.Tensor, act=torch.relu) -> torch.Tensor:
    """x (..., d) -> (...,): affine layers with ``act`` between them; the last layer has width 1."""
    for j in range(0, len(params) - 2, 2):
        x = act(x @ params[j] + params[j + 1])
    return (x @ params[-2] + params[-1]).squeeze(-1)


def make_select_task(seed: int, dim: int = 16, noise: float = 0.3) -> Callable[[int, int, torch.Generator], tuple]:
    """A hidden scorer (random tanh MLP dim -> 32 -> 1, scaled to unit std) plus Gaussian noise.

    Returns ``sample(batch, n, gen) -> (x (batch, n, dim), true_score (batch, n), clean_score)``.
    """
    g = torch.Generator().manual_seed(10_000 + seed)
    teacher = _mlp_init([dim, 32, 1], g)
    with torch.no_grad():
        scale = _mlp(teacher, torch.randn(4096, dim, generator=g), torch.tanh).std()

    def sample(batch: int, n: int, gen: torch.Generator):
        x = torch.randn(batch, n, dim, generator=gen)
        with torch.no_grad():
            clean = _mlp(teacher, x, torch.tanh) / scale
        return x, clean + noise * torch.randn(batch, n, generator=gen), clean

    return sample


def precision_at_k(scores: torch.Tensor, truth: torch.Tensor, k: int) -> float:
    """Mean over rows of |topk(scores) ∩ topk(truth)| / k."""
    return float((hard_topk(scores, k) * hard_topk(truth, k)).sum(1).mean() / k)


class SelectLearner:
    """Experiment B's learner: an MLP scorer dim -> hidden -> 1 trained through ``method``'s soft top-k with BCE
    to the true top-k membership, one Adam step on fresh instances of n items per :meth:`step`.

    Memberships are clamped into [1e-6, 1 - 1e-6] before the BCE (softmax/NeuralSort/SoftSort may exceed 1).
    Same (method, k, seed) -> same numbers; every method sees the same instances and init.
    """

    def __init__(self, method: str, k: int, seed: int, n: int = 2000, dim: int = 16, hidden: int = 64,
                 batch: int = 4, lr: float = 3e-3, tau: float = 1.0, sinkhorn_iter: int = 50, noise: float = 0.3):
        self.method, self.k, self.seed, self.n, self.batch = method, k, seed, n, batch
        self.sample = make_select_task(seed, dim, noise)
        self.params = [p.requires_grad_(True) for p in _mlp_init([dim, hidden, 1], torch.Generator().manual_seed(seed))]
        self.opt = torch.optim.Adam(self.params, lr=lr)
        self.soft = topk_fn(method, tau, sinkhorn_iter)
        self.data_gen = torch.Generator().manual_seed(20_000 + seed)
        self.loss = torch.tensor(float("nan"))
        self.steps = 0

    def step(self) -> None:
        """One Adam step: instance sampling, forward, backward, update."""
        x, score, _ = self.sample(self.batch, self.n, self.data_gen)
        target = hard_topk(score, self.k)
        p = self.soft(_mlp(self.params, x), self.k).clamp(1e-6, 1 - 1e-6)
        self.loss = torch.nn.functional.binary_cross_entropy(p, target)
        self.opt.zero_grad()
        self.loss.backward()
        self.opt.step()
        self.steps += 1

    def result(self, n_test: int = 8) -> dict:
        """Test precision@k of the learned scorer on ``n_test`` held-out instances, the noise-free teacher's
        precision (the ceiling), the final loss and the steps taken."""
        x, score, clean = self.sample(n_test, self.n, torch.Generator().manual_seed(30_000 + self.seed))
        with torch.no_grad():
            pred = _mlp(self.params, x)
        return {"method": self.method, "k": int(self.k), "precision_at_k": precision_at_k(pred, score, self.k),
                "teacher_precision_at_k": precision_at_k(clean, score, self.k),
                "final_loss": float(self.loss.detach()), "steps": self.steps}


def learn_to_select(method: str, k: int, seed: int, n: int = 2000, dim: int = 16, hidden: int = 64,
                    steps: int = 100, batch: int = 4, lr: float = 3e-3, tau: float = 1.0,
                    sinkhorn_iter: int = 50, noise: float = 0.3, n_test: int = 8) -> dict:
    """Experiment B at equal steps: :class:`SelectLearner` trained for ``steps`` steps; its :meth:`result` and
    the wall time."""
    learner = SelectLearner(method, k, seed, n, dim, hidden, batch, lr, tau, sinkhorn_iter, noise)
    t0 = time.perf_counter()
    for _ in range(steps):
        learner.step()
    return {**learner.result(n_test), "wall_s": time.perf_counter() - t0}


def select_budget(p: Params, seed: int) -> list[dict]:
    """Experiment B at the largest k with an equal CPU budget per method (``p.select_budget_s`` of one thread;
    the plan's equal wall-clock protocol, where a slower soft top-k takes fewer steps), plus the negative
    control: LapSum with ``p.control_budget_frac`` of the budget. The learners take their steps side by side
    (:func:`tasks.timing.interleaved_until_budget`), so a change of machine load slows every method alike; the
    steps taken still depend on the machine, unlike the equal-steps run. Rows as :meth:`SelectLearner.result`
    with ``budget`` "full" or "control"."""
    from tasks.train import torch_single_thread

    k = max(p.select_ks)
    common = dict(n=p.select_n, batch=p.select_batch, lr=p.select_lr, hidden=p.select_hidden,
                  tau=p.tau, sinkhorn_iter=p.sinkhorn_iter_train, noise=p.select_noise)
    arms = {(method, "full"): p.select_budget_s for method in p.methods}
    arms["lapsum", "control"] = p.select_budget_s * p.control_budget_frac
    with torch_single_thread():
        learners = {arm: SelectLearner(arm[0], k, seed, **common) for arm in arms}
        interleaved_until_budget({arm: learner.step for arm, learner in learners.items()}, arms, max_steps=10**6)
    return [{**learner.result(), "budget": budget} for (_, budget), learner in learners.items()]


# --- C: top-2 loss on digits --------------------------------------------------------------------------


def digits_topk(X: np.ndarray, y: np.ndarray, seed: int, loss: str, steps: int = 200, lr: float = 0.05,
                alpha: float = 1.0, k: int = 2, test_frac: float = 0.3) -> dict:
    """Experiment C: a linear classifier (64 -> 10) trained full-batch with Adam on ``load_digits``
    with cross-entropy (``loss="ce"``) or the LapSum top-k loss -mean log p_{y} where
    p = lapsum_topk(logits, k, alpha) (``loss="topk"``: the probability that the true class is in
    the soft top-k).  X (N, 64), y (N,).  Returns test top-1 and top-k accuracy."""
    rng = np.random.default_rng(seed)
    idx = rng.permutation(len(y))
    n_test = int(round(test_frac * len(y)))
    te, tr = idx[:n_test], idx[n_test:]
    mu, sd = X[tr].mean(0), X[tr].std(0) + 1e-6
    Xt = torch.tensor((X - mu) / sd, dtype=torch.float32)
    yt = torch.tensor(y, dtype=torch.long)
    n_cls = int(y.max()) + 1
    g = torch.Generator().manual_seed(seed)
    W = ((torch.rand(X.shape[1], n_cls, generator=g) * 2 - 1) / math.sqrt(X.shape[1])).requires_grad_(True)
    b = torch.zeros(n_cls, requires_grad=True)
    opt = torch.optim.Adam([W, b], lr=lr)
    for _ in range(steps):
        logits = Xt[tr] @ W + b
        if loss == "ce":
            L = torch.nn.functional.cross_entropy(logits, yt[tr])
        elif loss == "topk":
            p = lapsum_topk(logits, float(k), alpha)
            L = -torch.log(p.gather(1, yt[tr].unsqueeze(1)).clamp_min(1e-12)).mean()
        else:
            raise ValueError(f"unknown loss {loss!r}")
        opt.zero_grad()
        L.backward()
        opt.step()
    with torch.no_grad():
        logits = Xt[te] @ W + b
        top = torch.topk(logits, k, dim=1).indices
    return {"loss": loss, "top1_acc": float((top[:, 0] == yt[te]).float().mean()),
            f"top{k}_acc": float((top == yt[te].unsqueeze(1)).any(1).float().mean())}


# --- one seed ---------------------------------------------------------------------------------------


def run_seed(p: Params, seed: int, digits: tuple[np.ndarray, np.ndarray] | str | None = None) -> dict:
    """Experiments A (correctness), B (learn-to-select for each k and method) and C (digits) for one seed.

    ``digits``: (X, y) arrays, or the path of a Parquet file with the features and a ``target``
    column; loaded from scikit-learn when None.
    """
    out = {"seed": seed, "correctness": correctness(seed, n=p.correctness_n, alpha_hard=p.alpha_hard)}
    rows = []
    for k in p.select_ks:
        for method in p.methods:
            rows.append(learn_to_select(method, int(k), seed, n=p.select_n, steps=p.select_steps,
                                        batch=p.select_batch, lr=p.select_lr, hidden=p.select_hidden, tau=p.tau,
                                        sinkhorn_iter=p.sinkhorn_iter_train, noise=p.select_noise))
    out["select"] = rows
    out["select_budget"] = select_budget(p, seed)
    if digits is None:
        from sklearn.datasets import load_digits

        d = load_digits()
        digits = (d.data.astype(np.float64), d.target.astype(np.int64))
    elif isinstance(digits, str):  # a Parquet file with 64 feature columns and a "target" column
        import pandas as pd

        frame = pd.read_parquet(digits)
        digits = (frame.drop(columns="target").to_numpy(np.float64), frame["target"].to_numpy(np.int64))
    out["digits"] = [digits_topk(digits[0], digits[1], seed, loss, steps=p.digits_steps, alpha=p.digits_alpha)
                     for loss in ("ce", "topk")]
    return out

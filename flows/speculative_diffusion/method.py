"""Speculative sampling for diffusion models and Langevin chains (De Bortoli, Galashov, Gretton & Doucet, ICML 2025).

Every sampler here simulates a Markov chain with Gaussian transitions that share their std with the draft:

    X_{k+1} ~ p_k(. | X_k) = N(mean(X_k, f(X_k, k), k), s_k² I),     k = 0 .. K-1,

where ``f`` is the expensive *target* model (an ε-network for a DDPM, the gradient of a log density for Langevin)
and ``mean`` is cheap arithmetic. Speculative sampling drafts L steps with a cheap draft transition
q_k = N(m_q, s_k² I), evaluates the target at all drafted states in ONE parallel batch (one sequential function
evaluation, NFE), and keeps the longest prefix that a rejection test accepts. At the first rejection the output is
taken from the reflection maximal coupling, so the chain's law is exactly that of the target chain:

* accept the drafted Y = m_q + s Z with probability min(1, p(Y)/q(Y)) = min(1, φ(Z + Δ)/φ(Z)), Δ = (m_q - m_p)/s;
* on rejection output X = m_p + s (I - 2 e eᵀ) Z with e = Δ/|Δ| (the reflection does not depend on e's sign).

Drafts: ``frozen`` re-uses the target's output f at the last accepted state for all L draft steps (no draft model,
the paper's training-free draft); ``independent`` calls a separate cheap model (here a small ε-MLP) at every draft
step. Shapes: chains are rows, x is (n, d); steps are per row, (n,) long, because chains desynchronise.
The experiments at the end take the flow's typed params ``p``: ``run_seed(p, seed)`` runs one seed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from flows.speculative_diffusion.params import Params
from paperflows.core.seeding import torch_generator, torch_seeded
from tasks import diffusion
from tasks import two_sample
from tasks.data import digits_pixels, make_toy_2d
from tasks.train import torch_single_thread
from tasks.two_sample import energy_distance

# f(x (m, d), k (m,) long) -> (m, d): the target (or draft) model, called on a batch of states at their own steps
RowFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


# ----------------------------------------------------------------------------------------------------------------
# Gaussian-transition chains: DDPM ancestral sampling and the unadjusted Langevin algorithm
# ----------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class GaussianChain:
    """K steps of X_{k+1} = mean(X_k, f(X_k, k), k) + stds[k] Z (stds (K,); a zero std is a deterministic step)."""

    stds: torch.Tensor
    mean: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]  # (x, f, k) -> (m, d)

    @property
    def n_steps(self) -> int:
        return len(self.stds)


def ddpm_chain(schedule: diffusion.DDPMSchedule) -> GaussianChain:
    """Ancestral DDPM sampling as a chain: step k goes from t = T - k to t - 1, f is the ε-prediction.

    mean = (x - β_t/√(1-ᾱ_t) ε̂)/√α_t and std = √β̃_t, the same as ``DDPMSchedule.transition_mean/_std`` but per row.
    """
    T = schedule.n_steps
    ts = torch.arange(T, 0, -1)                          # t of step k = 0..K-1
    betas = schedule.betas[ts - 1]
    alpha_bars = schedule.alpha_bars[ts - 1]
    scale = 1.0 / torch.sqrt(1.0 - betas)                # (K,)
    eps_coef = betas / torch.sqrt(1.0 - alpha_bars)      # (K,)
    stds = torch.tensor([schedule.transition_std(int(t)) for t in ts], dtype=torch.float64)

    def mean(x: torch.Tensor, eps: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return scale.to(x.dtype)[k, None] * (x - eps_coef.to(x.dtype)[k, None] * eps)

    return GaussianChain(stds, mean)


def langevin_chain(step_size: float, n_steps: int) -> GaussianChain:
    """ULA X_{k+1} = X_k + h ∇log π(X_k) + √(2h) Z; f is the gradient of the (unnormalised) log density."""
    return GaussianChain(torch.full((n_steps,), math.sqrt(2.0 * step_size), dtype=torch.float64),
                         lambda x, grad, k: x + step_size * grad)


def eps_rows_from_net(net: torch.nn.Module, n_steps: int) -> RowFn:
    """An ε-network as a row function: chain step k is diffusion time t = T - k (each row its own t)."""
    return lambda x, k: net(x, (n_steps - k).to(x.dtype))


def eps_rows_from_scalar(eps_fn: diffusion.EpsFn, n_steps: int) -> RowFn:
    """Adapt a toolkit ``eps_fn(x, t: int)`` (e.g. ``GaussianMixture.exact_eps_fn``) to per-row steps by grouping
    the rows by step (still ONE logical call: the caller counts it once)."""

    def fn(x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for step in torch.unique(k).tolist():
            rows = k == step
            out[rows] = eps_fn(x[rows], n_steps - int(step)).to(x.dtype)
        return out

    return fn


@torch.no_grad()
def ancestral_chain(chain: GaussianChain, target: RowFn, x_init: torch.Tensor, generator: torch.Generator
                    ) -> tuple[torch.Tensor, int]:
    """The plain sampler: K sequential target calls. Returns (X_K, NFE = K).

    Draws its noise in the same order as ``tasks.diffusion.ddpm_sample`` (no draw on a zero-std step).
    """
    x = x_init
    for k in range(chain.n_steps):
        steps = torch.full((len(x),), k, dtype=torch.long)
        mean = chain.mean(x, target(x, steps), steps)
        std = float(chain.stds[k])
        x = mean + std * torch.randn(x.shape, generator=generator, dtype=x.dtype) if std > 0 else mean
    return x, chain.n_steps


# ----------------------------------------------------------------------------------------------------------------
# The acceptance step: rejection with a reflection maximal coupling (both Gaussians share their std)
# ----------------------------------------------------------------------------------------------------------------

def coupled_step(mean_p: torch.Tensor, mean_q: torch.Tensor, std: torch.Tensor, z: torch.Tensor, u: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """One accept/reject of the draft Y = m_q + s Z against the target N(m_p, s² I).

    mean_p, mean_q, z: (n, d); std: (n,) (0 = deterministic step: accept iff m_q == m_p, else output m_p);
    u: (n,) uniforms. Returns (X (n, d), accepted (n,) bool) with X ~ N(m_p, s² I) exactly and
    P(X = Y) = 1 - TV(p, q) = 2 Φ(-|m_p - m_q| / (2 s)).
    """
    positive = std > 0
    safe_std = torch.where(positive, std, torch.ones_like(std))[:, None]
    delta = (mean_q - mean_p) / safe_std                                     # Δ, (n, d)
    log_ratio = 0.5 * ((z * z).sum(1) - ((z + delta) ** 2).sum(1))        # log p(Y) - log q(Y)
    accepted = torch.where(positive, torch.log(u) < log_ratio, (mean_q == mean_p).all(1))
    norm = delta.norm(dim=1, keepdim=True)
    e = delta / torch.where(norm > 0, norm, torch.ones_like(norm))
    reflected = mean_p + safe_std * (z - 2.0 * (e * z).sum(1, keepdim=True) * e)
    rejected_out = torch.where(positive[:, None], reflected, mean_p)
    draft = mean_q + std[:, None] * z
    return torch.where(accepted[:, None], draft, rejected_out), accepted


def acceptance_probability(mean_p: np.ndarray, mean_q: np.ndarray, std: float) -> float:
    """Closed form 1 - TV(N(m_p, s² I), N(m_q, s² I)) = 2 Φ(-|m_p - m_q| / (2 s))."""
    from scipy.stats import norm
    return float(2.0 * norm.cdf(-np.linalg.norm(np.asarray(mean_p) - np.asarray(mean_q)) / (2.0 * std)))


# ----------------------------------------------------------------------------------------------------------------
# Speculative sampling
# ----------------------------------------------------------------------------------------------------------------

@dataclass
class SpeculativeStats:
    """Per-chain bookkeeping (tensors of shape (n,)) and per-step acceptance counts (K,)."""

    nfe: torch.Tensor            # sequential target calls each chain needed (a parallel batch counts once)
    target_rows: torch.Tensor    # target evaluations each chain needed in all (batch rows)
    draft_nfe: torch.Tensor      # sequential draft-model calls (independent draft; 0 for frozen)
    proposed: torch.Tensor       # draft transitions tested
    accepted: torch.Tensor       # draft transitions accepted
    windows: torch.Tensor        # draft-verify rounds
    step_proposed: torch.Tensor  # (K,) per chain step
    step_accepted: torch.Tensor  # (K,)
    batched_calls: int           # target calls made by this vectorised run over all chains


@torch.no_grad()
def speculative_sample(chain: GaussianChain, target: RowFn, x_init: torch.Tensor, lookahead: int,
                       generator: torch.Generator, draft: str = "frozen", draft_fn: RowFn | None = None,
                       verify: bool = True) -> tuple[torch.Tensor, SpeculativeStats]:
    """Speculative simulation of ``chain`` for n chains at once (rows of ``x_init`` (n, d)); returns (X_K, stats).

    A round, per chain at step k with L_c = min(L, K - k) steps left in the window:
    1. draft Y_0 = X_k, Y_{j+1} = m_q(Y_j) + s_{k+j} Z_j, j < L_c. ``frozen``: m_q(y) = mean(y, f(X_k, k), k + j),
       with f(X_k, k) known from the previous round's batch or, after a rejection, one sequential target call;
       ``independent``: m_q(y) = mean(y, draft_fn(y, k + j), k + j), one draft call per step.
    2. one parallel target call on the drafted states it needs: frozen: Y_1..Y_{L_c} (Y_{L_c} is a look-ahead that
       serves the next round's draft when everything is accepted; f(Y_0) is already known); independent: Y_0..Y_{L_c-1}.
    3. for j = 0, 1, ...: ``coupled_step`` on (m_p(Y_j), m_q(Y_j), Z_j); stop at the first rejection j*, whose coupled
       output is the new state X_{k+j*+1} (fresh: its f is unknown); if none, X_{k+L_c} = Y_{L_c}.
    ``verify=False`` accepts every draft (the uncorrected draft sampler, a baseline that is NOT exact).
    """
    if draft not in ("frozen", "independent"):
        raise ValueError(f"draft must be 'frozen' or 'independent', got {draft}")
    if draft == "independent" and draft_fn is None:
        raise ValueError("the independent draft needs draft_fn")
    n, d = x_init.shape
    K, L = chain.n_steps, lookahead
    stds = chain.stds.to(x_init.dtype)
    x, k = x_init.clone(), torch.zeros(n, dtype=torch.long)
    f_cur, has_f = torch.zeros_like(x), torch.zeros(n, dtype=torch.bool)
    zeros = lambda: torch.zeros(n, dtype=torch.long)
    st = SpeculativeStats(zeros(), zeros(), zeros(), zeros(), zeros(), zeros(),
                          torch.zeros(K, dtype=torch.long), torch.zeros(K, dtype=torch.long), 0)

    while True:
        active = (k < K).nonzero().squeeze(1)
        if len(active) == 0:
            break
        if draft == "frozen":                        # the target at X_k, for chains that just had a rejection
            need = active[~has_f[active]]
            if len(need):
                f_cur[need] = target(x[need], k[need])
                st.nfe[need] += 1
                st.target_rows[need] += 1
                st.batched_calls += 1
                has_f[need] = True
        m, k_a = len(active), k[active]
        length = torch.clamp(K - k_a, max=L)                                 # L_c per chain, (m,)
        positions = torch.arange(L + 1)
        steps = torch.clamp(k_a[:, None] + positions[None, :], max=K - 1)    # step of Y_j, (m, L+1)
        Y = torch.zeros(m, L + 1, d, dtype=x.dtype)
        MQ = torch.zeros(m, L, d, dtype=x.dtype)
        Z = torch.zeros(m, L, d, dtype=x.dtype)
        Y[:, 0] = x[active]
        for j in range(L):                            # 1. draft
            live = (j < length).nonzero().squeeze(1)
            if draft == "frozen":
                f_draft = f_cur[active[live]]
            else:
                f_draft = draft_fn(Y[live, j], steps[live, j])
                st.draft_nfe[active[live]] += 1
            MQ[live, j] = chain.mean(Y[live, j], f_draft, steps[live, j])
            Z[:, j] = torch.randn((m, d), generator=generator, dtype=x.dtype)
            Y[live, j + 1] = MQ[live, j] + stds[steps[live, j]][:, None] * Z[live, j]
        U = torch.rand((m, L), generator=generator, dtype=x.dtype)
        in_window = positions[None, :L] < length[:, None]                     # (m, L)

        if verify:                                    # 2. one parallel target call
            F = torch.zeros(m, L + 1, d, dtype=x.dtype)
            if draft == "frozen":
                F[:, 0] = f_cur[active]
                wanted = (positions[None, 1:] <= length[:, None]) & (k_a[:, None] + positions[None, 1:] < K)
                rows, cols = wanted.nonzero(as_tuple=True)
                cols = cols + 1
            else:
                rows, cols = in_window.nonzero(as_tuple=True)
            F[rows, cols] = target(Y[rows, cols], steps[rows, cols])
            st.nfe[active] += 1
            st.target_rows[active] += torch.bincount(rows, minlength=m)
            st.batched_calls += 1
            # 3. verify every window position at once; the first rejection ends the round
            r, c = in_window.nonzero(as_tuple=True)
            MP = torch.zeros(m, L, d, dtype=x.dtype)
            MP[r, c] = chain.mean(Y[r, c], F[r, c], steps[r, c])
            X_out, ok = torch.zeros(m, L, d, dtype=x.dtype), torch.ones(m, L, dtype=torch.bool)
            X_out[r, c], ok[r, c] = coupled_step(MP[r, c], MQ[r, c], stds[steps[r, c]], Z[r, c], U[r, c])
        else:
            ok = torch.ones(m, L, dtype=torch.bool)
        rejected = ~ok & in_window
        any_reject = rejected.any(1)
        first = torch.where(any_reject, rejected.float().argmax(1), length)   # j* or L_c
        n_tested = torch.where(any_reject, first + 1, length)
        tested = positions[None, :L] < n_tested[:, None]
        st.proposed[active] += n_tested
        st.accepted[active] += n_tested - any_reject.long()
        st.windows[active] += 1
        st.step_proposed += torch.bincount(steps[:, :L][tested], minlength=K)
        st.step_accepted += torch.bincount(steps[:, :L][tested & ok], minlength=K)

        idx = torch.arange(m)
        new_x = Y[idx, length]
        if verify:
            new_x = torch.where(any_reject[:, None], X_out[idx, torch.clamp(first, max=L - 1)], new_x)
        x[active] = new_x
        k[active] = k_a + n_tested
        if draft == "frozen":
            keep = ~any_reject & (k[active] < K) & verify
            if verify:
                f_cur[active[keep]] = F[idx[keep], length[keep]]
            has_f[active] = keep
    return x, st


# ----------------------------------------------------------------------------------------------------------------
# Unnormalised 2-D targets for Langevin
# ----------------------------------------------------------------------------------------------------------------

def four_mode_mixture() -> diffusion.GaussianMixture:
    """The 2-D 4-mode Gaussian mixture: modes at (±2, ±2), std 0.5, equal weights."""
    return diffusion.gaussian_mixture([[2.0, 2.0], [-2.0, 2.0], [2.0, -2.0], [-2.0, -2.0]], std=0.5)


def banana_grad(x: torch.Tensor, curvature: float = 0.3) -> torch.Tensor:
    """∇ log π for the banana π(x) ∝ exp(-x₁²/8 - (x₂ - b(x₁² - 4))²/2), b = ``curvature``; (n, 2) -> (n, 2)."""
    x1, x2 = x[:, 0], x[:, 1]
    r = x2 - curvature * (x1 ** 2 - 4.0)
    return torch.stack([-x1 / 4.0 + 2.0 * curvature * x1 * r, -r], dim=1)


def langevin_grad_fn(name: str) -> Callable[[torch.Tensor], torch.Tensor]:
    if name == "gmm4":
        return four_mode_mixture().score
    if name == "banana":
        return banana_grad
    raise ValueError(f"unknown Langevin target '{name}'; choose gmm4 or banana")


# ----------------------------------------------------------------------------------------------------------------
# One seed of the experiment
# ----------------------------------------------------------------------------------------------------------------

def _summary(stats: SpeculativeStats, n_plain: int) -> dict:
    nfe = stats.nfe.double()
    return {"nfe_seq": float(nfe.mean()), "nfe_ratio": float(nfe.mean()) / n_plain,
            "nfe_seq_max": int(stats.nfe.max()), "target_rows": float(stats.target_rows.double().mean()),
            "draft_nfe": float(stats.draft_nfe.double().mean()),
            "accept_rate": float(stats.accepted.sum()) / max(int(stats.proposed.sum()), 1),
            "windows": float(stats.windows.double().mean()), "batched_calls": stats.batched_calls}


def _stream(seed: int, *ids: int) -> int:
    """An independent integer seed for (seed, experiment, variant, ...): no two samplers share random numbers."""
    return int(np.random.SeedSequence([seed, *ids]).generate_state(1)[0])


def _timed(fn: Callable[..., tuple], *args, **kwargs) -> tuple:
    """``fn(*args, **kwargs)`` (a tuple) with its wall time appended."""
    started = time.perf_counter()
    out = fn(*args, **kwargs)
    return (*out, time.perf_counter() - started)


def load_data(name: str, n: int, seed: int) -> np.ndarray:
    """A 2-D density from ``tasks.data.make_toy_2d`` (n points), or ``digits``: all 1,797 8x8 digits in [-1, 1]."""
    return digits_pixels()[0] if name == "digits" else make_toy_2d(name, n, seed)


def train_models(name: str, p: Params, seed: int) -> tuple[torch.nn.Module, torch.nn.Module, np.ndarray, float]:
    """Target ε-MLP (``p.depth`` x ``p.width``, ``p.train_steps`` Adam steps) and the small independent draft
    ε-MLP (``p.draft_depth`` x ``p.draft_width``, ``p.draft_train_steps`` steps) on ``p.n_train`` points of
    density ``name``, T = ``p.n_steps``; returns (target, draft, data, training seconds)."""
    data = load_data(name, p.n_train, seed)
    schedule = diffusion.ddpm_schedule(p.n_steps)
    tensor = torch.tensor(data, dtype=torch.float32)
    dim = data.shape[1]
    started = time.perf_counter()
    with torch_seeded(seed):
        target = diffusion.TimeConditionedMLP(dim, width=p.width, depth=p.depth)
        drafter = diffusion.TimeConditionedMLP(dim, width=p.draft_width, depth=p.draft_depth, embedding_dim=16)
    diffusion.train_ddpm(target, tensor, schedule, steps=p.train_steps, batch_size=p.batch_size, lr=p.lr, seed=seed)
    diffusion.train_ddpm(drafter, tensor, schedule, steps=p.draft_train_steps, batch_size=p.batch_size, lr=p.lr,
                         seed=seed + 1)
    return target, drafter, data, time.perf_counter() - started


def diffusion_experiment(name: str, p: Params, seed: int, index: int = 0) -> dict:
    """Plain ancestral DDPM vs speculative sampling (frozen / independent draft, every L in ``p.lookaheads``) on
    one density: ``p.n_samples`` samples per sampler, two-sample tests with ``p.n_permutations`` permutations.

    ``index`` names the experiment's random streams. Sample quality is the energy distance to fresh data
    (for digits, to the whole data set: there is no more)."""
    target_net, draft_net, data, train_s = train_models(name, p, seed)
    T, n, dim = p.n_steps, p.n_samples, data.shape[1]
    schedule = diffusion.ddpm_schedule(T)
    chain = ddpm_chain(schedule)
    held_out = data if name == "digits" else make_toy_2d(name, n, seed + 100_000)
    target_rows = eps_rows_from_net(target_net, T)
    draft_rows = eps_rows_from_net(draft_net, T)
    rows, samples = [], {}

    counted = diffusion.CountedFn(diffusion.eps_from_net(target_net))
    x_T = torch.randn((n, dim), generator=torch_generator(_stream(seed, index, 0, 0)))
    with torch.no_grad():
        plain, nfe_plain, wall_plain = _timed(diffusion.ddpm_sample, counted, schedule, x_T,
                                                      torch_generator(_stream(seed, index, 0, 1)))
    plain = plain.numpy()
    samples["plain"] = plain
    base = {"kind": "diffusion", "dataset": name}
    rows.append({**base, "draft": "plain", "L": 1, "nfe_seq": float(counted.calls), "nfe_ratio": 1.0,
                 "target_rows": float(counted.rows) / n, "draft_nfe": 0.0, "accept_rate": float("nan"),
                 "wall_s": wall_plain, "energy_to_data": energy_distance(plain, held_out)})
    variants = [("frozen", L, True) for L in p.lookaheads]
    variants += [("independent", L, True) for L in p.lookaheads]
    variants += [("frozen_unverified", L, False) for L in p.lookaheads[-1:]]
    for variant, (draft, L, verify) in enumerate(variants, start=1):
        x_init = torch.randn((n, dim), generator=torch_generator(_stream(seed, index, variant, 0)))
        gen = torch_generator(_stream(seed, index, variant, 1))
        out, st, wall = _timed(speculative_sample, chain, target_rows, x_init, L, gen,
                               draft="independent" if draft == "independent" else "frozen", draft_fn=draft_rows,
                               verify=verify)
        out = out.numpy()
        samples[f"{draft}_L{L}"] = out
        tests = two_sample.kernel_permutation_tests(out, plain, p.n_permutations,
                                                   seed=_stream(seed, index, variant, 2))
        rows.append({**base, "draft": draft, "L": L, **_summary(st, nfe_plain), "wall_s": wall,
                     "energy_to_data": energy_distance(out, held_out), "mmd": tests["mmd"], "mmd_p": tests["mmd_p"],
                     "energy": tests["energy"], "energy_p": tests["energy_p"],
                     "step_accept": (st.step_accepted.double() / st.step_proposed.clamp(min=1)).tolist()})
        rows[-1].pop("batched_calls")
    rows[0]["train_s"] = train_s
    keep = ("plain", f"frozen_L{p.lookaheads[-1]}") if dim == 2 else ()
    return {"rows": rows, "samples": {key: value[:300].tolist() for key, value in samples.items() if key in keep}}


def langevin_experiment(name: str, p: Params, seed: int, index: int = 0) -> dict:
    """Plain ULA vs speculative ULA with the frozen-gradient draft (every L in ``p.lookaheads``, and uncorrected at
    the largest L) on one unnormalised 2-D density: ``p.n_samples`` chains of ``p.langevin_steps`` steps of size ``p.langevin_step``."""
    grad = langevin_grad_fn(name)
    chain = langevin_chain(p.langevin_step, p.langevin_steps)
    n, K = p.n_samples, p.langevin_steps
    target = lambda x, k: grad(x)
    x0 = torch.randn((n, 2), generator=torch_generator(_stream(seed, index, 0, 0)), dtype=torch.float64)
    plain, nfe_plain, wall_plain = _timed(ancestral_chain, chain, target, x0,
                                          torch_generator(_stream(seed, index, 0, 1)))
    plain = plain.numpy()
    base = {"kind": "langevin", "dataset": name}
    rows = [{**base, "draft": "plain", "L": 1, "nfe_seq": float(K), "nfe_ratio": 1.0, "target_rows": float(K),
             "draft_nfe": 0.0, "accept_rate": float("nan"), "wall_s": wall_plain}]
    # the uncorrected draft (no rejection step) at the largest L: the negative control of the exactness test
    variants = [("frozen", L, True) for L in p.lookaheads] + [("frozen_unverified", p.lookaheads[-1], False)]
    for variant, (draft, L, verify) in enumerate(variants, start=1):
        x_init = torch.randn((n, 2), generator=torch_generator(_stream(seed, index, variant, 0)),
                             dtype=torch.float64)
        gen = torch_generator(_stream(seed, index, variant, 1))
        out, st, wall = _timed(speculative_sample, chain, target, x_init, L, gen, draft="frozen", verify=verify)
        tests = two_sample.kernel_permutation_tests(out.numpy(), plain, p.n_permutations,
                                         seed=_stream(seed, index, variant, 2))
        summary = _summary(st, nfe_plain)
        summary.pop("batched_calls")
        rows.append({**base, "draft": draft, "L": L, **summary, "wall_s": wall, "mmd": tests["mmd"],
                     "mmd_p": tests["mmd_p"], "energy": tests["energy"], "energy_p": tests["energy_p"]})
    return {"rows": rows}


def run_seed(p: Params, seed: int) -> dict:
    """All experiments of one seed: the diffusion data sets ``p.datasets`` and the Langevin targets
    ``p.langevin_targets``. JSON-able."""
    with torch_single_thread():
        rows, samples = [], {}
        for index, name in enumerate(p.datasets):
            result = diffusion_experiment(name, p, seed, index)
            rows += result["rows"]
            if result["samples"]:
                samples[name] = result["samples"]
        for index, name in enumerate(p.langevin_targets, start=len(p.datasets)):
            rows += langevin_experiment(name, p, seed, index)["rows"]
    return {"seed": seed, "rows": [{"seed": seed, **row} for row in rows], "samples": samples}

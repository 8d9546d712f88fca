"""A small diffusion toolkit shared by the diffusion papers: schedules, denoisers, trainers, samplers that count
function evaluations, guidance, and a Gaussian mixture whose diffused score is known in closed form.

Two parameterisations cover the papers:

* **DDPM / VP** (Ho et al. 2020): discrete steps t = 1..T, x_t = √ᾱ_t x_0 + √(1-ᾱ_t) ε, an ε-predicting network,
  ancestral and DDIM samplers. A model is passed to the samplers as ``eps_fn(x_t, t) -> ε̂`` with x_t of shape
  (n, d) and t an int.
* **EDM / VE** (Karras et al. 2022): continuous noise level σ, x_σ = x_0 + σ ε, a preconditioned denoiser
  ``denoise_fn(x, σ) -> x̂_0`` and Heun's second-order ODE sampler on the ρ-spaced σ grid.

Every sampler returns its samples together with the number of *sequential* model calls it made (NFE): a call on a
batch of states counts once, however many states it holds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

from paperflows.core.seeding import torch_generator

EpsFn = Callable[[torch.Tensor, int], torch.Tensor]
DenoiseFn = Callable[[torch.Tensor, float], torch.Tensor]
# guidance(x_t, t) -> the gradient of a log-signal with respect to x_t, shape of x_t
GuidanceFn = Callable[[torch.Tensor, int], torch.Tensor]


# ----------------------------------------------------------------------------------------------------------------
# Noise schedules
# ----------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class DDPMSchedule:
    """A discrete VP schedule; index i of every tensor is step t = i + 1 (``alpha_bars[t - 1]`` is ᾱ_t)."""

    betas: torch.Tensor  # (T,), float64

    @property
    def n_steps(self) -> int:
        return len(self.betas)

    @property
    def alphas(self) -> torch.Tensor:
        return 1.0 - self.betas

    @property
    def alpha_bars(self) -> torch.Tensor:
        return torch.cumprod(self.alphas, 0)

    def alpha_bar(self, t: int) -> float:
        """ᾱ_t for t in 1..T; ᾱ_0 = 1."""
        return 1.0 if t == 0 else float(self.alpha_bars[t - 1])

    def transition_std(self, t: int) -> float:
        """σ_t of p(x_{t-1} | x_t): the posterior std √β̃_t = √(β_t (1-ᾱ_{t-1}) / (1-ᾱ_t)) (0 at t = 1)."""
        return math.sqrt(float(self.betas[t - 1]) * (1.0 - self.alpha_bar(t - 1)) / (1.0 - self.alpha_bar(t)))

    def transition_mean(self, x_t: torch.Tensor, eps: torch.Tensor, t: int) -> torch.Tensor:
        """Mean of p(x_{t-1} | x_t) given the predicted noise: (x_t - β_t/√(1-ᾱ_t) ε̂) / √α_t."""
        beta = float(self.betas[t - 1])
        return (x_t - beta / math.sqrt(1.0 - self.alpha_bar(t)) * eps) / math.sqrt(1.0 - beta)

    def posterior_mean(self, x_t: torch.Tensor, x0: torch.Tensor, t: int) -> torch.Tensor:
        """Mean of q(x_{t-1} | x_t, x_0) (Ho et al. eq. 7), for samplers that clip or otherwise edit x̂_0 first."""
        beta, alpha_bar, alpha_bar_prev = float(self.betas[t - 1]), self.alpha_bar(t), self.alpha_bar(t - 1)
        return (math.sqrt(alpha_bar_prev) * beta * x0
                + math.sqrt(1.0 - beta) * (1.0 - alpha_bar_prev) * x_t) / (1.0 - alpha_bar)

    def predict_x0(self, x_t: torch.Tensor, eps: torch.Tensor, t: int) -> torch.Tensor:
        """Tweedie's estimate of x_0: (x_t - √(1-ᾱ_t) ε̂) / √ᾱ_t."""
        return (x_t - math.sqrt(1.0 - self.alpha_bar(t)) * eps) / math.sqrt(self.alpha_bar(t))

    def add_noise(self, x0: torch.Tensor, noise: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """x_t for a batch of steps ``t`` (n,) in 1..T."""
        alpha_bar = self.alpha_bars.to(x0.dtype)[t - 1].reshape(-1, *([1] * (x0.dim() - 1)))
        return alpha_bar.sqrt() * x0 + (1.0 - alpha_bar).sqrt() * noise


def ddpm_schedule(n_steps: int, kind: str = "linear") -> DDPMSchedule:
    """β schedule with T = ``n_steps``.

    ``linear``: Ho et al.'s β from 1e-4 to 0.02 at T = 1000, both ends scaled by 1000/T so that short chains
    reach the same ᾱ_T ≈ 4e-5 (so T ≥ 25, where β_T = 20/T stays below 1).
    ``cosine``: Nichol & Dhariwal's ᾱ(t) = cos²((t/T + s)/(1 + s) · π/2), s = 0.008, β clipped at 0.999.
    """
    if kind == "linear":
        if n_steps < 25:
            raise ValueError(f"a linear schedule needs at least 25 steps (β_T = 20/T < 1); got {n_steps}")
        scale = 1000.0 / n_steps
        betas = torch.linspace(1e-4 * scale, 0.02 * scale, n_steps, dtype=torch.float64)
    elif kind == "cosine":
        grid = torch.arange(n_steps + 1, dtype=torch.float64) / n_steps
        alpha_bar = torch.cos((grid + 0.008) / 1.008 * math.pi / 2) ** 2
        betas = (1.0 - alpha_bar[1:] / alpha_bar[:-1]).clamp(max=0.999)
    else:
        raise ValueError(f"unknown schedule '{kind}'; choose linear or cosine")
    return DDPMSchedule(betas)


def edm_sigmas(n_steps: int, sigma_min: float = 0.002, sigma_max: float = 80.0, rho: float = 7.0) -> torch.Tensor:
    """Karras et al.'s ρ-spaced noise levels from σ_max down to σ_min, then a final 0: shape (n_steps + 1,)."""
    ramp = torch.linspace(0, 1, n_steps, dtype=torch.float64)
    sigmas = (sigma_max ** (1 / rho) + ramp * (sigma_min ** (1 / rho) - sigma_max ** (1 / rho))) ** rho
    return torch.cat([sigmas, torch.zeros(1, dtype=torch.float64)])


# ----------------------------------------------------------------------------------------------------------------
# Networks
# ----------------------------------------------------------------------------------------------------------------

def sinusoidal_embedding(time: torch.Tensor, dim: int, max_period: float = 10_000.0) -> torch.Tensor:
    """Transformer-style features of a scalar per row: (n,) -> (n, dim), dim even."""
    half = dim // 2
    frequencies = torch.exp(-math.log(max_period) * torch.arange(half, dtype=time.dtype) / half)
    angles = time[:, None] * frequencies[None, :]
    return torch.cat([torch.cos(angles), torch.sin(angles)], dim=1)


class TimeConditionedMLP(nn.Module):
    """MLP f(x, time, label) -> (n, dim) for ε-prediction (time = t, the step) or EDM (time = c_noise).

    Input: x (n, dim), a scalar time per row (n,), optional integer labels (n,) where label ``n_classes`` is the
    "no label" token used for classifier-free guidance. ``depth`` hidden layers of ``width`` with SiLU.
    """

    def __init__(self, dim: int, width: int = 256, depth: int = 4, n_classes: int = 0, embedding_dim: int = 64,
                 time_scale: float = 1.0):
        super().__init__()
        self.embedding_dim = embedding_dim
        self.time_scale = time_scale
        self.n_classes = n_classes
        self.label_embedding = nn.Embedding(n_classes + 1, embedding_dim) if n_classes else None
        layers: list[nn.Module] = []
        inputs = dim + embedding_dim * (2 if n_classes else 1)
        for _ in range(depth):
            layers += [nn.Linear(inputs, width), nn.SiLU()]
            inputs = width
        layers.append(nn.Linear(inputs, dim))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor, time: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
        features = [x, sinusoidal_embedding(time.to(x.dtype) * self.time_scale, self.embedding_dim)]
        if self.label_embedding is not None:
            if labels is None:
                labels = torch.full((len(x),), self.n_classes, dtype=torch.long)
            features.append(self.label_embedding(labels))
        return self.net(torch.cat(features, dim=1))


class EDMPrecond(nn.Module):
    """Karras et al.'s preconditioned denoiser D(x, σ) = c_skip x + c_out F(c_in x, c_noise).

    c_skip = σ_d²/(σ²+σ_d²), c_out = σσ_d/√(σ²+σ_d²), c_in = 1/√(σ²+σ_d²), c_noise = ¼ ln σ.
    """

    def __init__(self, net: TimeConditionedMLP, sigma_data: float):
        super().__init__()
        self.net = net
        self.sigma_data = sigma_data

    def forward(self, x: torch.Tensor, sigma: torch.Tensor | float, labels: torch.Tensor | None = None) -> torch.Tensor:
        sigma = torch.as_tensor(sigma, dtype=x.dtype).reshape(-1)
        sigma = sigma.expand(len(x)) if sigma.numel() == 1 else sigma
        column = sigma[:, None]
        total = column ** 2 + self.sigma_data ** 2
        c_skip = self.sigma_data ** 2 / total
        c_out = column * self.sigma_data / total.sqrt()
        c_in = 1.0 / total.sqrt()
        return c_skip * x + c_out * self.net(c_in * x, sigma.log() / 4.0, labels)


# ----------------------------------------------------------------------------------------------------------------
# Training
# ----------------------------------------------------------------------------------------------------------------

def _fit(module: nn.Module, data: torch.Tensor,
         batch_loss: Callable[[torch.Tensor, torch.Tensor, torch.Generator], torch.Tensor], *,
         steps: int, batch_size: int, lr: float, seed: int) -> list[float]:
    """Adam on ``batch_loss(x0, index, generator)`` over ``steps`` minibatches of ``data`` drawn with replacement.

    One generator seeded by ``seed`` draws the rows and whatever noise the loss needs, so a seed fixes the run.
    Returns the loss per step; the module is left in eval mode.
    """
    generator = torch_generator(seed)
    optimiser = torch.optim.Adam(module.parameters(), lr=lr)
    history = []
    module.train()
    for _ in range(steps):
        index = torch.randint(len(data), (min(batch_size, len(data)),), generator=generator)
        loss = batch_loss(data[index], index, generator)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        history.append(float(loss.detach()))
    module.eval()
    return history


def train_ddpm(net: TimeConditionedMLP, data: torch.Tensor, schedule: DDPMSchedule, *, steps: int, batch_size: int,
               lr: float, seed: int, labels: torch.Tensor | None = None, label_dropout: float = 0.0) -> list[float]:
    """ε-prediction loss E|ε - f(x_t, t, c)|² with t ~ U{1..T}; Adam, ``steps`` minibatches drawn with replacement.

    With ``labels`` (n,), each label is replaced by the null token with probability ``label_dropout`` (classifier-free
    guidance training). Returns the loss per step. ``net`` is called with time = t (the integer step as a float).
    """

    def batch_loss(x0: torch.Tensor, index: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        t = torch.randint(1, schedule.n_steps + 1, (len(x0),), generator=generator)
        noise = torch.randn(x0.shape, generator=generator, dtype=x0.dtype)
        batch_labels = None
        if labels is not None:
            batch_labels = labels[index].clone()
            dropped = torch.rand(len(x0), generator=generator) < label_dropout
            batch_labels[dropped] = net.n_classes
        return ((net(schedule.add_noise(x0, noise, t), t.to(x0.dtype), batch_labels) - noise) ** 2).mean()

    return _fit(net, data, batch_loss, steps=steps, batch_size=batch_size, lr=lr, seed=seed)


def train_edm(denoiser: EDMPrecond, data: torch.Tensor, *, steps: int, batch_size: int, lr: float, seed: int,
              p_mean: float = -1.2, p_std: float = 1.2) -> list[float]:
    """EDM loss λ(σ)|D(x + σε, σ) - x|² with ln σ ~ N(p_mean, p_std²), λ = (σ²+σ_d²)/(σσ_d)²; Adam.

    Returns the loss per step.
    """

    def batch_loss(x0: torch.Tensor, index: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        sigma = (p_mean + p_std * torch.randn(len(x0), generator=generator, dtype=x0.dtype)).exp()
        noise = torch.randn(x0.shape, generator=generator, dtype=x0.dtype)
        weight = (sigma ** 2 + denoiser.sigma_data ** 2) / (sigma * denoiser.sigma_data) ** 2
        residual = denoiser(x0 + sigma[:, None] * noise, sigma) - x0
        return (weight[:, None] * residual ** 2).mean()

    return _fit(denoiser, data, batch_loss, steps=steps, batch_size=batch_size, lr=lr, seed=seed)


# ----------------------------------------------------------------------------------------------------------------
# Model functions with evaluation counts
# ----------------------------------------------------------------------------------------------------------------

class CountedFn:
    """Wraps a model function and counts its calls: ``calls`` (sequential) and ``rows`` (states evaluated in all)."""

    def __init__(self, fn: Callable[..., torch.Tensor]):
        self.fn = fn
        self.calls = 0
        self.rows = 0

    def __call__(self, x: torch.Tensor, *args) -> torch.Tensor:
        self.calls += 1
        self.rows += len(x)
        return self.fn(x, *args)


def eps_from_net(net: TimeConditionedMLP, labels: torch.Tensor | None = None, guidance_scale: float = 0.0) -> EpsFn:
    """``eps_fn(x_t, t)`` from an ε-network; with labels and ``guidance_scale`` w > 0, classifier-free guidance
    (1 + w) ε(x, c) - w ε(x, ∅), evaluated as one batch of 2n rows."""

    def eps_fn(x: torch.Tensor, t: int) -> torch.Tensor:
        time = torch.full((len(x),), float(t), dtype=x.dtype)
        if labels is None or guidance_scale == 0.0:
            return net(x, time, labels)
        null = torch.full_like(labels, net.n_classes)
        both = net(torch.cat([x, x]), torch.cat([time, time]), torch.cat([labels, null]))
        conditional, unconditional = both[:len(x)], both[len(x):]
        return (1.0 + guidance_scale) * conditional - guidance_scale * unconditional

    return eps_fn


def tweedie_guidance(eps_fn: EpsFn, schedule: DDPMSchedule, log_signal: Callable[[torch.Tensor], torch.Tensor],
                     weight: float) -> GuidanceFn:
    """Guidance by a signal of the clean estimate: w ∇_{x_t} Σ log_signal(x̂_0(x_t)), x̂_0 by Tweedie.

    ``log_signal`` maps x̂_0 (n, d) to (n,); the gradient flows through the denoiser, so the signal never sees a
    noisy state.
    """

    def guidance(x_t: torch.Tensor, t: int) -> torch.Tensor:
        with torch.enable_grad():
            x = x_t.detach().requires_grad_(True)
            value = log_signal(schedule.predict_x0(x, eps_fn(x, t), t)).sum()
            (gradient,) = torch.autograd.grad(value, x)
        return weight * gradient

    return guidance


# ----------------------------------------------------------------------------------------------------------------
# Samplers
# ----------------------------------------------------------------------------------------------------------------

def ddpm_sample(eps_fn: EpsFn, schedule: DDPMSchedule, x_T: torch.Tensor, generator: torch.Generator,
                guidance: GuidanceFn | None = None) -> tuple[torch.Tensor, int]:
    """Ancestral sampling x_{t-1} = μ(x_t, ε̂) + σ_t z from t = T to 1; returns (x_0, sequential NFE = T).

    Guidance g = ∇ log r(x_t) shifts the noise prediction, ε̂ ← ε̂ - √(1-ᾱ_t) g (Dhariwal & Nichol's classifier
    guidance), i.e. the mean moves by σ_t²-scaled score.
    """
    x = x_T
    for t in range(schedule.n_steps, 0, -1):
        with torch.no_grad():
            eps = eps_fn(x, t)
        if guidance is not None:
            eps = eps - math.sqrt(1.0 - schedule.alpha_bar(t)) * guidance(x, t)
        mean = schedule.transition_mean(x, eps, t)
        noise = torch.randn(x.shape, generator=generator, dtype=x.dtype) if t > 1 else torch.zeros_like(x)
        x = mean + schedule.transition_std(t) * noise
    return x, schedule.n_steps


@torch.no_grad()
def ddim_sample(eps_fn: EpsFn, schedule: DDPMSchedule, x_T: torch.Tensor, n_steps: int) -> tuple[torch.Tensor, int]:
    """Deterministic DDIM (η = 0) on ``n_steps`` evenly spaced steps of the schedule; returns (x_0, NFE)."""
    times = torch.linspace(schedule.n_steps, 1, n_steps).round().long().unique_consecutive().tolist()
    x = x_T
    for index, t in enumerate(times):
        eps = eps_fn(x, t)
        x0 = schedule.predict_x0(x, eps, t)
        previous = schedule.alpha_bar(times[index + 1]) if index + 1 < len(times) else 1.0
        x = math.sqrt(previous) * x0 + math.sqrt(1.0 - previous) * eps
    return x, len(times)


@torch.no_grad()
def heun_sample(denoise_fn: DenoiseFn, x_start: torch.Tensor, sigmas: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Karras et al.'s deterministic Heun sampler for dx/dσ = (x - D(x, σ))/σ along ``sigmas`` (decreasing, last 0).

    ``x_start`` is a state at noise level sigmas[0]. Euler step to σ_{i+1}, then the trapezoidal correction unless
    σ_{i+1} = 0. Returns (x at σ = 0, NFE).
    """
    x, nfe = x_start, 0
    for sigma, sigma_next in zip(sigmas[:-1].tolist(), sigmas[1:].tolist()):
        slope = (x - denoise_fn(x, sigma)) / sigma
        nfe += 1
        x_next = x + (sigma_next - sigma) * slope
        if sigma_next > 0:
            slope_next = (x_next - denoise_fn(x_next, sigma_next)) / sigma_next
            nfe += 1
            x_next = x + (sigma_next - sigma) * (slope + slope_next) / 2.0
        x = x_next
    return x, nfe


# ----------------------------------------------------------------------------------------------------------------
# A target with a closed-form score
# ----------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class GaussianMixture:
    """Σ_k w_k N(μ_k, s_k² I) with means (K, d), stds (K,), weights (K,); float64 throughout.

    Diffusing it keeps it a mixture: under VP noise ᾱ, μ_k → √ᾱ μ_k and s_k² → ᾱ s_k² + 1 - ᾱ; under VE noise σ,
    s_k² → s_k² + σ². So the exact ε-prediction and denoiser at every noise level are closed-form.
    """

    means: torch.Tensor
    stds: torch.Tensor
    weights: torch.Tensor

    @property
    def dim(self) -> int:
        return self.means.shape[1]

    def sample(self, n: int, generator: torch.Generator) -> torch.Tensor:
        component = torch.multinomial(self.weights, n, replacement=True, generator=generator)
        noise = torch.randn((n, self.dim), generator=generator, dtype=torch.float64)
        return self.means[component] + self.stds[component, None] * noise

    def _component_log_probs(self, x: torch.Tensor) -> torch.Tensor:
        squared = ((x[:, None, :] - self.means[None]) ** 2).sum(-1)
        variances = self.stds ** 2
        return (self.weights.log() - squared / (2 * variances)
                - self.dim / 2 * torch.log(2 * math.pi * variances))

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        """log density, (n, d) -> (n,)."""
        return torch.logsumexp(self._component_log_probs(x), dim=1)

    def score(self, x: torch.Tensor) -> torch.Tensor:
        """∇_x log p(x), (n, d) -> (n, d): the responsibility-weighted (μ_k - x)/s_k²."""
        responsibilities = torch.softmax(self._component_log_probs(x), dim=1)
        pulls = (self.means[None] - x[:, None, :]) / (self.stds ** 2)[None, :, None]
        return (responsibilities[:, :, None] * pulls).sum(1)

    def diffused(self, alpha_bar: float) -> "GaussianMixture":
        return GaussianMixture(self.means * math.sqrt(alpha_bar),
                               torch.sqrt(alpha_bar * self.stds ** 2 + 1.0 - alpha_bar), self.weights)

    def noised(self, sigma: float) -> "GaussianMixture":
        return GaussianMixture(self.means, torch.sqrt(self.stds ** 2 + sigma ** 2), self.weights)

    def exact_eps_fn(self, schedule: DDPMSchedule) -> EpsFn:
        """The Bayes-optimal ε-prediction E[ε | x_t] = -√(1-ᾱ_t) ∇ log p_t(x_t)."""
        return lambda x, t: -math.sqrt(1.0 - schedule.alpha_bar(t)) * self.diffused(schedule.alpha_bar(t)).score(x)

    def exact_denoise_fn(self) -> DenoiseFn:
        """The Bayes-optimal denoiser E[x_0 | x_σ] = x + σ² ∇ log p_σ(x) (Tweedie)."""
        return lambda x, sigma: x + sigma ** 2 * self.noised(sigma).score(x)


def gaussian_mixture(means: list[list[float]], std: float, weights: list[float] | None = None) -> GaussianMixture:
    """Convenience constructor: K modes at ``means`` (K, d) with a common std."""
    means_tensor = torch.tensor(means, dtype=torch.float64)
    k = len(means_tensor)
    weight_tensor = torch.tensor(weights if weights is not None else [1.0 / k] * k, dtype=torch.float64)
    return GaussianMixture(means_tensor, torch.full((k,), float(std), dtype=torch.float64),
                           weight_tensor / weight_tensor.sum())

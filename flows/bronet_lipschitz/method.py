"""BRONet on 8x8 digits: the Block Reflector Orthogonal (BRO) layer and the Logit-Annealing (LA) loss,
against the Cayley (Trockman & Kolter, 2021) and SOC (Singla & Feizi, 2021) orthogonal convolutions and
the cross-entropy / offset cross-entropy losses; certified by the Lipschitz margin. No Prefect; read top
to bottom.

Shapes: images ``(b, c, h, w)`` (digits: ``(b, 1, 8, 8)``, pixels in [0, 1]); logits ``(b, 10)``.

The three layer families share one network (a small LipConvNet) and differ only in how each conv's
orthogonal matrix is parameterised:

* **BRO** (the paper): per 2-D frequency f, ``W(f) = I - 2 V(f) (V(f)^H V(f) + eps I)^{-1} V(f)^H`` with
  ``V(f)`` the FFT of a k x k kernel ``(c_max, r)``: a block reflector, orthogonal by construction
  (no iteration, no series); one r x r solve per frequency. As in the official code the input is
  zero-padded by k // 2, the circular conv runs on the padded grid and the output is cropped back.
* **Cayley**: per frequency the (generalised) Cayley transform of the kernel's FFT, ``(I + S)^{-1} (I - S)``
  with ``S`` skew-Hermitian in the square case (Trockman & Kolter, as in the official repository: same
  pad + crop, centred kernel, global scale ``alpha W / ||W||``); one c_min x c_min inverse per frequency.
* **SOC**: ``exp(S) x`` by a truncated Taylor series, ``S`` a skew-symmetric zero-padded convolution
  (kernel ``(K - K^T_flipped) / 2``) divided by the smallest of four reshaped-kernel norms, as the official
  code (6 terms in training, 15 at evaluation).

A BRO or SOC layer with ``c_out != c_in`` uses the top-left ``c_out x c_in`` block of a ``c_max x c_max``
orthogonal matrix (orthonormal columns when ``c_out >= c_in``, a 1-Lipschitz projection otherwise), as
the official code; Cayley's rectangular transform gives orthonormal columns (or rows) directly.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass

import numpy as np
import torch
from sklearn.model_selection import train_test_split
from torch import nn
from torch.nn import functional as F

from flows.bronet_lipschitz.params import Params
from paperflows.core.seeding import torch_generator, torch_seeded
from tasks import lipschitz as lip
from tasks.attacks import margin_objective, pgd
from tasks.data import digits_pixels
from tasks.timing import interleaved_seconds
from tasks.train import torch_single_thread

N_CLASSES = 10
IMAGE = 8
KINDS = ("bro", "cayley", "soc")
LOSSES = ("ce", "xent", "la")


# ----------------------------------------------------------------------------------------------------
# Orthogonal layers
# ----------------------------------------------------------------------------------------------------

def kernel_fft(kernel: torch.Tensor, n: int) -> torch.Tensor:
    """Per-frequency matrices of a kernel ``(a, b, k, k)`` zero-padded to an ``n x n`` grid:
    ``(n * (n // 2 + 1), a, b)`` complex (real FFT: the other half is the conjugate)."""
    a, b = kernel.shape[:2]
    return torch.fft.rfft2(kernel, s=(n, n)).permute(2, 3, 0, 1).reshape(-1, a, b)


def block_reflector(V: torch.Tensor, eps_ratio: float) -> torch.Tensor:
    """BRO's matrix ``I - 2 V (V^H V + eps I)^{-1} V^H`` for a batch ``V`` of shape ``(F, m, r)``, r <= m:
    shape ``(F, m, m)``. With eps = 0 it is the reflection across the orthogonal complement of
    range(V): symmetric (Hermitian) and orthogonal (unitary). ``eps = eps_ratio * mean diag(V^H V)``
    keeps the r x r solve well posed (as the official code); it moves the eigenvalues on range(V) from
    -1 to ``-1 + 2 eps / (sigma^2 + eps)``, so the norm stays <= 1."""
    gram = V.mH @ V
    eye_r = torch.eye(V.shape[-1], dtype=V.dtype)
    eps = gram.diagonal(dim1=-2, dim2=-1).real.mean(dim=-1).mul(eps_ratio)
    gram = gram + eps[:, None, None] * eye_r
    eye_m = torch.eye(V.shape[-2], dtype=V.dtype)
    return eye_m - 2.0 * V @ torch.linalg.solve(gram, V.mH)


def cayley(W: torch.Tensor) -> torch.Tensor:
    """Trockman & Kolter's (generalised) Cayley transform of ``W`` ``(F, c_out, c_in)``, shape ``(F, c_out, c_in)``.

    For c_out >= c_in, with ``U = W[:, :c_in]`` (square) and ``V = W[:, c_in:]``, ``A = U - U^H + V^H V`` and
    ``Q = [(I + A)^{-1} (I - A); -2 V (I + A)^{-1}]`` has orthonormal columns (square case: the classic
    ``(I + S)^{-1} (I - S)`` of the skew-Hermitian ``S = U - U^H``); for c_out < c_in the transform of the
    transpose, transposed back (orthonormal rows). One c_min x c_min inverse per frequency."""
    _, c_out, c_in = W.shape
    if c_in > c_out:
        return cayley(W.transpose(1, 2)).transpose(1, 2)
    U, V = W[:, :c_in], W[:, c_in:]
    eye = torch.eye(c_in, dtype=W.dtype)
    A = U - U.mH + V.mH @ V
    inverse = torch.linalg.inv(eye + A)
    return torch.cat([inverse @ (eye - A), -2.0 * V @ inverse], dim=1)


class FFTOrthoConv(nn.Module):
    """A conv applied per frequency on an ``n x n`` grid: ``z(f) = W(f)[:c_out, :c_in] x(f)``.

    ``pad``: zero-pad the input by k // 2 before the circular conv and crop afterwards (BRO's official
    layer), else a circular conv on the image itself (Cayley). Subclasses give ``matrices()``, shape
    ``(F, c_max, c_max)``. In eval mode the matrices are computed once and cached.
    """

    def __init__(self, c_in: int, c_out: int, kernel_size: int, size: int, pad: bool) -> None:
        super().__init__()
        self.c_in, self.c_out, self.k, self.size = c_in, c_out, kernel_size, size
        self.c_max = max(c_in, c_out)
        self.pad = kernel_size // 2 if pad else 0
        self.n = size + 2 * self.pad
        self.bias = nn.Parameter(torch.zeros(c_out))
        self._cache: torch.Tensor | None = None

    def matrices(self) -> torch.Tensor:
        raise NotImplementedError

    def train(self, mode: bool = True) -> "FFTOrthoConv":
        self._cache = None  # weights may change
        return super().train(mode)

    def _weights(self) -> torch.Tensor:
        if self.training:
            return self.matrices()
        if self._cache is None:
            with torch.no_grad():
                self._cache = self.matrices()
        return self._cache

    def circular(self, x: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
        """The circular conv on the n x n grid: ``x`` ``(b, c, n, n)`` with c = W's columns -> ``(b, W's rows, n, n)``."""
        b, c, n, _ = x.shape
        m = n // 2 + 1
        xf = torch.fft.rfft2(x, norm="ortho").permute(2, 3, 1, 0).reshape(n * m, c, b)
        zf = (W @ xf).reshape(n, m, W.shape[-2], b).permute(3, 2, 0, 1)
        return torch.fft.irfft2(zf, s=(n, n), norm="ortho")

    def linear(self, x: torch.Tensor) -> torch.Tensor:
        """The layer without its bias, ``(b, c_in, size, size) -> (b, c_out, size, size)``."""
        W = self._weights()[:, : self.c_out, : self.c_in]
        if self.pad:
            x = F.pad(x, (self.pad,) * 4)
        z = self.circular(x, W)
        if self.pad:
            z = z[:, :, self.pad:-self.pad, self.pad:-self.pad]
        return z

    def core(self, x: torch.Tensor) -> torch.Tensor:
        """The full ``c_max x c_max`` circular operator on the padded grid, ``(b, c_max, n, n)``: the map
        that is orthogonal by construction (the crop of ``linear`` only removes energy)."""
        return self.circular(x, self._weights())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) + self.bias[:, None, None]


class BROConv(FFTOrthoConv):
    """BRO: ``V`` is a real kernel ``(c_max, r, k, k)``; rank r = ``rank_frac * c`` for square layers
    (official ``--bro-rank``), ``min(c_in, c_out)`` for rectangular ones; identity-like init (one 1 at
    the centre tap of each of the first r channels), as the official ``id_init``."""

    def __init__(self, c_in: int, c_out: int, kernel_size: int, size: int, rank_frac: float, eps_ratio: float) -> None:
        super().__init__(c_in, c_out, kernel_size, size, pad=True)
        self.rank = max(1, int(c_in * rank_frac)) if c_in == c_out else min(c_in, c_out)
        V = torch.zeros(self.c_max, self.rank, kernel_size, kernel_size)
        V[torch.arange(self.rank), torch.arange(self.rank), kernel_size // 2, kernel_size // 2] = 1.0
        self.V = nn.Parameter(V)
        self.eps_ratio = eps_ratio

    def matrices(self) -> torch.Tensor:
        return block_reflector(kernel_fft(self.V, self.n), self.eps_ratio)


class CayleyConv(FFTOrthoConv):
    """Cayley as in the official repository (after Trockman & Kolter): a real kernel ``(c_out, c_in, k, k)``
    (PyTorch's default conv init), zero-padded input and cropped output like BRO, the kernel's FFT
    conjugated (PyTorch convs are cross-correlations) and phase-shifted so that the kernel is centred,
    then ``cayley(alpha * W / ||W||)`` per frequency, ``||W||`` over all frequencies. ``alpha`` starts at 1
    for convs (a near-identity start) and at ``||W||`` for the dense head (``dense``: the official
    ``CayleyLinear``, uniform init +-1/sqrt(c_in))."""

    def __init__(self, c_in: int, c_out: int, kernel_size: int, size: int, dense: bool = False) -> None:
        super().__init__(c_in, c_out, kernel_size, size, pad=True)
        A = torch.empty(c_out, c_in, kernel_size, kernel_size)
        if dense:
            nn.init.uniform_(A, -1 / math.sqrt(c_in), 1 / math.sqrt(c_in))
        else:
            nn.init.kaiming_uniform_(A, a=math.sqrt(5))
        self.A = nn.Parameter(A)
        self.alpha = nn.Parameter(A.norm().detach().clone() if dense else torch.tensor(1.0))
        n, s = self.n, (kernel_size - 1) // 2
        rows, cols = torch.meshgrid(torch.arange(n), torch.arange(n // 2 + 1), indexing="ij")
        self.register_buffer("shift", torch.exp(-2j * math.pi * s * (rows + cols) / n).reshape(-1, 1, 1).to(torch.complex64))

    def matrices(self) -> torch.Tensor:
        W = self.shift * kernel_fft(self.A, self.n).conj()
        return cayley(self.alpha * W / W.norm())


def transpose_filter(kernel: torch.Tensor) -> torch.Tensor:
    """The kernel of the adjoint of a zero-padded 'same' conv: channels swapped, taps flipped."""
    return kernel.transpose(0, 1).flip(2, 3)


def _unit(t: torch.Tensor) -> torch.Tensor:
    return t / t.norm().clamp_min(1e-12)


class SOCConv(nn.Module):
    """SOC as in the official repository: ``z = exp(S) x`` by a truncated Taylor series, ``S`` the zero-padded
    'same' conv with skew kernel ``(K - K^T_flipped) / 2`` divided by the smallest of the four 'fantastic
    four' matrix norms of the kernel (each by power iteration on a reshaping of the 4-D kernel, 50 steps at
    init, one per training step; no gradient through the vectors). Channels are zero-padded to c_max on
    the way in and the first c_out kept on the way out."""

    # (sum axes for v, shape of u, sum axes for u, shape of v) of the four reshapings
    SHAPES = (((1, 3), (1, -1, 1, -2), (0, 2)), ((1, 2), (1, -1, -2, 1), (0, 3)),
              ((1, 2, 3), (1, -1, -2, -2), (0,)), ((0, 2, 3), (-1, 1, -2, -2), (1,)))

    def __init__(self, c_in: int, c_out: int, kernel_size: int, size: int, train_terms: int, eval_terms: int,
                 seed: int) -> None:
        super().__init__()
        self.c_in, self.c_out, self.k, self.size = c_in, c_out, kernel_size, size
        self.c_max = max(c_in, c_out)
        self.K = nn.Parameter(torch.randn(self.c_max, self.c_max, kernel_size, kernel_size) / math.sqrt(self.c_max))
        self.bias = nn.Parameter(torch.zeros(c_out))
        self.train_terms, self.eval_terms = train_terms, eval_terms
        generator = torch_generator(seed)
        for i, (_, u_shape, _) in enumerate(self.SHAPES):
            shape = [self.c_max if d == -1 else kernel_size if d == -2 else d for d in u_shape]
            self.register_buffer(f"u{i}", _unit(torch.randn(shape, generator=generator)))
        self._power(50)

    def _skew(self) -> torch.Tensor:
        return 0.5 * (self.K - transpose_filter(self.K))

    @torch.no_grad()
    def _power(self, iters: int) -> None:
        skew = self._skew()
        for _ in range(iters):
            for i, (v_axes, _, u_axes) in enumerate(self.SHAPES):
                v = _unit((skew * getattr(self, f"u{i}")).sum(v_axes, keepdim=True))
                setattr(self, f"u{i}", _unit((skew * v).sum(u_axes, keepdim=True)))

    def scaled_skew(self) -> torch.Tensor:
        """The skew kernel divided by min_i u_i^T R_i v_i (the four power-iteration norm estimates)."""
        skew = self._skew()
        sigmas = []
        for i, (v_axes, _, _) in enumerate(self.SHAPES):
            u = getattr(self, f"u{i}")
            v = _unit((skew.detach() * u).sum(v_axes, keepdim=True))
            sigmas.append((skew * u * v).sum())
        return skew / torch.stack(sigmas).min().clamp_min(1e-12)

    def linear(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            self._power(1)
        terms = self.train_terms if self.training else self.eval_terms
        skew = self.scaled_skew()
        if self.c_max > self.c_in:
            x = F.pad(x, (0, 0, 0, 0, 0, self.c_max - self.c_in))
        z = x
        for i in range(terms - 1, 0, -1):  # Horner: sum_{j < terms} S^j x / j!
            z = x + F.conv2d(z, skew, padding=self.k // 2) / i
        return z[:, : self.c_out]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) + self.bias[:, None, None]


class MaxMin(nn.Module):
    """MaxMin (GroupSort of pairs): 1-Lipschitz and gradient-norm preserving. ``(b, 2c, ...) -> (b, 2c, ...)``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = x.chunk(2, dim=1)
        return torch.cat([torch.maximum(a, b), torch.minimum(a, b)], dim=1)


def make_layer(kind: str, c_in: int, c_out: int, kernel_size: int, size: int, p: Params, seed: int) -> nn.Module:
    if kind == "bro":
        return BROConv(c_in, c_out, kernel_size, size, p.bro_rank, p.bro_eps)
    if kind == "cayley":
        return CayleyConv(c_in, c_out, kernel_size, size, dense=size == 1 and kernel_size == 1)
    if kind == "soc":
        return SOCConv(c_in, c_out, kernel_size, size, p.soc_train_terms, p.soc_eval_terms, seed)
    raise ValueError(f"unknown layer kind {kind!r}; choose one of {KINDS}")


class LipConvNet(nn.Module):
    """A small LipConvNet: per stage two orthogonal convs (MaxMin after each), then an invertible 2x2
    downsampling (``pixel_unshuffle``, a permutation) between stages; the features are flattened and an
    orthogonal dense head (the same family, as a 1x1 conv on a 1x1 grid) gives 10 logits.
    ``(b, 64)`` pixels -> ``(b, 10)``. Every piece is 1-Lipschitz, so L <= 1 up to SOC's series error."""

    def __init__(self, kind: str, p: Params, seed: int) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        c, size = 1, IMAGE
        for stage, width in enumerate(p.channels):
            layers += [make_layer(kind, c, width, p.kernel_size, size, p, seed + 10 * stage), MaxMin(),
                       make_layer(kind, width, width, p.kernel_size, size, p, seed + 10 * stage + 1), MaxMin()]
            c = width
            if stage < len(p.channels) - 1:
                layers.append(nn.PixelUnshuffle(2))
                c, size = 4 * c, size // 2
        self.features = nn.Sequential(*layers)
        self.flat = c * size * size
        self.head = make_layer(kind, self.flat, N_CLASSES, 1, 1, p, seed + 99)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.features(x.reshape(-1, 1, IMAGE, IMAGE))
        return self.head(z.reshape(len(z), self.flat, 1, 1)).reshape(len(z), N_CLASSES)

    def linear_layers(self) -> list[tuple[nn.Module, tuple[int, ...]]]:
        """Each orthogonal layer with the shape of one input ``(1, c_in, size, size)``."""
        convs = [m for m in self.features if hasattr(m, "linear")] + [self.head]
        return [(m, (1, m.c_in, m.size, m.size)) for m in convs]

    def lipschitz_bound(self, iters: int) -> float:
        """Product of the layers' spectral norms (power iteration through ``tasks.lipschitz``): an upper
        bound on the network's l2 Lipschitz constant (MaxMin and the unshuffle are 1-Lipschitz)."""
        bound = 1.0
        for i, (layer, shape) in enumerate(self.linear_layers()):
            bound *= lip.spectral_norm(layer.linear, shape, iters=iters, seed=i, dtype=torch.float32)
        return bound


# ----------------------------------------------------------------------------------------------------
# Losses
# ----------------------------------------------------------------------------------------------------

def ce_loss(logits: torch.Tensor, labels: torch.Tensor, p: Params) -> torch.Tensor:
    """Plain cross-entropy (the standard baseline)."""
    return F.cross_entropy(logits, labels)


def _offset_logits(logits: torch.Tensor, labels: torch.Tensor, p: Params) -> torch.Tensor:
    """``(z - offset * sqrt(2) * onehot(y)) / T``: the true logit must win by the offset to reach a low loss
    (the official trainer multiplies the offset factor by sqrt(2), the certificate's margin factor)."""
    onehot = F.one_hot(labels, N_CLASSES).to(logits.dtype)
    return (logits - p.offset * math.sqrt(2.0) * onehot) / p.temperature


def xent_loss(logits: torch.Tensor, labels: torch.Tensor, p: Params) -> torch.Tensor:
    """Offset cross-entropy (Prach & Lampert's margin loss, the 'Xent' baseline): ``T * CE(offset logits)``."""
    return F.cross_entropy(_offset_logits(logits, labels, p), labels) * p.temperature


def la_loss(logits: torch.Tensor, labels: torch.Tensor, p: Params) -> torch.Tensor:
    """Logit annealing: ``T * mean(alpha (1 - p_y)^beta CE)`` on the offset logits; the focal factor anneals
    the loss of points whose margin is already large, so the Lipschitz budget goes to the rest."""
    ce = F.cross_entropy(_offset_logits(logits, labels, p), labels, reduction="none")
    p_true = torch.exp(-ce)
    return (p.la_alpha * (1.0 - p_true) ** p.la_beta * ce).mean() * p.temperature


LOSS_FNS = {"ce": ce_loss, "xent": xent_loss, "la": la_loss}


# ----------------------------------------------------------------------------------------------------
# Data, training, evaluation
# ----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Split:
    x_train: torch.Tensor  # (n_train, 64), pixels in [0, 1]
    y_train: torch.Tensor  # (n_train,)
    x_test: torch.Tensor
    y_test: torch.Tensor


def load_split(p: Params, seed: int) -> Split:
    """The digits with pixels in [0, 1] (radii are then in the plan's 1/255 pixel units), split stratified
    by ``seed``."""
    X, y = digits_pixels()
    X = (X + 1.0) / 2.0
    xtr, xte, ytr, yte = train_test_split(X, y, test_size=p.test_fraction, random_state=seed, stratify=y)
    as_x = lambda a: torch.tensor(a, dtype=torch.float32)  # noqa: E731
    as_y = lambda a: torch.tensor(a, dtype=torch.long)  # noqa: E731
    return Split(as_x(xtr), as_y(ytr), as_x(xte), as_y(yte))


def build_model(kind: str, p: Params, seed: int) -> LipConvNet:
    with torch_seeded(seed):
        return LipConvNet(kind, p, seed)


def train_model(model: nn.Module, loss: str, split: Split, p: Params, seed: int) -> list[float]:
    """SGD with momentum and weight decay, cosine learning-rate decay to 0 per step (official defaults
    scaled to the digits); batches drawn from ``seed``. Returns the mean loss per epoch."""
    loss_fn = LOSS_FNS[loss]
    optimiser = torch.optim.SGD(model.parameters(), lr=p.lr, momentum=p.momentum, weight_decay=p.weight_decay)
    n = len(split.x_train)
    steps_per_epoch = math.ceil(n / p.batch_size)
    total = p.epochs * steps_per_epoch
    schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, lambda t: 0.5 * (1 + math.cos(math.pi * t / total)))
    generator = torch_generator(seed)
    history = []
    model.train()
    for _ in range(p.epochs):
        order = torch.randperm(n, generator=generator)
        running = 0.0
        for start in range(0, n, p.batch_size):
            idx = order[start:start + p.batch_size]
            optimiser.zero_grad()
            value = loss_fn(model(split.x_train[idx]), split.y_train[idx], p)
            value.backward()
            optimiser.step()
            schedule.step()
            running += float(value.detach()) * len(idx)
        history.append(running / n)
    model.eval()
    return history


def evaluate(model: LipConvNet, split: Split, p: Params, seed: int) -> dict:
    """Clean accuracy, the Lipschitz bound, certified accuracy at each radius (certificate
    ``margin / (sqrt(2) L)`` with L = max(1, product of layer norms)), PGD-l2 robust accuracy (margin
    objective) and the number of test points certified at a radius yet broken by PGD there (must be 0)."""
    model.eval()
    with torch.no_grad():
        logits = model(split.x_test)
    bound = model.lipschitz_bound(p.power_iters)
    L = max(1.0, bound)
    radius = lip.certified_radius(logits, split.y_test, L)
    out = {"clean_acc": float((logits.argmax(1) == split.y_test).float().mean()), "lipschitz_bound": bound,
           "median_radius": float(radius.clamp_min(0).median()), "cert": {}, "pgd": {}, "violations": 0}
    for r255 in p.radii_255:
        r = r255 / 255.0
        certified = radius > r
        out["cert"][r255] = float(certified.float().mean())
        if r == 0:
            out["pgd"][r255] = out["clean_acc"]
            continue
        adv = pgd(margin_objective(model, split.y_test), split.x_test, eps=r, step_size=2.5 * r / p.pgd_steps,
                  steps=p.pgd_steps, norm="l2", restarts=p.pgd_restarts, bounds=(0.0, 1.0), seed=seed)
        with torch.no_grad():
            robust = model(adv).argmax(1) == split.y_test
        out["pgd"][r255] = float(robust.float().mean())
        out["violations"] += int((certified & ~robust).sum())
    return out


def bro_orthogonality(model: LipConvNet, n_pairs: int = 16) -> dict[str, float]:
    """For each BRO layer of a trained model, in float64: the distance-preservation error of its full
    circular operator (orthogonal by construction, up to the eps regulariser) and of the layer as used
    (pad, circular conv, crop: only 1-Lipschitz when the input is padded). Max over layers."""
    core_err, used_err = 0.0, 0.0
    for i, (layer, shape) in enumerate(model.linear_layers()):
        twin = BROConv(layer.c_in, layer.c_out, layer.k, layer.size, 1.0, layer.eps_ratio).double()
        twin.rank = layer.rank
        twin.V = nn.Parameter(layer.V.detach().double())
        twin.eval()
        core_err = max(core_err, lip.orthogonality_error(twin.core, (twin.c_max, twin.n, twin.n), n_pairs=n_pairs, seed=i))
        if layer.c_out >= layer.c_in:  # orthonormal columns expected only then
            used_err = max(used_err, lip.orthogonality_error(twin.linear, shape[1:], n_pairs=n_pairs, seed=i))
    return {"core_error": core_err, "used_error": used_err}


def run_config(p: Params, seed: int, config: str) -> dict:
    """Train and evaluate one configuration ``"<layer>_<loss>"`` (``_twin`` suffix: the same with another
    initialisation and batch order, the A/A control) on the seed's split."""
    kind, loss, *twin = config.split("_")
    stream = 1000 if twin else 0
    with torch_single_thread():
        split = load_split(p, seed)
        model = build_model(kind, p, seed * 7919 + stream)
        started = time.perf_counter()
        history = train_model(model, loss, split, p, seed * 7919 + stream + 1)
        train_s = time.perf_counter() - started
        result = evaluate(model, split, p, seed)
        if kind == "bro" and not twin and loss == "la":
            result["orthogonality"] = bro_orthogonality(model)
    return {"seed": seed, "config": config, "layer": kind, "loss": loss, "twin": bool(twin),
            "final_loss": history[-1], "train_s": train_s, **result}


def time_steps(p: Params, seed: int) -> dict[str, list[float]]:
    """Seconds per training step (forward, backward, SGD step; one batch of ``p.batch_size``, CE loss) of
    the same network with BRO, Cayley and SOC layers, in ``p.timing_repeats`` repeats of ``p.timing_steps``
    rounds; each round runs one step of every layer in a seeded random order, so the layers are interleaved
    step by step and load drift reaches them alike (:func:`tasks.timing.interleaved_seconds`, after two
    untimed rounds). SOC is timed twice per round (``soc_twin``) for the A/A control. The clock is the calling
    thread's CPU time: with one intra-op thread the whole step runs in this thread, and CPU time does not count
    the waits that other processes' load adds to wall time (the wall-clock ratio flipped with the machine's
    load). Run alone, single-threaded."""
    names = ["bro", "cayley", "soc", "soc_twin"]
    rng = np.random.default_rng(seed)
    with torch_single_thread():
        split = load_split(p, seed)
        models = {name: build_model(name.split("_")[0], p, seed) for name in names}
        optimisers = {name: torch.optim.SGD(m.parameters(), lr=1e-3, momentum=p.momentum) for name, m in models.items()}
        x, y = split.x_train[: p.batch_size], split.y_train[: p.batch_size]
        for model in models.values():
            model.train()

        def step(name: str) -> None:
            model, optimiser = models[name], optimisers[name]
            optimiser.zero_grad()
            F.cross_entropy(model(x), y).backward()
            optimiser.step()

        per_round = interleaved_seconds({name: functools.partial(step, name) for name in names},
                                        p.timing_repeats * p.timing_steps, warmup_rounds=2, order=rng)
        return {name: np.asarray(per_round[name]).reshape(p.timing_repeats, p.timing_steps).mean(axis=1).tolist()
                 for name in names}

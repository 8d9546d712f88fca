"""ANOVA-TPNN (Park, Kong, Choi, Park, Kim, ICML 2025): a tensor-product neural network whose
functional ANOVA decomposition is unique, against neural additive models that are not.

The functional ANOVA model writes a regression function (or a logit) as

    f(x) = b0 + sum_{S in components} f_S(x_S),        components = mains {j} and pairs {j, l}.

The decomposition is unique once every component integrates to zero in each of its arguments,
here under the empirical marginal of the training data (the paper's *sum-to-zero condition*):

    sum_i f_S(x_i,j, z_{S-j}) = 0     for every j in S and every value z of the other arguments.

ANOVA-TPNN gets this by construction (official code ``ParkSeokhun/ANOVA-TPNN``, ``models/tpnn.py``):

    f_S(x_S)   = sum_{k=1..K} beta_{S,k} prod_{j in S} phi_{S,k,j}(x_j)
    phi(x)     = s0(x) + r * s1(x),   s0 = sigmoid(-(x - b)/t),  s1 = sigmoid((x - b)/t)
    r          = -(sum_i s0(x_i) + eps) / (sum_i s1(x_i) + eps)      (over the training batch)

so every factor phi sums to zero over the training data (up to the official eps = 1e-3 guard), and
a product of such factors sums to zero in each argument. ``r`` is recomputed on every training
batch (with gradients, as in the official code) and frozen afterwards for inference. The ablation
fixes r = -1 (phi = s0 - s1, not centred), so its components are not identified.

Baselines: NA2M (one MLP per component, the pairwise neural additive model), NB2M (neural basis
model: one shared basis MLP per order, a linear read-out per component) and EBM (``interpret``).

Read top to bottom:

1. data        -- the synthetic function with known components, diabetes, breast_cancer (top-8
                  features by mutual information); a fixed test split, a fixed quantile transform;
2. models      -- ANOVA-TPNN (vectorised over components), NA2M, NB2M, all ``components(x) -> (n, C)``;
3. training    -- full-batch Adam, best-validation checkpoint on the out-of-bag rows;
4. EBM         -- the ``interpret`` baseline and its per-term contributions;
5. metrics     -- the sum-to-zero check, test RMSE / AUC, recovery of known components,
                  pairwise normalised distances between runs and the stability score;
6. one run     -- ``run_seed(p, seed)`` (``p`` the flow's typed params): a bootstrap resample of the
                  training rows and a fresh initialisation, every model on every dataset.

No Prefect, no DVC. Randomness only through ``np.random.default_rng`` / ``torch.Generator`` /
``random_state``, so the same seed gives bit-identical results.
"""

from __future__ import annotations

import copy
import itertools
import threading
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from scipy.special import ndtr
from sklearn.feature_selection import mutual_info_classif
from sklearn.metrics import roc_auc_score
from sklearn.preprocessing import QuantileTransformer
from torch import nn

from flows.anova_tpnn.params import DATASETS, MODELS, Params
from tasks.data import load_bundled, save_parquet
from tasks.train import torch_single_thread

NEURAL_MODELS = tuple(kind for kind in MODELS if kind != "ebm")
SPLIT_SEED = 12345          # the test split, feature selection and evaluation rows are the same for every run
TRUE_SYNTHETIC = ((0,), (1,), (2,), (0, 3))   # the synthetic function's non-zero components


# ----------------------------------------------------------------------------------------------
# 1. Data
# ----------------------------------------------------------------------------------------------
def all_components(d: int, max_order: int = 2) -> list[tuple[int, ...]]:
    """Mains (0,), ..., (d-1,) then all pairs (j, l), j < l: the official ``gen_tpnn(max_order=2)`` order."""
    comps = [(j,) for j in range(d)]
    if max_order >= 2:
        comps += list(itertools.combinations(range(d), 2))
    return comps


def synthetic_function(X: np.ndarray) -> np.ndarray:
    """f(x) = sin(pi x0) + x1^2 + 0.5 x2 + x0 x3 for X (n, d >= 4); returns (n,)."""
    return np.sin(np.pi * X[:, 0]) + X[:, 1] ** 2 + 0.5 * X[:, 2] + X[:, 0] * X[:, 3]


def make_synthetic(n: int, d: int, rho: float, noise: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Inputs X (n, d) with uniform marginals on [-1, 1] and a Gaussian copula (latent equicorrelation rho),
    and y = f(X) + noise * N(0, 1) (n,)."""
    if d < 4:
        raise ValueError("the synthetic function uses 4 inputs: d >= 4")
    cov = np.full((d, d), rho) + (1.0 - rho) * np.eye(d)
    latent = rng.standard_normal((n, d)) @ np.linalg.cholesky(cov).T
    X = 2.0 * ndtr(latent) - 1.0
    return X, synthetic_function(X) + noise * rng.standard_normal(n)


def true_components(X: np.ndarray, comps: Sequence[tuple[int, ...]], ref: np.ndarray) -> np.ndarray:
    """The synthetic function's unique functional ANOVA components at the rows of X (n, d): (n, C).

    Under the product of the empirical marginals of ``ref`` (m_j = mean of x_j there), the pure
    interaction of x0 x3 is (x0 - m0)(x3 - m3) and its marginal parts move to the mains:
        f_0 = sin(pi x0) - mean + m3 (x0 - m0),   f_1 = x1^2 - mean,   f_2 = 0.5 (x2 - m2),
        f_3 = m0 (x3 - m3),   f_03 = (x0 - m0)(x3 - m3),   every other component 0.
    """
    m = ref.mean(axis=0)
    truth = {
        (0,): np.sin(np.pi * X[:, 0]) - np.sin(np.pi * ref[:, 0]).mean() + m[3] * (X[:, 0] - m[0]),
        (1,): X[:, 1] ** 2 - (ref[:, 1] ** 2).mean(),
        (2,): 0.5 * (X[:, 2] - m[2]),
        (3,): m[0] * (X[:, 3] - m[3]),
        (0, 3): (X[:, 0] - m[0]) * (X[:, 3] - m[3]),
    }
    return np.stack([truth.get(tuple(c), np.zeros(len(X))) for c in comps], axis=1)


@dataclass
class Dataset:
    """A prepared dataset. ``X`` (n, d) raw features, ``Z`` (n, d) quantile-transformed to [-1, 1] with a
    transform fitted on the training pool, ``y`` (n,) (regression: standardised with the pool's mean and
    std), ``pool`` / ``test`` row indices, ``eval_rows`` the fixed rows on which components are compared."""

    name: str
    task: str                 # "regression" | "classification"
    X: np.ndarray
    Z: np.ndarray
    y: np.ndarray
    feature_names: list[str]
    comps: list[tuple[int, ...]]
    pool: np.ndarray
    test: np.ndarray
    eval_rows: np.ndarray
    y_scale: float            # RMSE in the target's units = standardised RMSE * y_scale
    truth: np.ndarray | None  # (len(eval_rows), C) for the synthetic set


def raw_dataset(name: str, p: Params) -> tuple[np.ndarray, np.ndarray, list[str], str]:
    """Features (n, d), target (n,), feature names and task, before any split or transform (the synthetic
    set from ``p.synth_n``, ``p.synth_d``, ``p.synth_rho`` and ``p.synth_noise``)."""
    if name == "synthetic":
        X, y = make_synthetic(p.synth_n, p.synth_d, p.synth_rho, p.synth_noise, np.random.default_rng([SPLIT_SEED, 1]))
        return X, y, [f"x{j}" for j in range(X.shape[1])], "regression"
    X, y = load_bundled(name)
    if name == "diabetes":
        return X.to_numpy(float), y.to_numpy(float), list(X.columns), "regression"
    if name == "breast_cancer":
        return X.to_numpy(float), y.to_numpy(float), list(X.columns), "classification"
    raise ValueError(f"unknown dataset {name!r}; choose from {DATASETS}")


def prepare_dataset(name: str, p: Params) -> Dataset:
    """Fixed split (``p.test_frac`` of the rows), feature selection (``p.bc_top_features``), quantile transform
    and ``p.eval_rows`` evaluation rows."""
    X, y, names, task = raw_dataset(name, p)
    rng = np.random.default_rng([SPLIT_SEED, 2])
    order = rng.permutation(len(X))
    n_test = int(round(p.test_frac * len(X)))
    test, pool = np.sort(order[:n_test]), np.sort(order[n_test:])
    if name == "breast_cancer":   # the top features by mutual information with the label, on the pool
        mi = mutual_info_classif(X[pool], y[pool], random_state=SPLIT_SEED)
        keep = np.sort(np.argsort(-mi, kind="stable")[: p.bc_top_features])
        X, names = X[:, keep], [names[j] for j in keep]
    qt = QuantileTransformer(n_quantiles=min(1000, len(pool)), output_distribution="uniform", random_state=SPLIT_SEED)
    qt.fit(X[pool])
    Z = 2.0 * qt.transform(X) - 1.0
    y_scale = 1.0
    if task == "regression":
        mu, y_scale = float(y[pool].mean()), float(y[pool].std())
        y = (y - mu) / y_scale
    comps = all_components(X.shape[1], 2)
    eval_rows = np.sort(rng.permutation(len(X))[: min(len(X), p.eval_rows)])
    truth = None
    if name == "synthetic":
        truth = true_components(X[eval_rows], comps, X[pool]) / y_scale     # in the standardised target's units
        truth -= truth.mean(axis=0)
    return Dataset(name, task, X, Z, y, names, comps, pool, test, eval_rows, y_scale, truth)


# ----------------------------------------------------------------------------------------------
# 2. Models. Each maps x (n, d) -> prediction (n,) and exposes components(x) -> (n, C).
# ----------------------------------------------------------------------------------------------
def _uniform(shape: Sequence[int], bound: float, g: torch.Generator) -> torch.Tensor:
    return (torch.rand(*shape, generator=g) * 2.0 - 1.0) * bound


class ANOVATPNN(nn.Module):
    """ANOVA-TPNN over ``comps`` (mains and pairs), K basis functions per component.

    Parameters per order o (C_o components): ``b`` thresholds (C_o, K, o), ``log_t`` log-temperatures
    (C_o, K, o), ``beta`` (C_o, K); ``r`` (C_o, K, o) is the frozen sum-to-zero constant used in eval
    mode. ``constrained=False`` is the ablation r = -1.
    """

    def __init__(self, comps: Sequence[tuple[int, ...]], n_basis: int, constrained: bool = True,
                 eps: float = 1e-3):
        super().__init__()
        self.comps = [tuple(c) for c in comps]
        self.orders = sorted({len(c) for c in self.comps})
        self.K, self.constrained, self.eps = n_basis, constrained, eps
        self.intercept = nn.Parameter(torch.zeros(()))
        self._slots: list[tuple[int, int]] = []     # component index -> (order, position within order)
        counts = {o: 0 for o in self.orders}
        for c in self.comps:
            self._slots.append((len(c), counts[len(c)]))
            counts[len(c)] += 1
        for o in self.orders:
            idx = torch.tensor([c for c in self.comps if len(c) == o], dtype=torch.long)
            self.register_buffer(f"idx{o}", idx)                                     # (C_o, o)
            self.register_parameter(f"b{o}", nn.Parameter(torch.zeros(len(idx), n_basis, o)))
            self.register_parameter(f"log_t{o}", nn.Parameter(torch.zeros(len(idx), n_basis, o)))
            self.register_parameter(f"beta{o}", nn.Parameter(torch.zeros(len(idx), n_basis)))
            self.register_buffer(f"r{o}", -torch.ones(len(idx), n_basis, o))

    @torch.no_grad()
    def initialize(self, x: torch.Tensor, rng: np.random.Generator, g: torch.Generator) -> None:
        """Data-aware init (official ``TPNN.initialize``): thresholds at Beta(1, 1) percentiles of the data,
        temperature = the 100th percentile of |x - b| over the data; beta ~ N(0, 1)."""
        xs = x.numpy()
        for o in self.orders:
            idx = getattr(self, f"idx{o}").numpy()                                   # (C_o, o)
            q = 100.0 * rng.beta(1.0, 1.0, size=(len(idx), self.K, o))
            cols = xs[:, idx]                                                        # (n, C_o, o)
            b = np.empty_like(q)
            for c, k, j in itertools.product(range(len(idx)), range(self.K), range(o)):
                b[c, k, j] = np.percentile(cols[:, c, j], q[c, k, j])
            t = np.abs(cols[:, :, None, :] - b[None]).max(axis=0)                    # (C_o, K, o)
            getattr(self, f"b{o}").copy_(torch.as_tensor(b, dtype=torch.float32))
            getattr(self, f"log_t{o}").copy_(torch.log(torch.as_tensor(t, dtype=torch.float32) + 1e-6))
            getattr(self, f"beta{o}").copy_(torch.randn(len(idx), self.K, generator=g))

    def _factors(self, x: torch.Tensor, o: int) -> torch.Tensor:
        """phi_{S,k,j}(x_j) for the order-o components: (n, C_o, K, o). In training mode r comes from
        this batch (and is stored); in eval mode the stored r is used.

        Uses s0 = sigmoid(-z) = 1 - s1, so phi = s0 + r s1 = 1 + (r - 1) s1 and sum_i s0 = n - sum_i s1
        (the official formula with one sigmoid instead of two)."""
        xs = x[:, getattr(self, f"idx{o}")]                                          # (n, C_o, o)
        s1 = torch.sigmoid((xs[:, :, None, :] - getattr(self, f"b{o}")) * torch.exp(-getattr(self, f"log_t{o}")))
        if not self.constrained:
            return 1.0 - 2.0 * s1                                                    # r = -1
        if self.training:
            sum1 = s1.sum(0)
            r = -(len(x) - sum1 + self.eps) / (sum1 + self.eps)                      # (C_o, K, o)
            getattr(self, f"r{o}").copy_(r.detach())
        else:
            r = getattr(self, f"r{o}")
        return 1.0 + (r - 1.0) * s1

    def order_components(self, x: torch.Tensor, o: int) -> torch.Tensor:
        """f_S(x_S) for the order-o components: (n, C_o)."""
        phi = self._factors(x, o)
        prod = phi[..., 0] if o == 1 else phi.prod(dim=-1)                            # (n, C_o, K)
        return torch.einsum("nck,ck->nc", prod, getattr(self, f"beta{o}"))

    @torch.no_grad()
    def component(self, x: torch.Tensor, c: int) -> torch.Tensor:
        """The single component ``comps[c]`` at the rows of x (n, d), with the frozen r (eval mode): (n,)."""
        o, p = self._slots[c]
        cols = x[:, list(self.comps[c])]                                             # (n, o)
        z = (cols[:, None, :] - getattr(self, f"b{o}")[p]) * torch.exp(-getattr(self, f"log_t{o}")[p])
        r = -torch.ones_like(z[0]) if not self.constrained else getattr(self, f"r{o}")[p]
        phi = torch.sigmoid(-z) + r * torch.sigmoid(z)                               # (n, K, o)
        return (phi.prod(-1) * getattr(self, f"beta{o}")[p]).sum(-1)

    def components(self, x: torch.Tensor) -> torch.Tensor:
        """All components in ``comps`` order: (n, C)."""
        by_order = {o: self.order_components(x, o) for o in self.orders}
        return torch.stack([by_order[o][:, p] for o, p in self._slots], dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.intercept + sum(self.order_components(x, o).sum(1) for o in self.orders)

    @torch.no_grad()
    def freeze_constants(self, x: torch.Tensor) -> None:
        """Recompute r on the training rows x at the final parameters and keep it for inference
        (the official ``save_id_constants``)."""
        was = self.training
        self.train()
        for o in self.orders:
            self._factors(x, o)
        self.train(was)


class BatchedMLP(nn.Module):
    """C independent ReLU MLPs in_dim -> hidden... -> out_dim, evaluated at once: (n, C, in) -> (n, C, out).
    Initialised like ``nn.Linear`` (uniform +-1/sqrt(fan_in)) from the generator ``g``."""

    def __init__(self, n_nets: int, in_dim: int, hidden: Sequence[int], out_dim: int, g: torch.Generator):
        super().__init__()
        dims = [in_dim, *hidden, out_dim]
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for a, b in zip(dims[:-1], dims[1:]):
            bound = 1.0 / np.sqrt(a)
            self.weights.append(nn.Parameter(_uniform((n_nets, a, b), bound, g)))
            self.biases.append(nn.Parameter(_uniform((n_nets, b), bound, g)))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            h = torch.einsum("nci,cio->nco", h, w) + b
            if i < last:
                h = torch.relu(h)
        return h


class NA2M(nn.Module):
    """Neural additive model with pairwise terms: one MLP per component, f_S(x_S) = MLP_S(x_S)."""

    def __init__(self, comps: Sequence[tuple[int, ...]], hidden: Sequence[int], g: torch.Generator):
        super().__init__()
        self.comps = [tuple(c) for c in comps]
        self.orders = sorted({len(c) for c in self.comps})
        self.intercept = nn.Parameter(torch.zeros(()))
        self.nets = nn.ModuleDict()
        for o in self.orders:
            idx = torch.tensor([c for c in self.comps if len(c) == o], dtype=torch.long)
            self.register_buffer(f"idx{o}", idx)
            self.nets[str(o)] = BatchedMLP(len(idx), o, hidden, 1, g)
        self._slots = _slots(self.comps)

    def order_components(self, x: torch.Tensor, o: int) -> torch.Tensor:
        return self.nets[str(o)](x[:, getattr(self, f"idx{o}")])[..., 0]               # (n, C_o)

    def components(self, x: torch.Tensor) -> torch.Tensor:
        by_order = {o: self.order_components(x, o) for o in self.orders}
        return torch.stack([by_order[o][:, p] for o, p in self._slots], dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.intercept + sum(self.order_components(x, o).sum(1) for o in self.orders)


class NB2M(nn.Module):
    """Neural basis model with pairwise terms: per order o one shared MLP R^o -> R^B (the bases), and
    f_S(x_S) = <w_S, bases(x_S)> with a weight vector w_S (B,) per component."""

    def __init__(self, comps: Sequence[tuple[int, ...]], hidden: Sequence[int], n_bases: int, g: torch.Generator):
        super().__init__()
        self.comps = [tuple(c) for c in comps]
        self.orders = sorted({len(c) for c in self.comps})
        self.intercept = nn.Parameter(torch.zeros(()))
        self.bases = nn.ModuleDict()
        self.readout = nn.ParameterDict()
        for o in self.orders:
            idx = torch.tensor([c for c in self.comps if len(c) == o], dtype=torch.long)
            self.register_buffer(f"idx{o}", idx)
            self.bases[str(o)] = BatchedMLP(1, o, hidden, n_bases, g)
            self.readout[str(o)] = nn.Parameter(_uniform((len(idx), n_bases), 1.0 / np.sqrt(n_bases), g))
        self._slots = _slots(self.comps)

    def order_components(self, x: torch.Tensor, o: int) -> torch.Tensor:
        xs = x[:, getattr(self, f"idx{o}")]                                          # (n, C_o, o)
        n, c, _ = xs.shape
        h = self.bases[str(o)](xs.reshape(n * c, 1, o)).reshape(n, c, -1)             # (n, C_o, B)
        return (h * self.readout[str(o)]).sum(-1)

    def components(self, x: torch.Tensor) -> torch.Tensor:
        by_order = {o: self.order_components(x, o) for o in self.orders}
        return torch.stack([by_order[o][:, p] for o, p in self._slots], dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.intercept + sum(self.order_components(x, o).sum(1) for o in self.orders)


def _slots(comps: Sequence[tuple[int, ...]]) -> list[tuple[int, int]]:
    counts: dict[int, int] = {}
    slots = []
    for c in comps:
        slots.append((len(c), counts.get(len(c), 0)))
        counts[len(c)] = counts.get(len(c), 0) + 1
    return slots


def build_model(kind: str, comps: Sequence[tuple[int, ...]], p: Params, x_train: torch.Tensor,
                seed: int) -> nn.Module:
    """A freshly initialised model of ``kind`` (one of NEURAL_MODELS) from ``seed``: ANOVA-TPNN with ``p.n_basis``
    bases and guard ``p.id_eps``, NA2M with ``p.nam_hidden``, or NB2M with ``p.nbm_hidden`` and ``p.nbm_bases``."""
    g = torch.Generator().manual_seed(seed)
    if kind in ("tpnn", "tpnn_noconstraint"):
        model = ANOVATPNN(comps, p.n_basis, constrained=(kind == "tpnn"), eps=p.id_eps)
        model.initialize(x_train, np.random.default_rng(seed), g)
        return model
    if kind == "na2m":
        return NA2M(comps, p.nam_hidden, g)
    if kind == "nb2m":
        return NB2M(comps, p.nbm_hidden, p.nbm_bases, g)
    raise ValueError(f"unknown model {kind!r}")


# ----------------------------------------------------------------------------------------------
# 3. Training: full-batch Adam (official: lr 0.01, betas (0.95, 0.998), batch >= n), best-validation
#    checkpoint (official: the epoch with the best validation RMSE / AUC).
# ----------------------------------------------------------------------------------------------
def _loss(task: str, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    if task == "regression":
        return torch.mean((out - y) ** 2)
    return nn.functional.binary_cross_entropy_with_logits(out, y)


def fit_neural(model: nn.Module, task: str, x: torch.Tensor, y: torch.Tensor, x_val: torch.Tensor,
               y_val: torch.Tensor, epochs: int, lr: float, eval_every: int) -> dict[str, Any]:
    """Train on (x, y) (shapes (n, d), (n,)) full batch; keep the parameters with the best validation loss
    (checked every ``eval_every`` epochs and at the end). Returns {"best_epoch", "val_loss", "train_loss"}."""
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.95, 0.998))
    best = (float("inf"), -1, None)
    train_loss = float("nan")
    for epoch in range(1, epochs + 1):
        model.train()
        opt.zero_grad()
        loss = _loss(task, model(x), y)
        loss.backward()
        opt.step()
        train_loss = float(loss.detach())
        if epoch % eval_every == 0 or epoch == epochs:
            if isinstance(model, ANOVATPNN):
                model.freeze_constants(x)
            model.eval()
            with torch.no_grad():
                val = float(_loss(task, model(x_val), y_val))
            if val < best[0]:
                best = (val, epoch, copy.deepcopy(model.state_dict()))
    model.load_state_dict(best[2])
    model.eval()
    return {"best_epoch": best[1], "val_loss": best[0], "train_loss": train_loss}


# ----------------------------------------------------------------------------------------------
# 4. EBM (interpret): the boosted-tree GA2M baseline
# ----------------------------------------------------------------------------------------------
def fit_ebm(task: str, X: np.ndarray, y: np.ndarray, interactions: int, outer_bags: int, interaction_bins: int,
            seed: int):
    """An ExplainableBoosting{Regressor,Classifier} (n_jobs=1, ``outer_bags`` bags, ``interactions`` pairs on
    ``interaction_bins`` bins: the default 64 makes each pair update ~20x slower) fitted on X (n, d).

    libebm picks its SIMD path from the CPU, and its AVX-512 path rounds otherwise than its AVX2 path: the fit runs
    on AVX2 on every x86-64 machine, as ``paperflows/settings.py`` pins NumPy, MKL and oneDNN (the option is
    interpret's global one, restored afterwards)."""
    from interpret import develop
    from interpret.glassbox import (
        ExplainableBoostingClassifier,
        ExplainableBoostingRegressor,
    )
    from interpret.utils._native import Native

    cls = ExplainableBoostingRegressor if task == "regression" else ExplainableBoostingClassifier
    model = cls(interactions=interactions, outer_bags=outer_bags, max_interaction_bins=interaction_bins, n_jobs=1,
                random_state=seed)
    acceleration = develop.get_option("acceleration")
    develop.set_option("acceleration", Native.AccelerationFlags_AVX2)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(X, y.astype(int) if task == "classification" else y)
    finally:
        develop.set_option("acceleration", acceleration)
    return model


def ebm_components(model, X: np.ndarray, comps: Sequence[tuple[int, ...]]) -> np.ndarray:
    """Per-term contributions of a fitted EBM at X (n, d) laid out in ``comps`` order: (n, C).
    Pairs the EBM did not select are 0 (it fits only ``ebm_interactions`` of them)."""
    terms = model.eval_terms(X)                                                      # (n, n_terms)
    where = {tuple(sorted(f)): i for i, f in enumerate(model.term_features_)}
    out = np.zeros((len(X), len(comps)))
    for c, comp in enumerate(comps):
        if comp in where:
            out[:, c] = terms[:, where[comp]]
    return out


# ----------------------------------------------------------------------------------------------
# 5. Metrics
# ----------------------------------------------------------------------------------------------
@torch.no_grad()
def centring_error(model: ANOVATPNN, x_train: torch.Tensor, n_probe: int, rng: np.random.Generator,
                   relative_to: str = "component") -> float:
    """max over components S, arguments j in S and probe values z of the other argument of
        |mean_i f_S(x_ij, z)| / scale,
    evaluated by brute force on the training rows x_train (n, d): the sum-to-zero condition. ``scale`` is
    the component's RMS over the training rows (``relative_to="component"``) or the standard deviation of
    the model's prediction there (``"prediction"``)."""
    model.eval()
    n = len(x_train)
    worst = 0.0
    pred_sd = float(model(x_train).std()) + 1e-12
    probes = x_train[torch.as_tensor(rng.choice(n, size=min(n_probe, n), replace=False))]
    for c, comp in enumerate(model.comps):
        values = model.component(x_train, c)
        scale = float(values.pow(2).mean().sqrt()) + 1e-12 if relative_to == "component" else pred_sd
        if len(comp) == 1:
            worst = max(worst, abs(float(values.mean())) / scale)
            continue
        for j in comp:
            # every training value of x_j combined with each probe's value of the other argument
            grid = probes.repeat_interleave(n, dim=0).clone()                        # (P*n, d)
            grid[:, j] = x_train[:, j].repeat(len(probes))
            vals = model.component(grid, c).reshape(len(probes), n)
            worst = max(worst, float(vals.mean(1).abs().max()) / scale)
    return worst


@torch.no_grad()
def smallest_side_mass(model: ANOVATPNN, x_train: torch.Tensor) -> float:
    """min over every basis factor of min(sum_i s0, sum_i s1) on the training rows: below ~id_eps the
    official guard eps dominates r and that factor no longer sums to zero."""
    low = float("inf")
    for o in model.orders:
        xs = x_train[:, getattr(model, f"idx{o}")]
        s1 = torch.sigmoid((xs[:, :, None, :] - getattr(model, f"b{o}")) * torch.exp(-getattr(model, f"log_t{o}")))
        sum1 = s1.sum(0)
        low = min(low, float(torch.minimum(sum1, len(x_train) - sum1).min()))
    return low


@torch.no_grad()
def centring_error_exact_r(model: ANOVATPNN, x_train: torch.Tensor, n_probe: int, rng: np.random.Generator) -> float:
    """``centring_error`` of a copy of ``model`` whose constants r are recomputed at its final parameters with
    the guard eps = 0, in float64: the diagnosis of a failing sum-to-zero check. If this error is small, the
    failure came from the guard (r = -(sum s0 + eps) / (sum s1 + eps) misses the zero sum by about
    eps / min(sum s0, sum s1) relative), not from the construction, float32 or the checkpoint."""
    exact = copy.deepcopy(model).double()
    exact.eps = 0.0
    exact.freeze_constants(x_train.double())
    return centring_error(exact, x_train.double(), n_probe, rng)


def linear_control(task: str, z_train: np.ndarray, y_train: np.ndarray, z_test: np.ndarray) -> np.ndarray:
    """The negative control of the accuracy claims: a model that cannot approximate a smooth non-linear
    function, least squares (regression) or L2 logistic regression (classification, sklearn defaults) on the
    quantile-transformed features. Returns its test predictions (n_test,)."""
    if task == "regression":
        A = np.column_stack([np.ones(len(z_train)), z_train])
        coef = np.linalg.lstsq(A, y_train, rcond=None)[0]
        return np.column_stack([np.ones(len(z_test)), z_test]) @ coef
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(max_iter=2000).fit(z_train, y_train.astype(int)).decision_function(z_test)


def test_score(task: str, pred: np.ndarray, y: np.ndarray, y_scale: float) -> float:
    """RMSE in the target's units (regression) or ROC AUC (classification)."""
    if task == "regression":
        return float(np.sqrt(np.mean((pred - y) ** 2)) * y_scale)
    return float(roc_auc_score(y, pred))


def recovery_error(est: np.ndarray, truth: np.ndarray) -> float:
    """||est - truth|| / ||truth|| over all components at once; est, truth (n, C), both centred."""
    return float(np.linalg.norm(est - truth) / np.linalg.norm(truth))


def pairwise_distances(G: np.ndarray) -> np.ndarray:
    """Normalised L2 distances between runs of one component. G (R, n): the centred estimates of R runs.
    D[r, s] = ||G_r - G_s|| / (||G_r|| + ||G_s||), in [0, 1]; 0 where both are identically zero. (R, R)."""
    norms = np.linalg.norm(G, axis=1)
    diff = np.linalg.norm(G[:, None, :] - G[None, :, :], axis=2)
    denom = norms[:, None] + norms[None, :]
    return np.divide(diff, denom, out=np.zeros_like(diff), where=denom > 0)


def component_distances(est: np.ndarray) -> np.ndarray:
    """est (R, n, C): every run's components at the evaluation rows -> distances (C, R, R) after
    centring each estimate over the evaluation rows."""
    est = est - est.mean(axis=1, keepdims=True)
    return np.stack([pairwise_distances(est[:, :, c]) for c in range(est.shape[2])])


def stability(D: np.ndarray, runs: np.ndarray | None = None) -> np.ndarray:
    """Stability per component, 1 - mean over pairs of distinct runs of D, for D (C, R, R).

    ``runs`` (a bootstrap resample of run indices, length R') selects the runs; pairs of positions that
    hold the same run are skipped. Returns (C,)."""
    R = D.shape[1]
    runs = np.arange(R) if runs is None else np.asarray(runs)
    a, b = np.triu_indices(len(runs), k=1)
    keep = runs[a] != runs[b]
    if not keep.any():
        return np.full(D.shape[0], np.nan)
    return 1.0 - D[:, runs[a][keep], runs[b][keep]].mean(axis=1)


# ----------------------------------------------------------------------------------------------
# 6. One run: bootstrap resample + fresh initialisation, every model on every dataset
# ----------------------------------------------------------------------------------------------
def run_dataset(ds: Dataset, p: Params, seed: int, models: Sequence[str]) -> dict[str, Any]:
    """One run of ``models`` on one dataset. The training rows are a bootstrap resample of the pool (rng(seed));
    the out-of-bag rows are the validation set of the checkpoint. Every neural model trains ``p.epochs`` epochs
    (``p.synth_epochs`` on the synthetic set) at ``p.lr``, checked every ``p.eval_every``; ``p.centring_probes`` probes per argument in the sum-to-zero check.
    Returns per model: test score, best epoch,
    seconds, and ``components`` (len(eval_rows), C) float64 at the evaluation rows; plus the TPNN
    sum-to-zero errors (constrained and ablation; for ANOVA-TPNN also with exact constants) and the test score
    of the linear control (``linear_score``)."""
    rng = np.random.default_rng([seed, DATASETS.index(ds.name)])
    boot = ds.pool[rng.integers(0, len(ds.pool), size=len(ds.pool))]
    oob = np.setdiff1d(ds.pool, boot)
    to_t = lambda a: torch.as_tensor(a, dtype=torch.float32)
    x, y = to_t(ds.Z[boot]), to_t(ds.y[boot])
    x_val, y_val = to_t(ds.Z[oob]), to_t(ds.y[oob])
    x_test, x_eval = to_t(ds.Z[ds.test]), to_t(ds.Z[ds.eval_rows])
    # every model's best checkpoint was the last epoch on the synthetic set at 250 epochs: it gets p.synth_epochs
    epochs = p.synth_epochs if ds.name == "synthetic" else p.epochs
    out: dict[str, Any] = {"dataset": ds.name, "seed": seed, "n_train": len(boot), "n_val": len(oob),
                           "models": {}, "epochs": epochs,
                           "linear_score": test_score(ds.task, linear_control(ds.task, ds.Z[boot], ds.y[boot],
                                                                              ds.Z[ds.test]), ds.y[ds.test], ds.y_scale)}
    for k, kind in enumerate(models):
        started = time.perf_counter()
        if kind == "ebm":
            ebm = fit_ebm(ds.task, ds.X[boot], ds.y[boot], p.ebm_interactions, p.ebm_outer_bags,
                          p.ebm_interaction_bins, seed)
            if ds.task == "regression":
                pred = ebm.predict(ds.X[ds.test])
            else:
                pred = ebm.decision_function(ds.X[ds.test])
            comps = ebm_components(ebm, ds.X[ds.eval_rows], ds.comps)
            info = {"best_epoch": -1}
        else:
            model = build_model(kind, ds.comps, p, x, seed * 1000 + k)
            info = fit_neural(model, ds.task, x, y, x_val, y_val, epochs, p.lr, p.eval_every)
            with torch.no_grad():
                pred = model(x_test).numpy().astype(float)
                comps = model.components(x_eval).numpy().astype(float)
            if kind in ("tpnn", "tpnn_noconstraint"):
                info["centring_error"] = centring_error(model, x, p.centring_probes, np.random.default_rng([seed, 7]))
                info["centring_error_vs_prediction"] = centring_error(
                    model, x, p.centring_probes, np.random.default_rng([seed, 7]), relative_to="prediction")
                info["smallest_side_mass"] = smallest_side_mass(model, x)
                info["centring_error_exact_r"] = centring_error_exact_r(model, x, p.centring_probes,
                                                                        np.random.default_rng([seed, 7]))
        row = {"score": test_score(ds.task, pred, ds.y[ds.test], ds.y_scale),
               "seconds": time.perf_counter() - started, "components": comps, **info}
        if ds.truth is not None:
            row["recovery_error"] = recovery_error(comps - comps.mean(axis=0), ds.truth)
        out["models"][kind] = row
    return out


_CACHE: dict[tuple, Dataset] = {}
_CACHE_LOCK = threading.Lock()


def cached_dataset(name: str, p: Params) -> Dataset:
    """``prepare_dataset`` once per (name, data settings) and process; seeds in threads share it (read-only)."""
    key = (name, p.synth_n, p.synth_d, p.synth_rho, p.synth_noise, p.bc_top_features, p.test_frac, p.eval_rows)
    with _CACHE_LOCK:
        if key not in _CACHE:
            _CACHE[key] = prepare_dataset(name, p)
        return _CACHE[key]


def save_datasets(p: Params, data_dir: str) -> list[str]:
    """Each table of ``p.datasets`` as used (quantile-transformed features, target, fixed split, evaluation rows)
    -> ``<data_dir>/<name>.parquet``; returns the paths."""
    paths = []
    for name in p.datasets:
        ds = cached_dataset(name, p)
        frame = pd.DataFrame(ds.Z, columns=ds.feature_names).assign(
            target=ds.y, split=np.where(np.isin(np.arange(len(ds.y)), ds.test), "test", "pool"),
            eval_row=np.isin(np.arange(len(ds.y)), ds.eval_rows))
        paths.append(str(save_parquet(frame, Path(data_dir) / f"{name}.parquet")))
    return paths


def run_seed(p: Params, seed: int, with_ebm: bool = True) -> dict[str, Any]:
    """Run ``seed`` (one bootstrap resample + initialisation) on every dataset of ``p.datasets``, with every
    model of ``p.models`` (EBM only when ``with_ebm``).

    Returns {"seed", "seconds", "datasets": {name: run_dataset(...)}}; the ``components`` arrays are NumPy
    (they feed the across-run stability score in the flow)."""
    started = time.perf_counter()
    models = [k for k in p.models if with_ebm or k != "ebm"]
    with torch_single_thread():
        results = {name: run_dataset(cached_dataset(name, p), p, seed, models) for name in p.datasets}
    return {"seed": seed, "seconds": time.perf_counter() - started, "datasets": results}

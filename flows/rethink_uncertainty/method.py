"""Rethinking aleatoric and epistemic uncertainty (Bickford Smith, Kossen, Trollope, van der Wilk,
Foster, Rainforth; ICML 2025): decision-theoretic uncertainty next to the popular
information-theoretic estimates, in two conjugate models where the true quantities are known, plus
an active-learning check of the claim that the estimates still guide data acquisition.

Read top to bottom:

1. decision theory -- a loss l(a, z), its Bayes action a* = argmin_a E_p[l(a, z)], the predictive
   uncertainty h[p] = E_p[l(a*, z)], the expected score of a model under an evaluation
   distribution (= dispersion h[p_eval] + discrepancy), and the decomposition
   h[p_n] = E_theta h[p(z|theta)] + E_theta[E_{p(z|theta)} l(a*_n, z) - h[p(z|theta)]]
   for log loss (entropy = expected entropy + BALD) and squared loss (law of total variance);
2. information theory on samples -- predictive entropy, expected entropy and BALD of an
   ensemble / posterior sample, shape (K, ..., C);
3. the discrete problem -- data ~ Bernoulli(p*), model Beta-Bernoulli (closed forms);
4. the continuous problem -- data ~ N(mu*, sigma*^2), model Normal-Gamma, Student-t predictive;
5. one seed of the estimation-error experiment (the paper's ``demo_bald_estimation_errors.py``):
   eps_z  = (E_theta H[z|theta] - H[p_true(z)])^2   -- error of the "aleatoric" estimate, equal to
            the error of BALD as an estimate of the long-run uncertainty reduction
            EUR_z^true(inf) = h[p_n(z)] - h[p_true(z)];
   eps_th = (BALD - EIG_theta^true)^2 where EIG_theta^true = H[p_n(theta)] - E_{p_true(y)} H[p_{n+1}(theta)];
6. active learning on digits with a 5-member deep ensemble (BALD, predictive entropy, random).

The experiment entry points ``run_estimation_seed(p, seed)`` and ``run_al_seed(p, seed, acquisition,
digits)`` take the flow's typed params ``p``; the functions below them take explicit arguments.

No Prefect, no DVC. Randomness only through explicit ``np.random.default_rng`` and
``torch.Generator`` seeds: the same seed gives bit-identical results.
"""

from __future__ import annotations

import functools
import itertools
import math
import time
from typing import Any

import numpy as np
import torch
from scipy import integrate, special
from sklearn.model_selection import train_test_split

from flows.rethink_uncertainty.params import Params
from tasks.train import torch_single_thread

LN2PI = float(np.log(2.0 * np.pi))
PROBLEMS = ("discrete", "continuous")
ESTIMATORS = ("eps_z", "eps_theta")
ACQUISITIONS = ("bald", "entropy", "random")
CONTROL_ACQUISITION = "random_control"
"""Uniform random acquisition from a second, independent stream: the negative control of 'BALD beats random'
(random vs random must not show a difference whose CI excludes zero)."""


# =============================================================================== 1. decision theory
def entropy(p: np.ndarray, axis: int = -1) -> np.ndarray:
    """Shannon entropy in nats of probability vectors ``p`` along ``axis`` (0 log 0 = 0)."""
    return -np.sum(special.xlogy(p, p), axis=axis)


def bayes_action(p: np.ndarray, support: np.ndarray, loss: str) -> np.ndarray:
    """Bayes-optimal action under distribution ``p`` (shape (..., Z)) over outcomes ``support`` (Z,).

    log loss: the action is a distribution and the optimum is ``p`` itself (a proper scoring rule);
    squared loss l(a, z) = (a - z)^2: the optimum is the mean.
    """
    if loss == "log":
        return np.asarray(p, dtype=float)
    if loss == "squared":
        return np.asarray(p, dtype=float) @ support
    raise ValueError(f"unknown loss {loss!r}")


def expected_loss(action: np.ndarray, q: np.ndarray, support: np.ndarray, loss: str) -> np.ndarray:
    """E_{z ~ q}[l(action, z)] for ``q`` of shape (..., Z); ``action`` as returned by :func:`bayes_action`."""
    if loss == "log":
        return -np.sum(special.xlogy(q, action), axis=-1)
    if loss == "squared":
        return np.sum(q * (np.asarray(action)[..., None] - support) ** 2, axis=-1)
    raise ValueError(f"unknown loss {loss!r}")


def uncertainty(p: np.ndarray, support: np.ndarray, loss: str) -> np.ndarray:
    """Predictive uncertainty h[p] = E_p[l(a*, z)] (entropy for log loss, variance for squared loss)."""
    return expected_loss(bayes_action(p, support, loss), p, support, loss)


def expected_score(p_model: np.ndarray, p_eval: np.ndarray, support: np.ndarray, loss: str) -> dict[str, np.ndarray]:
    """Evaluation of a model's Bayes action under the data distribution ``p_eval``:
    score = E_{p_eval}[l(a*_model, z)] = dispersion h[p_eval] + discrepancy (>= 0)."""
    score = expected_loss(bayes_action(p_model, support, loss), p_eval, support, loss)
    dispersion = uncertainty(p_eval, support, loss)
    return {"score": score, "dispersion": dispersion, "discrepancy": score - dispersion}


def decompose(cond: np.ndarray, weights: np.ndarray, support: np.ndarray, loss: str) -> dict[str, float]:
    """Split the predictive uncertainty of the mixture p_n(z) = sum_k w_k p(z | theta_k).

    ``cond``: (K, Z) conditional predictive distributions; ``weights``: (K,) posterior weights.
    total = h[p_n] = E_theta h[p(z|theta)] ("aleatoric" estimate) + E_theta[D(theta)] ("epistemic"
    estimate) with D(theta) = E_{p(z|theta)} l(a*_n, z) - h[p(z|theta)] >= 0 (for log loss D is the
    KL divergence and the second term is BALD; for squared loss it is the variance of the mean).
    """
    w = np.asarray(weights, dtype=float) / np.sum(weights)
    p_n = w @ cond
    a_n = bayes_action(p_n, support, loss)
    h_cond = uncertainty(cond, support, loss)
    divergence = expected_loss(a_n, cond, support, loss) - h_cond
    return {"total": float(uncertainty(p_n, support, loss)), "expected_conditional": float(w @ h_cond),
            "expected_divergence": float(w @ divergence)}


# ====================================================================== 2. information theory on samples
def predictive_entropy(probs: np.ndarray) -> np.ndarray:
    """H[mean_k p_k]: ``probs`` (K, ..., C) -> (...)."""
    return entropy(np.mean(probs, axis=0))


def expected_entropy(probs: np.ndarray) -> np.ndarray:
    """mean_k H[p_k]: ``probs`` (K, ..., C) -> (...)."""
    return np.mean(entropy(probs), axis=0)


def bald(probs: np.ndarray) -> np.ndarray:
    """BALD / mutual information estimate H[mean_k p_k] - mean_k H[p_k]: (K, ..., C) -> (...)."""
    return predictive_entropy(probs) - expected_entropy(probs)


def bernoulli_probs(theta: np.ndarray) -> np.ndarray:
    """Stack P(z=1) = theta (any shape) into class probabilities (..., 2) = [1 - theta, theta]."""
    theta = np.asarray(theta, dtype=float)
    return np.stack([1.0 - theta, theta], axis=-1)


# ============================================================================ 3. discrete problem
def beta_update(data: np.ndarray, a0: float, b0: float) -> tuple[float, float]:
    """Beta(a0, b0) prior, Bernoulli observations ``data`` (n,) in {0, 1} -> posterior (a_n, b_n)."""
    s = float(np.sum(data))
    return a0 + s, b0 + len(data) - s


def bernoulli_entropy(p: np.ndarray | float) -> np.ndarray:
    return entropy(bernoulli_probs(p))


def beta_entropy(a: float, b: float) -> float:
    """Differential entropy of Beta(a, b)."""
    return float(special.betaln(a, b) - (a - 1) * special.digamma(a) - (b - 1) * special.digamma(b)
                 + (a + b - 2) * special.digamma(a + b))


def beta_expected_bernoulli_entropy(a: float, b: float) -> float:
    """E_{theta ~ Beta(a, b)} H[Bernoulli(theta)] in closed form, from
    E[theta log theta] = a/(a+b) (psi(a+1) - psi(a+b+1))."""
    s = a + b
    return float(-(a / s) * (special.digamma(a + 1) - special.digamma(s + 1))
                 - (b / s) * (special.digamma(b + 1) - special.digamma(s + 1)))


def discrete_quantities(a: float, b: float, p_true: float) -> dict[str, float]:
    """All quantities of the Beta(a, b)-Bernoulli model against data ~ Bernoulli(p_true).

    Log loss: predictive entropy, expected entropy E_theta H[z|theta], BALD, the data entropy,
    the true parameter EIG (expectation over y ~ p_true) and the model's own (over y ~ p_n),
    the expected score (cross-entropy). Squared loss: the same decision-theoretic quantities.
    """
    p_n = a / (a + b)
    h_post = beta_entropy(a, b)
    h_post_1, h_post_0 = beta_entropy(a + 1, b), beta_entropy(a, b + 1)
    pred_ent = float(bernoulli_entropy(p_n))
    exp_ent = beta_expected_bernoulli_entropy(a, b)
    data_ent = float(bernoulli_entropy(p_true))
    var_theta = a * b / ((a + b) ** 2 * (a + b + 1))
    return {
        "pred_entropy": pred_ent, "expected_entropy": exp_ent, "bald": pred_ent - exp_ent,
        "data_entropy": data_ent,
        "eig_true": h_post - (p_true * h_post_1 + (1 - p_true) * h_post_0),
        "eig_model": h_post - (p_n * h_post_1 + (1 - p_n) * h_post_0),
        # the official code's value: scipy's Bernoulli ``expect`` passes the support [0, 1] as one array,
        # and its posterior update then sums it to a single y = 1 observation
        "eig_true_official_code": h_post - h_post_1,
        "log_score": float(-special.xlogy(p_true, p_n) - special.xlogy(1 - p_true, 1 - p_n)),
        "sq_uncertainty": p_n * (1 - p_n), "sq_expected_conditional": a * b / ((a + b) * (a + b + 1)),  # E[theta(1-theta)]
        "sq_epistemic": var_theta, "sq_dispersion": p_true * (1 - p_true),
        "sq_score": (p_n - p_true) ** 2 + p_true * (1 - p_true),
    }


# ========================================================================== 4. continuous problem
def normal_gamma_update(data: np.ndarray, a0: float, b0: float, k0: float, m0: float) -> tuple[float, float, float, float]:
    """Normal-Gamma prior (Murphy 2007: lambda ~ Gamma(shape a, rate b), mu | lambda ~ N(m, 1/(k lambda)))
    and Gaussian observations ``data`` (n,) -> posterior (a_n, b_n, k_n, m_n)."""
    n = len(data)
    if n == 0:
        return a0, b0, k0, m0
    xbar = float(np.mean(data))
    a_n = a0 + n / 2
    b_n = b0 + 0.5 * float(np.sum((data - xbar) ** 2)) + k0 * n * (xbar - m0) ** 2 / (2 * (k0 + n))
    return a_n, b_n, k0 + n, (k0 * m0 + n * xbar) / (k0 + n)


def student_t_params(a: float, b: float, k: float, m: float) -> tuple[float, float, float]:
    """Posterior predictive of the Normal-Gamma model: Student-t (df, loc, scale)."""
    return 2 * a, m, float(np.sqrt(b * (k + 1) / (a * k)))


def student_t_entropy(df: float, scale: float) -> float:
    """Differential entropy of a Student-t in closed form."""
    return float((df + 1) / 2 * (special.digamma((df + 1) / 2) - special.digamma(df / 2))
                 + 0.5 * np.log(df) + special.betaln(df / 2, 0.5) + np.log(scale))


def student_t_logpdf(t: np.ndarray | float, df: float) -> np.ndarray | float:
    """Log density of the standard Student-t with ``df`` degrees of freedom (no scipy.stats overhead)."""
    const = special.gammaln((df + 1) / 2) - special.gammaln(df / 2) - 0.5 * np.log(df * np.pi)
    return const - (df + 1) / 2 * np.log1p(np.square(t) / df)


def gamma_rate_entropy(a: float, b: float | np.ndarray) -> float | np.ndarray:
    """Entropy of Gamma(shape a, rate b)."""
    return a - np.log(b) + special.gammaln(a) + (1 - a) * special.digamma(a)


def normal_gamma_entropy(a: float, b: float | np.ndarray, k: float) -> float | np.ndarray:
    """Joint entropy H(mu, lambda) = H(lambda) + E_lambda[1/2 log(2 pi e / (k lambda))] with
    E[log lambda] = psi(a) - log b (b a rate)."""
    return gamma_rate_entropy(a, b) + 0.5 * (LN2PI + 1 - np.log(k) - special.digamma(a) + np.log(b))


def normal_gamma_entropy_official(a: float, b: float | np.ndarray, k: float) -> float | np.ndarray:
    """The official code's ``param_entropy``: it builds Gamma(a, scale=b) although b is a rate, so
    its H(lambda) has +log b instead of -log b. Kept only to report how much that changes eps_theta."""
    return (a + np.log(b) + special.gammaln(a) + (1 - a) * special.digamma(a)
            + 0.5 * (LN2PI + 1 - np.log(k) - special.digamma(a) + np.log(b)))


@functools.lru_cache(maxsize=8)
def _gauss_hermite(n_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights for E_{y ~ N(0, 1)} f(y) ~= sum_i w_i f(x_i) (computed once per size; read-only)."""
    x, w = np.polynomial.hermite_e.hermegauss(n_nodes)
    w = w / np.sqrt(2 * np.pi)
    x.flags.writeable = False
    w.flags.writeable = False
    return x, w


def continuous_quantities(a: float, b: float, k: float, m: float, mu_true: float, sigma_true: float,
                          n_nodes: int = 80, model_eig: bool = True) -> dict[str, float]:
    """All quantities of the Normal-Gamma model against data ~ N(mu_true, sigma_true^2).

    The true parameter EIG needs E_{y ~ p_true}[H(theta | y)]; after one observation only b depends
    on y (b' = b + k (y - m)^2 / (2 (k + 1))), and the expectation is taken by Gauss-Hermite quadrature.
    """
    df, loc, scale = student_t_params(a, b, k, m)
    pred_ent = student_t_entropy(df, scale)
    exp_ent = 0.5 * (LN2PI + 1 - special.digamma(a) + np.log(b))
    data_ent = 0.5 * (LN2PI + 1) + np.log(sigma_true)
    x, w = _gauss_hermite(n_nodes)
    b_next = b + k * (mu_true + sigma_true * x - m) ** 2 / (2 * (k + 1))
    eig_true = normal_gamma_entropy(a, b, k) - w @ normal_gamma_entropy(a + 0.5, b_next, k + 1)
    eig_official = normal_gamma_entropy_official(a, b, k) - w @ normal_gamma_entropy_official(a + 0.5, b_next, k + 1)
    if model_eig:   # the model's own parameter EIG, E over y ~ p_n(y) (Student-t) by adaptive quadrature
        c = k * scale ** 2 / (2 * (k + 1))     # y = m + scale * t with t ~ standard Student-t(df)
        post = integrate.quad(lambda t: math.exp(student_t_logpdf(t, df)) * normal_gamma_entropy(a + 0.5, b + c * t * t, k + 1),
                              -np.inf, np.inf, epsabs=1e-12, limit=200)[0]
        eig_model = float(normal_gamma_entropy(a, b, k) - post)
    else:
        eig_model = float("nan")
    pred_var = b * (k + 1) / (k * (a - 1)) if a > 1 else float("inf")     # Student-t variance
    exp_var = b / (a - 1) if a > 1 else float("inf")                     # E_theta[1/lambda]
    var_mu = b / (k * (a - 1)) if a > 1 else float("inf")                # Var_theta(mu) = E[1/(k lambda)]
    log_score = float(-w @ (student_t_logpdf((mu_true + sigma_true * x - loc) / scale, df) - np.log(scale)))
    return {
        "pred_entropy": pred_ent, "expected_entropy": float(exp_ent), "bald": pred_ent - float(exp_ent),
        "data_entropy": float(data_ent), "eig_true": float(eig_true), "eig_model": eig_model,
        "eig_true_official_code": float(eig_official), "log_score": log_score,
        "sq_uncertainty": pred_var, "sq_expected_conditional": exp_var, "sq_epistemic": var_mu,
        "sq_dispersion": sigma_true ** 2, "sq_score": (m - mu_true) ** 2 + sigma_true ** 2,
    }


# ============================================================ 5. one seed of the estimation experiment
def mc_bald_beta(a: float, b: float, n_samples: int, rng: np.random.Generator) -> float:
    """BALD from ``n_samples`` posterior draws theta_k ~ Beta(a, b) (an 'ensemble' of Bernoullis)."""
    return float(bald(bernoulli_probs(rng.beta(a, b, size=n_samples))))


def run_estimation_seed(p: Params, seed: int) -> dict[str, Any]:
    """Both conjugate problems for one seed: data drawn once, posteriors after the first n points.

    Reads ``p.n_examples``, ``p.p_true``, ``p.beta_prior``, ``p.mu_true``, ``p.sigma_true``,
    ``p.normal_gamma_prior`` and ``p.mc_samples``. Returns ``{"rows": [...]}``: one row per
    (problem, n) with every quantity and the two squared errors.
    """
    rng = np.random.default_rng([seed, 0])
    n_max = max(p.n_examples)
    bern = (rng.random(n_max) < p.p_true).astype(float)
    gauss = p.mu_true + p.sigma_true * rng.standard_normal(n_max)
    mc_rng = np.random.default_rng([seed, 1])
    a0, b0 = p.beta_prior
    na0, nb0, nk0, nm0 = p.normal_gamma_prior
    rows = []
    for n in p.n_examples:
        a, b = beta_update(bern[:n], a0, b0)
        q = discrete_quantities(a, b, p.p_true)
        q["mc_bald"] = mc_bald_beta(a, b, p.mc_samples, mc_rng)
        q["p_n"] = a / (a + b)
        rows.append({"problem": "discrete", "seed": seed, "n": n, **q})
        pa, pb, pk, pm = normal_gamma_update(gauss[:n], na0, nb0, nk0, nm0)
        q = continuous_quantities(pa, pb, pk, pm, p.mu_true, p.sigma_true)
        q["m_n"] = pm
        rows.append({"problem": "continuous", "seed": seed, "n": n, **q})
    for r in rows:
        r["eps_z"] = (r["expected_entropy"] - r["data_entropy"]) ** 2
        r["eps_theta"] = (r["bald"] - r["eig_true"]) ** 2
        if "eig_true_official_code" in r:
            r["eps_theta_official_code"] = (r["bald"] - r["eig_true_official_code"]) ** 2
        r["eur_true_inf"] = r["pred_entropy"] - r["data_entropy"]        # h[p_n] - h[p_true], log loss
        r["sq_eur_true_inf"] = r["sq_uncertainty"] - r["sq_dispersion"]  # the same for squared loss
        # identities the paper states, each side computed by a separate route (closed form vs closed form
        # or quadrature): BALD = the model's own parameter EIG; h[p_n] = E_theta h + E_theta D (squared loss)
        r["identity_error"] = max(abs(r["bald"] - r["eig_model"]),
                                  abs(r["sq_uncertainty"] - r["sq_expected_conditional"] - r["sq_epistemic"]))
    return {"rows": rows}


# ====================================================================== 6. active learning on digits
def split_digits(X: np.ndarray, y: np.ndarray, seed: int, test_size: float, init_labels: int) -> dict[str, np.ndarray]:
    """Pool / test split (stratified, ``test_size`` of the rows) and a class-balanced initial labelled
    set of ``init_labels`` pool points.

    ``X`` (n, 64) raw pixel counts, scaled to [0, 1]; returns pool/test arrays and ``init`` indices into the pool.
    """
    Xs = np.asarray(X, dtype=np.float32) / 16.0
    X_pool, X_test, y_pool, y_test = train_test_split(Xs, np.asarray(y), test_size=test_size,
                                                      stratify=y, random_state=seed)
    rng = np.random.default_rng([seed, 2])
    classes = np.unique(y_pool)
    per_class = init_labels // len(classes)
    init = np.concatenate([rng.choice(np.flatnonzero(y_pool == c), per_class, replace=False) for c in classes])
    extra = init_labels - len(init)
    if extra > 0:
        rest = np.setdiff1d(np.arange(len(y_pool)), init)
        init = np.concatenate([init, rng.choice(rest, extra, replace=False)])
    return {"X_pool": X_pool, "y_pool": y_pool, "X_test": X_test, "y_test": y_test, "init": np.sort(init)}


def init_ensemble(n_members: int, dims: list[int], generator: torch.Generator) -> list[torch.Tensor]:
    """Weights of ``n_members`` independent MLPs with layer sizes ``dims``, stacked on a leading
    member axis: W (E, d_in, d_out), b (E, 1, d_out), PyTorch's default U(-1/sqrt(d_in), 1/sqrt(d_in))."""
    params = []
    for d_in, d_out in itertools.pairwise(dims):
        bound = 1.0 / np.sqrt(d_in)
        W = (torch.rand(n_members, d_in, d_out, generator=generator) * 2 - 1) * bound
        b = (torch.rand(n_members, 1, d_out, generator=generator) * 2 - 1) * bound
        params += [W.requires_grad_(), b.requires_grad_()]
    return params


def ensemble_logits(params: list[torch.Tensor], X: torch.Tensor) -> torch.Tensor:
    """Forward pass of all members at once: X (n, d) -> logits (E, n, C); ReLU hidden layers."""
    h = X.unsqueeze(0).expand(params[0].shape[0], -1, -1)
    n_layers = len(params) // 2
    for i in range(n_layers):
        h = torch.baddbmm(params[2 * i + 1], h, params[2 * i])
        if i < n_layers - 1:
            h = torch.relu(h)
    return h


def train_ensemble(X: np.ndarray, y: np.ndarray, n_classes: int, seed: int, *, members: int, hidden: list[int],
                   steps: int, lr: float, weight_decay: float) -> list[torch.Tensor]:
    """A deep ensemble of ``members`` MLPs (``hidden`` widths, ReLU) trained by ``steps`` full-batch Adam
    steps on (X (n, d), y (n,)); members differ in their initialisation only (the standard deep
    ensemble). Deterministic given ``seed``."""
    gen = torch.Generator().manual_seed(seed)
    dims = [X.shape[1], *hidden, n_classes]
    params = init_ensemble(members, dims, gen)
    Xt, yt = torch.tensor(X), torch.tensor(np.asarray(y, dtype=np.int64))
    opt = torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    E = members
    for _ in range(steps):
        opt.zero_grad()
        logits = ensemble_logits(params, Xt)                  # (E, n, C)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), yt.repeat(E)) * E
        loss.backward()
        opt.step()
    return [p.detach() for p in params]


@torch.no_grad()
def ensemble_probs(params: list[torch.Tensor], X: np.ndarray) -> np.ndarray:
    """Member class probabilities (E, n, C) as float64."""
    return torch.softmax(ensemble_logits(params, torch.tensor(X)), dim=-1).double().numpy()


def acquisition_scores(name: str, probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Score of each pool point (higher = acquire first) from member probabilities (E, n, C)."""
    if name == "bald":
        return bald(probs)
    if name == "entropy":
        return predictive_entropy(probs)
    if name in ("random", CONTROL_ACQUISITION):
        return rng.random(probs.shape[1])
    raise ValueError(f"unknown acquisition {name!r}")


def run_active_learning(data: dict[str, np.ndarray], acquisition: str, p: Params, seed: int
                        ) -> list[dict[str, Any]]:
    """Pool-based active learning: retrain the ensemble (``p.al_members``, ``p.al_hidden``, ``p.al_steps``,
    ``p.al_lr``, ``p.al_weight_decay``), score the unlabelled pool, label the top ``p.al_batch`` points;
    ``p.al_rounds`` times. One row per round (test accuracy and NLL of the ensemble's mean prediction).
    The initial set and the per-round initialisations are shared by all acquisition functions of a
    seed (paired comparison)."""
    n_classes = int(max(data["y_pool"].max(), data["y_test"].max())) + 1
    labelled = np.zeros(len(data["y_pool"]), dtype=bool)
    labelled[data["init"]] = True
    # the control draws its random scores from its own stream, everything else is shared (paired)
    rng = np.random.default_rng([seed, 4] if acquisition == CONTROL_ACQUISITION else [seed, 3])
    rows = []
    for rnd in range(p.al_rounds + 1):
        idx = np.flatnonzero(labelled)
        params = train_ensemble(data["X_pool"][idx], data["y_pool"][idx], n_classes, seed=seed * 1000 + rnd,
                                members=p.al_members, hidden=p.al_hidden, steps=p.al_steps, lr=p.al_lr,
                                weight_decay=p.al_weight_decay)
        p_test = ensemble_probs(params, data["X_test"]).mean(axis=0)
        acc = float(np.mean(p_test.argmax(axis=1) == data["y_test"]))
        nll = float(-np.mean(np.log(np.clip(p_test[np.arange(len(p_test)), data["y_test"]], 1e-12, None))))
        rows.append({"acquisition": acquisition, "seed": seed, "round": rnd, "n_labels": int(labelled.sum()),
                     "n_acquired": int(labelled.sum()) - len(data["init"]), "test_acc": acc, "test_nll": nll})
        if rnd == p.al_rounds:
            break
        pool = np.flatnonzero(~labelled)
        scores = acquisition_scores(acquisition, ensemble_probs(params, data["X_pool"][pool]), rng)
        top = pool[np.argsort(-scores, kind="stable")[:p.al_batch]]
        labelled[top] = True
    return rows


def run_al_seed(p: Params, seed: int, acquisition: str, digits: tuple[np.ndarray, np.ndarray] | str
                ) -> dict[str, Any]:
    """One (seed, acquisition function) active-learning run with its wall time, on one torch thread
    (runs of other seeds go on in parallel tasks).

    ``digits``: (X (n, 64) pixel counts, y (n,)) arrays, or the path of a Parquet file with the
    features and a ``target`` column (:func:`tasks.data.save_bundled`). Reads ``p.al_test_size``,
    ``p.al_init_labels`` and what :func:`run_active_learning` reads.
    """
    started = time.perf_counter()
    if isinstance(digits, str):
        from tasks.data import load_xy

        frame, target = load_xy(digits)
        digits = (frame.to_numpy(dtype=np.float32), target.to_numpy())
    X, y = digits
    data = split_digits(X, y, seed, p.al_test_size, p.al_init_labels)
    with torch_single_thread():
        rows = run_active_learning(data, acquisition, p, seed)
    return {"rows": rows, "seconds": time.perf_counter() - started}

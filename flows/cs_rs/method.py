"""cs_rs: cost-sensitive certified robustness via randomized smoothing (Xin, Chen, Backes, Zhang, ICML 2025).

Read top to bottom:

1. Cost matrices: a set of *seed* classes y, each with a set Omega_y of *sensitive targets*; only a
   misclassification y -> Omega_y is costly. A seed example x is cost-sensitively robust at radius r
   when the smoothed classifier g predicts no class of Omega_y anywhere in the L2 ball B(x, r).
2. Certify-CS (official ``core.py``): from the same Monte-Carlo counts as Cohen's certify,
   p_A = Clopper-Pearson lower bound of the top class at alpha/2, p_B = max over Omega_y of the
   Clopper-Pearson upper bounds at alpha/(2 |Omega_y|) (Bonferroni), r2 = sigma/2 (Phi^-1(p_A) -
   Phi^-1(p_B)) and radius = max(r1, r2), r1 Cohen's sigma Phi^-1(p_A at alpha). Within r2 the top
   class stays more likely than every target, so g never predicts a target (even where g abstains
   in Cohen's sense); within r1, g keeps predicting the top class.
3. Training: Gaussian augmentation (Cohen), the cost-sensitive reweighted Gaussian baseline, MACER
   (Zhai et al., 2020) and CS-MACER (official ``pair_macer.py``): MACER's smoothed-softmax NLL plus
   hinge terms on the soft radii, one for every example (top-1 vs runner-up) and one for seed
   examples (top class vs the most likely sensitive target).
4. ``run_seed``: one data split, every model trained and certified, the certified accuracies and a
   PGD attack on the smoothed classifier.

Shapes: inputs are (b, 64) digits pixels in [0, 1]; logits (b, 10); counts (m, 10).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from scipy.stats import norm
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn
from torch.nn import functional as F

from flows.cs_rs.params import Params
from paperflows.core.seeding import torch_generator, torch_seeded
from tasks import smoothing
from tasks.attacks import pgd
from tasks.train import mlp, torch_single_thread, warm_up_optimiser

N_CLASSES = 10

# ---------------------------------------------------------------------------------------------
# 1. Cost matrices (plan: digits stand-ins for the paper's CIFAR-10 cat -> {bird, deer, dog} settings)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CostMatrix:
    """Binary cost matrix: misclassifying a class of ``seeds`` into a class of ``targets`` is costly."""

    seeds: tuple[int, ...]
    targets: tuple[int, ...]
    all_targets: bool = False   # every class but the label is sensitive (the standard setting, on these seeds)

    def standard(self) -> "CostMatrix":
        """The same seed examples with every wrong class sensitive: Cohen's setting, no cost structure."""
        return CostMatrix(self.seeds, tuple(c for c in range(N_CLASSES) if c not in self.seeds), all_targets=True)


COST_MATRICES = {
    "single_pair": CostMatrix(seeds=(3,), targets=(5,)),
    "multi_target": CostMatrix(seeds=(4,), targets=(1, 7, 9)),
    "multi_seed": CostMatrix(seeds=(3, 8), targets=(5, 9)),
}
# the negative control of the training claim: CS-MACER trained for a cost matrix with other seed classes
WRONG_MATRIX = {"single_pair": "multi_target", "multi_target": "single_pair", "multi_seed": "multi_target"}


def load_split(p: Params, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Stratified digits split: (X_train (n, 64), y_train (n,), X_test (p.test_size, 64), y_test), pixels in [0, 1]."""
    digits = load_digits()
    X = digits.data.astype(np.float32) / 16.0
    Xtr, Xte, ytr, yte = train_test_split(X, digits.target, test_size=p.test_size, stratify=digits.target,
                                          random_state=seed)
    return torch.from_numpy(Xtr), torch.from_numpy(ytr).long(), torch.from_numpy(Xte), torch.from_numpy(yte).long()


# ---------------------------------------------------------------------------------------------
# 2. Certify-CS, from the counts of Cohen's certify
# ---------------------------------------------------------------------------------------------


def cohen_radius(selection: np.ndarray, estimation: np.ndarray, sigma: float, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Cohen's certificate before abstention: (top class (m,), r1 = sigma Phi^-1(p_A lower at alpha) (m,)).
    r1 < 0 exactly where Cohen's certify abstains (p_A < 1/2)."""
    top = selection.argmax(axis=1)
    n = estimation.sum(axis=1)
    p_lower = smoothing.cp_lower(estimation[np.arange(len(top)), top], n, alpha)
    with np.errstate(divide="ignore"):
        return top, sigma * norm.ppf(p_lower)


def certify_cs(selection: np.ndarray, estimation: np.ndarray, targets: np.ndarray, sigma: float,
               alpha: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Certify-CS for m points, each with its own sensitive set: ``targets`` (m, K) bool.

    Returns (top class (m,), radius = max(r1, r2) (m,), r1 (m,), r2 (m,)). With probability >= 1 - alpha
    (per point) g(x') is not in the point's sensitive set for every ||x' - x|| < radius, provided the
    top class itself is not sensitive (checked by the caller: a sensitive top class gets r2 <= 0 anyway).
    Both certificates hold on one event: the alpha/2 lower bound on p_A and the |Omega|-fold
    Bonferroni upper bounds together fail with probability <= alpha, and the alpha/2 bound is below
    the alpha bound, so r1 is valid on the same event.
    """
    top, r1 = cohen_radius(selection, estimation, sigma, alpha)
    rows = np.arange(len(top))
    n = estimation.sum(axis=1)
    card = targets.sum(axis=1)
    p_a = smoothing.cp_lower(estimation[rows, top], n, alpha / 2)
    upper = smoothing.cp_upper(estimation, n[:, None], (alpha / (2 * np.maximum(card, 1)))[:, None])
    p_b = np.where(targets, upper, 0.0).max(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        r2 = sigma / 2 * (norm.ppf(p_a) - norm.ppf(p_b))
    r2 = np.where(np.isnan(r2), -np.inf, r2)
    return top, np.maximum(r1, r2), r1, r2


def sensitive_mask(labels: np.ndarray, cost: CostMatrix | None) -> np.ndarray:
    """(m, K) bool: the sensitive targets of each point; ``cost=None`` is the standard (all-pair) setting,
    where every class but the label is sensitive, for every point; ``cost.all_targets``: the same for seed
    examples only."""
    labels = np.asarray(labels)
    every_other = np.arange(N_CLASSES)[None, :] != labels[:, None]
    if cost is None:
        return every_other
    is_seed = np.isin(labels, cost.seeds)
    if cost.all_targets:
        return every_other & is_seed[:, None]
    mask = np.zeros((len(labels), N_CLASSES), dtype=bool)
    mask[np.ix_(is_seed, list(cost.targets))] = True
    return mask


def robust_at(top: np.ndarray, radius: np.ndarray, targets: np.ndarray, r: float) -> np.ndarray:
    """(m,) bool: certified cost-sensitively robust at radius ``r`` (top class not sensitive, radius >= r)."""
    return ~targets[np.arange(len(top)), top] & (radius >= r)


# ---------------------------------------------------------------------------------------------
# 3. Training: Gaussian augmentation, reweighting, MACER and CS-MACER
# ---------------------------------------------------------------------------------------------


def gaussian_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor, p: Params, gen: torch.Generator,
                  weights: torch.Tensor | None = None) -> torch.Tensor:
    """Cohen's Gaussian augmentation: cross-entropy at one noisy copy per example; ``weights`` (b,)
    reweight it per example (the cost-sensitive reweighting baseline)."""
    noisy = x + p.sigma * torch.randn(x.shape, generator=gen)
    ce = F.cross_entropy(model(noisy), y, reduction="none")
    return ce.mean() if weights is None else (weights * ce).mean()


def macer_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor, p: Params, gen: torch.Generator,
               cost: CostMatrix | None = None) -> torch.Tensor:
    """MACER (``cost=None``) or CS-MACER loss of a batch x (b, 64), y (b,), as in the official pair_macer.py.

    ``gauss_num`` noisy copies per example give the smoothed softmax (b, K); the classification term is
    its NLL. On the beta-scaled smoothed softmax, the soft radius of every correctly classified example
    is Phi^-1(p_y) - Phi^-1(p_second); where it lies in (0, gamma2) the hinge gamma2 - radius is added.
    CS-MACER adds, for seed examples, the soft cost-sensitive radius Phi^-1(p_top) - Phi^-1(max_Omega p_j)
    (p_top: the top class, as in the official code) with the hinge gamma1 - radius where |radius| < gamma1.
    Loss = (NLL + lambda sigma/2 sum(hinges)) / b.
    """
    b, g = len(x), p.gauss_num
    noisy = x.repeat_interleave(g, dim=0)
    noisy = noisy + p.sigma * torch.randn(noisy.shape, generator=gen)
    logits = model(noisy).view(b, g, N_CLASSES)
    smoothed = F.softmax(logits, dim=2).mean(1)
    classification = F.nll_loss(torch.log(smoothed + 1e-10), y, reduction="sum")

    soft = F.softmax(p.beta * logits, dim=2).mean(1)      # beta only inside the robustness term
    onehot = F.one_hot(y, N_CLASSES).bool()
    first = soft[onehot]
    second = soft.masked_fill(onehot, 0.0).max(dim=1).values
    with torch.no_grad():   # select the examples where the soft radius is finite and inside the hinge
        radius = torch.special.ndtri(first) - torch.special.ndtri(second)
        normal = torch.isfinite(radius) & (radius > 0) & (radius < p.gamma2)
    hinge = (torch.special.ndtri(second[normal]) - torch.special.ndtri(first[normal]) + p.gamma2).sum()

    if cost is not None:
        top = soft.max(dim=1).values
        target_cols = torch.tensor(cost.targets)
        target = soft[:, target_cols].max(dim=1).values
        is_seed = torch.isin(y, torch.tensor(cost.seeds))
        with torch.no_grad():
            cs_radius = torch.special.ndtri(top) - torch.special.ndtri(target)
            sensitive = is_seed & torch.isfinite(cs_radius) & (cs_radius.abs() < p.gamma1)
        hinge = hinge + (torch.special.ndtri(target[sensitive]) - torch.special.ndtri(top[sensitive]) + p.gamma1).sum()

    return (classification + p.lbd * p.sigma / 2 * hinge) / b


def train_model(p: Params, X: torch.Tensor, y: torch.Tensor, method: str, cost: CostMatrix | None,
                seed: int) -> nn.Module:
    """Train the MLP 64 -> hidden -> 10 with ``method`` in {"gaussian", "reweight", "macer", "cs_macer"}
    (Adam, ``p.epochs`` epochs). Every method starts from the same initialisation and batch order of ``seed``."""
    with torch_seeded(seed):
        model = mlp(X.shape[1], list(p.hidden), N_CLASSES)
    optimiser = torch.optim.Adam(model.parameters(), lr=p.lr)
    order_gen, noise_gen = torch_generator(seed), torch_generator(seed + 7919)
    weights = None
    if method == "reweight":
        weights = torch.where(torch.isin(y, torch.tensor(cost.seeds)), p.reweight, 1.0)
    model.train()
    for _ in range(p.epochs):
        order = torch.randperm(len(X), generator=order_gen)
        for start in range(0, len(X), p.batch_size):
            idx = order[start:start + p.batch_size]
            if method in ("gaussian", "reweight"):
                loss = gaussian_loss(model, X[idx], y[idx], p, noise_gen, None if weights is None else weights[idx])
            elif method == "macer":
                loss = macer_loss(model, X[idx], y[idx], p, noise_gen)
            elif method == "cs_macer":
                loss = macer_loss(model, X[idx], y[idx], p, noise_gen, cost)
            else:
                raise ValueError(f"unknown method {method!r}")
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
    model.eval()
    return model


class MaskTargets(nn.Module):
    """A trivial cost-sensitive 'defence': a base model with the sensitive targets' logits set to -inf,
    so it never predicts them (negative control of the accuracy claims: robust by giving up accuracy)."""

    def __init__(self, model: nn.Module, targets: tuple[int, ...]):
        super().__init__()
        self.model, self.targets = model, list(targets)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mask(self.model(x))

    def mask(self, logits: torch.Tensor) -> torch.Tensor:
        """The base model's ``logits`` with the sensitive targets' set to -inf (a copy)."""
        logits = logits.clone()
        logits[:, self.targets] = -torch.inf
        return logits


def shared_forward(models: list[nn.Module]) -> Callable[[torch.Tensor], list[torch.Tensor]]:
    """A batch -> the logits of every model, each base network run once (a masked model reuses its base's logits)."""
    def classify(x: torch.Tensor) -> list[torch.Tensor]:
        base_logits: dict[int, torch.Tensor] = {}

        def logits_of(model: nn.Module) -> torch.Tensor:
            if isinstance(model, MaskTargets):
                return model.mask(logits_of(model.model))
            if id(model) not in base_logits:
                base_logits[id(model)] = model(x)
            return base_logits[id(model)]

        return [logits_of(model) for model in models]
    return classify


# ---------------------------------------------------------------------------------------------
# 4. Evaluation: certification of every model, PGD on the smoothed classifier, one seed
# ---------------------------------------------------------------------------------------------


def certify_models(p: Params, models: dict[str, tuple[nn.Module, dict[str, CostMatrix]]], X: torch.Tensor,
                   y: torch.Tensor, seed: int) -> list[dict]:
    """Certified accuracies of every model {name: (model, matrices)}, each from the counts of Cohen's certify
    with the same noise draws (drawn once, as each model's own certify would draw them)."""
    classify = shared_forward([model for model, _ in models.values()])
    selections = smoothing.sample_counts_shared(classify, X, p.sigma, p.n0, p.cert_batch, seed)
    estimations = smoothing.sample_counts_shared(classify, X, p.sigma, p.n, p.cert_batch, seed + 1_000_003)
    return [row for (name, (_, matrices)), selection, estimation in zip(models.items(), selections, estimations)
            for row in certified_rows(p, selection, estimation, y, name, matrices)]


def certified_rows(p: Params, selection: np.ndarray, estimation: np.ndarray, y: torch.Tensor, name: str,
                   matrices: dict[str, CostMatrix]) -> list[dict]:
    """Certified accuracies of one model from its selection and estimation counts: rows of (model, matrix,
    certificate, radius, accuracy).

    ``matrix="all_pair"`` is the standard setting (every wrong class sensitive; its Cohen accuracy is the
    usual certified accuracy over all test points); the cost matrices are scored on their seed examples.
    """
    labels = y.numpy()
    rows = []
    radii = sorted({0.0, p.tightness_radius, p.training_radius, *p.curve_radii})
    for matrix, cost in [("all_pair", None), *matrices.items()]:
        targets = sensitive_mask(labels, cost)
        keep = np.ones(len(labels), bool) if cost is None else np.isin(labels, cost.seeds)
        top, radius_cs, r1, _ = certify_cs(selection[keep], estimation[keep], targets[keep], p.sigma, p.alpha)
        for certificate, radius in (("cohen", r1), ("cs", radius_cs)):
            for r in radii:
                # at r = 0, radius >= 0 is Cohen's no-abstention condition p_A >= 1/2: the smoothed accuracy
                ok = robust_at(top, radius, targets[keep], r)
                rows.append({"model": name, "matrix": matrix, "certificate": certificate, "radius": float(r),
                             "accuracy": float(ok.mean())})
    return rows


def smoothed_log_probs(model: nn.Module, x: torch.Tensor, sigma: float, draws: int, gen: torch.Generator) -> torch.Tensor:
    """log of the soft smoothed classifier E_e softmax f(x + e), estimated with ``draws`` noise draws: (b, K)."""
    noisy = x.repeat_interleave(draws, dim=0)
    noisy = noisy + sigma * torch.randn(noisy.shape, generator=gen)
    probs = F.softmax(model(noisy), dim=1).view(len(x), draws, -1).mean(1)
    return torch.log(probs + 1e-12)


def pgd_check(p: Params, model: nn.Module, X: torch.Tensor, y: torch.Tensor, cost: CostMatrix, seed: int,
              X_train: torch.Tensor, y_train: torch.Tensor) -> dict:
    """Attack the smoothed classifier of ``model`` on seed examples certified by Certify-CS at
    ``p.training_radius``: L2 PGD (eps = that radius, no pixel box: the certificate is on R^64) toward the
    most likely sensitive target (EOT over ``p.pgd_noise`` draws), then Cohen's predict on the result.

    Returns the number of certified points attacked, how many adversarial points g predicts in Omega
    (violations of the certificate; each predict errs with probability <= alpha), and, for power, the same
    attack's success with eps = the largest distance from an attacked point to its nearest training
    image of a sensitive target class (so every attacked point has a real target image inside its ball).
    """
    labels = y.numpy()
    is_seed = np.isin(labels, cost.seeds)
    Xs = X[is_seed]
    sel = smoothing.sample_counts(model, Xs, p.sigma, p.n0, p.cert_batch, seed + 11)
    est = smoothing.sample_counts(model, Xs, p.sigma, p.n, p.cert_batch, seed + 13)
    targets = sensitive_mask(labels[is_seed], cost)
    top, radius, _, _ = certify_cs(sel, est, targets, p.sigma, p.alpha)
    certified = np.flatnonzero(robust_at(top, radius, targets, p.training_radius))[: p.pgd_points]
    if len(certified) == 0:
        return {"attacked": 0, "violations": 0, "power_eps": 0.0, "power_successes": 0}
    x = Xs[certified]
    target_cols = torch.tensor(cost.targets)
    target_images = X_train[torch.isin(y_train, target_cols)]
    power_eps = float(torch.cdist(x, target_images).min(dim=1).values.max())
    top_t = torch.from_numpy(top[certified])
    gen = torch_generator(seed + 17)

    def objective(inputs: torch.Tensor) -> torch.Tensor:   # (b,): log max_Omega p_j - log p_top
        logp = smoothed_log_probs(model, inputs, p.sigma, p.pgd_noise, gen)
        return logp[:, target_cols].max(dim=1).values - logp.gather(1, top_t[:, None]).squeeze(1)

    out = {"attacked": int(len(certified)), "power_eps": power_eps}
    for key, eps in (("violations", p.training_radius), ("power_successes", power_eps)):
        adv = pgd(objective, x, eps=eps, step_size=eps / 4, steps=p.pgd_steps, norm="l2", restarts=1,
                  bounds=None, seed=seed)
        pred = smoothing.predict(model, adv, p.sigma, p.pgd_n, p.alpha, p.cert_batch, seed + 19)
        out[key] = int(np.isin(pred, cost.targets).sum())
    return out


def run_seed(p: Params, seed: int) -> dict:
    """One seed: split, train Gaussian, MACER, and per cost matrix the reweighted Gaussian and CS-MACER;
    certify every model (and MACER with the targets masked, the trivial control); PGD on the Gaussian
    model's smoothed classifier where Certify-CS certified it (single pair 3 -> 5).

    Returns {"rows": certified-accuracy rows, "train_s": {model: seconds}, "pgd": {...}, "seed": seed}.
    """
    warm_up_optimiser()
    with torch_single_thread():
        Xtr, ytr, Xte, yte = load_split(p, seed)
        models: dict[str, tuple[nn.Module, dict[str, CostMatrix]]] = {}
        train_s: dict[str, float] = {}

        # CPU seconds of this seed's thread (seeds run in parallel threads, torch single-threaded inside)
        def fit(name: str, method: str, cost: CostMatrix | None) -> nn.Module:
            started = time.thread_time()
            model = train_model(p, Xtr, ytr, method, cost, seed)
            train_s[name] = time.thread_time() - started
            return model

        # Gaussian is also certified with each matrix's seeds in the standard setting (tightness control)
        standard = {f"{m}@standard": cost.standard() for m, cost in COST_MATRICES.items()}
        models["gaussian"] = (fit("gaussian", "gaussian", None), {**COST_MATRICES, **standard})
        models["macer"] = (fit("macer", "macer", None), COST_MATRICES)
        for m, cost in COST_MATRICES.items():
            models[f"reweight:{m}"] = (fit(f"reweight:{m}", "reweight", cost), {m: cost})
            # CS-MACER is certified on its own matrix and, as the control, on the matrix it was not trained for
            wrong = {k: v for k, v in COST_MATRICES.items() if WRONG_MATRIX[k] == m}
            models[f"cs_macer:{m}"] = (fit(f"cs_macer:{m}", "cs_macer", cost), {m: cost, **wrong})
            models[f"masked_macer:{m}"] = (MaskTargets(models["macer"][0], cost.targets), {m: cost})

        started = time.thread_time()
        rows = certify_models(p, models, Xte, yte, seed)
        certify_s = time.thread_time() - started
        started = time.thread_time()
        pgd_out = pgd_check(p, models["gaussian"][0], Xte, yte, COST_MATRICES["single_pair"], seed,
                            Xtr, ytr)
        pgd_s = time.thread_time() - started
    for row in rows:
        row["seed"] = seed
    return {"seed": seed, "rows": rows, "train_s": train_s, "certify_s": certify_s, "pgd_s": pgd_s, "pgd": pgd_out}

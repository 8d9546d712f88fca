"""Heterogeneous Label Shift (HLS): HLSAN and its baselines on two synthetic modalities of the digits.

**HLSAN is reconstructed, not the authors' code.** No official code exists (the reproducibility page
says "no code") and only the abstract was available; the algorithm below follows the plan's reading
of the abstract and standard heterogeneous domain adaptation (HDA) practice:

* modality-specific projectors g_S (source features -> R^z) and g_T (target features -> R^z) and a
  shared classifier h on the latent space;
* the target risk is bounded by an importance-weighted source risk (weights w(y) = p_T(y) / p_S(y)),
  a discrepancy between the w-weighted source and the target latent distributions, and a term for the
  error in w; HLSAN minimises the first two and re-estimates w as it goes:
  (i) every ``reestimate_every`` steps after ``warmup`` it estimates w by BBSE (Lipton et al. 2018)
      from the confusion matrix of h∘g_S on held-out source data and the predictions of h∘g_T on the
      unlabelled target;
  (ii) w-weighted source cross-entropy + cross-entropy on the few labelled target samples;
  (iii) w-weighted domain-adversarial alignment of the latent features (gradient reversal,
      Ganin et al. 2016): the discriminator sees source samples weighted by w(y), so the target is
      aligned with the source *re-weighted to the target's label distribution* instead of the source
      as it is (which, under label shift, would pull target samples onto the wrong classes).

Data (the plan's laptop stand-in for the paper's cross-modal benchmarks): scikit-learn's 8x8 digits,
split in two halves per seed. Source modality = the 64 raw pixels of one half, with its natural
(nearly uniform) label distribution. Target modality = the other half encoded differently: row and
column ink profiles (16) + a fixed random orthogonal projection of the 2-D DCT (``dct_dims``), then
standardised, plus Gaussian noise drawn per sample (40 dims by default: a different space and
dimension). The target's class prior is drawn from Dirichlet(alpha); unlabelled and test samples are
drawn with that prior (with replacement from disjoint image pools, each draw with its own noise); a
few labelled target samples per class (``shots``) are given as in semi-supervised HDA.

Methods (the same networks, initialisation and full-batch Adam steps for every method of a seed):
``target_only`` (logistic regression on the labelled target samples), ``no_align`` (source + labelled
target cross-entropy, no alignment: the HDA analogue of source-only, since a source classifier cannot
read the target's features), ``hda_adv`` (domain-adversarial HDA, w = 1), ``hda_adv_bbse`` (the
``hda_adv`` model with post-hoc BBSE prior correction of its target predictions), ``hlsan``
(estimated w), ``hlsan_oracle`` (true w; reference), and two negative controls: ``hda_adv_rerun``
(``hda_adv`` from another initialisation: an A/A pair) and ``hlsan_permuted`` (HLSAN on source data
whose labels are permuted, so the source carries no label information).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch
from scipy.fft import dctn
from scipy.stats import ortho_group
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from torch import nn
from torch.nn import functional as F

from flows.heterogeneous_label_shift.params import Params
from paperflows.core.seeding import numpy_rng, torch_seeded
from tasks.data import load_bundled
from tasks.train import mlp, torch_single_thread

N_CLASSES = 10
SETTINGS = ("uniform", "mild", "moderate", "severe")       # target prior: uniform (no shift), then Dirichlet
STREAM = {"split": 0, "encoding": 1, "prior": 2, "draw": 3, "init": 4, "rerun_init": 5, "permute": 6}
NETWORK_METHODS = ("no_align", "hda_adv", "hlsan", "hlsan_oracle")


def setting_alpha(p: Params, setting: str) -> float:
    """Dirichlet concentration of a shift setting; ``inf`` for the uniform target prior."""
    return {"uniform": float("inf"), "mild": p.alpha_mild, "moderate": p.alpha_moderate,
            "severe": p.alpha_severe}[setting]


# =============================================================================================
# Label-shift estimation (BBSE)
# =============================================================================================
def confusion_joint(y_true: np.ndarray, y_pred: np.ndarray, k: int) -> np.ndarray:
    """C[i, j] = P_S(prediction = i, label = j), shape (k, k), from paired label arrays of shape (n,)."""
    C = np.zeros((k, k))
    np.add.at(C, (y_pred, y_true), 1.0)
    return C / len(y_true)


def bbse_weights(y_val: np.ndarray, pred_val: np.ndarray, pred_target: np.ndarray, k: int) -> np.ndarray:
    """Black-box shift estimation (Lipton et al. 2018): w (k,) with w[j] ~ p_T(j) / p_S(j).

    Under label shift, P_T(pred = i) = sum_j P_S(pred = i | y = j) p_T(j) = sum_j C[i, j] w[j], so
    w = C^{-1} mu_T with C the source-validation joint confusion matrix and mu_T the target's
    prediction frequencies. Least squares stands in for the inverse when C is singular (a class never
    predicted); negative weights are clipped to 0 (a prior cannot be negative).
    """
    C = confusion_joint(y_val, pred_val, k)
    mu = np.bincount(pred_target, minlength=k) / len(pred_target)
    w = np.linalg.lstsq(C, mu, rcond=None)[0]
    return np.clip(w, 0.0, None)


def weight_error(w_hat: np.ndarray, w_true: np.ndarray) -> float:
    """||w_hat - w_true||_2: the estimation error of the label-shift weights."""
    return float(np.linalg.norm(np.asarray(w_hat) - np.asarray(w_true)))


# =============================================================================================
# Data: two modalities of the digits, and a shifted target
# =============================================================================================
def encode_target(images: np.ndarray, projection: np.ndarray) -> np.ndarray:
    """The target modality before standardisation: images (n, 8, 8) in [0, 16] -> (n, 16 + d).

    Row ink profile (8) and column ink profile (8), each a mean in [0, 1], then the orthonormal 2-D
    DCT of the image (64 coefficients, flattened row-major) times ``projection`` (64, d).
    """
    x = images / 16.0
    profiles = np.concatenate([x.mean(axis=2), x.mean(axis=1)], axis=1)
    dct = dctn(x, axes=(1, 2), norm="ortho").reshape(len(x), 64)
    return np.concatenate([profiles, dct @ projection], axis=1)


def draw_with_prior(pools: list[np.ndarray], prior: np.ndarray, n: int, rng: np.random.Generator
                    ) -> tuple[np.ndarray, np.ndarray]:
    """n draws with class prior ``prior`` (k,): labels ~ Categorical(prior), then an image index drawn
    uniformly (with replacement) from that class's pool. Returns (indices (n,), labels (n,))."""
    labels = rng.choice(len(prior), size=n, p=prior)
    index = np.array([pools[c][rng.integers(len(pools[c]))] for c in labels], dtype=int)
    return index, labels


@dataclass(frozen=True)
class Split:
    """One seed's modalities and index sets (every array indexes the digits' rows)."""

    Xs_all: np.ndarray          # (n_all, 64) source encoding of every digit, standardised
    Xt_all: np.ndarray          # (n_all, 16 + d) target encoding of every digit, standardised, noise-free
    y_all: np.ndarray           # (n_all,)
    source_train: np.ndarray
    source_val: np.ndarray
    target_labelled: np.ndarray
    unlabelled_pools: list      # per class: target-half indices the unlabelled draws come from
    test_pools: list            # per class: target-half indices the test draws come from (disjoint)


def make_split(p: Params, seed: int) -> Split:
    """Split the digits in a source half and a target half (stratified) and encode both modalities."""
    X, y = load_bundled("digits")
    images, y = X.to_numpy(float).reshape(-1, 8, 8), y.to_numpy()
    rng = numpy_rng(seed, STREAM["split"])
    idx = np.arange(len(y))
    src, tgt = train_test_split(idx, test_size=0.5, stratify=y, random_state=int(rng.integers(2**31)))
    s_train, s_val = train_test_split(src, test_size=p.source_val_frac, stratify=y[src],
                                      random_state=int(rng.integers(2**31)))
    labelled, unl_pools, test_pools = [], [], []
    for c in range(N_CLASSES):
        members = rng.permutation(tgt[y[tgt] == c])
        labelled.append(members[:p.shots])
        rest = members[p.shots:]
        unl_pools.append(rest[: len(rest) // 2])
        test_pools.append(rest[len(rest) // 2:])
    projection = ortho_group.rvs(64, random_state=numpy_rng(seed, STREAM["encoding"]))[:, :p.dct_dims]
    # standardisation statistics from the training data of each modality (no labels are used)
    Xs = StandardScaler().fit(images[s_train].reshape(-1, 64)).transform(images.reshape(-1, 64))
    Zt = encode_target(images, projection)
    Xt = StandardScaler().fit(Zt[tgt]).transform(Zt)
    return Split(Xs, Xt, y, s_train, s_val, np.concatenate(labelled), unl_pools, test_pools)


@dataclass(frozen=True)
class Task:
    """One seed's data at one shift setting, as tensors (float32 features, int64 labels)."""

    xs: torch.Tensor            # (n_s, 64) source training features
    ys: torch.Tensor            # (n_s,)
    xs_val: torch.Tensor        # (n_v, 64) held-out source (BBSE's confusion matrix)
    ys_val: torch.Tensor
    xl: torch.Tensor            # (shots * k, d_T) labelled target
    yl: torch.Tensor
    xu: torch.Tensor            # (n_u, d_T) unlabelled target (shifted prior)
    xt: torch.Tensor            # (n_test, d_T) target test set (shifted prior)
    yt: torch.Tensor
    prior_target: np.ndarray    # (k,) the target prior the draws came from
    w_true: np.ndarray          # (k,) p_T(y) / p_S(y), p_S the source training frequencies


def make_task(p: Params, split: Split, seed: int, setting: str) -> Task:
    """Draw the target prior of ``setting`` and the unlabelled and test target sets with it."""
    alpha = setting_alpha(p, setting)
    k = N_CLASSES
    if np.isinf(alpha):
        prior = np.full(k, 1.0 / k)
    else:
        prior = numpy_rng(seed, STREAM["prior"], SETTINGS.index(setting)).dirichlet(np.full(k, alpha))
        prior = np.maximum(prior, 0.0) / prior.sum()
    rng = numpy_rng(seed, STREAM["draw"], SETTINGS.index(setting))
    u_idx, _ = draw_with_prior(split.unlabelled_pools, prior, p.n_target_unlabelled, rng)
    t_idx, t_lab = draw_with_prior(split.test_pools, prior, p.n_target_test, rng)
    d_t = split.Xt_all.shape[1]
    xu = split.Xt_all[u_idx] + p.target_noise * rng.standard_normal((len(u_idx), d_t))
    xt = split.Xt_all[t_idx] + p.target_noise * rng.standard_normal((len(t_idx), d_t))
    xl = split.Xt_all[split.target_labelled] + p.target_noise * rng.standard_normal((len(split.target_labelled), d_t))
    ys = split.y_all[split.source_train]
    p_source = np.bincount(ys, minlength=k) / len(ys)
    f32 = lambda a: torch.as_tensor(a, dtype=torch.float32)
    i64 = lambda a: torch.as_tensor(a, dtype=torch.int64)
    return Task(f32(split.Xs_all[split.source_train]), i64(ys), f32(split.Xs_all[split.source_val]),
                i64(split.y_all[split.source_val]), f32(xl), i64(split.y_all[split.target_labelled]),
                f32(xu), f32(xt), i64(t_lab), prior, prior / p_source)


# =============================================================================================
# Networks and the training loop (one loop for every network method)
# =============================================================================================
class GradientReversal(torch.autograd.Function):
    """Identity forward; the gradient times -lambda backward (Ganin et al. 2016)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, lam: float) -> torch.Tensor:
        ctx.lam = lam
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return -ctx.lam * grad, None


class HDANet(nn.Module):
    """g_S (64 -> z), g_T (d_T -> z), shared classifier h (z -> k) and domain discriminator D (z -> 1)."""

    def __init__(self, d_source: int, d_target: int, hidden: int, latent: int, k: int = N_CLASSES):
        super().__init__()
        self.g_s = nn.Sequential(mlp(d_source, [hidden], latent), nn.ReLU())
        self.g_t = nn.Sequential(mlp(d_target, [hidden], latent), nn.ReLU())
        self.h = nn.Linear(latent, k)
        self.d = mlp(latent, [hidden], 1)

    def source_logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.h(self.g_s(x))

    def target_logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.h(self.g_t(x))


def weighted_mean(values: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """sum(w v) / sum(w): the self-normalised importance-weighted mean (a zero total falls back to the mean)."""
    total = weights.sum()
    return (weights * values).sum() / total if float(total) > 0 else values.mean()


def conditional_discrepancy(zs: torch.Tensor, ys: torch.Tensor, zt: torch.Tensor, qt: torch.Tensor,
                            k: int = N_CLASSES) -> torch.Tensor:
    """Class-conditional discrepancy of the latent features: mean over classes of ||mu_S[c] - mu_T[c]||^2.

    mu_S[c] is the mean of the source latents zs (n_s, z) of class c (true labels ys (n_s,)); mu_T[c]
    the q-weighted mean of the target latents zt (n_t, z), q (n_t, k) one-hot for labelled target rows
    and the classifier's (detached) soft predictions for unlabelled ones. Class-conditional
    distributions do not change under label shift, so this term needs no w: it is the part of the
    bound that handles the feature heterogeneity alone. Classes absent from either side are skipped.
    """
    onehot = F.one_hot(ys, k).to(zs.dtype)                       # (n_s, k)
    mass_s, mass_t = onehot.sum(0), qt.sum(0)                     # (k,)
    mu_s = (onehot.T @ zs) / mass_s.clamp_min(1e-8)[:, None]       # (k, z)
    mu_t = (qt.T @ zt) / mass_t.clamp_min(1e-8)[:, None]
    present = (mass_s > 0) & (mass_t > 1e-3)
    return ((mu_s - mu_t) ** 2).sum(1)[present].mean()


def dann_lambda(step: int, steps: int) -> float:
    """The DANN schedule 2 / (1 + exp(-10 progress)) - 1 of the reversal coefficient (0 -> 1)."""
    return float(2.0 / (1.0 + np.exp(-10.0 * step / steps)) - 1.0)


@torch.no_grad()
def _predictions(net: HDANet, task: Task) -> tuple[np.ndarray, np.ndarray]:
    """Hard predictions on the held-out source (n_v,) and on the unlabelled target (n_u,)."""
    return net.source_logits(task.xs_val).argmax(1).numpy(), net.target_logits(task.xu).argmax(1).numpy()


def estimate_weights(net: HDANet, task: Task) -> np.ndarray:
    """BBSE weights (k,) of the current model: source-validation confusion matrix, target predictions."""
    pred_val, pred_u = _predictions(net, task)
    return bbse_weights(task.ys_val.numpy(), pred_val, pred_u, N_CLASSES)


def new_network(p: Params, task: Task, init_seed: int) -> tuple[HDANet, torch.optim.Adam]:
    """The untrained net of ``init_seed`` and its Adam optimiser."""
    with torch_seeded(init_seed):
        net = HDANet(task.xs.shape[1], task.xu.shape[1], p.hidden, p.latent)
    # foreach: one kernel per Adam state update over all parameters instead of one per parameter (the
    # per-element arithmetic is the same, so the trained weights are too)
    return net, torch.optim.Adam(net.parameters(), lr=p.lr, weight_decay=p.weight_decay, foreach=True)


def warm_start(p: Params, task: Task, init_seed: int) -> tuple[HDANet, torch.optim.Adam]:
    """The net and optimiser of ``init_seed`` after the ``warmup`` steps on the cross-entropies alone (w = 1, true
    source labels): the first steps of ``no_align``, ``hda_adv`` and ``hlsan`` coincide, so they are run once."""
    net, optimiser = new_network(p, task, init_seed)
    _train_steps(p, task, net, optimiser, range(p.warmup), align=False, weights="one", ys=task.ys)
    return net, optimiser


def train_network(p: Params, task: Task, net: HDANet, optimiser: torch.optim.Adam, *, align: bool, weights: str,
                  first_step: int = 0, source_labels: torch.Tensor | None = None) -> tuple[HDANet, np.ndarray]:
    """Train one network method full-batch with Adam from step ``first_step`` to ``steps``; returns the net and the
    final w it used (k,).

    ``align``: from step ``warmup`` on, add the class-conditional discrepancy and the domain-adversarial
    loss (every aligned method first trains ``warmup`` steps on the cross-entropies alone: BBSE needs a
    target predictor that is not yet pulled onto the wrong classes by alignment under label shift, and
    the w = 1 and oracle variants share the schedule so that only w differs). ``weights``: ``"one"`` (w = 1), ``"oracle"`` (the true
    w) or ``"bbse"`` (HLSAN: w = 1 for ``warmup`` steps, then BBSE re-estimates every
    ``reestimate_every`` steps). ``source_labels`` replaces the source training labels (the permuted
    control). ``net, optimiser``: a :func:`new_network` of the seed's init seed (every method of a seed starts
    from the same weights) at ``first_step`` 0, or a copy of its :func:`warm_start` at ``first_step`` ``warmup``
    (only for w = 1 or BBSE weights and the true labels, whose warmup it is).
    """
    ys = task.ys if source_labels is None else source_labels
    w = _train_steps(p, task, net, optimiser, range(first_step, p.steps), align=align, weights=weights, ys=ys)
    net.eval()
    return net, w


def _train_steps(p: Params, task: Task, net: HDANet, optimiser: torch.optim.Adam, steps: range, *, align: bool,
                 weights: str, ys: torch.Tensor) -> np.ndarray:
    """The full-batch Adam steps ``steps`` of :func:`train_network` (source labels ``ys`` (n_s,)); returns the final
    w (k,)."""
    w = task.w_true.copy() if weights == "oracle" else np.ones(N_CLASSES)
    w_src = torch.as_tensor(w, dtype=torch.float32)[ys]           # (n_s,) w(y_i) per source row
    xt_domain = torch.cat([task.xu, task.xl])          # every target sample the discriminator may see
    onehot_l = F.one_hot(task.yl, N_CLASSES).float()              # (n_l, k) soft labels of the labelled target
    domain_s, domain_t = torch.ones(len(task.xs)), torch.zeros(len(xt_domain))   # discriminator targets
    for step in steps:
        if weights == "bbse" and step >= p.warmup and (step - p.warmup) % p.reestimate_every == 0:
            w = estimate_weights(net, task)
            w_src = torch.as_tensor(w, dtype=torch.float32)[ys]
        zs = net.g_s(task.xs)
        loss = weighted_mean(F.cross_entropy(net.h(zs), ys, reduction="none"), w_src)
        loss = loss + p.fewshot_weight * F.cross_entropy(net.target_logits(task.xl), task.yl)
        aligning = align and step >= p.warmup
        if aligning:
            zt = net.g_t(xt_domain)
            # soft labels of the unlabelled target (no gradient through them), one-hot for the labelled ones
            qt = torch.cat([F.softmax(net.h(zt[: len(task.xu)]), 1).detach(), onehot_l])
            loss = loss + p.cond_weight * conditional_discrepancy(zs, ys, zt, qt)
        if aligning and p.adv_weight > 0:
            lam = dann_lambda(step - p.warmup, p.steps - p.warmup)
            d_s = net.d(GradientReversal.apply(zs, lam)).squeeze(1)
            d_t = net.d(GradientReversal.apply(zt, lam)).squeeze(1)
            # source = 1, target = 0; the source side weighted by w(y) (w = 1: plain DANN)
            loss_dom = (weighted_mean(F.binary_cross_entropy_with_logits(d_s, domain_s, reduction="none"), w_src)
                        + F.binary_cross_entropy_with_logits(d_t, domain_t))
            loss = loss + p.adv_weight * loss_dom
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    return w


@torch.no_grad()
def target_accuracy(net: HDANet, task: Task, prior_weights: np.ndarray | None = None) -> float:
    """Accuracy of argmax_y w(y) p(y | x) on the target test set (w = 1 when ``prior_weights`` is None)."""
    probs = F.softmax(net.target_logits(task.xt), dim=1)
    if prior_weights is not None:
        probs = probs * torch.as_tensor(prior_weights, dtype=torch.float32)
    return float((probs.argmax(1) == task.yt).float().mean())


def target_only_accuracy(p: Params, task: Task) -> float:
    """Logistic regression on the labelled target samples alone, accuracy on the target test set."""
    model = LogisticRegression(C=p.target_only_c, max_iter=2000).fit(task.xl.numpy(), task.yl.numpy())
    return float((model.predict(task.xt.numpy()) == task.yt.numpy()).mean())


# =============================================================================================
# One seed
# =============================================================================================
def run_seed(p: Params, seed: int) -> list[dict]:
    """Every method at every shift setting for one seed: rows {seed, setting, method, acc, w_err, ...}.

    ``w_err`` is ||w_hat - w_true||_2 for the methods that estimate w (hlsan, hda_adv_bbse) and NaN
    otherwise; ``w_err_uniform`` is ||1 - w_true||_2 (the error of making no correction).
    """
    rows: list[dict] = []
    with torch_single_thread():
        split = make_split(p, seed)
        init = int(numpy_rng(seed, STREAM["init"]).integers(2**31))
        rerun = int(numpy_rng(seed, STREAM["rerun_init"]).integers(2**31))
        for setting in SETTINGS:
            task = make_task(p, split, seed, setting)
            base = {"seed": seed, "setting": setting, "alpha": setting_alpha(p, setting),
                    "w_err_uniform": weight_error(np.ones(N_CLASSES), task.w_true),
                    "prior_max": float(task.prior_target.max())}

            def add(method: str, acc: float, w_hat: np.ndarray | None = None) -> None:
                err = weight_error(w_hat, task.w_true) if w_hat is not None else float("nan")
                rows.append({**base, "method": method, "acc": acc, "w_err": err,
                             "w_hat": None if w_hat is None else [float(v) for v in w_hat],
                             "w_true": [float(v) for v in task.w_true]})

            add("target_only", target_only_accuracy(p, task))
            warm = warm_start(p, task, init)
            # one deep copy of the (net, optimiser) pair per method, so that the copied optimiser steps the copied net
            net, _ = train_network(p, task, *copy.deepcopy(warm), first_step=p.warmup, align=False, weights="one")
            add("no_align", target_accuracy(net, task))
            net, _ = train_network(p, task, *copy.deepcopy(warm), first_step=p.warmup, align=True, weights="one")
            add("hda_adv", target_accuracy(net, task))
            w_post = estimate_weights(net, task)
            add("hda_adv_bbse", target_accuracy(net, task, w_post), w_post)
            net, w_hat = train_network(p, task, *copy.deepcopy(warm), first_step=p.warmup, align=True, weights="bbse")
            add("hlsan", target_accuracy(net, task), w_hat)
            net, _ = train_network(p, task, *new_network(p, task, init), align=True, weights="oracle")
            add("hlsan_oracle", target_accuracy(net, task))
            if setting in ("mild", "moderate", "severe"):       # the A/A pair of the shift-dependence claim
                net, _ = train_network(p, task, *new_network(p, task, rerun), align=True, weights="one")
                add("hda_adv_rerun", target_accuracy(net, task))
            if setting == "moderate":               # the transfer claim's control: no label information
                perm = torch.as_tensor(numpy_rng(seed, STREAM["permute"]).permutation(task.ys.numpy()))
                net, _ = train_network(p, task, *new_network(p, task, init), align=True, weights="bbse",
                                       source_labels=perm)
                add("hlsan_permuted", target_accuracy(net, task))
    return rows

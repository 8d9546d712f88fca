"""UEFL: Uncertainty-Based Extensible-Codebook Federated Learning (Zhang, Cao & Liu, ICML 2025),
rebuilt after the official code (destiny301/uefl: ``train.py``, ``model/vqmodel.py``, ``utils.py``) at
digits scale, plain PyTorch + scikit-learn, against FedAvg, FedProx and a personalised FedPer baseline.

Setting. Silos drawn from one pool of 8x8 digits; each silo belongs to one image distribution
(0 = original, 1 = rotated 90 degrees + Gaussian noise, 2 = contrast-inverted + 3x3 blur). The first
distribution holds most silos, the others are "unfamiliar" minorities.

Model (official ``UEFL``): CNN encoder -> extensible vector quantiser -> MLP classifier with dropout.

* Extensible VQ (official ``extVQ``): every spatial position of the encoder output (a vector of
  ``2 * width`` channels) is replaced by its nearest codeword. A silo with book index 0 sees codebook 0
  only; a silo with book index t > 0 sees the concatenation [codebook 0; codebook t]. VQ loss =
  ||sg(z) - q||^2 + commitment * ||z - sg(q)||^2 (means), straight-through gradient to the encoder;
  training loss = cross-entropy + ``vq_weight`` * VQ loss (the official code adds it with weight 1:
  its ``--gamma 0.1`` argument is never read).
* Codebooks (and the book index) are kept per silo and never averaged (official ``running_uefl_avg``
  skips every ``discretizer`` key); everything else is averaged by FedAvg each round.

UEFL's iterations (official ``train.py``):

1. Iteration 1: ``rounds`` FedAvg rounds, every silo on codebook 0.
2. Uncertainty per silo = mean over its test samples of the entropy of the MC-dropout predictive
   distribution (``mc_passes`` stochastic passes averaged, then the entropy). After iteration 1 the
   threshold is fixed at (1 + thd) x the mean silo entropy.
3. While the largest silo entropy exceeds the threshold (and fewer than ``max_iterations``
   iterations ran): every silo above it gets book index t = iteration - 1, its codebook t is
   initialised by K-means (scikit-learn) on that silo's encoder features, and ``rounds_plus`` more
   FedAvg rounds follow.

Baselines (``tasks.federated.fedavg``): FedAvg and FedProx on the same encoder + MLP without the VQ
layer, FedPer (the MLP's output layer kept per silo: personalised FL), and the ablation "UEFL
without extension": the same VQ model and loop, for the same number of rounds, with no silo ever
flagged; and its capacity-matched control: as many new codebooks at each iteration as UEFL added,
given to the least uncertain silos. Every baseline gets as many rounds as UEFL used on that seed.

Deviations from the official code, all at digits scale: a plain conv-ReLU-pool encoder (no ResNet
block, no batch norm); dropout really on at inference (the official ``validate`` calls
``model.eval()``, so its 20 "stochastic" passes coincide and its entropy is that of the deterministic
softmax); at the start of a later iteration only the flagged silos' new codebook is K-means
initialised (the official ``silo_training`` also re-initialises codebook 0 by K-means for every
unflagged silo, a side effect of its flag ignoring the book index). As in the official code the
uncertainty that drives the extension is measured on the silos' test sets: a leak (the decision sees
the images it is then scored on), kept to follow the official code and disclosed in the report.

Randomness only through explicit seeds: NumPy generators keyed by (seed, stream), torch initialisation
under ``paperflows.core.seeding.torch_seeded``, dropout masks from a per-model ``torch.Generator``.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.cluster import KMeans
from torch import nn

from flows.uefl.params import Params
from paperflows.core.seeding import numpy_rng, torch_seeded
from tasks.data import load_bundled
from tasks.federated import Silo, average_states, fedavg, local_train, partition, shift_digits
from tasks.groups import group_summary
from tasks.train import torch_single_thread

N_CLASSES = 10
SHIFTS = {0: ("none",), 1: ("rotate", "noise"), 2: ("invert", "blur")}   # distribution -> feature shifts
DISTRIBUTION_NAMES = {0: "original", 1: "rotated + noise", 2: "inverted + blurred"}
STREAM = {"data": 0, "shift": 1, "uefl": 2, "noext": 3, "fedavg": 4, "fedprox": 5, "fedper": 6,
          "homogeneous": 7, "kmeans": 8, "mc": 9, "least_uncertain": 10}


# =============================================================================================
# Data: digit silos with feature shift
# =============================================================================================
def digit_images() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's digits as raw images (1797, 8, 8) in [0, 16] and labels (1797,)."""
    X, y = load_bundled("digits")
    return X.to_numpy(float).reshape(-1, 8, 8), y.to_numpy()


def silo_distributions(p: Params) -> np.ndarray:
    """The distribution of each silo, shape (n_silos,): majority silos first, e.g. [0,0,0,0,0,1,1,2,2]."""
    return np.repeat(np.arange(len(p.silos_per_distribution)), p.silos_per_distribution)


def apply_shift(images: np.ndarray, distribution: int, p: Params, rng: np.random.Generator) -> np.ndarray:
    """The feature shift of ``distribution`` applied to images (n, 8, 8) in [0, 16], in SHIFTS order."""
    out = images
    for kind in SHIFTS[distribution]:
        out = shift_digits(out, kind, rng, strength=p.noise_strength if kind == "noise" else 1.0)
    return out


def build_silos(p: Params, seed: int, homogeneous: bool = False) -> list[Silo]:
    """One federation: the digits split iid into equal silos, each silo split into train / test and
    shifted by its distribution. ``homogeneous=True`` builds the same split with no shift at all (the
    negative control of the premise); the silos keep their nominal ``distribution`` label.

    Inputs are float32 tensors (n, 1, 8, 8) scaled to about [-1, 1]; labels int64 (n,).
    """
    images, labels = digit_images()
    dists = silo_distributions(p)
    parts = partition(labels, len(dists), numpy_rng(seed, STREAM["data"]))
    split_rng = numpy_rng(seed, STREAM["data"], 1)
    silos = []
    for s, (idx, d) in enumerate(zip(parts, dists)):
        idx = split_rng.permutation(idx)
        n_test = max(1, int(round(p.test_fraction * len(idx))))
        x = images[idx] if homogeneous else apply_shift(images[idx], int(d), p, numpy_rng(seed, STREAM["shift"], s))
        x = torch.as_tensor(x / 8.0 - 1.0, dtype=torch.float32).unsqueeze(1)
        y = torch.as_tensor(labels[idx], dtype=torch.long)
        silos.append(Silo(x[n_test:], y[n_test:], x[:n_test], y[:n_test], int(d)))
    return silos


# =============================================================================================
# Model: CNN encoder -> extensible VQ -> MLP with (seeded) dropout
# =============================================================================================
class SeededDropout(nn.Module):
    """Inverted dropout whose masks come from the module's own ``torch.Generator`` (the global torch RNG
    is shared by the seed threads, so ``nn.Dropout`` would make runs depend on thread timing)."""

    def __init__(self, rate: float):
        super().__init__()
        self.rate = rate
        self.generator = torch.Generator().manual_seed(0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return x
        keep = torch.rand(x.shape, generator=self.generator) >= self.rate
        return x * keep / (1.0 - self.rate)


def seed_dropout(model: nn.Module, seed: int) -> None:
    for i, m in enumerate(m for m in model.modules() if isinstance(m, SeededDropout)):
        m.generator.manual_seed(int(seed) * 1000 + i)


class ExtensibleVQ(nn.Module):
    """Vector quantiser with an extensible codebook (official ``extVQ``).

    ``codebooks`` (max_books, num_codes, dim): codebook 0 is the shared one, codebook t > 0 the one added
    at iteration t + 1. The buffer ``book_index`` selects what this silo's copy of the model sees:
    codebook 0 alone (index 0) or [codebook 0; codebook index] (the official concatenation).
    After each forward, ``last_loss`` holds the VQ loss and ``last_codes`` the chosen codeword indices.
    """

    def __init__(self, num_codes: int, dim: int, max_books: int, commitment: float):
        super().__init__()
        self.codebooks = nn.Parameter(torch.randn(max_books, num_codes, dim))   # official: normal_() init
        self.register_buffer("book_index", torch.zeros((), dtype=torch.long))
        self.commitment = commitment
        self.last_loss = torch.zeros(())
        self.last_codes = torch.zeros(0, dtype=torch.long)

    def codes(self) -> torch.Tensor:
        """The codewords this silo may use, (num_codes or 2 * num_codes, dim)."""
        t = int(self.book_index)
        return self.codebooks[0] if t == 0 else torch.cat([self.codebooks[0], self.codebooks[t]])

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        """z (n, dim, H, W) -> quantised z, same shape, with a straight-through gradient to z."""
        n, dim, h, w = z.shape
        flat = z.permute(0, 2, 3, 1).reshape(-1, dim)
        codes = self.codes()
        distances = (flat ** 2).sum(1, keepdim=True) + (codes ** 2).sum(1) - 2.0 * flat @ codes.T
        self.last_codes = distances.argmin(1)
        quantised = codes[self.last_codes]
        # the codebook moves to the encoder outputs; the encoder commits to its codewords (weight 0.25)
        self.last_loss = F.mse_loss(quantised, flat.detach()) + self.commitment * F.mse_loss(flat, quantised.detach())
        quantised = flat + (quantised - flat).detach()
        return quantised.reshape(n, h, w, dim).permute(0, 3, 1, 2)


class Net(nn.Module):
    """Encoder (n,1,8,8) -> (n, 2w, 2, 2) -> optional extensible VQ -> MLP -> logits (n, 10).
    The MLP follows the official ``Mlp``: Linear, GELU, dropout, Linear, dropout (on the logits too)."""

    def __init__(self, p: Params, vq: bool):
        super().__init__()
        w = p.width
        # conv -> norm -> ReLU -> pool, twice: the norm plays the official ResNet block's batch norm (it
        # puts the features on the unit scale of the N(0, 1) codebook); GroupNorm, as batch statistics
        # would change between training and the dropout-on inference passes
        self.encoder = nn.Sequential(nn.Conv2d(1, w, 3, padding=1), nn.GroupNorm(1, w), nn.ReLU(), nn.MaxPool2d(2),
                                     nn.Conv2d(w, 2 * w, 3, padding=1), nn.GroupNorm(1, 2 * w), nn.ReLU(),
                                     nn.MaxPool2d(2))
        self.vq = ExtensibleVQ(p.num_codes, 2 * w, p.max_iterations, p.commitment) if vq else None
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(2 * w * 4, p.hidden), nn.GELU(),
                                        SeededDropout(p.dropout), nn.Linear(p.hidden, N_CLASSES),
                                        SeededDropout(p.dropout))

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """Encoder outputs as the VQ layer sees them, (n * H * W, dim)."""
        z = self.encoder(x)
        return z.permute(0, 2, 3, 1).reshape(-1, z.shape[1])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.encoder(x)
        if self.vq is not None:
            z = self.vq(z)
        return self.classifier(z)


def make_net(p: Params, seed: int, vq: bool) -> Net:
    """Same seed, same encoder and MLP weights for every method (the VQ codebooks draw after them)."""
    with torch_seeded(seed):
        net = Net(p, vq=vq)
    seed_dropout(net, seed)
    return net


def is_codebook(name: str) -> bool:
    """Parameters kept per silo by UEFL: the codebooks and the book index (never averaged)."""
    return name.startswith("vq.")


def vq_loss_fn(p: Params) -> Callable[[nn.Module, torch.Tensor, torch.Tensor], torch.Tensor]:
    def loss(model: Net, xb: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(model(xb), yb) + p.vq_weight * model.vq.last_loss
    return loss


# =============================================================================================
# Uncertainty: MC dropout, predictive entropy, calibration
# =============================================================================================
@torch.no_grad()
def mc_probabilities(model: nn.Module, X: torch.Tensor, passes: int, seed: int) -> torch.Tensor:
    """Softmax outputs of ``passes`` forward passes with dropout on, shape (passes, n, classes)."""
    seed_dropout(model, seed)
    model.train()      # only dropout differs between train and eval mode in this model
    probs = torch.stack([F.softmax(model(X), dim=1) for _ in range(passes)])
    model.eval()
    return probs


def predictive_entropy(probs: np.ndarray) -> np.ndarray:
    """Entropy (nats) of the MC-averaged predictive distribution, per sample: probs (T, n, C) -> (n,)
    (the official ``utils.entropy``)."""
    mean = probs.mean(axis=0)
    return -(mean * np.log(np.clip(mean, 1e-300, None))).sum(axis=-1)


def expected_calibration_error(confidence: np.ndarray, correct: np.ndarray, bins: int) -> float:
    """ECE with ``bins`` equal-width confidence bins on (0, 1]: sum_b n_b / n * |acc_b - conf_b|."""
    which = np.clip(np.ceil(confidence * bins).astype(int) - 1, 0, bins - 1)
    total = 0.0
    for b in np.unique(which):
        sel = which == b
        total += sel.sum() * abs(correct[sel].mean() - confidence[sel].mean())
    return float(total / len(confidence))


def evaluate(models: list[nn.Module], silos: list[Silo], p: Params, seed: int) -> dict:
    """Per-sample test results of one method: ``models[s]`` is silo s's model (the global one, or the
    global one with silo s's own codebooks / head). Arrays over all test samples, silos concatenated:
    ``probs`` (n, C) MC-mean predictive distribution, ``entropy`` (n,), ``correct`` (n,), ``silo`` (n,)."""
    out = {"probs": [], "entropy": [], "correct": [], "silo": []}
    for s, (model, silo) in enumerate(zip(models, silos)):
        probs = mc_probabilities(model, silo.X_test, p.mc_passes, seed * 100 + s).numpy().astype(float)
        mean = probs.mean(axis=0)
        out["probs"].append(mean)
        out["entropy"].append(predictive_entropy(probs))
        out["correct"].append((mean.argmax(1) == silo.y_test.numpy()).astype(float))
        out["silo"].append(np.full(len(mean), s))
    return {k: np.concatenate(v) for k, v in out.items()}


def silo_entropies(models: list[nn.Module], silos: list[Silo], p: Params, seed: int) -> np.ndarray:
    """Mean MC-dropout predictive entropy per silo, shape (n_silos,): UEFL's uncertainty."""
    ev = evaluate(models, silos, p, seed)
    return np.array([ev["entropy"][ev["silo"] == s].mean() for s in range(len(silos))])


# =============================================================================================
# UEFL's loop: FedAvg rounds with per-silo codebooks, uncertainty check, codebook extension
# =============================================================================================
def _clone(state: dict) -> dict:
    return {k: v.detach().clone() for k, v in state.items()}


def kmeans_codebook(features: np.ndarray, num_codes: int, seed: int) -> np.ndarray:
    """K-means centres (num_codes, dim) of features (m, dim): the new codebook's initialisation
    (official ``init_codebooks``: scikit-learn KMeans, n_init='auto'). With fewer distinct points than
    codes the surplus codewords are copies of data points (they then stay unused)."""
    distinct = np.unique(features, axis=0)
    k = min(num_codes, len(distinct))
    centres = KMeans(n_clusters=k, random_state=seed, n_init="auto").fit(features).cluster_centers_
    if k < num_codes:
        extra = distinct[np.random.default_rng(seed).integers(0, len(distinct), num_codes - k)]
        centres = np.concatenate([centres, extra])
    return centres


class UEFLRun:
    """State of one UEFL training: the global (averaged) state and each silo's codebook state."""

    def __init__(self, p: Params, silos: list[Silo], seed: int, stream: int):
        self.p, self.silos, self.seed = p, silos, seed
        self.model = make_net(p, seed, vq=True)
        self.global_state = _clone(self.model.state_dict())
        self.local = [{k: v.clone() for k, v in self.global_state.items() if is_codebook(k)} for _ in silos]
        self.rng = numpy_rng(seed, stream)
        self.weights = [len(s.y_train) for s in silos]
        self.rounds_done = 0
        self.uploads = 0
        if p.kmeans_init_shared:
            # data-dependent start of every silo's own copy of codebook 0 (see the module docstring)
            for s in range(len(silos)):
                self.extend(s, 0)

    def silo_model(self, s: int) -> Net:
        """A model holding the averaged weights and silo s's own codebooks / book index."""
        net = make_net(self.p, self.seed, vq=True)
        net.load_state_dict({**self.global_state, **self.local[s]})
        return net

    def fl_rounds(self, n: int) -> None:
        """n FedAvg rounds: each silo trains the global weights with its own codebooks (Adam, fresh per
        round as in the official ``silo_training``), then everything but the codebooks is averaged."""
        loss = vq_loss_fn(self.p)
        for _ in range(n):
            states = []
            for s, silo in enumerate(self.silos):
                self.model.load_state_dict({**self.global_state, **self.local[s]})
                local_train(self.model, silo.X_train, silo.y_train, epochs=self.p.local_epochs,
                            batch_size=self.p.batch_size, lr=self.p.lr, rng=self.rng, optimizer="adam", loss_fn=loss)
                state = _clone(self.model.state_dict())
                self.local[s] = {k: v for k, v in state.items() if is_codebook(k)}
                states.append(state)
                self.uploads += 1
            self.global_state = average_states(states, self.weights, skip=is_codebook)
            self.rounds_done += 1

    def entropies(self, tag: int) -> np.ndarray:
        models = [self.silo_model(s) for s in range(len(self.silos))]
        return silo_entropies(models, self.silos, self.p, self.seed * 10 + tag)

    def extend(self, silo: int, book: int) -> None:
        """Give ``silo`` codebook ``book``, K-means-initialised on its training features under the
        current global encoder (the official local model is a copy of the averaged one)."""
        net = self.silo_model(silo)
        with torch.no_grad():
            feats = net.features(self.silos[silo].X_train).numpy().astype(float)
        centres = kmeans_codebook(feats, self.p.num_codes, int(numpy_rng(self.seed, STREAM["kmeans"], silo, book)
                                                                .integers(2**31)))
        codebooks = self.local[silo]["vq.codebooks"].clone()
        codebooks[book] = torch.as_tensor(centres, dtype=codebooks.dtype)
        self.local[silo] = {**self.local[silo], "vq.codebooks": codebooks}
        if book > 0:
            self.local[silo]["vq.book_index"] = torch.tensor(book, dtype=torch.long)


def run_uefl(p: Params, silos: list[Silo], seed: int, extend: bool = True,
             iterations: int | None = None, counts: list[int] | None = None) -> tuple[UEFLRun, dict]:
    """UEFL (``extend=True``; stops when no silo is above the threshold or at ``max_iterations``) or its
    ablation (``extend=False``: the same loop for exactly ``iterations`` iterations, no silo flagged), or the
    capacity-matched control (``counts``: at later iteration t, ``counts[t - 2]`` new codebooks go to the
    *least* uncertain silos instead of those above the threshold; ``len(counts) + 1`` iterations).

    Returns the run and a log: per-iteration silo entropies (n_silos,), flags, the threshold, rounds."""
    run = UEFLRun(p, silos, seed, STREAM["least_uncertain" if counts is not None else "uefl" if extend else "noext"])
    run.fl_rounds(p.rounds)
    entropy = run.entropies(0)
    threshold = (1.0 + p.threshold_margin) * float(entropy.mean())   # fixed after iteration 1
    log = {"threshold": threshold, "entropy": [entropy.tolist()], "flagged": [], "book_index": []}
    iteration = 1
    while True:
        if counts is not None:
            if iteration > len(counts):
                break
        elif extend:
            if iteration >= p.max_iterations or entropy.max() <= threshold:
                break
        elif iteration >= (iterations or 1):
            break
        iteration += 1
        if counts is not None:
            flagged = np.zeros(len(silos), bool)
            flagged[np.argsort(entropy, kind="stable")[:counts[iteration - 2]]] = True
        else:
            flagged = (entropy > threshold) if extend else np.zeros(len(silos), bool)
        for s in np.flatnonzero(flagged):
            run.extend(int(s), iteration - 1)
        log["flagged"].append(flagged.astype(int).tolist())
        log["book_index"].append([int(run.local[s]["vq.book_index"]) for s in range(len(silos))])
        run.fl_rounds(p.rounds_plus)
        entropy = run.entropies(iteration)
        log["entropy"].append(entropy.tolist())
    log["iterations"] = iteration
    log["rounds"] = run.rounds_done
    return run, log


# =============================================================================================
# Baselines through the shared FedAvg loop
# =============================================================================================
def is_head(name: str) -> bool:
    """FedPer's personal layer: the MLP's output layer."""
    return name.startswith("classifier.4.")


def run_baseline(p: Params, silos: list[Silo], seed: int, rounds: int, kind: str) -> tuple[list[nn.Module], int]:
    """FedAvg / FedProx / FedPer (no VQ layer) for ``rounds`` rounds; returns each silo's model for
    evaluation (the global one, or with the silo's own head for FedPer) and the uploads counted."""
    model = make_net(p, seed, vq=False)
    keep = is_head if kind == "fedper" else (lambda name: False)
    run = fedavg(model, silos, rounds=rounds, local_epochs=p.local_epochs, batch_size=p.batch_size, lr=p.lr,
                 seed=int(numpy_rng(seed, STREAM[kind]).integers(2**31)),
                 optimizer="adam", proximal_mu=p.fedprox_mu if kind == "fedprox" else 0.0, keep_local=keep)
    models = []
    for s in range(len(silos)):
        net = make_net(p, seed, vq=False)
        state = _clone(run.model.state_dict())
        if kind == "fedper":
            state.update({k: v for k, v in run.local_states[s].items() if is_head(k)})
        net.load_state_dict(state)
        models.append(net)
    return models, run.uploads


# =============================================================================================
# One seed
# =============================================================================================
def summarise(ev: dict, silos: list[Silo], p: Params) -> dict:
    """Method-level numbers of one evaluation: accuracy and entropy over all silos (mean of the silo
    means, as the paper's averages over silos), over minority and majority silos, worst silo, ECE."""
    dists = np.array([s.distribution for s in silos])
    n_silos = len(silos)
    acc = np.array([ev["correct"][ev["silo"] == s].mean() for s in range(n_silos)])
    ent = np.array([ev["entropy"][ev["silo"] == s].mean() for s in range(n_silos)])
    minority = dists > 0
    confidence = ev["probs"].max(axis=1)
    by_silo = group_summary(ev["correct"], ev["silo"])
    return {"acc_all": float(acc.mean()), "acc_minority": float(acc[minority].mean()),
            "acc_majority": float(acc[~minority].mean()), "acc_worst_silo": float(by_silo["worst"]),
            "entropy_all": float(ent.mean()), "entropy_minority": float(ent[minority].mean()),
            "entropy_majority": float(ent[~minority].mean()),
            "ece": expected_calibration_error(confidence, ev["correct"], p.ece_bins),
            "silo_acc": acc.tolist(), "silo_entropy": ent.tolist(),
            "silo_ece": [expected_calibration_error(confidence[ev["silo"] == s], ev["correct"][ev["silo"] == s],
                                                    p.ece_bins) for s in range(n_silos)]}


def run_seed(p: Params, seed: int) -> dict:
    """Every method on one federation (and FedAvg on its unshifted twin). Returns per-method summaries
    (see :func:`summarise`) plus UEFL's log, timings, uploads and parameter counts."""
    with torch_single_thread():
        silos = build_silos(p, seed)
        out: dict = {"seed": seed, "methods": {}, "uploads": {}, "seconds": {}}
        started = time.perf_counter()
        uefl, log = run_uefl(p, silos, seed, extend=True)
        out["seconds"]["uefl"] = time.perf_counter() - started
        out["uefl_log"] = log
        out["methods"]["uefl"] = summarise(evaluate([uefl.silo_model(s) for s in range(len(silos))], silos, p, seed),
                                           silos, p)
        out["uploads"]["uefl"] = uefl.uploads
        started = time.perf_counter()
        noext, _ = run_uefl(p, silos, seed, extend=False, iterations=log["iterations"])
        out["seconds"]["uefl_no_extension"] = time.perf_counter() - started
        out["methods"]["uefl_no_extension"] = summarise(
            evaluate([noext.silo_model(s) for s in range(len(silos))], silos, p, seed), silos, p)
        started = time.perf_counter()
        least, _ = run_uefl(p, silos, seed, counts=[int(sum(f)) for f in log["flagged"]])
        out["seconds"]["uefl_least_uncertain"] = time.perf_counter() - started
        out["methods"]["uefl_least_uncertain"] = summarise(
            evaluate([least.silo_model(s) for s in range(len(silos))], silos, p, seed), silos, p)
        for kind in ("fedavg", "fedprox", "fedper"):
            started = time.perf_counter()
            models, uploads = run_baseline(p, silos, seed, log["rounds"], kind)
            out["seconds"][kind] = time.perf_counter() - started
            out["methods"][kind] = summarise(evaluate(models, silos, p, seed), silos, p)
            out["uploads"][kind] = uploads
        twin = build_silos(p, seed, homogeneous=True)
        models, _ = run_baseline(p, twin, seed, log["rounds"], "homogeneous")
        out["methods"]["fedavg_homogeneous"] = summarise(evaluate(models, twin, p, seed), twin, p)
        vq_net, plain_net = make_net(p, seed, vq=True), make_net(p, seed, vq=False)
        out["parameters"] = {"fedavg": sum(v.numel() for v in plain_net.parameters()),
                             "uefl_codebook_per_book": p.num_codes * 2 * p.width,
                             "uefl_shared": sum(v.numel() for k, v in vq_net.named_parameters() if not is_codebook(k))}
    return out

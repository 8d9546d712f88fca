"""Longtail Guidance (LTG; Hayden et al., ICML 2025) at laptop scale: a long-tailed 8x8-digits classifier, a
single-forward-pass epistemic head on its frozen features, and a class-conditional latent DDPM whose ancestral
sampler is guided by the epistemic signal of the *decoded Tweedie estimate* (Algorithm 1 of the paper):

    z_T ~ N(0, I);  for t = T..1:
        ẑ0 = (z_t - √(1-ᾱ_t) ε̂(z_t, t, c)) / √ᾱ_t          Tweedie estimate of the clean latent
        x̂0 = D(ẑ0)                                          decoded clean image (the predictor never sees z_t)
        g  = w ∇_{z_t} f_lt(x̂0)                              gradient through decoder and denoiser
        ε̂ ← ε̂ - √(1-ᾱ_t) g;  z_{t-1} = μ(z_t, ε̂) + σ_t ξ      (tasks.diffusion.ddpm_sample's guidance hook)
    return D(z_0)

Pieces (shapes: images (n, 64) in [-1, 1], latents (n, d_z), K heads, C = 10 classes, F features):

* ``long_tailed_split``: per seed a random digit order; class of rank c keeps n_c = max(round(h ρ^c), m) train
  images; balanced validation and test sets from the rest.
* ``Autoencoder``: 64 -> d_z -> 64 MLP (tanh output), trained on the long-tailed train set; latents standardised.
* latent ε-DDPM: ``tasks.diffusion.TimeConditionedMLP`` with labels, ``train_ddpm`` with label dropout, sampled with
  classifier-free guidance (``eps_from_net``).
* ``Predictor``: MLP classifier; ``features(x)`` (n, F) is its penultimate layer.
* ``EpistemicHead``: K linear heads (K, F, C) on the frozen predictor's features, head k trained on its own bootstrap
  resample of the train set (the predictor is frozen, so its parameters and logits are untouched). Epistemic
  uncertainty = mutual information between label and head, H[mean_k p_k] - mean_k H[p_k] (0 when the heads
  agree). One forward pass of the predictor gives both its logits and the epistemic score. [The paper's exact
  head architecture could not be read here; see the flow's notes.]
* ``generate``: class-conditional latent DDPM samples, unguided or LTG with the epistemic or entropy signal.
* ``run_seed``: the whole experiment for one seed.

Randomness only via explicit ``np.random.default_rng`` / ``torch.Generator`` / ``torch_seeded`` (module init).
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from sklearn.metrics import roc_auc_score
from sklearn.neighbors import KNeighborsClassifier
from torch import nn
from torch.nn import functional as F

from flows.longtail_guidance.params import Params
from paperflows.core.seeding import torch_generator, torch_seeded
from tasks import diffusion
from tasks.data import digits_pixels, load_parquet
from tasks.train import torch_single_thread, train

N_CLASSES = 10
DTYPE = torch.float32


# ----------------------------------------------------------------------------------------------------------------
# Data: long-tailed digits
# ----------------------------------------------------------------------------------------------------------------

def longtail_counts(head_count: int, decay: float, min_count: int, n_classes: int = N_CLASSES) -> list[int]:
    """Train images per class rank c = 0..C-1: n_c = max(round(head_count * decay^c), min_count)."""
    return [max(round(head_count * decay ** c), min_count) for c in range(n_classes)]


def long_tailed_split(X: np.ndarray, y: np.ndarray, counts: list[int], val_per_class: int, test_per_class: int,
                      rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Split (X (N, 64), y (N,)) into a long-tailed train set and balanced validation / test sets.

    A random permutation of the digits assigns ranks: digit ``order[c]`` gets ``counts[c]`` train images. Test and
    validation take ``test_per_class`` / ``val_per_class`` images of every digit first, the train set comes from the
    rest. Returns index arrays ``train``, ``val``, ``test``, ``pool`` (all non-test images: the oracle's data) and
    ``order`` (C,), plus ``rank`` (N,) of every image's digit (0 = most frequent).
    """
    order = rng.permutation(N_CLASSES)
    rank_of_digit = np.empty(N_CLASSES, dtype=int)
    rank_of_digit[order] = np.arange(N_CLASSES)
    parts: dict[str, list[np.ndarray]] = {"train": [], "val": [], "test": [], "pool": []}
    for digit in range(N_CLASSES):
        idx = rng.permutation(np.flatnonzero(y == digit))
        need = test_per_class + val_per_class + counts[rank_of_digit[digit]]
        if need > len(idx):
            raise ValueError(f"digit {digit} has {len(idx)} images, the split needs {need}")
        parts["test"].append(idx[:test_per_class])
        parts["val"].append(idx[test_per_class:test_per_class + val_per_class])
        parts["train"].append(idx[test_per_class + val_per_class:need])
        parts["pool"].append(idx[test_per_class:])
    out = {k: np.sort(np.concatenate(v)) for k, v in parts.items()}
    out["order"] = order
    out["rank"] = rank_of_digit[y]
    return out


def tail_weighted_allocation(counts: list[int], n_generate: int) -> np.ndarray:
    """Synthetic images per class rank, ∝ (max count - n_c) (filling toward balance), largest-remainder rounded
    so that they sum to ``n_generate``: (C,) ints."""
    deficit = np.max(counts) - np.asarray(counts, dtype=float)
    if deficit.sum() == 0:
        deficit = np.ones_like(deficit)
    share = n_generate * deficit / deficit.sum()
    alloc = np.floor(share).astype(int)
    remainder = n_generate - alloc.sum()
    alloc[np.argsort(-(share - alloc), kind="stable")[:remainder]] += 1
    return alloc


# ----------------------------------------------------------------------------------------------------------------
# Models
# ----------------------------------------------------------------------------------------------------------------

class Autoencoder(nn.Module):
    """64 -> hidden -> d_z -> hidden -> 64 (tanh) MLP autoencoder; ``decode`` maps (n, d_z) -> (n, 64)."""

    def __init__(self, n_pixels: int, latent_dim: int, hidden: int):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(n_pixels, hidden), nn.SiLU(), nn.Linear(hidden, latent_dim))
        self.decoder = nn.Sequential(nn.Linear(latent_dim, hidden), nn.SiLU(), nn.Linear(hidden, n_pixels), nn.Tanh())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.encoder(x))


class Predictor(nn.Module):
    """MLP classifier 64 -> hidden... -> C (ReLU); ``features`` is the last hidden layer (n, F)."""

    def __init__(self, n_inputs: int, hidden: list[int], n_classes: int = N_CLASSES):
        super().__init__()
        layers: list[nn.Module] = []
        width = n_inputs
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        self.body = nn.Sequential(*layers)
        self.classifier = nn.Linear(width, n_classes)
        self.n_features = width

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


class EpistemicHead(nn.Module):
    """K linear heads on the frozen predictor's features: logits (n, K, C) = einsum(features, W (K, F, C)) + b (K, C)."""

    def __init__(self, n_features: int, n_heads: int, n_classes: int = N_CLASSES):
        super().__init__()
        bound = 1.0 / math.sqrt(n_features)
        self.weight = nn.Parameter(torch.empty(n_heads, n_features, n_classes).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(n_heads, n_classes).uniform_(-bound, bound))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return torch.einsum("nf,kfc->nkc", features, self.weight) + self.bias


def entropy(probs: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Shannon entropy in nats along ``dim`` (0 log 0 = 0)."""
    return -(probs * torch.log(probs.clamp_min(1e-30))).sum(dim)


def mutual_information(head_logits: torch.Tensor) -> torch.Tensor:
    """Epistemic uncertainty of an ensemble: H[mean_k p_k] - mean_k H[p_k]; head_logits (n, K, C) -> (n,) in
    [0, log K]. Zero iff every head predicts the same distribution."""
    probs = torch.softmax(head_logits, dim=-1)
    return entropy(probs.mean(1)) - entropy(probs).mean(1)


class PredictorWithEpistemicHead(nn.Module):
    """The deployed predictor plus its epistemic head: one forward pass returns (logits (n, C), epistemic (n,)).

    The head is trained on features computed without gradient and its optimiser holds only the head's parameters
    (``train_epistemic_head``), so the predictor's parameters never change; the logits are computed by exactly the
    predictor's own operations (bit-identical to ``predictor(x)``). The epistemic score stays differentiable in the
    input x, which is what guidance needs (``epistemic_signal``).
    """

    def __init__(self, predictor: Predictor, head: EpistemicHead):
        super().__init__()
        self.predictor = predictor
        self.head = head

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.predictor.features(x)
        logits = self.predictor.classifier(features)
        return logits, mutual_information(self.head(features))


def train_epistemic_head(predictor: Predictor, X: torch.Tensor, y: torch.Tensor, *, n_heads: int, steps: int,
                         lr: float, weight_decay: float, seed: int) -> EpistemicHead:
    """K linear heads on the frozen predictor's features, head k on its own bootstrap resample of (X, y).

    The bootstrap is a multinomial count vector per head (K, n); the loss is Σ_k Σ_i count_ki CE_ki / n, full batch,
    Adam for ``steps`` steps. The predictor is never updated (its features are computed once, without grad).
    """
    generator = torch_generator(seed)
    n = len(X)
    counts = torch.stack([torch.bincount(torch.randint(n, (n,), generator=generator), minlength=n)
                          for _ in range(n_heads)]).to(X.dtype)  # (K, n)
    with torch.no_grad():
        features = predictor.features(X)
    with torch_seeded(seed):
        head = EpistemicHead(predictor.n_features, n_heads)
    optimiser = torch.optim.Adam(head.parameters(), lr=lr, weight_decay=weight_decay)
    targets = y.repeat(n_heads, 1)  # (K, n)
    for _ in range(steps):
        logits = head(features).permute(1, 0, 2)  # (K, n, C)
        ce = F.cross_entropy(logits.reshape(-1, N_CLASSES), targets.reshape(-1), reduction="none").reshape(n_heads, n)
        loss = (counts * ce).sum() / n
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    head.eval()
    return head


# ----------------------------------------------------------------------------------------------------------------
# Longtail signals and guidance
# ----------------------------------------------------------------------------------------------------------------

def epistemic_signal(model: PredictorWithEpistemicHead) -> Callable[[torch.Tensor], torch.Tensor]:
    """f_lt(x) = epistemic uncertainty of the image x (n, 64) -> (n,), differentiable in x."""
    return lambda x: model(x)[1]


def entropy_signal(predictor: Predictor) -> Callable[[torch.Tensor], torch.Tensor]:
    """f_lt(x) = entropy of the predictor's softmax (the paper's predictive-uncertainty baseline signal)."""
    return lambda x: entropy(torch.softmax(predictor(x), dim=-1))


def latent_log_signal(signal: Callable[[torch.Tensor], torch.Tensor], decode: Callable[[torch.Tensor], torch.Tensor],
                      floor: float):
    """The log-signal of a standardised latent ẑ0 (n, d_z): log(f_lt(D(ẑ0)) + floor) -> (n,).

    Guiding with w ∇ log f_lt samples (approximately) from p(z | c) f_lt(x)^w: the weight w is then free of the
    signal's units (epistemic MI and entropy live on very different scales); ``floor`` (nats) keeps the log finite
    where the predictor is certain.
    """
    return lambda z: torch.log(signal(decode(z)) + floor)


def ltg_guidance(eps_fn: diffusion.EpsFn, schedule: diffusion.DDPMSchedule, signal, decode, weight: float,
                 floor: float):
    """LTG's guidance hook: w ∇_{z_t} log f_lt(D(ẑ0(z_t))), through the denoiser and the decoder; the predictor
    only ever sees decoded clean estimates (tasks.diffusion.tweedie_guidance)."""
    return diffusion.tweedie_guidance(eps_fn, schedule, latent_log_signal(signal, decode, floor), weight)


@torch.no_grad()
def _decode_all(decode, z: torch.Tensor) -> torch.Tensor:
    return decode(z)


def generate(net: diffusion.TimeConditionedMLP, schedule: diffusion.DDPMSchedule, decode, labels: torch.Tensor,
             z_T: torch.Tensor, *, cfg_scale: float, seed: int, signal=None, weight: float = 0.0,
             floor: float = 1e-3) -> tuple[torch.Tensor, torch.Tensor]:
    """Class-conditional latent DDPM samples decoded to images: (latents (n, d_z), images (n, 64)).

    ``signal`` None (or weight 0) is unguided sampling; otherwise LTG with that longtail signal and weight.
    The same ``z_T`` and ``seed`` (ancestral noise) across methods give common random numbers.
    """
    eps_fn = diffusion.eps_from_net(net, labels, cfg_scale)
    guidance = None if signal is None or weight == 0.0 else ltg_guidance(eps_fn, schedule, signal, decode, weight, floor)
    z0, _ = diffusion.ddpm_sample(eps_fn, schedule, z_T, torch_generator(seed), guidance)
    return z0.detach(), _decode_all(decode, z0.detach())


# ----------------------------------------------------------------------------------------------------------------
# Training helpers
# ----------------------------------------------------------------------------------------------------------------

def train_predictor(X: torch.Tensor, y: torch.Tensor, hidden: list[int], *, epochs: int, batch_size: int, lr: float,
                    weight_decay: float, seed: int) -> Predictor:
    with torch_seeded(seed):
        model = Predictor(X.shape[1], hidden)
    train(model, X, y, loss_fn=F.cross_entropy, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed,
          weight_decay=weight_decay)
    return model


def finetune(predictor: Predictor, X: torch.Tensor, y: torch.Tensor, *, steps: int, batch_size: int, lr: float,
             seed: int) -> Predictor:
    """A copy of ``predictor`` fine-tuned for a fixed number of Adam steps on minibatches drawn with replacement
    from (X, y): every method gets the same number of updates whatever its data size."""
    model = copy.deepcopy(predictor).requires_grad_(True)
    generator = torch_generator(seed)
    optimiser = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        idx = torch.randint(len(X), (min(batch_size, len(X)),), generator=generator)
        loss = F.cross_entropy(model(X[idx]), y[idx])
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    model.eval()
    return model


@torch.no_grad()
def class_accuracy(model: nn.Module, X: torch.Tensor, y: torch.Tensor, ranks: np.ndarray, tail_from: int) -> dict:
    """Accuracy overall, on tail ranks (>= tail_from) and head ranks, and per rank; ``ranks`` (n,) of each row."""
    correct = (model(X).argmax(1) == y).numpy()
    tail = ranks >= tail_from
    return {"all": float(correct.mean()), "tail": float(correct[tail].mean()), "head": float(correct[~tail].mean()),
            "per_rank": [float(correct[ranks == r].mean()) for r in range(N_CLASSES)]}


def auroc(scores: np.ndarray, positive: np.ndarray) -> float:
    return float(roc_auc_score(positive.astype(int), scores))


# ----------------------------------------------------------------------------------------------------------------
# One seed
# ----------------------------------------------------------------------------------------------------------------

def load_digits_parquet(path: str) -> tuple[np.ndarray, np.ndarray]:
    """(X (N, 64) in [-1, 1], y (N,)) from the flow's Parquet of ``tasks.data.digits_pixels`` (columns p0..p63, y)."""
    frame = load_parquet(Path(path))
    return frame[[f"p{j}" for j in range(64)]].to_numpy(float), frame["y"].to_numpy()


def run_seed(p: Params, seed: int, digits_path: str | None = None) -> dict:
    """The whole LTG experiment for one seed at the flow's params ``p`` (every field but ``seeds``); returns
    JSON-able scalars and row lists.

    Steps: long-tailed split; autoencoder; latent class-conditional DDPM; predictor; epistemic head (invariance
    check, AUROC of tail vs head test images); generation of ``p.n_generate`` images (tail-weighted class
    allocation) unguided and with LTG (epistemic / entropy) at every guidance weight; fine-tuning of the predictor
    on long-tailed + synthetic data (and on long-tailed data alone); the guidance weight of each LTG variant is
    chosen on the validation set's tail accuracy; test accuracies of all. ``digits_path``: the flow's Parquet of
    the digits (:func:`load_digits_parquet`); taken from scikit-learn when None.
    """
    timings: dict[str, float] = {}
    started = time.perf_counter()
    cpu_started = time.thread_time()
    X_np, y_np = load_digits_parquet(digits_path) if digits_path else digits_pixels()
    rng = np.random.default_rng([seed, 0])
    counts = longtail_counts(p.head_count, p.decay, p.min_count)
    split = long_tailed_split(X_np, y_np, counts, p.val_per_class, p.test_per_class, rng)
    tail_from = N_CLASSES - p.n_tail
    # labels are class *ranks* (0 = most frequent digit): the model does not care which digit a rank is
    rank = split["rank"]

    def tensors(name):
        idx = split[name]
        return torch.tensor(X_np[idx], dtype=DTYPE), torch.tensor(rank[idx], dtype=torch.long), rank[idx]

    X_tr, y_tr, _ = tensors("train")
    X_va, y_va, r_va = tensors("val")
    X_te, y_te, r_te = tensors("test")

    with torch_single_thread():
        # --- autoencoder and standardised latents
        t0 = time.perf_counter()
        with torch_seeded(seed + 1):
            ae = Autoencoder(X_tr.shape[1], p.latent_dim, p.ae_hidden)
        train(ae, X_tr, X_tr, loss_fn=F.mse_loss, epochs=p.ae_epochs, batch_size=p.batch_size, lr=p.lr,
              seed=seed + 1)
        ae.requires_grad_(False)
        with torch.no_grad():
            z_tr = ae.encoder(X_tr)
            recon_mse = float(F.mse_loss(ae(X_te), X_te))
        z_mean, z_std = z_tr.mean(0), z_tr.std(0) + 1e-6

        def decode(z: torch.Tensor) -> torch.Tensor:
            return ae.decoder(z * z_std + z_mean)

        timings["autoencoder_s"] = time.perf_counter() - t0

        # --- class-conditional latent DDPM
        t0 = time.perf_counter()
        schedule = diffusion.ddpm_schedule(p.diffusion_steps, "linear")
        with torch_seeded(seed + 2):
            net = diffusion.TimeConditionedMLP(p.latent_dim, p.diff_width, p.diff_depth, n_classes=N_CLASSES,
                                               embedding_dim=32)
        losses = diffusion.train_ddpm(net, (z_tr - z_mean) / z_std, schedule, steps=p.diff_train_steps,
                                      batch_size=p.batch_size, lr=p.lr, seed=seed + 2, labels=y_tr,
                                      label_dropout=p.label_dropout)
        net.requires_grad_(False)
        timings["diffusion_train_s"] = time.perf_counter() - t0

        # --- predictor and epistemic head
        t0 = time.perf_counter()
        predictor = train_predictor(X_tr, y_tr, p.pred_hidden, epochs=p.pred_epochs, batch_size=p.batch_size,
                                    lr=p.lr, weight_decay=p.weight_decay, seed=seed + 3)
        with torch.no_grad():
            logits_before = predictor(X_te).clone()
        params_before = [w.detach().clone() for w in predictor.parameters()]
        head = train_epistemic_head(predictor, X_tr, y_tr, n_heads=p.n_heads, steps=p.head_steps,
                                    lr=p.head_lr, weight_decay=p.weight_decay, seed=seed + 4)
        model = PredictorWithEpistemicHead(predictor, head)
        with torch.no_grad():
            logits_after, epistemic_te = model(X_te)
        invariance = {
            "max_abs_logit_diff": float((logits_after - logits_before).abs().max()),
            "max_abs_param_diff": float(max((w.detach() - w0).abs().max() for w, w0 in zip(predictor.parameters(), params_before))),
            "bit_identical": bool(torch.equal(logits_after, logits_before)),
        }
        predictor.requires_grad_(False)
        head.requires_grad_(False)
        with torch.no_grad():
            entropy_te = entropy(torch.softmax(logits_before, -1))
        is_tail = r_te >= tail_from
        detection = {"auroc_epistemic": auroc(epistemic_te.numpy(), is_tail),
                     # the detection claim's control: the predictor's own predictive entropy
                     "auroc_entropy": auroc(entropy_te.numpy(), is_tail),
                     "epistemic_tail_mean": float(epistemic_te.numpy()[is_tail].mean()),
                     "epistemic_head_mean": float(epistemic_te.numpy()[~is_tail].mean())}
        base_acc = class_accuracy(predictor, X_te, y_te, r_te, tail_from)
        timings["predictor_s"] = time.perf_counter() - t0

        # --- an oracle classifier (5-NN on all non-test images, about balanced) to check synthetic labels
        t0 = time.perf_counter()
        pool = split["pool"]
        oracle = KNeighborsClassifier(n_neighbors=5).fit(X_np[pool], rank[pool])
        timings["oracle_s"] = time.perf_counter() - t0

        # --- generation: same z_T, ancestral noise and class allocation for every method
        t0 = time.perf_counter()
        alloc = tail_weighted_allocation(counts, p.n_generate)
        labels = torch.tensor(np.repeat(np.arange(N_CLASSES), alloc), dtype=torch.long)
        z_T = torch.randn((len(labels), p.latent_dim), generator=torch_generator(seed + 5), dtype=DTYPE)
        signals = {"epistemic": epistemic_signal(model), "entropy": entropy_signal(predictor)}
        variants: dict[str, tuple[str | None, float]] = {"unguided": (None, 0.0)}
        for name in signals:
            for w in p.guidance_weights:
                variants[f"{name}@{w:g}"] = (name, float(w))
        # negative control of the gain claims: as many unguided draws with fresh noise as LTG has weights, the
        # best one on validation tail accuracy chosen as LTG's weight is (selection without guidance)
        noise = {key: (z_T, seed + 6) for key in variants}
        for i in range(len(p.guidance_weights)):
            key = f"unguided_rep{i}"
            variants[key] = (None, 0.0)
            noise[key] = (torch.randn(z_T.shape, generator=torch_generator(seed + 1000 * (i + 1)), dtype=DTYPE),
                          seed + 1000 * (i + 1) + 1)
        synthetic: dict[str, torch.Tensor] = {}
        generation_rows = []
        for key, (name, w) in variants.items():
            _, images = generate(net, schedule, decode, labels, noise[key][0], cfg_scale=p.cfg_scale,
                                 seed=noise[key][1], signal=signals[name] if name else None, weight=w,
                                 floor=p.signal_floor)
            synthetic[key] = images
            with torch.no_grad():
                logits_gen, epi_gen = model(images)
                ent_gen = entropy(torch.softmax(logits_gen, -1))
            oracle_agree = oracle.predict(images.numpy().astype(float)) == labels.numpy()
            generation_rows.append({
                "variant": key, "signal": name or "unguided", "weight": w,
                "epistemic_mean": float(epi_gen.mean()), "entropy_mean": float(ent_gen.mean()),
                "predictor_agrees": float((logits_gen.argmax(1) == labels).float().mean()),
                "oracle_agrees": float(oracle_agree.mean()),
                "oracle_agrees_tail": float(oracle_agree[labels.numpy() >= tail_from].mean()),
            })
        timings["generation_s"] = time.perf_counter() - t0

        # --- fine-tuning on long-tailed + synthetic data; and on the long-tailed data alone
        t0 = time.perf_counter()
        ft = {"steps": p.finetune_steps, "batch_size": p.batch_size, "lr": p.finetune_lr, "seed": seed + 7}
        results = {"none": {"val": class_accuracy(predictor, X_va, y_va, r_va, tail_from), "test": base_acc}}
        no_extra = finetune(predictor, X_tr, y_tr, **ft)
        results["no_extra"] = {"val": class_accuracy(no_extra, X_va, y_va, r_va, tail_from),
                               "test": class_accuracy(no_extra, X_te, y_te, r_te, tail_from)}
        for key, images in synthetic.items():
            tuned = finetune(predictor, torch.cat([X_tr, images]), torch.cat([y_tr, labels]), **ft)
            results[key] = {"val": class_accuracy(tuned, X_va, y_va, r_va, tail_from),
                            "test": class_accuracy(tuned, X_te, y_te, r_te, tail_from)}
        timings["finetune_s"] = time.perf_counter() - t0

    # --- the guidance weight of each signal, chosen on validation tail accuracy (ties: the smaller weight)
    chosen = {}
    for name in signals:
        best = max(p.guidance_weights, key=lambda w: (results[f"{name}@{w:g}"]["val"]["tail"], -w))
        chosen[name] = float(best)
        results[f"ltg_{name}"] = results[f"{name}@{best:g}"]
    replicates = [f"unguided_rep{i}" for i in range(len(p.guidance_weights))]
    results["unguided_selected"] = results[max(replicates, key=lambda k: (results[k]["val"]["tail"], -replicates.index(k)))]
    for row in generation_rows:
        row["val_tail_acc"] = results[row["variant"]]["val"]["tail"]
        row["test_tail_acc"] = results[row["variant"]]["test"]["tail"]
        row["test_acc"] = results[row["variant"]]["test"]["all"]

    timings["total_s"] = time.perf_counter() - started
    timings["total_cpu_s"] = time.thread_time() - cpu_started
    examples = {key: synthetic[key][labels.numpy() == N_CLASSES - 1][:6].numpy().round(4).tolist()
                for key in ("unguided", f"epistemic@{chosen['epistemic']:g}", f"entropy@{chosen['entropy']:g}")}
    return {
        "seed": seed,
        "counts": counts,
        "digit_order": split["order"].tolist(),
        "split": {k: split[k].tolist() for k in ("train", "val", "test")},
        "allocation": alloc.tolist(),
        "recon_mse_test": recon_mse,
        "diffusion_final_loss": float(np.mean(losses[-100:])),
        "invariance": invariance,
        "detection": detection,
        "chosen_weight": chosen,
        "accuracy": {k: v["test"] for k, v in results.items()},
        "val_accuracy": {k: v["val"] for k, v in results.items()},
        "generation": generation_rows,
        "scores": [{"seed": seed, "rank": int(r), "tail": bool(r >= tail_from), "epistemic": float(e),
                    "entropy": float(h)} for r, e, h in zip(r_te, epistemic_te.numpy(), entropy_te.numpy())],
        "examples": examples,
        "timings": timings,
    }

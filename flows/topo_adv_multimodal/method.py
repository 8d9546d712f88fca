"""Topological signatures of adversaries in multimodal alignments (TP and MK losses, TC-feature MMD tests),
no Prefect; read top to bottom.

1. A tiny CLIP-style dual encoder, trained from scratch with the symmetric InfoNCE loss (learnable
   temperature) on 8x8 digits paired with generated captions ("a thick handwritten seven", ...). It stands
   in for CLIP/BLIP (no pretrained weights offline).
2. Attacks on the images (L-inf, pixels in [0, 1]) against the zero-shot alignment (image vs the ten class
   prompts): FGSM, PGD untargeted (maximise the InfoNCE loss of the true pair) and PGD targeted to a wrong
   caption; and random sign noise of the same budget as a non-adversarial control.
3. The Topological-Contrastive losses between the image cloud X and the text cloud Y of a batch of B pairs
   (Vietoris–Rips H0 and H1 by gudhi, see :mod:`tasks.topology`):
   L_TP^alpha = sum_q |Pers^alpha_q(X) - Pers^alpha_q(Y)|, L_MK^sigma = sum_q d_sigma(PD_q(X), PD_q(Y)).
   The sweep replaces a growing, nested fraction rho of a batch's images by their adversarial versions.
4. Detection: the gradient of a TC loss with respect to each image embedding is a per-sample feature
   (computed in batches of B drawn blind to the sample labels from the pooled two samples, which keeps
   the permutation test exact); an MMD permutation test on [embedding, feature] (product of Gaussian
   kernels, median heuristic per block) against the plain MMD on embeddings, at a fixed level.

Shapes: pixels (n, 64) in [0, 1]; token counts (n, V); embeddings (n, embed_dim), unit norm.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch
from sklearn.datasets import load_digits
from torch import nn
from torch.nn import functional as F

from flows.topo_adv_multimodal.params import Params
from paperflows.core.seeding import numpy_rng, torch_generator, torch_seeded
from tasks import attacks, topology
from tasks.train import mlp, torch_single_thread

ATTACKS = ("fgsm", "pgd", "pgd_targeted")
CONTROL = "noise"  # random sign noise of the same L-inf budget: a perturbation that is not adversarial
PERTURBATIONS = (*ATTACKS, CONTROL)
DETECTORS = ("plain", "tp", "mk", "spread")  # spread: the non-topological control feature

# ----------------------------------------------------------------------------------------------------------
# 1. Data: digits with generated captions (bag of tokens)
# ----------------------------------------------------------------------------------------------------------
NAMES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
NUMERALS = tuple(str(k) for k in range(10))
ARTICLES = ("a", "the", "one")
STYLES = ("handwritten", "written", "scribbled", "drawn")
NOUNS = ("digit", "number", "numeral")
THICKNESS = ("thin", "thick")
VOCAB = {w: i for i, w in enumerate(dict.fromkeys(NAMES + NUMERALS + ARTICLES + STYLES + NOUNS + THICKNESS))}


def load_pixels() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's 8x8 digits, pixels scaled to [0, 1] (the attacks' box): (1797, 64) float32 and labels (1797,)."""
    digits = load_digits()
    return (digits.data / 16.0).astype(np.float32), digits.target.astype(np.int64)


def captions(pixels: np.ndarray, labels: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, list[str]]:
    """One caption per image: article, thickness (ink above / below the class median), style, an optional
    noun and the class as a name or a numeral, in a random order. Returns token counts (n, V) and the text."""
    ink = pixels.sum(1)
    thick = np.zeros(len(labels), dtype=bool)
    for k in np.unique(labels):
        thick[labels == k] = ink[labels == k] > np.median(ink[labels == k])
    counts = np.zeros((len(labels), len(VOCAB)), dtype=np.float32)
    texts = []
    for i, k in enumerate(labels):
        words = [ARTICLES[rng.integers(3)], THICKNESS[int(thick[i])], STYLES[rng.integers(4)]]
        if rng.random() < 0.5:
            words.append(NOUNS[rng.integers(3)])
        words.append(NAMES[k] if rng.random() < 0.5 else NUMERALS[k])
        words = [words[j] for j in rng.permutation(len(words))]
        for w in words:
            counts[i, VOCAB[w]] += 1
        texts.append(" ".join(words))
    return counts, texts


def class_prompts() -> np.ndarray:
    """The zero-shot prompts "a {thin|thick} handwritten {name|numeral}" as token counts (10, 4, V): four
    templates per class, whose embeddings are averaged (CLIP's prompt ensembling)."""
    counts = np.zeros((10, 4, len(VOCAB)), dtype=np.float32)
    for k in range(10):
        for j, (thickness, word) in enumerate((t, w) for t in THICKNESS for w in (NAMES[k], NUMERALS[k])):
            for w in ("a", thickness, "handwritten", word):
                counts[k, j, VOCAB[w]] += 1
    return counts


# ----------------------------------------------------------------------------------------------------------
# 2. The dual encoder and its InfoNCE training
# ----------------------------------------------------------------------------------------------------------
class DualEncoder(nn.Module):
    """Image tower (64 -> image_hidden -> d) and text tower (V -> text_hidden -> d), both L2-normalised,
    and CLIP's learnable temperature (logit scale exp(t), initialised at 1 / 0.07)."""

    def __init__(self, p: Params):
        super().__init__()
        self.image = mlp(64, list(p.image_hidden), p.embed_dim)
        self.text = mlp(len(VOCAB), [p.text_hidden], p.embed_dim)
        self.log_scale = nn.Parameter(torch.tensor(float(np.log(1 / 0.07))))

    def encode_image(self, pixels: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.image(pixels), dim=-1)

    def encode_text(self, tokens: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.text(tokens), dim=-1)

    def scale(self) -> torch.Tensor:
        return self.log_scale.exp().clamp(max=100.0)  # CLIP clips the logit scale at 100


def info_nce(model: DualEncoder, pixels: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Symmetric InfoNCE of a batch of pairs (n, 64), (n, V): each image against the batch's captions and back."""
    logits = model.scale() * model.encode_image(pixels) @ model.encode_text(tokens).T
    target = torch.arange(len(pixels))
    return 0.5 * (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target))


def train_encoder(p: Params, pixels: np.ndarray, tokens: np.ndarray, seed: int) -> DualEncoder:
    """Adam on the InfoNCE loss for ``p.epochs`` epochs of shuffled batches; returns the model in eval mode."""
    with torch_seeded(seed):
        model = DualEncoder(p)
    x, t = torch.from_numpy(pixels), torch.from_numpy(tokens)
    optimiser = torch.optim.Adam(model.parameters(), lr=p.lr)
    generator = torch_generator(seed)
    for _ in range(p.epochs):
        order = torch.randperm(len(x), generator=generator)
        for start in range(0, len(x) - p.train_batch // 2, p.train_batch):  # drop a tiny last batch
            idx = order[start:start + p.train_batch]
            optimiser.zero_grad()
            info_nce(model, x[idx], t[idx]).backward()
            optimiser.step()
    model.eval()
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    return model


def zero_shot(model: DualEncoder) -> Callable[[torch.Tensor], torch.Tensor]:
    """The alignment the attacks target: pixels (n, 64) -> logits (n, 10) of each image against the ten
    class prompts, scaled by the learnt temperature."""
    prompts = F.normalize(model.encode_text(torch.from_numpy(class_prompts())).mean(1), dim=-1)  # (10, d)
    return lambda pixels: model.scale() * model.encode_image(pixels) @ prompts.T


# ----------------------------------------------------------------------------------------------------------
# 3. Perturbations of the images (tasks.attacks: any per-sample objective)
# ----------------------------------------------------------------------------------------------------------
def perturb(p: Params, kind: str, model: DualEncoder, pixels: torch.Tensor, labels: torch.Tensor,
            seed: int) -> torch.Tensor:
    """Perturbed images (n, 64) in [0, 1], within ``p.eps`` in L-inf of ``pixels``.

    fgsm / pgd: maximise the InfoNCE loss of the true (image, class prompt) pair, i.e. the zero-shot
    cross-entropy; pgd_targeted: minimise it at a random wrong class; noise: a random sign pattern."""
    logits = zero_shot(model)
    if kind == "fgsm":
        return attacks.fgsm(attacks.cross_entropy_objective(logits, labels), pixels, eps=p.eps)
    if kind == "pgd":
        return attacks.pgd(attacks.cross_entropy_objective(logits, labels), pixels, eps=p.eps,
                           step_size=p.pgd_step_size, steps=p.pgd_steps, seed=seed)
    if kind == "pgd_targeted":
        shift = torch.randint(1, 10, labels.shape, generator=torch_generator(seed + 1))
        targets = (labels + shift) % 10
        return attacks.pgd(attacks.cross_entropy_objective(logits, targets, targeted=True), pixels, eps=p.eps,
                           step_size=p.pgd_step_size, steps=p.pgd_steps, seed=seed)
    if kind == CONTROL:
        signs = torch.randint(0, 2, pixels.shape, generator=torch_generator(seed + 2)) * 2 - 1
        return (pixels + p.eps * signs).clamp(0.0, 1.0)
    raise ValueError(f"unknown perturbation {kind!r}")


# ----------------------------------------------------------------------------------------------------------
# 4. The Topological-Contrastive losses of a batch
# ----------------------------------------------------------------------------------------------------------
def tc_losses(p: Params, image_emb: torch.Tensor, text_diagrams: list[torch.Tensor]) -> dict[str, float]:
    """TP (every alpha of ``p.alphas``) and MK (every sigma of ``p.sigmas``) losses between the image cloud
    (B, d) and the text cloud's H0/H1 diagrams, and the total persistences Pers^alpha_q of each side."""
    with torch.no_grad():
        image_diagrams = topology.rips_diagrams(image_emb.double())
        out = {f"tp_{a:g}": float(topology.total_persistence_distance(image_diagrams, text_diagrams, a))
               for a in p.alphas}
        out.update({f"mk_{s:g}": float(topology.multiscale_kernel_loss(image_diagrams, text_diagrams, s))
                    for s in p.sigmas})
        # the two sides of L_TP (headline alpha), to see where |Pers(X) - Pers(Y)| changes direction
        for q in (0, 1):
            out[f"pers{q}_image"] = float(topology.total_persistence(image_diagrams[q], p.tp_alpha))
            out[f"pers{q}_text"] = float(topology.total_persistence(text_diagrams[q], p.tp_alpha))
    return out


def spread_loss(image_emb: torch.Tensor, text_emb: torch.Tensor) -> torch.Tensor:
    """The non-topological stand-in of the control detector: |mean pairwise distance(X) - mean(Y)|.
    Distances from squared differences plus a floor, so coincident captions keep the gradient finite."""
    def mean_distance(z: torch.Tensor) -> torch.Tensor:
        return ((z[:, None] - z[None]).pow(2).sum(-1) + 1e-12).sqrt().mean()
    return (mean_distance(image_emb) - mean_distance(text_emb)).abs()


def tc_features(p: Params, image_emb: torch.Tensor, text_emb: torch.Tensor) -> dict[str, np.ndarray]:
    """Per-sample features of a batch: the embeddings themselves ("plain") and the gradients of L_TP (headline
    alpha), L_MK (headline sigma) and the spread loss with respect to each image embedding, each (B, d)."""
    text_diagrams = [d.detach() for d in topology.rips_diagrams(text_emb.double())]
    x = image_emb.double().detach().requires_grad_(True)
    image_diagrams = topology.rips_diagrams(x)  # one persistence computation serves both losses
    losses = {"tp": topology.total_persistence_distance(image_diagrams, text_diagrams, p.tp_alpha),
              "mk": topology.multiscale_kernel_loss(image_diagrams, text_diagrams, p.mk_sigma),
              "spread": spread_loss(x, text_emb.double())}
    features = {"plain": image_emb.detach().double().numpy()}
    for name, loss in losses.items():
        grad, = torch.autograd.grad(loss, x, retain_graph=True)
        features[name] = grad.numpy()
    return features


# ----------------------------------------------------------------------------------------------------------
# 5. MMD permutation tests on (embedding, feature) pairs
# ----------------------------------------------------------------------------------------------------------
def _sq_dists(z: np.ndarray) -> np.ndarray:
    sq = (z * z).sum(1)
    return np.maximum(sq[:, None] + sq[None, :] - 2.0 * z @ z.T, 0.0)


def gaussian_gram(blocks: list[np.ndarray]) -> np.ndarray:
    """Product of Gaussian kernels, one per feature block (each (N, d_b)), each with the median heuristic
    on the pooled sample: k = prod_b exp(-|u_b - v_b|^2 / (2 h_b^2)), shape (N, N)."""
    gram = np.ones((len(blocks[0]), len(blocks[0])))
    for z in blocks:
        sq = _sq_dists(z)
        off = sq[np.triu_indices(len(z), 1)]
        h = float(np.median(np.sqrt(off[off > 0]))) if np.any(off > 0) else 1.0  # median pairwise distance
        gram *= np.exp(-sq / (2.0 * h * h))
    return gram


def mmd_permutation_p_value(gram: np.ndarray, n_x: int, n_permutations: int, seed: int) -> float:
    """p-value of the biased MMD^2 between the first ``n_x`` rows of ``gram`` (N, N) and the rest, against
    ``n_permutations`` random relabellings, (1 + #{T_perm >= T_obs}) / (1 + P). All statistics come from one
    product: MMD^2(a) = a^T K a with a = 1_x / n_x - 1_y / n_y."""
    n = len(gram)
    labels = np.arange(n) < n_x
    rng = np.random.default_rng(seed)
    in_x = np.stack([labels] + [rng.permutation(labels) for _ in range(n_permutations)], axis=1)  # (N, P + 1)
    weights = np.where(in_x, 1.0 / n_x, -1.0 / (n - n_x))
    statistic = (weights * (gram @ weights)).sum(0)
    return float((1.0 + (statistic[1:] >= statistic[0]).sum()) / (1.0 + n_permutations))


def pooled_features(p: Params, image_emb: torch.Tensor, text_emb: torch.Tensor, seed: int) -> dict[str, np.ndarray]:
    """TC features of a pooled two-sample problem (N, d) image and text embeddings, computed within batches
    of ``p.batch`` drawn by a random partition of the pooled rows that ignores which sample a row came from.

    Why: a gradient feature describes a point's place in its batch's diagram, and features of one batch are
    dependent (a translation-invariant loss's gradients sum to zero over the batch). Computed per sample
    batch, they would tie each sample to itself and the permutation test would lose its level (it became
    conservative: 0 false positives and 0 power in a first full run). A label-blind partition keeps the
    feature map symmetric in the pooled rows, so under the null the features stay exchangeable."""
    order = np.random.default_rng(seed).permutation(len(image_emb))
    features: dict[str, np.ndarray] = {}
    for rows in np.array_split(order, max(1, len(order) // p.batch)):
        idx = torch.from_numpy(rows)
        for name, value in tc_features(p, image_emb[idx], text_emb[idx]).items():
            features.setdefault(name, np.zeros((len(image_emb), value.shape[1])))[rows] = value
    return features


def detection_p_values(p: Params, features: dict[str, np.ndarray], n_x: int, seed: int) -> dict[str, float]:
    """p-values of the four tests of "the first ``n_x`` pooled rows and the rest come from the same law":
    plain MMD on the embeddings, and MMD on [embedding, gradient feature] for TP, MK and the spread control."""
    out = {"plain": mmd_permutation_p_value(gaussian_gram([features["plain"]]), n_x, p.n_permutations, seed)}
    for name in ("tp", "mk", "spread"):
        out[name] = mmd_permutation_p_value(gaussian_gram([features["plain"], features[name]]), n_x,
                                            p.n_permutations, seed)
    return out


# ----------------------------------------------------------------------------------------------------------
# 6. One seed of the experiment
# ----------------------------------------------------------------------------------------------------------
def run_seed(p: Params, seed: int) -> dict:
    """Train the encoder, perturb the test pool, sweep rho and run the detection tests.

    Returns ``{"seed", "zero_shot_acc", "accuracy" {kind: zero-shot accuracy on the perturbed pool},
    "sweep": rows (kind, rho, batch, tp_*, mk_*), "detect": rows (rep, null, test, p_value)}``.
    """
    with torch_single_thread():
        rng = numpy_rng(seed, 0)
        pixels, labels = load_pixels()
        tokens, _ = captions(pixels, labels, numpy_rng(seed, 1))
        order = rng.permutation(len(labels))
        train, pool = order[:p.n_train], order[p.n_train:]
        model = train_encoder(p, pixels[train], tokens[train], seed)

        x_pool, y_pool = torch.from_numpy(pixels[pool]), torch.from_numpy(labels[pool])
        t_pool = torch.from_numpy(tokens[pool])
        logits = zero_shot(model)
        with torch.no_grad():
            accuracy = {"clean": float((logits(x_pool).argmax(1) == y_pool).float().mean())}
            text_emb = model.encode_text(t_pool)
            image_emb = {"clean": model.encode_image(x_pool)}
        for j, kind in enumerate(PERTURBATIONS):
            adversarial = perturb(p, kind, model, x_pool, y_pool, seed=1000 * seed + j)
            with torch.no_grad():
                accuracy[kind] = float((logits(adversarial).argmax(1) == y_pool).float().mean())
                image_emb[kind] = model.encode_image(adversarial)

        # the rho sweep: in each batch, the first round(rho B) images are replaced by their perturbed
        # versions (nested as rho grows), the captions stay the true ones
        sweep = []
        for b in range(p.sweep_batches):
            idx = torch.from_numpy(numpy_rng(seed, 2, b).choice(len(pool), p.batch, replace=False))
            text_diagrams = [d.detach() for d in topology.rips_diagrams(text_emb[idx].double())]
            clean = tc_losses(p, image_emb["clean"][idx], text_diagrams)
            for kind in PERTURBATIONS:
                for rho in p.rhos:
                    k = int(round(rho * p.batch))
                    if k == 0:
                        losses = clean
                    else:
                        emb = image_emb["clean"][idx].clone()
                        emb[:k] = image_emb[kind][idx[:k]]
                        losses = tc_losses(p, emb, text_diagrams)
                    sweep.append({"seed": seed, "kind": kind, "rho": rho, "batch": b, **losses})

        # detection: per repetition three disjoint batches -- a clean reference, a test batch with a fraction
        # detect_rho of PGD images (power) and a clean test batch (false-positive rate); each pair is pooled
        detect = []
        n_adv = int(round(p.detect_rho * p.batch))
        for rep in range(p.detect_reps):
            ref, test, null = np.split(numpy_rng(seed, 3, rep).choice(len(pool), 3 * p.batch, replace=False), 3)
            emb_test = image_emb["clean"][test].clone()
            emb_test[:n_adv] = image_emb["pgd"][test[:n_adv]]
            for is_null, emb, rows in ((False, emb_test, test), (True, image_emb["clean"][null], null)):
                pooled_image = torch.cat([image_emb["clean"][ref], emb])
                pooled_text = torch.cat([text_emb[ref], text_emb[rows]])
                features = pooled_features(p, pooled_image, pooled_text, seed=int(numpy_rng(seed, 4, rep, int(is_null)).integers(2**31)))
                p_values = detection_p_values(p, features, p.batch, seed=10_000 * seed + rep)
                detect += [{"seed": seed, "rep": rep, "null": is_null, "test": name, "p_value": pv}
                           for name, pv in p_values.items()]
    return {"seed": seed, "accuracy": accuracy, "sweep": sweep, "detect": detect,
            "logit_scale": float(model.scale())}

"""Mini-CLIMB: multitask clinical pretraining against single-task training, few-shot transfer and fusion.

The paper (Dai et al., "CLIMB: Data Foundations for Large Scale Multimodal Clinical Foundation Models", ICML 2025)
pretrains one encoder per modality on many clinical datasets at once (a shared encoder, one head per dataset, each
dataset keeping its own label set remapped to a shared space), fine-tunes it on a target dataset and compares with
the same model trained on the target alone; it then probes new tasks few-shot and fuses encoders across modalities
(late concatenation, gating, cross-attention). Nothing of the 4.51M-sample benchmark is here; the protocol runs on a
synthetic mini-CLIMB (plan ``shared/papers/climb_multitask.md``):

* **ECG**: 9 conditions drawn with ECGSYN's wave morphology (McSharry et al. 2003, the model behind
  ``neurokit2.ecg_simulate(method="ecgsyn")``: each beat is five Gaussian waves P, Q, R, S, T placed in cardiac
  phase), with per-condition rhythm and morphology; each dataset has its own sampling rate, gain, noise and baseline
  wander (``neurokit2.signal_distort``), and is resampled to a common rate. Three source datasets with different
  label sets, a small 7-class target dataset, and two novel conditions for the few-shot task.
* **Images**: procedural lesion images (``tasks.segmentation.lesion_images``): two x-ray-like source tasks (bright
  lesion present? large or small?) and an ultrasound-like target (dark lesion, multiplicative speckle) with few labels.
* **EHR**: a Gaussian tabular block; the fusion outcome depends on the ECG condition, the EHR and their interaction.

Models: a 1-D CNN (ECG) and a 2-D CNN (images) with one interface (:class:`Encoder`: inputs -> tokens (n, L, d),
pooled embedding (n, d)); linear heads; fusion heads on frozen encoders. Metrics: AUC (sklearn ``roc_auc_score``,
macro one-vs-rest for several classes). Few-shot probes: sklearn logistic regression on frozen embeddings.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import neurokit2 as nk
import numpy as np
import torch
from scipy import signal as sps_signal
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from torch import nn
from torch.nn import functional as F

from flows.climb_multitask.params import Params
from paperflows.core.seeding import numpy_rng, torch_seeded
from tasks import correlation
from tasks.segmentation import GroupLook, lesion_images
from tasks.train import mlp, predict, torch_single_thread, train

# ------------------------------------------------------------------------------------------------ ECG world
CONDITIONS = ("normal", "bradycardia", "tachycardia", "atrial_fibrillation", "ectopic_beats", "low_voltage",
              "t_inversion", "bundle_branch_block", "av_block")
SHARED = tuple(range(7))  # the shared 7-class diagnostic space of the pretraining and target datasets
NOVEL_TASK = (0, 7, 8)  # the held-out few-shot task: normal vs bundle branch block vs first-degree AV block
SEVERITY = np.array([0.0, 0.5, 0.5, 1.0, 1.0, 0.5, 1.0, 1.0, 0.5])  # how much each finding raises the fused outcome's risk

# ECGSYN's waves P, Q, R, S, T: phase (rad, R at 0), amplitude a and width b (McSharry et al. 2003, Table 1)
WAVE_THETA = np.radians([-70.0, -15.0, 0.0, 15.0, 100.0])
WAVE_A = np.array([1.2, -5.0, 30.0, -7.5, 0.75])
WAVE_B = np.array([0.25, 0.1, 0.1, 0.1, 0.4])
P, Q, R, S, T = range(5)
QRS = [Q, R, S]
R_PEAK = WAVE_A[R] * WAVE_B[R] ** 2  # the R wave's height in the static form below, scaled to 1 mV

WIDE_QRS_ECTOPIC, WIDE_QRS_BLOCK = 2.5, 2.0  # QRS width factors of ectopic beats and of bundle branch block
HEART_RATE = {1: (40.0, 55.0), 2: (105.0, 140.0), 3: (70.0, 120.0)}  # bpm by condition; others (60, 90)


@dataclass(frozen=True)
class EcgDataset:
    """One ECG dataset's acquisition and its label set (indices into ``CONDITIONS``)."""

    name: str
    sampling_rate: int
    gain: float  # lead gain relative to 1 mV per unit
    noise: float  # amplitude of neurokit2's distortion (white + 5 Hz noise)
    wander: float  # amplitude of the baseline wander (0.3 Hz)
    conditions: tuple[int, ...]


ECG_SOURCES = (
    EcgDataset("rhythm_250hz", 250, 1.0, 0.03, 0.10, (0, 1, 2, 3)),
    EcgDataset("morphology_150hz", 150, 0.9, 0.05, 0.30, (0, 4, 5, 6)),
    EcgDataset("diagnostic_100hz", 100, 1.1, 0.04, 0.15, SHARED),
)
ECG_TARGET = EcgDataset("target_125hz", 125, 0.7, 0.08, 0.25, SHARED)


def _beat_parameters(conditions: np.ndarray, n_beats: int, rng: np.random.Generator
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per beat RR intervals (n, B) in seconds and wave phase, amplitude and width (n, B, 5) for each record's condition."""
    n = len(conditions)
    low = np.array([HEART_RATE.get(c, (60.0, 90.0))[0] for c in conditions])
    high = np.array([HEART_RATE.get(c, (60.0, 90.0))[1] for c in conditions])
    rr = 60.0 / rng.uniform(low, high)[:, None] * (1 + 0.03 * rng.standard_normal((n, n_beats)))
    theta = np.broadcast_to(WAVE_THETA, (n, n_beats, 5)).copy()
    a = np.broadcast_to(WAVE_A, (n, n_beats, 5)).copy()
    b = np.broadcast_to(WAVE_B, (n, n_beats, 5)).copy()
    af = conditions == 3
    rr[af] *= np.exp(0.25 * rng.standard_normal((af.sum(), n_beats)))  # irregularly irregular
    a[af, :, P] = 0.0  # no P waves
    ectopic = np.flatnonzero(conditions == 4)
    for row in ectopic:  # two or three premature, wide, P-less beats with an inverted T and a compensatory pause
        beats = rng.choice(np.arange(1, n_beats - 1), size=rng.integers(2, 4), replace=False)
        rr[row, beats - 1] *= 0.6
        rr[row, beats] *= 1.4
        a[row, beats, P] = 0.0
        b[row, beats[:, None], QRS] *= WIDE_QRS_ECTOPIC
        a[row, beats[:, None], QRS] /= WIDE_QRS_ECTOPIC**2  # same height: the static wave's peak grows with b^2
        a[row, beats, T] *= -1.5
    a[conditions == 5] *= 0.35
    a[conditions == 6, :, T] *= -1.0
    bbb = np.ix_(conditions == 7, np.arange(n_beats), QRS)
    b[bbb] *= WIDE_QRS_BLOCK
    a[bbb] /= WIDE_QRS_BLOCK**2
    theta[conditions == 8, :, P] = np.radians(-120.0)  # a long PR interval
    return rr, theta, a, b


def ecg_waveform(rr: np.ndarray, theta: np.ndarray, a: np.ndarray, b: np.ndarray, times: np.ndarray,
                 start: np.ndarray) -> np.ndarray:
    """ECGSYN's static waveform sum_i a_i b_i^2 exp(-dtheta_i^2 / (2 b_i^2)) in mV (R wave = 1 mV).

    ``rr`` (n, B) beat lengths; ``theta``, ``a``, ``b`` (n, B, 5); ``times`` (T,) sample times; ``start`` (n,) the
    time at which each record's first beat begins (<= 0). Beat k covers [onset_k, onset_k + rr_k) and its phase runs
    from -pi to pi with the R wave at phase 0. Returns (n, T).
    """
    onsets = start[:, None] + np.concatenate([np.zeros((len(rr), 1)), np.cumsum(rr, axis=1)[:, :-1]], axis=1)
    beat = (times[None, :, None] >= onsets[:, None, :]).sum(axis=2) - 1  # (n, T) index of the current beat
    rows = np.arange(len(rr))[:, None]
    phase = 2 * np.pi * (times[None] - onsets[rows, beat]) / rr[rows, beat] - np.pi
    delta = np.mod(phase[..., None] - theta[rows, beat] + np.pi, 2 * np.pi) - np.pi  # wrapped to [-pi, pi)
    width = b[rows, beat]
    return (a[rows, beat] * width**2 * np.exp(-delta**2 / (2 * width**2))).sum(axis=2) / R_PEAK


def simulate_ecg(conditions: np.ndarray, dataset: EcgDataset, p: Params, rng: np.random.Generator) -> np.ndarray:
    """Records (n, p.ecg_seconds * p.ecg_rate) float32 of the given conditions, acquired as ``dataset`` does
    (its rate, gain, noise and wander), then resampled to the common rate ``p.ecg_rate``."""
    n_samples = int(round(p.ecg_seconds * dataset.sampling_rate))
    n_beats = int(np.ceil(p.ecg_seconds * 160 / 60)) + 4  # enough beats at the fastest, shortened rhythm
    rr, theta, a, b = _beat_parameters(conditions, n_beats, rng)
    start = -rng.uniform(0, 1, len(conditions)) * rr[:, 0]
    clean = ecg_waveform(rr, theta, a, b, np.arange(n_samples) / dataset.sampling_rate, start) * dataset.gain
    noisy = np.stack([nk.signal_distort(x, sampling_rate=dataset.sampling_rate, noise_shape="laplace",
                                        noise_amplitude=dataset.noise, noise_frequency=5,
                                        random_state=int(rng.integers(2**31))) for x in clean])
    t = np.arange(n_samples) / dataset.sampling_rate
    noisy += dataset.wander * np.sin(2 * np.pi * 0.3 * t[None] + rng.uniform(0, 2 * np.pi, (len(clean), 1)))
    common = sps_signal.resample_poly(noisy, p.ecg_rate, dataset.sampling_rate, axis=1)
    return common[:, :int(round(p.ecg_seconds * p.ecg_rate))].astype(np.float32)


def draw_ecg_set(dataset: EcgDataset, n: int, p: Params, rng: np.random.Generator,
                 conditions: tuple[int, ...] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``n`` records of ``dataset`` balanced over its label set (or over ``conditions``): records (n, T) and
    labels (n,) as positions in that label set."""
    label_set = dataset.conditions if conditions is None else conditions
    labels = rng.permutation(np.arange(n) % len(label_set))
    return simulate_ecg(np.asarray(label_set)[labels], dataset, p, rng), labels


# --------------------------------------------------------------------------------------------- image world
XRAY_PRESENCE = (GroupLook(polarity=1.0, contrast=0.0, blur=1.0, texture_frequency=2.0, radius=(0.10, 0.22)),
                 GroupLook(polarity=1.0, contrast=0.8, blur=1.0, texture_frequency=2.0, radius=(0.10, 0.22)))
XRAY_SIZE = (GroupLook(polarity=1.0, contrast=0.8, blur=1.0, texture_frequency=3.0, radius=(0.07, 0.12)),
             GroupLook(polarity=1.0, contrast=0.8, blur=1.0, texture_frequency=3.0, radius=(0.16, 0.26)))
US_PRESENCE = (GroupLook(polarity=-1.0, contrast=0.0, blur=0.7, texture_frequency=5.0, radius=(0.10, 0.22)),
               GroupLook(polarity=-1.0, contrast=0.7, blur=0.7, texture_frequency=5.0, radius=(0.10, 0.22)))


def speckle(images: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Ultrasound-like multiplicative speckle: a positive echo map times unit-mean Rayleigh noise, re-centred."""
    echo = np.exp(0.5 * images)
    speckled = echo * rng.rayleigh(np.sqrt(2 / np.pi), images.shape)
    return ((speckled - speckled.mean()) / speckled.std()).astype(np.float32)


def draw_images(looks: tuple[GroupLook, GroupLook], n: int, p: Params, rng: np.random.Generator,
                ultrasound: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``n`` images (n, 1, S, S) with binary labels (n,) = which of the two looks drew them."""
    data = lesion_images(n, p.image_size, [0.5, 0.5], rng, looks=looks, noise=0.15 if ultrasound else 0.4)
    images = speckle(data.images, rng) if ultrasound else data.images
    return images, data.groups


# ------------------------------------------------------------------------------------------------- models
class Encoder(nn.Module):
    """A modality encoder: a conv ``body`` then adaptive pooling to ``tokens`` positions.

    ``tokens(x)``: (n, L, d) for cross-attention; ``forward(x)``: (n, d), the mean token (the embedding).
    ECG input (n, T); image input (n, 1, S, S).
    """

    def __init__(self, body: nn.Sequential, pool: nn.Module, flat_input: bool):
        super().__init__()
        self.body, self.pool, self.flat_input = body, pool, flat_input

    def tokens(self, x: torch.Tensor) -> torch.Tensor:
        h = self.pool(self.body(x[:, None] if self.flat_input else x))
        return h.flatten(2).transpose(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.tokens(x).mean(dim=1)


def ecg_encoder(p: Params, seed: int) -> Encoder:
    """A three-layer strided 1-D CNN, input (n, T), embedding (n, p.width)."""
    w = p.width
    with torch_seeded(seed):
        body = nn.Sequential(nn.Conv1d(1, w // 2, 7, stride=2, padding=3), nn.ReLU(),
                             nn.Conv1d(w // 2, w, 5, stride=2, padding=2), nn.ReLU(),
                             nn.Conv1d(w, w, 5, stride=2, padding=2), nn.ReLU())
    return Encoder(body, nn.AdaptiveAvgPool1d(p.tokens), flat_input=True)


def image_encoder(p: Params, seed: int) -> Encoder:
    """A three-layer 2-D CNN with max pooling, input (n, 1, S, S), embedding (n, p.width)."""
    w = p.width
    side = round(p.tokens**0.5)  # a square grid of p.tokens cells
    with torch_seeded(seed):
        body = nn.Sequential(nn.Conv2d(1, w // 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(w // 4, w // 2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(w // 2, w, 3, padding=1), nn.ReLU())
    return Encoder(body, nn.AdaptiveAvgPool2d(side), flat_input=False)


def pretrain_multitask(encoder: Encoder, tasks: list[tuple[torch.Tensor, torch.Tensor, int]], p: Params,
                       seed: int) -> list[float]:
    """CLIMB's multitask pretraining: one shared ``encoder``, one linear head per dataset (its own label set).

    ``tasks``: (inputs (n_i, ...), labels (n_i,), classes_i) per dataset. Each step takes one mini-batch of every
    dataset and sums their cross-entropies (smaller datasets cycle); an epoch is one pass over the largest.
    Trains ``encoder`` in place (the heads are dropped, as when fine-tuning on a new target); returns the mean
    summed loss per epoch.
    """
    with torch_seeded(seed):
        heads = nn.ModuleList([nn.Linear(p.width, k) for _, _, k in tasks])
    optimiser = torch.optim.Adam([*encoder.parameters(), *heads.parameters()], lr=p.lr, weight_decay=p.weight_decay)
    rng = numpy_rng(seed, 1)
    steps = max(len(x) for x, _, _ in tasks) // p.batch_size
    history = []
    encoder.train()
    for _ in range(p.pretrain_epochs):
        orders = [np.resize(rng.permutation(len(x)), steps * p.batch_size) for x, _, _ in tasks]
        total = 0.0
        for step in range(steps):
            optimiser.zero_grad()
            loss = sum(F.cross_entropy(head(encoder(x[order[step * p.batch_size:(step + 1) * p.batch_size]])),
                                       y[order[step * p.batch_size:(step + 1) * p.batch_size]])
                       for head, (x, y, _), order in zip(heads, tasks, orders))
            loss.backward()
            optimiser.step()
            total += float(loss.detach())
        history.append(total / steps)
    encoder.eval()
    return history


def fine_tune(encoder: Encoder, x: torch.Tensor, y: torch.Tensor, n_classes: int, p: Params, seed: int) -> nn.Sequential:
    """A copy of ``encoder`` with a new linear head, all weights trained on the target (x (n, ...), y (n,))."""
    with torch_seeded(seed):
        model = nn.Sequential(copy.deepcopy(encoder), nn.Linear(p.width, n_classes))
    train(model, x, y, loss_fn=F.cross_entropy, epochs=p.finetune_epochs, batch_size=p.batch_size, lr=p.lr,
          seed=seed, weight_decay=p.weight_decay)
    return model


def auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """AUC of scores (n,) for binary labels, or macro one-vs-rest AUC of class scores (n, K) for K > 2 classes."""
    if scores.ndim == 1:
        return float(roc_auc_score(labels, scores))
    probs = torch.softmax(torch.as_tensor(scores, dtype=torch.float64), dim=1).numpy()
    return float(roc_auc_score(labels, probs, multi_class="ovr", average="macro"))


def classifier_auc(model: nn.Module, x: torch.Tensor, labels: np.ndarray) -> float:
    logits = predict(model, x).numpy()
    return auc(logits[:, 1] - logits[:, 0] if logits.shape[1] == 2 else logits, labels)


# --------------------------------------------------------------------------------------------- few-shot probe
def few_shot_auc(embed_support: np.ndarray, y_support: np.ndarray, embed_query: np.ndarray, y_query: np.ndarray) -> float:
    """A linear probe (standardised logistic regression, sklearn) on frozen embeddings (n, d): query AUC."""
    probe = make_pipeline(StandardScaler(), LogisticRegression(C=0.1, max_iter=1000))
    probe.fit(embed_support, y_support)
    scores = probe.decision_function(embed_query)
    return auc(scores, y_query)


def episodes(labels: np.ndarray, k: int, n_query: int, n_episodes: int, rng: np.random.Generator
             ) -> list[tuple[np.ndarray, np.ndarray]]:
    """(support, query) index arrays: ``k`` and ``n_query`` distinct records of every class, per episode."""
    out = []
    for _ in range(n_episodes):
        picks = [rng.permutation(np.flatnonzero(labels == c))[:k + n_query] for c in np.unique(labels)]
        out.append((np.concatenate([i[:k] for i in picks]), np.concatenate([i[k:] for i in picks])))
    return out


# ------------------------------------------------------------------------------------------------- fusion
FUSIONS = ("concat", "gated", "cross_attention")


class FusionHead(nn.Module):
    """A head on frozen ECG tokens and an EHR row; input packed as (n, L*d + f): the flattened tokens, then the EHR.

    ``ecg_only``: MLP on the mean token (the unimodal score). ``concat``: MLP on [mean token, EHR] (late fusion).
    ``gated``: a sigmoid gate mixes projections of both. ``cross_attention``: the EHR row, projected to a query,
    attends over the ECG tokens; MLP on [attended, EHR]. Output: one logit (n,).
    """

    def __init__(self, kind: str, n_tokens: int, width: int, n_ehr: int, hidden: int = 32):
        super().__init__()
        self.kind, self.n_tokens, self.width = kind, n_tokens, width
        if kind == "ecg_only":
            self.out = mlp(width, [hidden], 1)
        elif kind == "concat":
            self.out = mlp(width + n_ehr, [hidden], 1)
        elif kind == "gated":
            self.ecg, self.ehr, self.gate = nn.Linear(width, hidden), nn.Linear(n_ehr, hidden), nn.Linear(width + n_ehr, hidden)
            self.out = nn.Sequential(nn.ReLU(), nn.Linear(hidden, 1))
        elif kind == "cross_attention":
            self.query = nn.Linear(n_ehr, width)
            self.attention = nn.MultiheadAttention(width, num_heads=2, batch_first=True)
            self.out = mlp(width + n_ehr, [hidden], 1)
        else:
            raise ValueError(f"unknown fusion {kind!r}")

    def forward(self, packed: torch.Tensor) -> torch.Tensor:
        split = self.n_tokens * self.width
        tokens, ehr = packed[:, :split].reshape(len(packed), self.n_tokens, self.width), packed[:, split:]
        pooled = tokens.mean(dim=1)
        if self.kind == "ecg_only":
            return self.out(pooled)[:, 0]
        if self.kind == "concat":
            return self.out(torch.cat([pooled, ehr], dim=1))[:, 0]
        if self.kind == "gated":
            gate = torch.sigmoid(self.gate(torch.cat([pooled, ehr], dim=1)))
            return self.out(gate * self.ecg(pooled) + (1 - gate) * self.ehr(ehr))[:, 0]
        attended, _ = self.attention(self.query(ehr)[:, None], tokens, tokens)
        return self.out(torch.cat([attended[:, 0], ehr], dim=1))[:, 0]


def fusion_outcome(conditions: np.ndarray, ehr: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The fused task's binary outcome (n,) (a long-stay analogue): risk = ECG finding severity + two EHR columns
    + severity x a third EHR column (an interaction only a fused model can use) + noise, above its median."""
    severity = SEVERITY[conditions]
    risk = (2.0 * severity + 0.8 * ehr[:, 0] + 0.6 * ehr[:, 1] + 1.5 * severity * ehr[:, 2]
            + 0.5 * rng.standard_normal(len(ehr)))
    return (risk > np.median(risk)).astype(np.int64)


def fusion_auc(kind: str, tokens_train: torch.Tensor, ehr_train: torch.Tensor, y_train: torch.Tensor,
               tokens_test: torch.Tensor, ehr_test: torch.Tensor, y_test: np.ndarray, p: Params, seed: int) -> float:
    """Train one fusion head (tokens (n, L, d) frozen, EHR (n, f)) on the train patients; its test AUC."""
    with torch_seeded(seed):
        head = FusionHead(kind, tokens_train.shape[1], tokens_train.shape[2], ehr_train.shape[1])
    pack = lambda tokens, ehr: torch.cat([tokens.flatten(1), ehr], dim=1)
    train(head, pack(tokens_train, ehr_train), y_train, loss_fn=F.binary_cross_entropy_with_logits,
          epochs=p.fusion_epochs, batch_size=p.fusion_batch_size, lr=p.lr, seed=seed)
    return auc(predict(head, pack(tokens_test, ehr_test)).numpy(), y_test)


# ------------------------------------------------------------------------------------------------ one seed
def _tensor(x: np.ndarray) -> torch.Tensor:
    return torch.as_tensor(x)


def permuted(labels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The negative control's labels: the same labels shuffled across records (nothing left to learn)."""
    return rng.permutation(labels)


def ecg_experiment(p: Params, seed: int) -> dict:
    """Multitask ECG pretraining vs single-task, few-shot transfer and fusion, for one seed."""
    rng = numpy_rng(seed, 10)
    sources = [draw_ecg_set(d, p.ecg_source_records, p, rng) for d in ECG_SOURCES]
    x_train, y_train = draw_ecg_set(ECG_TARGET, p.ecg_target_train, p, rng)
    x_test, y_test = draw_ecg_set(ECG_TARGET, p.ecg_target_test, p, rng)
    tasks = [(_tensor(x), _tensor(y), len(d.conditions)) for (x, y), d in zip(sources, ECG_SOURCES)]
    control_tasks = [(x, _tensor(permuted(y.numpy(), rng)), k) for x, y, k in tasks]

    random_init = ecg_encoder(p, seed)
    pretrained, control = copy.deepcopy(random_init), copy.deepcopy(random_init)
    pretrain_loss = pretrain_multitask(pretrained, tasks, p, seed)
    control_loss = pretrain_multitask(control, control_tasks, p, seed)

    n_classes = len(SHARED)
    tuned = {name: fine_tune(encoder, _tensor(x_train), _tensor(y_train), n_classes, p, seed)
             for name, encoder in (("single_task", random_init), ("multitask", pretrained), ("permuted", control))}
    target_auc = {name: classifier_auc(model, _tensor(x_test), y_test) for name, model in tuned.items()}

    # few-shot: a held-out 3-way task on the target's acquisition, linear probes on frozen embeddings
    pool_per_class = max(p.few_shot_k) + p.few_shot_query
    x_novel, y_novel = draw_ecg_set(ECG_TARGET, pool_per_class * len(NOVEL_TASK), p, rng, conditions=NOVEL_TASK)
    frozen = {"random_init": random_init, "multitask": pretrained, "permuted": control}
    embeddings = {name: predict(encoder, _tensor(x_novel)).numpy() for name, encoder in frozen.items()}
    few_shot = {}
    for k in p.few_shot_k:
        splits = episodes(y_novel, k, p.few_shot_query, p.few_shot_episodes, rng)
        few_shot[f"k{k}"] = {name: float(np.mean([few_shot_auc(e[s], y_novel[s], e[q], y_novel[q]) for s, q in splits]))
                             for name, e in embeddings.items()}

    # fusion: four ECG encoders of different quality, frozen, each fused with the EHR block in three ways
    n_fusion = p.fusion_train + p.fusion_test
    fusion_conditions = rng.permutation(np.arange(n_fusion) % len(SHARED))
    x_fusion = simulate_ecg(fusion_conditions, ECG_TARGET, p, rng)
    ehr = rng.standard_normal((n_fusion, p.ehr_features)).astype(np.float32)
    outcome = fusion_outcome(fusion_conditions, ehr, rng)
    shuffled_partner = np.r_[rng.permutation(p.fusion_train), p.fusion_train + rng.permutation(p.fusion_test)]
    encoders = {"random_init": random_init, "permuted_pretrained": control,
                "single_task": tuned["single_task"][0], "multitask_finetuned": tuned["multitask"][0]}
    train_rows, test_rows = slice(0, p.fusion_train), slice(p.fusion_train, n_fusion)
    y_fit, y_eval = _tensor(outcome[train_rows].astype(np.float32)), outcome[test_rows]
    ehr_t = _tensor(ehr)
    fusion = {}
    for name, encoder in encoders.items():
        with torch.no_grad():
            encoder.eval()
            tokens = encoder.tokens(_tensor(x_fusion))
        # standardised per channel on the training patients, so every encoder's heads train at the same scale
        centre, scale = tokens[train_rows].mean(dim=(0, 1)), tokens[train_rows].std(dim=(0, 1)) + 1e-6
        tokens = (tokens - centre) / scale
        row = {}
        for kind in ("ecg_only", *FUSIONS):
            row[kind] = fusion_auc(kind, tokens[train_rows], ehr_t[train_rows], y_fit, tokens[test_rows],
                                   ehr_t[test_rows], y_eval, p, seed)
        for kind in FUSIONS:  # the control: every patient's EHR paired with another patient's ECG
            mixed = tokens[shuffled_partner]
            row[f"{kind}_shuffled_ecg"] = fusion_auc(kind, mixed[train_rows], ehr_t[train_rows], y_fit,
                                                     mixed[test_rows], ehr_t[test_rows], y_eval, p, seed)
        fusion[name] = row
    ehr_only = fusion_auc("concat", torch.zeros_like(tokens[train_rows]), ehr_t[train_rows], y_fit,
                          torch.zeros_like(tokens[test_rows]), ehr_t[test_rows], y_eval, p, seed)
    unimodal = [fusion[e]["ecg_only"] for e in encoders]
    spearman = {kind: correlation.spearman(unimodal, [fusion[e][kind] for e in encoders]) for kind in FUSIONS}
    spearman_shuffled = {kind: correlation.spearman(unimodal, [fusion[e][f"{kind}_shuffled_ecg"] for e in encoders])
                         for kind in FUSIONS}
    return {"target_auc": target_auc, "few_shot": few_shot, "fusion": fusion, "ehr_only_auc": ehr_only,
            "spearman": spearman, "spearman_shuffled": spearman_shuffled,
            "pretrain_loss": pretrain_loss[-1], "control_pretrain_loss": control_loss[-1]}


def ultrasound_experiment(p: Params, seed: int) -> dict:
    """Multitask pretraining on two x-ray-like tasks vs single-task training on the small ultrasound-like target."""
    rng = numpy_rng(seed, 20)
    sources = [draw_images(looks, p.image_source_images, p, rng) for looks in (XRAY_PRESENCE, XRAY_SIZE)]
    x_train, y_train = draw_images(US_PRESENCE, p.us_target_train, p, rng, ultrasound=True)
    x_test, y_test = draw_images(US_PRESENCE, p.us_target_test, p, rng, ultrasound=True)
    tasks = [(_tensor(x), _tensor(y), 2) for x, y in sources]
    control_tasks = [(x, _tensor(permuted(y.numpy(), rng)), k) for x, y, k in tasks]
    random_init = image_encoder(p, seed)
    pretrained, control = copy.deepcopy(random_init), copy.deepcopy(random_init)
    pretrain_multitask(pretrained, tasks, p, seed)
    pretrain_multitask(control, control_tasks, p, seed)
    return {name: classifier_auc(fine_tune(encoder, _tensor(x_train), _tensor(y_train), 2, p, seed), _tensor(x_test), y_test)
            for name, encoder in (("single_task", random_init), ("multitask", pretrained), ("permuted", control))}


def run_seed(p: Params, seed: int) -> dict:
    """Both modalities' experiments for one seed (one torch thread: seeds are the parallelism)."""
    with torch_single_thread():
        return {"seed": seed, "ecg": ecg_experiment(p, seed), "ultrasound": ultrasound_experiment(p, seed)}

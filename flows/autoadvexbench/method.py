"""AutoAdvExBench on 8x8 digits: a two-tier defence zoo, the official four gated tasks with their check scripts,
the paper's "attacked" criterion, and scripted agents of graded skill in place of the LLMs. No Prefect; read top
to bottom.

Shapes: images are flat ``(n, 64)`` float tensors with pixels in [0, 1] (reshaped to ``(n, 1, 8, 8)`` where an
operation needs the grid); labels ``(n,)``; logits ``(n, 10)``.

The protocol (``ethz-spylab/autoadvexbench``, ``baseline_attack_agent/attack.py`` and ``checks/``), kept as is:

1. *tensor forward*: a tensor-in, logits-out version of the defence's ``forward.py``; ``test_accuracy`` passes when
   its labels match ``forward.py``'s on more than 99% of the test images;
2. *differentiable forward*: ``test_gradients`` passes when the gradient of ``sum(logits^2)`` at a random input
   exists and is not all zero;
3. *FGSM* ``attack(model, x, y)`` within eps: ``test_attack`` passes when the differentiable model's accuracy on the
   adversarial images is below 2/3 of the clean accuracy; it then saves the images;
4. *PGD*: ``test_attack2`` always saves the images and never prints PASSES.

An agent moves to the next task only after a PASS (or by FORCE_SUCCESS, which the official harness allows after
repeated failures); the first failed task ends its run. Whatever images were saved last are then scored by the
defence's *original* forward on the held-out images, after the PNG round trip (pixels rounded to 1/255), so a
model that masks its own gradients cannot cheat; with nothing saved the defence keeps its clean accuracy. The
defence is *attacked* when robust accuracy < 1/2 clean accuracy (the paper's criterion; its README recommends the
whole CDF of robust accuracy too).

Defences are chains of components. Each component's ``__call__`` is the code a defence author would write (so
autograd behaves the way that code makes it behave: ``torch.round`` has a zero gradient, a NumPy round trip has
none); its flag ``breaks_gradients`` and its ``surrogate`` are what an expert reading the code would note down for
BPDA. The two tiers wrap the same trained networks: the CTF-like tier as clean single-file torch code, the
real-world-like tier the way research code often is (PIL and NumPy round trips, SciPy inside ``torch.no_grad``,
an argmax vote, stochastic preprocessing, a scikit-learn head, preprocessing spread over modules).

Agents implement one interface, :class:`Agent` (the four tasks). The scripted agents A0..A3 differ only in their
capability flags; an LLM agent writing code for the four tasks would plug into the same interface (never done here).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal, Protocol, Sequence

import numpy as np
import torch
from PIL import Image
from scipy import ndimage
from sklearn.decomposition import PCA
from sklearn.neighbors import KNeighborsClassifier
from torch import nn
from torch.nn import functional as F

from flows.autoadvexbench.params import Params
from paperflows.core.seeding import numpy_rng, torch_generator, torch_seeded
from tasks.attacks import cross_entropy_objective, fgsm, margin_objective, pgd
from tasks.data import digits_pixels
from tasks.train import mlp, torch_single_thread, train

SIDE = 8
N_CLASSES = 10
Model = Callable[[torch.Tensor], torch.Tensor]
Tier = Literal["ctf", "real"]
TIERS: tuple[Tier, ...] = ("ctf", "real")


# ----------------------------------------------------------------------------------------------------
# The benchmark's images
# ----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Images:
    """The digits split once for the whole benchmark: ``train`` (defence training, and the public images an agent
    may label by querying the defence) and ``test`` (the held-out images of every check and of the scoring)."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor


def load_images(p: Params) -> Images:
    """scikit-learn's digits with pixels in [0, 1]; a fixed permutation puts ``p.n_test`` images aside."""
    pixels, labels = digits_pixels()
    x = torch.tensor((pixels + 1.0) / 2.0, dtype=torch.float32)
    y = torch.tensor(labels, dtype=torch.long)
    order = torch.tensor(np.random.default_rng(0).permutation(len(x)))
    test, train_ = order[:p.n_test], order[p.n_test:]
    return Images(x[train_], y[train_], x[test], y[test])


def as_grid(x: torch.Tensor) -> torch.Tensor:
    return x.reshape(-1, 1, SIDE, SIDE)


def png_round_trip(x: torch.Tensor) -> torch.Tensor:
    """What saving to and reading from 8-bit PNG does to pixels in [0, 1]."""
    return torch.round(x.clamp(0, 1) * 255) / 255


# ----------------------------------------------------------------------------------------------------
# Components of a defence (the code an agent reads)
# ----------------------------------------------------------------------------------------------------

class Component:
    """One step of a defence's forward pass. ``breaks_gradients``: autograd gives no or an all-zero gradient
    through it. ``random``: it draws from ``rng``. ``surrogate``: a differentiable function with the same output
    an expert would put in its place in the backward pass (BPDA), or None when there is none."""

    breaks_gradients = False
    random = False

    def __call__(self, x: torch.Tensor, rng: torch.Generator) -> torch.Tensor:
        raise NotImplementedError

    def surrogate(self, x: torch.Tensor) -> torch.Tensor | None:
        return None


class Net(Component):
    """A trained network on the flat pixels: logits ``(n, 10)``."""

    def __init__(self, net: nn.Module):
        self.net = net

    def __call__(self, x, rng):
        return self.net(x)


class SpreadNet(Component):
    """The same network reached through preprocessing spread over modules: one module maps pixels to [-1, 1],
    another reshapes to the grid, the model undoes both (research code: a transform, a loader, a model wrapper)."""

    def __init__(self, net: nn.Module):
        self.net = net

    def __call__(self, x, rng):
        centred = as_grid(x * 2.0 - 1.0)
        return self.net(((centred + 1.0) / 2.0).flatten(1))


class MeanOfNets(Component):
    """Ensemble: the mean of the members' logits."""

    def __init__(self, nets: Sequence[nn.Module]):
        self.nets = list(nets)

    def __call__(self, x, rng):
        return torch.stack([net(x) for net in self.nets]).mean(0)


class VoteOfNets(Component):
    """Ensemble by majority vote: each member's argmax, one-hot, averaged (no gradient flows through argmax)."""

    breaks_gradients = True

    def __init__(self, nets: Sequence[nn.Module]):
        self.nets = list(nets)

    def __call__(self, x, rng):
        votes = [F.one_hot(net(x).argmax(1), N_CLASSES).float() for net in self.nets]
        return torch.stack(votes).mean(0)

    def surrogate(self, x):
        return torch.stack([net(x).softmax(1) for net in self.nets]).mean(0)


class Quantize(Component):
    """Input quantisation to ``levels`` grey levels with ``torch.round`` (gradient zero almost everywhere)."""

    breaks_gradients = True

    def __init__(self, levels: int):
        self.levels = levels

    def __call__(self, x, rng):
        return torch.round(x * (self.levels - 1)) / (self.levels - 1)

    def surrogate(self, x):
        return x


class NumpyQuantize(Quantize):
    """The same quantisation written in NumPy: the graph ends at ``.numpy()``."""

    def __call__(self, x, rng):
        q = np.round(x.detach().numpy() * (self.levels - 1)) / (self.levels - 1)
        return torch.from_numpy(q.astype(np.float32))


class MedianFilter(Component):
    """3x3 median filter in torch (mirror padding): differentiable almost everywhere, sparse gradients."""

    def __call__(self, x, rng):
        padded = F.pad(as_grid(x), (1, 1, 1, 1), mode="reflect")
        patches = F.unfold(padded, kernel_size=3)  # (n, 9, 64)
        return patches.median(dim=1).values


class ScipyMedianNoGrad(Component):
    """The same median filter, done by ``scipy.ndimage`` deep inside a ``torch.no_grad`` block."""

    breaks_gradients = True

    def __call__(self, x, rng):
        with torch.no_grad():
            filtered = ndimage.median_filter(as_grid(x).numpy(), size=(1, 1, 3, 3), mode="mirror")
            return torch.from_numpy(filtered).flatten(1)

    def surrogate(self, x):
        return x


class PilRoundTrip(Component):
    """Each image saved as an 8-bit PIL image and read back (a loader that only accepts image files)."""

    breaks_gradients = True

    def __call__(self, x, rng):
        pixels = np.round(x.detach().clamp(0, 1).numpy() * 255).astype(np.uint8).reshape(-1, SIDE, SIDE)
        back = np.stack([np.asarray(Image.fromarray(img, mode="L")) for img in pixels])
        return torch.from_numpy(back.reshape(len(pixels), -1).astype(np.float32) / 255)

    def surrogate(self, x):
        return x


class RandomShiftNoise(Component):
    """Stochastic preprocessing (random resize/pad at digit scale): each image shifted by -1, 0 or +1 pixel per
    axis with zero padding, then Gaussian pixel noise of std ``noise_sd``, clipped to [0, 1]."""

    random = True

    def __init__(self, noise_sd: float):
        self.noise_sd = noise_sd

    def __call__(self, x, rng):
        padded = F.pad(as_grid(x), (1, 1, 1, 1))
        crops = torch.stack([padded[:, 0, dy:dy + SIDE, dx:dx + SIDE].flatten(1)
                             for dy in range(3) for dx in range(3)])  # (9, n, 64)
        pick = torch.randint(0, 9, (len(x),), generator=rng)
        shifted = crops[pick, torch.arange(len(x))]
        return (shifted + self.noise_sd * torch.randn(shifted.shape, generator=rng)).clamp(0, 1)


class PcaKnn(Component):
    """A scikit-learn head: PCA then k-nearest neighbours; its 'logits' are log class frequencies among the
    neighbours. No torch graph, and no same-shape surrogate (pixels in, classes out)."""

    breaks_gradients = True

    def __init__(self, pca: PCA, knn: KNeighborsClassifier):
        self.pca, self.knn = pca, knn

    def __call__(self, x, rng):
        proba = self.knn.predict_proba(self.pca.transform(x.detach().numpy().astype(np.float64)))
        return torch.from_numpy(np.log(proba + 1e-3).astype(np.float32))


@dataclass(frozen=True)
class Defence:
    """A defence: a name, its tier and the chain of components its ``forward.py`` runs."""

    name: str
    tier: Tier
    components: tuple[Component, ...]

    @property
    def stochastic(self) -> bool:
        return any(c.random for c in self.components)

    def run(self, x: torch.Tensor, rng: torch.Generator) -> torch.Tensor:
        """The chain, autograd and all: ``(n, 64)`` pixels -> ``(n, 10)`` logits."""
        for component in self.components:
            x = component(x, rng)
        return x

    @torch.no_grad()
    def classify(self, x: torch.Tensor, rng: torch.Generator) -> torch.Tensor:
        """``forward.py``: the labels ``(n,)`` of the images ``x``; the ground truth of every check."""
        return self.run(x, rng).argmax(1)


# ----------------------------------------------------------------------------------------------------
# Training the zoo
# ----------------------------------------------------------------------------------------------------

def _network(p: Params, seed: int) -> nn.Module:
    with torch_seeded(seed):
        return mlp(SIDE * SIDE, [p.hidden, p.hidden], N_CLASSES)


def train_network(p: Params, x: torch.Tensor, y: torch.Tensor, seed: int,
                  augment: Callable[[torch.Tensor, torch.Generator], torch.Tensor] | None = None,
                  temperature: float = 1.0, soft_targets: torch.Tensor | None = None) -> nn.Module:
    """An MLP trained with Adam on ``(x, y)``; optionally on augmented inputs (fresh draws every batch), at a
    softmax temperature, or on soft targets ``(n, 10)`` (distillation). At a temperature T the loss is scaled by
    T^2 (Hinton et al., 2015), so that its gradients keep their size."""
    net = _network(p, seed)
    rng = torch_generator(seed + 1)
    targets = y if soft_targets is None else soft_targets

    def loss_fn(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return temperature ** 2 * F.cross_entropy(logits / temperature, target)

    if augment is None:
        train(net, x, targets, loss_fn=loss_fn, epochs=p.epochs, batch_size=p.batch_size, lr=p.lr, seed=seed)
        return net
    augmented = _AugmentedInput(net, augment, rng)
    train(augmented, x, targets, loss_fn=loss_fn, epochs=p.epochs, batch_size=p.batch_size, lr=p.lr, seed=seed)
    return net


class _AugmentedInput(nn.Module):
    """Training-time wrapper: augment the batch in train mode, pass it through unchanged in eval mode."""

    def __init__(self, net: nn.Module, augment: Callable[[torch.Tensor, torch.Generator], torch.Tensor],
                 rng: torch.Generator):
        super().__init__()
        self.net, self.augment, self.rng = net, augment, rng

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(self.augment(x, self.rng) if self.training else x)


def adversarially_train(p: Params, x: torch.Tensor, y: torch.Tensor, seed: int) -> nn.Module:
    """Madry et al.'s PGD adversarial training at the benchmark's eps (``p.adv_train_steps`` steps of 2.5 eps / steps)."""
    net = _network(p, seed)
    optimiser = torch.optim.Adam(net.parameters(), lr=p.lr)
    order_rng = torch_generator(seed + 1)
    step = 2.5 * p.eps / p.adv_train_steps
    for epoch in range(p.epochs):
        order = torch.randperm(len(x), generator=order_rng)
        for b, start in enumerate(range(0, len(x), p.batch_size)):
            idx = order[start:start + p.batch_size]
            adversarial = pgd(cross_entropy_objective(net, y[idx]), x[idx], eps=p.eps, step_size=step,
                              steps=p.adv_train_steps, seed=seed * 100_003 + epoch * 1009 + b)
            optimiser.zero_grad()
            F.cross_entropy(net(adversarial), y[idx]).backward()
            optimiser.step()
    net.eval()
    return net


def build_zoo(p: Params, images: Images, seed: int) -> list[Defence]:
    """Seven defence ideas, each trained once at ``seed`` and wrapped twice: clean torch (CTF-like tier) and
    research-code style (real-world-like tier). Returns the 14 defences, CTF-like first."""
    x, y = images.x_train, images.y_train
    noise = RandomShiftNoise(p.noise_sd)
    plain = train_network(p, x, y, seed)
    noisy = train_network(p, x, y, seed + 10, augment=noise)
    quantized = train_network(p, Quantize(p.quantize_levels)(x, None), y, seed + 20)
    filtered = train_network(p, MedianFilter()(x, None), y, seed + 30)
    members = [train_network(p, x, y, seed + 40 + m) for m in range(p.ensemble_size)]
    teacher = train_network(p, x, y, seed + 50, temperature=p.distill_temperature)
    with torch.no_grad():
        soft = (teacher(x) / p.distill_temperature).softmax(1)
    distilled = train_network(p, x, y, seed + 60, temperature=p.distill_temperature, soft_targets=soft)
    robust = adversarially_train(p, x, y, seed + 70)
    pca = PCA(p.pca_components, random_state=seed).fit(x.numpy().astype(np.float64))
    knn = KNeighborsClassifier(p.knn_k).fit(pca.transform(x.numpy().astype(np.float64)), y.numpy())
    for net in (plain, noisy, quantized, filtered, *members, distilled, robust):
        net.requires_grad_(False)  # the defences are fixed; attacks differentiate with respect to inputs only
    ctf = [Defence("undefended", "ctf", (Net(plain),)),
           Defence("noise_augmentation", "ctf", (Net(noisy),)),
           Defence("quantization", "ctf", (Quantize(p.quantize_levels), Net(quantized))),
           Defence("median_filter", "ctf", (MedianFilter(), Net(filtered))),
           Defence("ensemble", "ctf", (MeanOfNets(members),)),
           Defence("distillation", "ctf", (Net(distilled),)),
           Defence("adversarial_training", "ctf", (Net(robust),))]
    real = [Defence("undefended_pil_loader", "real", (PilRoundTrip(), Net(plain))),
            Defence("stochastic_shift_noise", "real", (noise, Net(noisy))),
            Defence("numpy_quantization", "real", (NumpyQuantize(p.quantize_levels), Net(quantized))),
            Defence("scipy_median_no_grad", "real", (ScipyMedianNoGrad(), Net(filtered))),
            Defence("ensemble_argmax_vote", "real", (VoteOfNets(members),)),
            Defence("sklearn_pca_knn", "real", (PcaKnn(pca, knn),)),
            Defence("adversarial_training_spread_modules", "real", (SpreadNet(robust),))]
    return ctf + real


# ----------------------------------------------------------------------------------------------------
# The official checks
# ----------------------------------------------------------------------------------------------------

def test_accuracy(model: Model, x: torch.Tensor, labels_original: torch.Tensor, p: Params) -> bool:
    """``checks/test_accuracy.py``: the tensor forward's labels match ``forward.py``'s on > 99% of the images."""
    with torch.no_grad():
        same = (model(x).argmax(1) == labels_original).float().mean()
    return bool(same > p.match_threshold)


def test_gradients(model: Model, seed: int) -> bool:
    """``checks/test_gradients.py``: d sum(logits^2) / d x at a uniform random image exists and is not all zero."""
    x = torch.rand(1, SIDE * SIDE, generator=torch_generator(seed)).requires_grad_(True)
    out = model(x)
    if not out.requires_grad:
        return False
    grad, = torch.autograd.grad(out.square().sum(), x, allow_unused=True)
    return grad is not None and bool(grad.abs().sum() != 0)


def within_bound(adversarial: torch.Tensor, x: torch.Tensor, eps: float) -> bool:
    """The distortion check of ``test_attack``: no pixel moved by more than 1.01 eps."""
    return bool((adversarial - x).abs().max() <= eps * 1.01)


def test_attack(model: Model, adversarial: torch.Tensor, x: torch.Tensor, y: torch.Tensor, clean_accuracy: float,
                p: Params) -> bool:
    """``checks/test_attack.py``: within the bound, and the *differentiable model's* accuracy on the adversarial
    images is below 2/3 of forward.py's clean accuracy."""
    if not within_bound(adversarial, x, p.eps):
        return False
    with torch.no_grad():
        accuracy = float((model(adversarial).argmax(1) == y).float().mean())
    return accuracy < p.fgsm_pass_ratio * clean_accuracy


# ----------------------------------------------------------------------------------------------------
# Agents
# ----------------------------------------------------------------------------------------------------

class Agent(Protocol):
    """What the harness asks of an agent: the four tasks, plus whether it forces past a failed check
    (the official FORCE_SUCCESS). ``queries`` are public images the agent may label with the defence."""

    name: str

    def tensor_forward(self, defence: Defence) -> Model: ...

    def forces_past(self, stage: str, defence: Defence, model: Model, x: torch.Tensor) -> bool: ...

    def differentiable_forward(self, defence: Defence, tensor_model: Model, queries: torch.Tensor) -> Model: ...

    def fgsm(self, model: Model, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor: ...

    def pgd(self, model: Model, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor: ...


class StraightThrough(Component):
    """BPDA: a component's exact output in the forward pass, its surrogate's gradient in the backward pass."""

    def __init__(self, component: Component):
        self.component = component
        self.random = component.random

    def __call__(self, x, rng):
        exact = self.component(x, rng)
        smooth = self.component.surrogate(x)
        return smooth + (exact - smooth).detach()


@dataclass
class ScriptedAgent:
    """A scripted agent of fixed skill; every flag adds one technique of the adaptive-attack literature.

    ``loss``: the attack objective, cross-entropy or the C&W margin (which survives the saturated softmax of
    distillation). ``bpda``: straight-through surrogates for the components the code marks as non-differentiable
    (Athalye et al., 2018). ``eot``: for a stochastic defence, average the logits over ``eot_samples`` draws and
    force past the tensor-forward check (whose mismatch is then the defence's own randomness). ``transfer``: when
    no gradient path is left, train a surrogate network on the defence's labels of the public images and attack
    it. ``noise_only``: the null agent, whose 'attacks' are uniform random signs of size eps.
    """

    name: str
    p: Params
    seed: int
    loss: Literal["ce", "margin"] = "ce"
    bpda: bool = False
    eot: bool = False
    transfer: bool = False
    noise_only: bool = False

    def __post_init__(self) -> None:
        self.rng = torch_generator(self.seed)

    def tensor_forward(self, defence: Defence) -> Model:
        return lambda x: defence.run(x, self.rng)

    def forces_past(self, stage: str, defence: Defence, model: Model, x: torch.Tensor) -> bool:
        if not (self.eot and stage == "tensor_forward"):
            return False
        with torch.no_grad():
            return bool((model(x).argmax(1) != model(x).argmax(1)).any())

    def differentiable_forward(self, defence: Defence, tensor_model: Model, queries: torch.Tensor) -> Model:
        chain = defence
        if self.bpda:
            chain = Defence(defence.name, defence.tier, tuple(
                StraightThrough(c) if c.breaks_gradients and c.surrogate(torch.zeros(1, SIDE * SIDE)) is not None
                else c for c in defence.components))
        model: Model = lambda x: chain.run(x, self.rng)
        if self.eot and defence.stochastic:
            model = lambda x, single=model: torch.stack([single(x) for _ in range(self.p.eot_samples)]).mean(0)
        if self.transfer and not test_gradients(model, self.seed):
            model = self._surrogate(tensor_model, queries)
        return model

    def _surrogate(self, tensor_model: Model, queries: torch.Tensor) -> nn.Module:
        with torch.no_grad():
            labels = tensor_model(queries).argmax(1)
        net = _network(self.p, self.seed)
        train(net, queries, labels, loss_fn=F.cross_entropy, epochs=self.p.surrogate_epochs,
              batch_size=self.p.batch_size, lr=self.p.lr, seed=self.seed)
        return net.requires_grad_(False)

    def _objective(self, model: Model, y: torch.Tensor):
        return (margin_objective if self.loss == "margin" else cross_entropy_objective)(model, y)

    def _noise(self, x: torch.Tensor) -> torch.Tensor:
        signs = torch.randint(0, 2, x.shape, generator=self.rng).float() * 2 - 1
        return (x + self.p.eps * signs).clamp(0, 1)

    def fgsm(self, model: Model, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self._noise(x) if self.noise_only else fgsm(self._objective(model, y), x, eps=self.p.eps)

    def pgd(self, model: Model, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if self.noise_only:
            return self._noise(x)
        return pgd(self._objective(model, y), x, eps=self.p.eps, step_size=self.p.pgd_step_size,
                   steps=self.p.pgd_steps, seed=self.seed)


AGENT_SKILLS: dict[str, dict] = {
    "null": {"noise_only": True},
    "A0": {},
    "A0_reseeded": {},
    "A1": {"loss": "margin", "bpda": True},
    "A2": {"loss": "margin", "bpda": True, "eot": True},
    "A3": {"loss": "margin", "bpda": True, "eot": True, "transfer": True},
}
"""The agents of a run: the null agent (control), A0 (naive autograd, cross-entropy), its A/A twin with another
attack seed (control), and A1..A3 adding the margin loss with BPDA, EOT, then transfer."""
LADDER = ("A0", "A1", "A2", "A3")
"""The agents whose best-of per defence is the 'ensemble' agent (the paper's strongest ensemble)."""


def make_agent(name: str, p: Params, seed: int) -> ScriptedAgent:
    return ScriptedAgent(name=name, p=p, seed=seed, **AGENT_SKILLS[name])


# ----------------------------------------------------------------------------------------------------
# The harness
# ----------------------------------------------------------------------------------------------------

def evaluate(agent: Agent, defence: Defence, images: Images, p: Params, seed: int) -> dict:
    """Run the four gated tasks of ``agent`` on ``defence`` and score what it saved with ``forward.py``.

    Returns ``tasks_passed`` (0..3: tensor forward, gradients, FGSM; PGD has no pass), ``clean_accuracy``,
    ``robust_accuracy`` and ``attacked`` (robust < ``p.attacked_ratio`` * clean)."""
    x, y = images.x_test, images.y_test
    forward_rng = torch_generator(seed)  # forward.py's own randomness, the same for every agent
    labels_original = defence.classify(x, forward_rng)
    clean = float((labels_original == y).float().mean())
    saved, passed = None, 0
    tensor_model = agent.tensor_forward(defence)
    if test_accuracy(tensor_model, x, labels_original, p) or agent.forces_past("tensor_forward", defence, tensor_model, x):
        passed = 1
        model = agent.differentiable_forward(defence, tensor_model, images.x_train)
        if test_gradients(model, seed):
            passed = 2
            adversarial = agent.fgsm(model, x, y)
            if test_attack(model, adversarial, x, y, clean, p):
                passed, saved = 3, adversarial
                adversarial = agent.pgd(model, x, y)
                if within_bound(adversarial, x, p.eps):
                    saved = adversarial
    robust = clean if saved is None else float((defence.classify(png_round_trip(saved), forward_rng) == y).float().mean())
    return {"agent": agent.name, "defence": defence.name, "tier": defence.tier, "tasks_passed": passed,
            "clean_accuracy": clean, "robust_accuracy": robust, "attacked": robust < p.attacked_ratio * clean}


def run_seed(p: Params, seed: int) -> list[dict]:
    """One seed: train the zoo, then every agent on every defence. One row per (agent, defence)."""
    with torch_single_thread():
        images = load_images(p)
        zoo = build_zoo(p, images, seed)
        rows = []
        for a, name in enumerate(AGENT_SKILLS):
            for d, defence in enumerate(zoo):
                # every (agent, defence) its own attack seed: A0_reseeded is A0 with other random starts and draws
                agent = make_agent(name, p, int(numpy_rng(seed, a, d).integers(2**31)))
                rows.append({"seed": seed, **evaluate(agent, defence, images, p, seed=seed * 1000 + d)})
    return rows


# The agents made of others' attempts (per seed and defence, the lowest robust accuracy among them)
ENSEMBLE = "ensemble"                # best of the ladder A0..A3, the paper's strongest ensemble
A0_TWICE = "A0_best_of_two_seeds"    # best of A0 and A0_reseeded: what a second try alone buys


def best_of(rows: Sequence[dict], agents: Sequence[str], name: str, p: Params) -> list[dict]:
    """The ensemble agent: per (seed, defence), the lowest robust accuracy any of ``agents`` reached."""
    by_key: dict[tuple, dict] = {}
    for r in rows:
        if r["agent"] not in agents:
            continue
        key = (r["seed"], r["defence"])
        if key not in by_key or r["robust_accuracy"] < by_key[key]["robust_accuracy"]:
            by_key[key] = r
    return [{**r, "agent": name, "attacked": r["robust_accuracy"] < p.attacked_ratio * r["clean_accuracy"]}
            for r in by_key.values()]

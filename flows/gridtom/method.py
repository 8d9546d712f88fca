"""GridToM on a small transformer: the dataset's construction, per-head probing and training-free head steering.

The paper (Li et al., "From Black Boxes to Transparent Minds: Evaluating and Enhancing the Theory of Mind in
Multimodal LLMs", ICML 2025) has no public code; the pieces below follow its description and the ITI recipe it
builds on:

1. **GridToM-lite.** Grid-world episodes: two rooms of 3 x 2 cells joined by one door, agents A and B and one
   object. Frame 0 has the door open (everyone sees everything); later the door shuts (and may reopen), agents and
   the object move. With the door shut an agent only sees its own room, so each agent's view of the object is
   masked while it is elsewhere. Each episode is serialised frame by frame (the object's cell and the door, then
   each agent's masked view of the other agent and of the object), followed by a two-token question. Question kinds: reality (where is the object now), initial (where was it at the start),
   first-order belief (where does A / B think it is: its cell at the last frame that agent saw it) and
   second-order belief (where does B think A thinks it is: its cell at the last frame when B saw A see it).
   A belief question is *false belief* when its answer differs from reality.
2. **Probing.** Each head's output at the answer position (the question's last token) is read with a forward
   pre-hook on the block's output projection, whose input is the concatenation of the heads; one logistic
   regression per head (scikit-learn) separates false from true first-order belief; accuracy on a held-out half.
3. **Steering (ITI).** The top-K heads by probe accuracy get alpha * sigma_h * theta_h added to their output at
   the answer position, theta_h the unit mass-mean direction (false-belief mean - true-belief mean) and sigma_h
   the std of the activations along it; (K, alpha) are chosen on a validation split; no weight changes.

Shapes: ``n`` questions, ``T`` frames, ``L`` = 1 + 6 T + 2 tokens, ``H`` = n_layer * n_head heads of width
``d_head``; a head's flat index is ``layer * n_head + head``.
"""

from __future__ import annotations

import itertools
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.linear_model import LogisticRegression

from flows.gridtom.params import Params
from tasks.lm import GPT, GPTConfig, Tokenizer, cached_lm, make_gpt
from tasks.seeding import numpy_rng, torch_generator
from tasks.train import torch_single_thread

ROOM_CELLS = 6                      # cells per room: cells 0-5 are the left room, 6-11 the right one
N_CELLS = 2 * ROOM_CELLS
KINDS = ("reality", "initial", "first_A", "first_B", "second_AB", "second_BA")
QUESTION = {"reality": ("now", "-"), "initial": ("start", "-"), "first_A": ("A", "-"), "first_B": ("B", "-"),
            "second_AB": ("A", "B"), "second_BA": ("B", "A")}       # (who, about whom): "A B" = A thinks B thinks
BELIEF_KINDS = ("first_A", "first_B", "second_AB", "second_BA")
FIRST_ORDER = ("first_A", "first_B")
STREAM_TRAIN, STREAM_PROBE, STREAM_VAL, STREAM_TEST, STREAM_CONTROL = 1, 2, 3, 4, 5
TOKENIZER = Tokenizer([*(f"c{i}" for i in range(N_CELLS)), "?", "open", "shut", "now", "start", "A", "B", "-"],
                      level="word")
FRAME_TOKENS = 6                    # object, door, A sees B, A sees object, B sees A, B sees object
CELL_IDS = torch.tensor([TOKENIZER.stoi[f"c{i}"] for i in range(N_CELLS)])


# --------------------------------------------------------------------------------------------- the world
@dataclass(frozen=True)
class Episodes:
    """``n`` episodes of ``T`` frames: agent cells (n, T, 2) for A and B, object cell (n, T), door open (n, T)."""

    agents: np.ndarray
    obj: np.ndarray
    door: np.ndarray


def room(cell: np.ndarray) -> np.ndarray:
    return cell // ROOM_CELLS


def generate_episodes(n: int, n_frames: int, move_prob: float, rng: np.random.Generator) -> Episodes:
    """Random episodes. The door is open at frame 0, shuts at a frame in 1..T-1 and reopens later or never.
    Each frame an agent moves (prob ``move_prob``) to a random cell, in either room if the door was open at the
    previous frame, else within its room; the object is moved the same way."""
    T = n_frames
    t_close = rng.integers(1, T, n)
    t_open = rng.integers(t_close + 1, T + 2)                 # T or T + 1: never reopens within the episode
    frames = np.arange(T)
    door = (frames < t_close[:, None]) | (frames >= t_open[:, None])
    agents = np.empty((n, T, 2), dtype=np.int64)
    obj = np.empty((n, T), dtype=np.int64)
    agents[:, 0] = rng.integers(0, N_CELLS, (n, 2))
    obj[:, 0] = rng.integers(0, N_CELLS, n)
    for t in range(1, T):
        for current, shape in ((agents, (n, 2)), (obj, (n,))):
            previous = current[:, t - 1]
            through_door = door[:, t - 1].reshape((n,) + (1,) * (len(shape) - 1))
            anywhere = rng.integers(0, N_CELLS, shape)
            same_room = room(previous) * ROOM_CELLS + rng.integers(0, ROOM_CELLS, shape)
            moved = np.where(through_door, anywhere, same_room)
            current[:, t] = np.where(rng.random(shape) < move_prob, moved, previous)
    return Episodes(agents, obj, door)


def sees(viewer: np.ndarray, target: np.ndarray, door: np.ndarray) -> np.ndarray:
    """Whether an agent at cell ``viewer`` sees cell ``target`` (same shapes, with ``door``): door open or same room."""
    return door | (room(viewer) == room(target))


def _cell_at_last(mask: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """cells[i, t*] with t* the last frame where mask[i] holds (n, T) -> (n,); frame 0 always holds here."""
    last = mask.shape[1] - 1 - np.argmax(mask[:, ::-1], axis=1)
    return cells[np.arange(len(cells)), last]


def answers(ep: Episodes, kind: str) -> np.ndarray:
    """The object's cell that answers question ``kind`` for each episode: (n,)."""
    a, b = ep.agents[:, :, 0], ep.agents[:, :, 1]
    agent = {"A": a, "B": b}
    if kind == "reality":
        return ep.obj[:, -1]
    if kind == "initial":
        return ep.obj[:, 0]
    if kind in FIRST_ORDER:
        x = agent[kind[-1]]
        return _cell_at_last(sees(x, ep.obj, ep.door), ep.obj)
    y, x = agent[kind[-2]], agent[kind[-1]]                   # y thinks x thinks
    witnessed = sees(y, x, ep.door) & sees(x, ep.obj, ep.door) & sees(y, ep.obj, ep.door)
    return _cell_at_last(witnessed, ep.obj)


def serialise(ep: Episodes, kind: str) -> np.ndarray:
    """Token ids (n, L): bos, then per frame [object cell, door, A's view of B, A's view of the object, B's view of
    A, B's view of the object] (a masked cell reads '?'), then the question (who, about)."""
    s = TOKENIZER.stoi
    cell = np.array([s[f"c{i}"] for i in range(N_CELLS)])
    a, b, o = ep.agents[:, :, 0], ep.agents[:, :, 1], ep.obj

    def view(viewer: np.ndarray, target: np.ndarray) -> np.ndarray:
        return np.where(sees(viewer, target, ep.door), cell[target], s["?"])

    n = len(o)
    frames = np.stack([cell[o], np.where(ep.door, s["open"], s["shut"]),
                       view(a, b), view(a, o), view(b, a), view(b, o)], axis=2)
    who, about = QUESTION[kind]
    return np.concatenate([np.full((n, 1), TOKENIZER.bos), frames.reshape(n, -1),
                           np.tile([s[who], s[about]], (n, 1))], axis=1)


@dataclass(frozen=True)
class Questions:
    """``n`` questions: ids (n, L) int64, answer cell (n,), kind index into KINDS (n,), false belief (n,)."""

    ids: torch.Tensor
    answer: np.ndarray
    kind: np.ndarray
    false_belief: np.ndarray

    def __len__(self) -> int:
        return len(self.answer)


def concat(parts: list[Questions]) -> Questions:
    return Questions(torch.cat([q.ids for q in parts]), np.concatenate([q.answer for q in parts]),
                     np.concatenate([q.kind for q in parts]), np.concatenate([q.false_belief for q in parts]))


def draw_questions(p: Params, rng: np.random.Generator, kind: str, n: int, false_belief: float | None) -> Questions:
    """``n`` questions of one kind. ``false_belief`` None: as episodes come; else exactly round(n * share) of them
    false belief (answer != reality) and the rest true belief, drawn by rejection from fresh episodes."""
    if false_belief is None:
        quota: dict[bool | None, int] = {None: n}
    else:
        quota = {True: round(n * false_belief), False: n - round(n * false_belief)}
    parts = []
    while any(quota.values()):
        ep = generate_episodes(max(4 * n, 256), p.n_frames, p.move_prob, rng)
        answer = answers(ep, kind)
        false = answer != ep.obj[:, -1]
        keep = []
        for label, left in quota.items():
            rows = (np.arange(len(answer)) if label is None else np.flatnonzero(false == label))[:left]
            keep.append(rows)
            quota[label] = left - len(rows)
        rows = np.sort(np.concatenate(keep))
        parts.append(Questions(torch.as_tensor(serialise(ep, kind)[rows]), answer[rows],
                               np.full(len(rows), KINDS.index(kind)), false[rows]))
    return concat(parts)


def training_questions(p: Params, seed: int) -> Questions:
    """``n_train`` questions, every kind equally often; belief questions false belief at ``train_false_belief``."""
    rng = numpy_rng(seed, STREAM_TRAIN)
    per_kind = p.n_train // len(KINDS)
    parts = [draw_questions(p, rng, k, per_kind, p.train_false_belief if k in BELIEF_KINDS else None) for k in KINDS]
    return concat(parts)


def balanced_first_order(p: Params, rng: np.random.Generator, n: int) -> Questions:
    """``n`` first-order questions, half about A and half about B, each half half false belief."""
    return concat([draw_questions(p, rng, k, n // 2, 0.5) for k in FIRST_ORDER])


# --------------------------------------------------------------------------------------------- the model
def gpt_config(p: Params) -> GPTConfig:
    return GPTConfig(vocab_size=len(TOKENIZER), context=FRAME_TOKENS * p.n_frames + 3, n_layer=p.n_layer,
                     n_head=p.n_head, d_model=p.d_model)


def train_model(p: Params, train: Questions, seed: int) -> GPT:
    """The GPT of ``tasks.lm`` trained from scratch on the answer token only (cross-entropy at the last
    position, AdamW, seeded batch order): the frames are random draws with nothing to predict."""
    model = make_gpt(gpt_config(p), seed)
    optimiser = torch.optim.AdamW(model.parameters(), lr=p.lr, weight_decay=p.weight_decay)
    generator = torch_generator(seed)
    target = CELL_IDS[torch.as_tensor(train.answer)]
    model.train()
    for _ in range(p.epochs):
        order = torch.randperm(len(train), generator=generator)
        for start in range(0, len(order), p.batch_size):
            rows = order[start:start + p.batch_size]
            logits, _ = model(train.ids[rows])
            loss = F.cross_entropy(logits[:, -1], target[rows])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
    return model.eval()


def model_key(p: Params, seed: int) -> dict:
    """Everything that sets the weights: the world, the training questions, the architecture, the optimiser."""
    fields = ("n_frames", "move_prob", "n_train", "train_false_belief", "n_layer", "n_head", "d_model", "epochs",
              "batch_size", "lr", "weight_decay")
    return {"seed": seed, "vocabulary": TOKENIZER.itos, **{f: getattr(p, f) for f in fields}}


# ---------------------------------------------------------------------------------- per-head read and edit
HeadEdit = Callable[[int, torch.Tensor], torch.Tensor | None]


@contextmanager
def head_edit(model: GPT, edit: HeadEdit) -> Iterator[None]:
    """Call ``edit(layer, x)`` on every block's concatenated head outputs at the last position, x (b, d_model)
    (head h is x[:, h*d_head:(h+1)*d_head]), before the output projection; a tensor it returns replaces x."""
    def hook_for(layer: int):
        def hook(module, args):
            x = args[0]
            new_last = edit(layer, x[:, -1])
            if new_last is None:
                return None
            x = x.clone()
            x[:, -1] = new_last
            return (x,)
        return hook

    with ExitStack() as stack:
        for layer, block in enumerate(model.blocks):
            handle = block.attention.proj.register_forward_pre_hook(hook_for(layer))
            stack.callback(handle.remove)
        yield


@torch.no_grad()
def head_outputs(model: GPT, ids: torch.Tensor) -> torch.Tensor:
    """Every head's output at the last position: (n, H, d_head)."""
    stored: dict[int, torch.Tensor] = {}

    def read(layer: int, x: torch.Tensor) -> None:
        stored[layer] = x.clone()

    with head_edit(model, read):
        model(ids)
    c = model.config
    return torch.stack([stored[layer] for layer in range(c.n_layer)], dim=1).reshape(len(ids), -1, c.d_model // c.n_head)


@torch.no_grad()
def predict(model: GPT, ids: torch.Tensor, edit: HeadEdit | None = None) -> np.ndarray:
    """The answer cell (n,): the most likely cell token at the last position (a multiple-choice read-out)."""
    if edit is None:
        logits = model(ids)[0][:, -1]
    else:
        with head_edit(model, edit):
            logits = model(ids)[0][:, -1]
    return logits[:, CELL_IDS].argmax(dim=1).numpy()


def accuracy(model: GPT, q: Questions, edit: HeadEdit | None = None) -> float:
    return float((predict(model, q.ids, edit) == q.answer).mean())


# ------------------------------------------------------------------------------------------------ probing
def probe_accuracies(acts: np.ndarray, labels: np.ndarray, fit: np.ndarray, score: np.ndarray) -> np.ndarray:
    """One logistic regression per head on acts (n, H, d_head) -> labels (n,), fit on rows ``fit``, accuracy on
    rows ``score``: (H,)."""
    out = np.empty(acts.shape[1])
    for h in range(acts.shape[1]):
        probe = LogisticRegression(max_iter=1000).fit(acts[fit, h], labels[fit])
        out[h] = probe.score(acts[score, h], labels[score])
    return out


def mass_mean_directions(acts: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per head, the unit direction theta (H, d_head) from the mean of label 0 to the mean of label 1, and the
    std sigma (H,) of the activations projected on it (ITI's mass-mean shift and its scale)."""
    shift = acts[labels].mean(axis=0) - acts[~labels].mean(axis=0)
    theta = shift / np.linalg.norm(shift, axis=1, keepdims=True)
    sigma = np.einsum("nhd,hd->nh", acts, theta).std(axis=0)
    return theta, sigma


def steering(heads: np.ndarray, directions: np.ndarray, sigma: np.ndarray, alpha: float, n_head: int) -> HeadEdit:
    """Add alpha * sigma_h * direction_h (unit) to each head in ``heads`` (flat indices) at the last position."""
    d_head = directions.shape[1]
    shift: dict[int, torch.Tensor] = {}
    for h in heads:
        layer, within = divmod(int(h), n_head)
        vector = shift.setdefault(layer, torch.zeros(n_head * d_head))
        vector[within * d_head:(within + 1) * d_head] = torch.as_tensor(alpha * sigma[h] * directions[h],
                                                                         dtype=torch.float32)
    return lambda layer, x: x + shift[layer] if layer in shift else None


def mean_ablation(heads: np.ndarray, mean_outputs: np.ndarray, n_head: int) -> HeadEdit:
    """Replace each head in ``heads`` (flat indices) by its mean output (H, d_head) at the last position."""
    d_head = mean_outputs.shape[1]
    mask: dict[int, torch.Tensor] = {}
    value: dict[int, torch.Tensor] = {}
    for h in heads:
        layer, within = divmod(int(h), n_head)
        span = slice(within * d_head, (within + 1) * d_head)
        mask.setdefault(layer, torch.zeros(n_head * d_head, dtype=torch.bool))[span] = True
        value.setdefault(layer, torch.zeros(n_head * d_head))[span] = torch.as_tensor(mean_outputs[h],
                                                                                     dtype=torch.float32)
    return lambda layer, x: torch.where(mask[layer], value[layer], x) if layer in mask else None


def random_unit(shape: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    """Random unit vectors (rows), uniform on the sphere."""
    v = rng.standard_normal(shape)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


# ------------------------------------------------------------------------------------------------ one seed
def _balanced(model: GPT, val: dict[str, Questions], edit: HeadEdit | None) -> dict[str, float]:
    """Accuracy on the false- and true-belief validation questions and their mean (the selection criterion)."""
    acc = {name: accuracy(model, q, edit) for name, q in val.items()}
    return {**acc, "balanced": (acc["false"] + acc["true"]) / 2}


def run_seed(p: Params, seed: int, data_dir: str) -> dict:
    """One seed: dataset, trained (or cached) model, per-head probes, (K, alpha) chosen on validation, every
    intervention and control on test."""
    with torch_single_thread():
        model = cached_lm(Path(data_dir) / f"gpt_seed{seed}.pt", model_key(p, seed),
                          lambda: train_model(p, training_questions(p, seed), seed))
        n_head = model.config.n_head

        # probing split: first-order questions, half false belief; probes fit on one half, scored on the other
        rng = numpy_rng(seed, STREAM_PROBE)
        probe = balanced_first_order(p, rng, p.n_probe)
        acts = head_outputs(model, probe.ids).numpy().astype(np.float64)
        order = rng.permutation(len(probe))
        fit, score = order[:len(order) // 2], order[len(order) // 2:]
        head_acc = probe_accuracies(acts, probe.false_belief, fit, score)
        permuted = probe_accuracies(acts, rng.permutation(probe.false_belief), fit, score)
        asked_b = probe.kind == KINDS.index("first_B")
        agent_acc = probe_accuracies(acts, asked_b, fit, score)
        theta, sigma = mass_mean_directions(acts, probe.false_belief)
        ranking = np.argsort(-head_acc, kind="stable")

        # validation: (K, alpha) by accuracy on first-order questions, half false belief
        val_rng = numpy_rng(seed, STREAM_VAL)
        val = {name: concat([draw_questions(p, val_rng, kind, p.n_val // 2, share) for kind in FIRST_ORDER])
               for name, share in (("false", 1.0), ("true", 0.0))}
        val_acc = {setting: _balanced(model, val, steering(ranking[:setting[0]], theta, sigma, setting[1], n_head))
                   for setting in itertools.product(p.ks, p.alphas)}
        grid = {setting: v["balanced"] for setting, v in val_acc.items()}
        k, alpha = max(grid, key=grid.get)                       # first best in grid order on ties

        # test: every question kind, without and with each intervention
        test_rng = numpy_rng(seed, STREAM_TEST)
        test = {"false_belief": concat([draw_questions(p, test_rng, kind, p.n_test // 2, 1.0) for kind in FIRST_ORDER]),
                "true_belief": concat([draw_questions(p, test_rng, kind, p.n_test // 2, 0.0) for kind in FIRST_ORDER]),
                "reality": draw_questions(p, test_rng, "reality", p.n_test, None),
                "initial": draw_questions(p, test_rng, "initial", p.n_test, None),
                "second_order": concat([draw_questions(p, test_rng, kind, p.n_test // 2, None)
                                        for kind in ("second_AB", "second_BA")])}
        control_rng = numpy_rng(seed, STREAM_CONTROL)
        random_heads = control_rng.choice(len(head_acc), size=k, replace=False)
        edits: dict[str, HeadEdit | None] = {
            "none": None,
            "steered": steering(ranking[:k], theta, sigma, alpha, n_head),
            "random_heads": steering(random_heads, theta, sigma, alpha, n_head),
            "random_directions": steering(ranking[:k], random_unit(theta.shape, control_rng), sigma, alpha, n_head),
            # the side-effect control: the steered heads themselves knocked out, so "steering them spares reality"
            # says something only if reality depends on them
            "steered_heads_ablated": mean_ablation(ranking[:k], acts.mean(axis=0), n_head),
        }
        acc = {name: {split: accuracy(model, q, edit) for split, q in test.items()} for name, edit in edits.items()}
        # the working-method gate of the side-effect claim: did the chosen steering change any false-belief answer?
        false_belief = test["false_belief"].ids
        changed = float((predict(model, false_belief, edits["steered"]) != predict(model, false_belief)).mean())
        identity = lambda layer, x: x.clone()
        with torch.no_grad():
            plain = model(test["reality"].ids[:64])[0]
            with head_edit(model, identity):
                hooked = model(test["reality"].ids[:64])[0]
    return {
        "seed": seed, "accuracy": acc, "false_belief_answers_changed": changed, "chosen_k": k, "chosen_alpha": alpha,
        "val_grid": {"no intervention": _balanced(model, val, None),
                     **{f"K={kk}, alpha={a:g}": v for (kk, a), v in val_acc.items()}},
        "head_accuracy": head_acc.tolist(), "head_accuracy_permuted": permuted.tolist(),
        "head_accuracy_asked_agent": agent_acc.tolist(), "top_heads": ranking[:k].tolist(),
        "random_heads": sorted(random_heads.tolist()),
        "hook_identity_max_abs": float((plain - hooked).abs().max()),
    }

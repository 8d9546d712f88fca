"""GridToM on a real pretrained LM: text false-belief stories in a grid world, per-head probes, ITI-style steering.

The paper (Li et al., "From Black Boxes to Transparent Minds: Evaluating and Enhancing the Theory of Mind in
Multimodal LLMs", ICML 2025) has no public code; the pieces below follow its description and the ITI recipe it
builds on, moved from video to words:

1. **Stories.** A grid world of four coloured rooms, a protagonist A, a mover B and an object. The object starts in
   one room; B moves it to another while A is away or looking elsewhere (*false belief*: A should look in the first
   room) or while A watches (*true belief*: the second room). Two questions end each story: where will A look
   (belief), and where is the object now (reality). The answer is the room's colour, one token, read as the more
   likely of the two rooms of the story (the object's first and last room).
2. **Probing.** Each attention head's output at the answer position (the last prompt token) is read with a forward
   pre-hook on the block's ``o_proj``, whose input is the concatenation of the heads; one logistic regression per
   head (scikit-learn) separates false- from true-belief stories; accuracy on held-out stories.
3. **Steering (ITI).** The top-K heads by probe accuracy get alpha * sigma_h * theta_h added to their output at the
   answer position, theta_h the unit mass-mean direction (false-belief mean - true-belief mean) and sigma_h the std
   of the activations along it; (K, alpha) are chosen on validation stories; no weight changes.

Because every edit touches the last position only, the prompt's other tokens are run once with a key/value cache and
each condition re-runs just the last token (``score_under_edits``): the prefix costs one forward however many
conditions are scored. Shapes: ``n`` prompts, ``H`` = n_layers * n_heads heads of width ``d_head``; a head's flat
index is ``layer * n_heads + head``.
"""

from __future__ import annotations

import itertools
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression

from flows.gridtom.params import Params
from paperflows.core.seeding import numpy_rng
from tasks import pretrained as P
from tasks.train import torch_single_thread

STREAM_STORIES, STREAM_SPLIT, STREAM_CONTROL = 1, 2, 3
NAMES = ("Anna", "Ben", "Carla", "David", "Emma", "Frank", "Grace", "Henry", "Lucy", "Mark", "Nora", "Oscar")
OBJECTS = ("ball", "key", "apple", "book", "coin", "hat", "cup", "shoe", "box", "pen")
COLOURS = ("red", "blue", "green", "yellow", "white", "black", "orange", "purple", "pink", "brown")
# A is away (false belief) or watching (true belief) while B moves the object: (before the move, after it)
AWAY = (("{A} leaves the grid.", "Then {A} comes back."),
        ("{A} turns around and looks at the wall.", "Then {A} turns back."),
        ("{A} falls asleep.", "Then {A} wakes up."),
        ("{A} goes out for a walk.", "Then {A} returns."))
WATCHING = (("{A} stays and watches.", "{A} saw it all."),
            ("{A} looks at the {obj} the whole time.", "{A} saw it all."),
            ("{A} is awake and watching.", "{A} saw it all."),
            ("{A} stands next to {B} and watches.", "{A} saw it all."))
QUESTIONS = {"belief": "Question: In which room will {A} look for the {obj}?\nAnswer: {A} will look in the",
             "reality": "Question: In which room is the {obj} now?\nAnswer: The {obj} is in the"}


# ----------------------------------------------------------------------------------------------- the stories
@dataclass(frozen=True)
class Story:
    """One story frame; ``first`` and ``last`` are the object's rooms before and after B moves it."""

    a: str
    b: str
    obj: str
    rooms: tuple[str, str, str, str]
    first: str
    last: str
    template: int

    def text(self, false_belief: bool) -> str:
        before, after = (AWAY if false_belief else WATCHING)[self.template]
        fill = dict(A=self.a, B=self.b, obj=self.obj)
        rooms = ", ".join(f"the {r} room" for r in self.rooms[:3]) + f" and the {self.rooms[3]} room"
        return (f"The world is a grid of four rooms: {rooms}. {self.a} and {self.b} are in the {self.first} room. "
                f"There is a {self.obj} in the {self.first} room. {before.format(**fill)} {self.b} moves the "
                f"{self.obj} to the {self.last} room. {after.format(**fill)}")

    def prompt(self, false_belief: bool, question: str) -> str:
        return self.text(false_belief) + "\n" + QUESTIONS[question].format(A=self.a, obj=self.obj)

    def answer(self, false_belief: bool, question: str) -> str:
        """Reality is the last room; A believes the first room only if A missed the move."""
        return self.first if question == "belief" and false_belief else self.last


def draw_stories(n: int, rng: np.random.Generator) -> list[Story]:
    stories = []
    for _ in range(n):
        a, b = rng.choice(NAMES, 2, replace=False)
        rooms = tuple(str(c) for c in rng.choice(COLOURS, 4, replace=False))
        first, last = rng.choice(rooms, 2, replace=False)
        stories.append(Story(str(a), str(b), str(rng.choice(OBJECTS)), rooms, str(first), str(last),
                             int(rng.integers(len(AWAY)))))
    return stories


@dataclass(frozen=True)
class Prompts:
    """``n`` prompts with their two candidate answer tokens: column 0 the correct room, column 1 the other."""

    texts: list[str]
    candidates: torch.Tensor          # (n, 2) token ids


def colour_token(tokenizer, colour: str) -> int:
    ids = P.token_ids(tokenizer, " " + colour, bos=False)
    if len(ids) != 1:
        raise ValueError(f"' {colour}' is {len(ids)} tokens for this tokenizer; answers must be one token")
    return ids[0]


def prompts(tokenizer, stories: list[Story], false_belief: bool, question: str) -> Prompts:
    rows = []
    for s in stories:
        right = s.answer(false_belief, question)
        wrong = s.last if right == s.first else s.first
        rows.append([colour_token(tokenizer, right), colour_token(tokenizer, wrong)])
    return Prompts([s.prompt(false_belief, question) for s in stories], torch.tensor(rows))


# ---------------------------------------------------------------------------------- per-head read and edit
HeadEdit = Callable[[int, torch.Tensor], "torch.Tensor | None"]


@dataclass(frozen=True)
class Heads:
    n_layers: int
    n_heads: int
    d_head: int

    @classmethod
    def of(cls, model) -> "Heads":
        c = model.config
        return cls(c.num_hidden_layers, c.num_attention_heads, c.head_dim)

    @property
    def count(self) -> int:
        return self.n_layers * self.n_heads


@contextmanager
def head_edit(model, edit: HeadEdit | None) -> Iterator[None]:
    """Call ``edit(layer, x)`` on every block's concatenated head outputs at the last position, x (b, n_heads *
    d_head) (head h is x[:, h*d_head:(h+1)*d_head]), before ``o_proj``; a tensor it returns replaces x."""
    def hook_for(layer: int):
        def hook(module, args):
            x = args[0]
            new_last = edit(layer, x[:, -1])
            if new_last is None:
                return None
            x = x.clone()
            x[:, -1] = new_last
            return (x, *args[1:])
        return hook

    with ExitStack() as stack:
        if edit is not None:
            for layer, block in enumerate(P.decoder_layers(model)):
                handle = block.self_attn.o_proj.register_forward_pre_hook(hook_for(layer))
                stack.callback(handle.remove)
        yield


def reader(store: dict[int, torch.Tensor]) -> HeadEdit:
    """An edit that records each layer's head outputs at the last position and changes nothing."""
    def read(layer: int, x: torch.Tensor) -> None:
        store[layer] = x.detach().clone()
    return read


def steering(heads: np.ndarray, directions: np.ndarray, sigma: np.ndarray, alpha: float, layout: Heads) -> HeadEdit:
    """Add alpha * sigma_h * direction_h (unit) to each head in ``heads`` (flat indices) at the last position."""
    shift: dict[int, torch.Tensor] = {}
    for h in heads:
        layer, within = divmod(int(h), layout.n_heads)
        vector = shift.setdefault(layer, torch.zeros(layout.n_heads * layout.d_head))
        vector[within * layout.d_head:(within + 1) * layout.d_head] = torch.as_tensor(
            alpha * sigma[h] * directions[h], dtype=torch.float32)
    return lambda layer, x: x + shift[layer] if layer in shift else None


def mean_ablation(heads: np.ndarray, mean_outputs: np.ndarray, layout: Heads) -> HeadEdit:
    """Replace each head in ``heads`` (flat indices) by its mean output (H, d_head) at the last position."""
    mask: dict[int, torch.Tensor] = {}
    value: dict[int, torch.Tensor] = {}
    for h in heads:
        layer, within = divmod(int(h), layout.n_heads)
        span = slice(within * layout.d_head, (within + 1) * layout.d_head)
        width = layout.n_heads * layout.d_head
        mask.setdefault(layer, torch.zeros(width, dtype=torch.bool))[span] = True
        value.setdefault(layer, torch.zeros(width))[span] = torch.as_tensor(mean_outputs[h], dtype=torch.float32)
    return lambda layer, x: torch.where(mask[layer], value[layer], x) if layer in mask else None


@torch.no_grad()
def score_under_edits(model, tokenizer, batch: Prompts, edits: dict[str, HeadEdit | None], batch_size: int,
                      read_heads: bool = False) -> tuple[dict[str, torch.Tensor], torch.Tensor | None]:
    """log p of the two candidates at the answer position under each edit: {name: (n, 2)}; with ``read_heads``
    also the unedited head outputs there, (n, H, d_head).

    All but the last token run once per prompt (left padding: every row's last column is a real token), their
    key/value cache is kept, and each edit re-runs the last token on it, then the cache is cropped back: an edit
    at the last position cannot change the earlier positions, so this equals a full forward per edit."""
    layout = Heads.of(model)
    scores: dict[str, list[torch.Tensor]] = {name: [] for name in edits}
    read: list[torch.Tensor] = []
    with torch_single_thread():
        for start in range(0, len(batch.texts), batch_size):
            ids, mask = P.encode(tokenizer, batch.texts[start:start + batch_size])
            positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
            cache = model(input_ids=ids[:, :-1], attention_mask=mask[:, :-1], position_ids=positions[:, :-1],
                          use_cache=True, logits_to_keep=1).cache
            candidates = batch.candidates[start:start + batch_size]
            for name, edit in edits.items():
                store: dict[int, torch.Tensor] = {}
                with head_edit(model, reader(store) if read_heads and edit is None else edit):
                    logits = model(input_ids=ids[:, -1:], attention_mask=mask, position_ids=positions[:, -1:],
                                   cache=cache, use_cache=True).logits[:, -1].float()
                cache.crop(-1)
                scores[name].append(torch.log_softmax(logits, dim=-1).gather(1, candidates))
                if store:
                    read.append(torch.stack([store[layer] for layer in range(layout.n_layers)], dim=1)
                                .reshape(len(ids), layout.count, layout.d_head))
    heads = torch.cat(read) if read_heads else None
    return {name: torch.cat(s) for name, s in scores.items()}, heads


@torch.no_grad()
def full_forward_logprobs(model, tokenizer, batch: Prompts) -> torch.Tensor:
    """The same candidates' log p from one plain forward of each whole prompt (no cache): the reference of the
    cached path (n, 2)."""
    with torch_single_thread():
        ids, mask = P.encode(tokenizer, batch.texts)
        positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
        logits = model(input_ids=ids, attention_mask=mask, position_ids=positions).logits[:, -1].float()
    return torch.log_softmax(logits, dim=-1).gather(1, batch.candidates)


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


def random_unit(shape: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    """Random unit vectors (rows), uniform on the sphere."""
    v = rng.standard_normal(shape)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


# ------------------------------------------------------------------------------------------------ one seed
def _accuracy(logp: torch.Tensor) -> float:
    return float((logp[:, 0] > logp[:, 1]).float().mean())


def _margin(logp: torch.Tensor) -> float:
    """Mean log p(correct room) - log p(other room)."""
    return float((logp[:, 0] - logp[:, 1]).mean())


def seed_stories(p: Params, seed: int) -> tuple[list[Story], list[Story], list[Story]]:
    """A seed's probe, validation and test stories."""
    rng = numpy_rng(seed, STREAM_STORIES)
    return tuple(draw_stories(n, rng) for n in (p.n_probe, p.n_val, p.n_test))


def run_seed(p: Params, seed: int) -> dict:
    """One seed: fresh stories split into probe / validation / test, per-head probes, (K, alpha) chosen on
    validation, then every intervention and control scored on the test stories."""
    model, tokenizer = P.load(p.model)    # a fresh model per seed: hooks live on the module
    layout = Heads.of(model)
    probe_stories, val_stories, test_stories = seed_stories(p, seed)
    scored = lambda stories, fb, question, edits, read=False: score_under_edits(
        model, tokenizer, prompts(tokenizer, stories, fb, question), edits, p.batch_size, read)

    # probing: head outputs at the answer position of each probe story told both ways; the reality question on the
    # false-belief telling is the label-control set (which question is asked, of the very same story)
    none = {"none": None}
    (fb_logp, fb_acts), (tb_logp, tb_acts), (real_logp, real_acts) = (
        scored(probe_stories, fb, q, none, read=True) for fb, q in ((True, "belief"), (False, "belief"),
                                                                    (True, "reality")))
    acts = torch.cat([fb_acts, tb_acts]).numpy().astype(np.float64)            # (2 n_probe, H, d_head)
    false_belief = np.r_[np.ones(p.n_probe, bool), np.zeros(p.n_probe, bool)]
    split_rng = numpy_rng(seed, STREAM_SPLIT)
    fit_stories = split_rng.permutation(p.n_probe)[:p.n_probe // 2]            # both tellings of a story together
    fit_rows = np.isin(np.arange(2 * p.n_probe) % p.n_probe, fit_stories)
    fit, score = np.flatnonzero(fit_rows), np.flatnonzero(~fit_rows)
    head_acc = probe_accuracies(acts, false_belief, fit, score)
    permuted = probe_accuracies(acts, split_rng.permutation(false_belief), fit, score)
    question_acts = torch.cat([fb_acts, real_acts]).numpy().astype(np.float64)
    question_acc = probe_accuracies(question_acts, false_belief, fit, score)    # label: belief vs reality question
    theta, sigma = mass_mean_directions(acts, false_belief)
    ranking = np.argsort(-head_acc, kind="stable")

    # validation: (K, alpha) by balanced belief accuracy (false and true belief told of the same stories)
    grid = {(k, a): steering(ranking[:k], theta, sigma, a, layout) for k, a in itertools.product(p.ks, p.alphas)}
    val_edits = {"none": None, **{f"K={k}, alpha={a:g}": e for (k, a), e in grid.items()}}
    val_fb, _ = scored(val_stories, True, "belief", val_edits)
    val_tb, _ = scored(val_stories, False, "belief", val_edits)
    val = {name: {"false": _accuracy(val_fb[name]), "true": _accuracy(val_tb[name])} for name in val_edits}
    for v in val.values():
        v["balanced"] = (v["false"] + v["true"]) / 2
    k, alpha = max(grid, key=lambda s: val[f"K={s[0]}, alpha={s[1]:g}"]["balanced"])   # first best on ties

    # test: belief questions told both ways and the reality question, under every intervention
    control_rng = numpy_rng(seed, STREAM_CONTROL)
    random_heads = control_rng.choice(layout.count, size=k, replace=False)
    edits = {"none": None,
             "steered": steering(ranking[:k], theta, sigma, alpha, layout),
             "random_heads": steering(random_heads, theta, sigma, alpha, layout),
             "random_directions": steering(ranking[:k], random_unit(theta.shape, control_rng), sigma, alpha, layout),
             # the side-effect control: the steered heads knocked out, so "steering them spares reality" says
             # something only if reality depends on them
             "steered_heads_ablated": mean_ablation(ranking[:k], acts.mean(axis=0), layout)}
    test = {"false_belief": scored(test_stories, True, "belief", edits)[0],
            "true_belief": scored(test_stories, False, "belief", edits)[0],
            "reality": scored(test_stories, True, "reality", edits)[0]}
    changed = float(((test["false_belief"]["steered"][:, 0] > test["false_belief"]["steered"][:, 1])
                     != (test["false_belief"]["none"][:, 0] > test["false_belief"]["none"][:, 1])).float().mean())

    # own-code checks: the cached last-token path equals a plain forward; a write-back edit changes nothing
    check = prompts(tokenizer, test_stories[:p.batch_size], True, "reality")
    identity = lambda layer, x: x.clone()
    cached = score_under_edits(model, tokenizer, check, {"none": None, "identity": identity}, p.batch_size)[0]
    return {
        "seed": seed, "chosen_k": k, "chosen_alpha": alpha,
        "accuracy": {c: {s: _accuracy(t[c]) for s, t in test.items()} for c in edits},
        "margin": {c: {s: _margin(t[c]) for s, t in test.items()} for c in edits},
        "false_belief_answers_changed": changed, "val_grid": val,
        "probe_set_accuracy": {"false_belief": _accuracy(fb_logp["none"]), "true_belief": _accuracy(tb_logp["none"]),
                               "reality": _accuracy(real_logp["none"])},
        "head_accuracy": head_acc.tolist(), "head_accuracy_permuted": permuted.tolist(),
        "head_accuracy_question": question_acc.tolist(), "top_heads": ranking[:k].tolist(),
        "random_heads": sorted(random_heads.tolist()), "n_heads": layout.n_heads,
        "cache_path_max_abs": float((cached["none"] - full_forward_logprobs(model, tokenizer, check)).abs().max()),
        "hook_identity_max_abs": float((cached["none"] - cached["identity"]).abs().max()),
    }

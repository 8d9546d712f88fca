"""delphi_autointerp: the pipeline's pieces against planted latents, hand cases and independent formulas (smoke run,
determinism and params come from test_papers.py)."""

import numpy as np
import pytest
import torch
from conftest import params_for

from flows.delphi_autointerp import method as m

TOK = m.make_tokenizer()
CLASSES = m.token_classes(TOK)


@pytest.fixture(scope="module")
def pool():
    rows = m.corpus_rows(m.generate_sentences(400, seed=5, stream=1), TOK, context=33)
    return rows, m.make_pool(rows, TOK, window=16)


def planted(pool_, rule) -> np.ndarray:
    """Window activations (W, w): 1 + a position-dependent magnitude where ``rule(token, prev, quotes)`` holds."""
    t, prev = pool_.tokens, pool_.prev
    on = rule(t, prev, pool_.quotes)
    return np.where(on, 1.0 + (t % 3), 0.0)


def test_context_flags_on_a_hand_row():
    row = np.array([TOK.encode('( the big cat ) says " a red fox " .')])
    quotes, brackets = m.context_flags(row, TOK)
    assert quotes[0].tolist() == [False] * 7 + [True, True, True, False, False]
    assert brackets[0].tolist() == [False, True, True, True] + [False] * 8


def test_windows_align_codes_with_tokens(pool):
    rows, p_ = pool
    # codes = the token id itself: window_activations must return each window's own tokens
    codes = rows.numpy().reshape(-1, 1).astype(float)
    acts = m.window_activations(codes, len(rows), 33, 16)[0]
    assert np.array_equal(acts.astype(int), p_.tokens)
    assert p_.texts[0] == TOK.decode(p_.tokens[0].tolist())
    assert np.array_equal(p_.prev[:, 1:], p_.tokens[:, :-1])


def test_topk_encode_keeps_exactly_the_k_largest():
    torch.manual_seed(0)
    sae = m.TopKSAE(6, 20, k=3)
    x = torch.randn(50, 6)
    codes = sae.encode(x).detach()
    pre = sae.pre_activations(x).detach().numpy()
    for row, c in zip(pre, codes.numpy()):
        keep = np.argsort(-row)[:3]
        expected = np.zeros_like(row)
        expected[keep] = row[keep]
        assert np.allclose(c, expected)


def test_topk_sae_recovers_a_planted_sparse_dictionary():
    rng = np.random.default_rng(0)
    atoms = rng.standard_normal((12, 8))
    atoms /= np.linalg.norm(atoms, axis=1, keepdims=True)
    n = 6000
    codes = np.zeros((n, 12))
    for i in range(n):
        codes[i, rng.choice(12, 2, replace=False)] = rng.uniform(1, 3, 2)
    x = torch.tensor(codes @ atoms, dtype=torch.float32)
    p = params_for("delphi_autointerp", sae_latents=24, sae_k=2, sae_epochs=30, sae_batch=256, sae_lr=3e-3)
    sae = m.train_topk_sae(x, p, seed=0)
    assert m.topk_explained_variance(sae, x) > 0.9
    # every planted atom has a decoder row within 25 degrees
    cos = np.abs(atoms @ sae.decoder.detach().numpy().T).max(axis=1)
    assert (cos > np.cos(np.radians(25))).mean() >= 0.8


def test_scripted_explainer_finds_a_planted_class_latent_and_round_trips(pool):
    _, p_ = pool
    acts = planted(p_, lambda t, prev, q: CLASSES[t] == m.CLASS_NAMES.index("color"))
    idx = np.flatnonzero(acts.max(axis=1) > 0)[:10]
    pred = m.scripted_explain(acts, idx, p_, TOK, CLASSES, margin=0.05)
    assert pred == m.Predicate("class", ("color",), "any")
    assert m.parse(m.render(pred)) == pred


def test_scripted_explainer_adds_a_context_clause_when_it_matters(pool):
    _, p_ = pool
    animal, number = m.CLASS_NAMES.index("animal"), m.CLASS_NAMES.index("number")
    acts = planted(p_, lambda t, prev, q: (CLASSES[t] == animal) & (CLASSES[prev] == number))
    idx = np.flatnonzero(acts.max(axis=1) > 0)[:10]
    pred = m.scripted_explain(acts, idx, p_, TOK, CLASSES, margin=0.05)
    assert pred == m.Predicate("class", ("animal",), "after:number")
    text = m.render(pred)
    assert text == "Fires on animal words such as cat, dog, fox, horse; right after number words."
    assert m.parse(text) == pred
    tokens = m.Predicate("tokens", ("(", ")", "fox"), "quotes")
    assert m.parse(m.render(tokens)) == tokens
    with pytest.raises(ValueError):
        m.parse("Fires on everything.")


def test_detection_and_fuzzing_are_perfect_for_the_true_explanation_and_noise_flips_at_rate(pool):
    _, p_ = pool
    acts = planted(p_, lambda t, prev, q: CLASSES[t] == m.CLASS_NAMES.index("food"))
    peak = acts.max(axis=1)
    pos, neg = np.flatnonzero(peak > 0)[:30], np.flatnonzero(peak == 0)[:30]
    text = m.render(m.Predicate("class", ("food",)))
    assert m.detection_answers(text, pos, p_, TOK, CLASSES).all()
    assert not m.detection_answers(text, neg, p_, TOK, CLASSES).any()
    fp, fn = m.fuzzing_answers(text, acts, pos, neg, p_, TOK, CLASSES, np.random.default_rng(0))
    assert fp.all() and not fn.any()
    wrong = m.render(m.Predicate("class", ("size",)))
    assert m.balanced_accuracy(*m.fuzzing_answers(wrong, acts, pos, neg, p_, TOK, CLASSES,
                                                  np.random.default_rng(0))) <= 0.6
    flipped = m.noisy(np.zeros(20000, dtype=bool), 0.2, np.random.default_rng(1))
    assert abs(flipped.mean() - 0.2) < 0.01


def test_surprisal_matches_a_hand_computation(pool):
    _, p_ = pool
    unigram = np.full(len(TOK), 1.0 / len(TOK))
    pos, neg = np.array([0, 1]), np.array([2, 3])
    text = m.render(m.Predicate("tokens", ("fox",)))
    # conditioned p(fox) = 0.8/V + 0.2, others 0.8/V: the reduction is (#fox * log(1 + 0.25 V) + rest*log 0.8) / w
    gain_fox, gain_other = np.log(0.8 + 0.2 * len(TOK)), np.log(0.8)
    fox = TOK.stoi["fox"]
    red = [((p_.tokens[i] == fox).sum() * gain_fox + (p_.tokens[i] != fox).sum() * gain_other) / 16
           for i in range(4)]
    wins = sum((a > b) + 0.5 * (a == b) for a in red[:2] for b in red[2:]) / 4
    assert m.surprisal_score(text, pos, neg, p_, TOK, unigram, beta=0.2) == pytest.approx(wins)


def test_embedding_score_is_the_pairwise_win_rate():
    rng = np.random.default_rng(0)
    emb = rng.standard_normal((10, 4))
    q = rng.standard_normal(4)
    pos, neg = np.arange(4), np.arange(4, 10)
    s = emb @ q
    wins = np.mean([(a > b) + 0.5 * (a == b) for a in s[pos] for b in s[neg]])
    assert m.embedding_score(q, pos, neg, emb) == pytest.approx(wins)


def test_simulation_is_one_for_a_binary_latent_and_its_exact_predicate(pool):
    _, p_ = pool
    on = CLASSES[p_.tokens] == m.CLASS_NAMES.index("verb")
    acts = on.astype(float)
    idx = np.arange(40)
    assert m.simulation_score(m.render(m.Predicate("class", ("verb",))), acts, idx, p_, TOK, CLASSES) \
        == pytest.approx(1.0)
    narrower = m.render(m.Predicate("class", ("verb",), "quotes"))
    assert m.simulation_score(narrower, acts, idx, p_, TOK, CLASSES) < 0.9


def test_intervention_score_hand_cases():
    unigram = np.full(len(TOK), 1.0 / len(TOK))
    colors = np.array([[TOK.stoi["red"], TOK.stoi["blue"]]] * 6)
    plain = np.array([[TOK.stoi["the"], TOK.stoi["."]]] * 6)
    text = "Promotes color words such as red, blue, green, yellow."
    assert m.parse_output(text) == "color"
    assert m.intervention_score(text, plain, colors, TOK, unigram, 0.2) == 1.0
    assert m.intervention_score(text, colors, plain, TOK, unigram, 0.2) == 0.0
    assert m.intervention_score(text, plain, plain, TOK, unigram, 0.2) == 0.5
    assert m.explain_output(plain, colors, CLASSES) == text


def test_steering_along_a_direction_changes_generations_and_zero_does_not():
    p = params_for("delphi_autointerp")
    model = m.make_gpt(m.GPTConfig(len(TOK), 33, 2, 4, 64), seed=0)
    prompts = m.corpus_rows(m.generate_sentences(20, 0, 1), TOK, 33)[:6, :9]
    clean = m.steered_generations(model, prompts, p.layer, None, 4, seed=0)
    same = m.steered_generations(model, prompts, p.layer, torch.zeros(64), 4, seed=0)
    big = m.steered_generations(model, prompts, p.layer, 50 * model.token.weight[TOK.stoi["red"]].detach(), 4, 0)
    assert np.array_equal(clean, same)
    assert not np.array_equal(clean, big)


def test_derangement_has_no_fixed_point():
    for seed in range(20):
        perm = m.derangement(7, np.random.default_rng(seed))
        assert sorted(perm) == list(range(7)) and not np.any(perm == np.arange(7))


def test_random_direction_latents_match_the_density():
    x = np.random.default_rng(0).standard_normal((5000, 8))
    codes, dirs = m.random_direction_latents(x, 5, density=0.05, seed=0)
    assert np.allclose(np.linalg.norm(dirs, axis=1), 1)
    assert np.allclose((codes > 0).mean(axis=0), 0.05, atol=0.002)

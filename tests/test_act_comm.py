"""act_comm: the protocol's pieces against independent references (smoke run, determinism and params come
from test_papers.py): the world and its corpus, activation reading and grafting against a hand-written
forward pass and known cases, the derangement control, and FLOP counts against torch's own counter."""

import re

import numpy as np
import pytest
import torch
from conftest import params_for
from torch.utils.flop_counter import FlopCounterMode

from flows.act_comm import method as M
from tasks.lm import GPTConfig, make_gpt, sample


@pytest.fixture(scope="module")
def tiny():
    """A small untrained-but-random model and a small world: enough for the exact checks."""
    p = params_for("act_comm")
    world = M.make_world(p, 0)
    tok = M.tokenizer_for(world)
    model = make_gpt(M.gpt_config(p, len(tok)), 3).eval()
    return p, world, tok, model


def manual_residuals(model, ids):
    """The residual stream after every block, by running the blocks by hand (no hooks)."""
    x = model.token(ids) + model.position(torch.arange(ids.shape[1]))
    out = []
    for block in model.blocks:
        x, _ = block(x)
        out.append(x)
    return out


# ------------------------------------------------------------------------------------------ world, corpus
def test_corpus_states_only_true_facts_and_never_asks_without_context():
    p = params_for("act_comm", n_stories=300, n_qa=700)
    w = M.make_world(p, 5)
    where = {}                                       # landmark/city -> the place it is in, from the world
    for l, c in enumerate(w.city_of):
        where[w.landmarks[l]] = w.cities[c]
    for c, k in enumerate(w.country_of):
        where[w.cities[c]] = w.countries[k]
    assert sorted(np.bincount(w.country_of)) == [p.n_cities // p.n_countries] * p.n_countries
    contexts = set()
    for line in M.corpus(p, w, 5):
        assert not line.startswith("which")          # B alone never saw its question without context
        for x, y in re.findall(r"(\S+) is in (\S+) \.", line):
            assert where[x] == y
        if "which country is" in line:
            context, answer = line.split(" which country is ")[0], line.split()[-1]
            person = line.split(" which country is ")[1].split()[0]
            at = re.findall(r"(\S+) is at (\S+) \.", context)
            assert all(q == person for q, _ in at)
            places = [l for _, l in at] + re.findall(r"(\S+) is in \S+ \.", context)
            # every place named in the context leads to the answer through the world's map
            for place in places:
                while place not in w.countries:
                    place = where[place]
                assert place == answer
            contexts.add(tuple("S1" if " is at " in s else "S2" if s.split()[0] in w.landmarks else "S3"
                               for s in context.split(" . ")))
    assert len(contexts) == 7                        # every non-empty subset of (S1, S2, S3) occurs


def test_derangement_is_a_permutation_without_fixed_points():
    for n, seed in [(2, 0), (7, 1), (1000, 2)]:
        other = M.derangement(n, seed)
        assert sorted(other) == list(range(n))
        assert not np.any(other == np.arange(n))


# --------------------------------------------------------------------------------------- read and graft
def test_read_last_token_matches_a_hand_run_forward_and_stops_after_layer_k(tiny):
    p, w, tok, model = tiny
    ids, _ = M.encode_rows(tok, [M.a_prompt(w, i, i) for i in range(5)])
    reference = manual_residuals(model, ids)
    ran = []
    handle = model.blocks[-1].register_forward_hook(lambda *a: ran.append(1))
    read = M.read_last_token(model, ids, [0])
    assert not ran                                    # A's blocks after k are never run
    read_all = M.read_last_token(model, ids, list(range(p.n_layer)))
    handle.remove()
    assert ran
    torch.testing.assert_close(read[0], reference[0][:, -1], rtol=0, atol=1e-6)
    for k in range(p.n_layer):
        torch.testing.assert_close(read_all[k], reference[k][:, -1], rtol=0, atol=1e-6)


@pytest.mark.parametrize("f,expected", [("replace", lambda a, b: a), ("sum", lambda a, b: a + b),
                                        ("mean", lambda a, b: (a + b) / 2)])
def test_combine_forms(f, expected):
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    torch.testing.assert_close(M.combine(f, a, b), expected(a, b))


def test_grafting_into_the_last_layer_with_replace_gives_A_s_own_next_token_logits(tiny):
    """After the last block only the final LayerNorm and unembedding remain: B must predict what A would."""
    p, w, tok, model = tiny
    a_ids, _ = M.encode_rows(tok, [M.a_prompt(w, i, 2 * i) for i in range(6)])
    b_ids, _ = M.encode_rows(tok, [M.b_prompt(w, 10 + i) for i in range(6)])
    last = p.n_layer - 1
    h_a = M.read_last_token(model, a_ids, [last])[last]
    grafted = M.answer_logits(model, b_ids, graft=(last, "replace", h_a))
    torch.testing.assert_close(grafted, model(a_ids)[0][:, -1], rtol=0, atol=1e-5)


def test_grafting_b_s_own_activation_or_a_zero_sum_changes_nothing(tiny):
    p, w, tok, model = tiny
    b_ids, _ = M.encode_rows(tok, [M.b_prompt(w, i) for i in range(6)])
    plain = M.answer_logits(model, b_ids)
    for j in range(p.n_layer):
        own = manual_residuals(model, b_ids)[j][:, -1]
        torch.testing.assert_close(M.answer_logits(model, b_ids, graft=(j, "replace", own)), plain, rtol=0, atol=1e-5)
        torch.testing.assert_close(M.answer_logits(model, b_ids, graft=(j, "mean", own)), plain, rtol=0, atol=1e-5)
        zero = torch.zeros_like(own)
        torch.testing.assert_close(M.answer_logits(model, b_ids, graft=(j, "sum", zero)), plain, rtol=0, atol=1e-6)
        other = M.answer_logits(model, b_ids, graft=(j, "replace", zero))
        assert (other - plain).abs().max() > 1e-3      # and a real graft does change B's answer
    assert M.hook_identity_error(model, b_ids) == 0.0


def test_answer_logits_reads_each_padded_row_at_its_own_last_token(tiny):
    p, w, tok, model = tiny
    texts = [M.b_prompt(w, 1), f"{M.a_prompt(w, 2, 3)} {M.b_prompt(w, 2)}", M.a_prompt(w, 4, 5)]
    ids, last = M.encode_rows(tok, texts)
    batched = M.answer_logits(model, ids, last)
    for i, text in enumerate(texts):
        alone = model(torch.tensor([tok.encode(text, bos=True)]))[0][0, -1]
        torch.testing.assert_close(batched[i], alone, rtol=0, atol=1e-5)


# ------------------------------------------------------------------------------------------------ FLOPs
@pytest.mark.parametrize("layers,width,vocab,t", [(2, 32, 51, 7), (4, 64, 307, 12), (3, 48, 100, 1)])
def test_dense_flops_match_torch_flop_counter(layers, width, vocab, t):
    c = GPTConfig(vocab_size=vocab, context=32, n_layer=layers, n_head=4, d_model=width)
    assert M.dense_flops_error(c, t) < 1e-12
    model = make_gpt(c, 0)
    _, cache = model(torch.zeros((1, 5), dtype=torch.long))
    with FlopCounterMode(display=False) as counter:             # one cached decoding step
        model(torch.zeros((1, 1), dtype=torch.long), cache)
    assert counter.get_total_flops() == M.dense_flops(c, 1, layers)


def test_attention_flops_match_the_explicit_per_head_matmuls():
    c = GPTConfig(vocab_size=10, context=32, n_layer=2, n_head=4, d_model=32)
    for n_new, n_past in [(7, 0), (1, 9), (3, 4)]:
        q = torch.randn(1, c.n_head, n_new, c.d_model // c.n_head)
        k = torch.randn(1, c.n_head, n_past + n_new, c.d_model // c.n_head)
        with FlopCounterMode(display=False) as counter:
            torch.softmax(q @ k.transpose(-1, -2), dim=-1) @ k
        assert counter.get_total_flops() == M.attention_flops(c, n_new, n_past)


def test_nl_flops_count_what_greedy_decoding_runs(tiny):
    """A decoder must feed every decoded token but the last back through the model; tasks.lm.sample also feeds
    the last one (one wasted step), so torch counts one more single-token forward than the NL accounting."""
    p, w, tok, model = tiny
    c = model.config
    a_ids, _ = M.encode_rows(tok, [M.a_prompt(w, 0, 0)])
    for m in (1, 4, 9):
        with FlopCounterMode(display=False) as counter:
            sample(model, a_ids, m, temperature=0.0)
        t_a = a_ids.shape[1]
        expected_dense = M.dense_flops(c, t_a, c.n_layer) + (m - 1) * M.dense_flops(c, 1, c.n_layer)
        assert counter.get_total_flops() == expected_dense + M.dense_flops(c, 1, c.n_layer)
        attention = c.n_layer * (M.attention_flops(c, t_a, 0) + sum(M.attention_flops(c, 1, t_a + i) for i in range(m - 1)))
        assert M.nl_flops(c, t_a, m, 7) == expected_dense + attention + M.forward_flops(c, 7)
    # AC: A up to layer k without logits, B's whole forward, plus f
    assert M.ac_flops(c, 6, 7, 0) == M.dense_flops(c, 6, 1, 0) + M.attention_flops(c, 6, 0) + M.forward_flops(c, 7) + c.d_model


# ------------------------------------------------------------------------------------- end to end, small
def test_a_trained_model_learns_the_world_and_the_mismatched_graft_carries_nothing(tmp_path):
    """A model trained a few seconds on a 3-country world answers with full information, and AC fed another
    episode's activation cannot beat chance by much while a matched graft at the chosen layers should."""
    p = params_for("act_comm", n_people=12, n_landmarks=6, n_cities=3, n_countries=3, n_stories=600, n_qa=900,
                   fact_repeats=20, n_layer=2, d_model=32, epochs=6, n_val=150, n_test=300)
    out = M.run_seed(p, 0, str(tmp_path), smoke=True)
    assert out["full_info"] > 0.9
    assert abs(out["mismatched"] - 1 / 3) < 0.12
    assert out["nl"][16]["names_country"] > 0.5 and out["nl"][16]["accuracy"] > 0.8
    assert out["hook_identity_error"] == 0.0
    cached = M.run_seed(p, 0, str(tmp_path), smoke=True)          # reloaded from data/, same numbers
    assert cached["ac"] == out["ac"] and cached["val_grid"] == out["val_grid"]

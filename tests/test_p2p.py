"""P2P: the selection machinery against brute force, closed forms and finite differences (the smoke run,
determinism and params come from test_papers.py)."""

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import params_for

from flows.p2p import method as M


def test_pool_groups_matches_a_per_group_loop():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3, 20))
    seg = rng.integers(0, 5, size=(3, 20))
    seg[1][seg[1] == 4] = 3                                               # group 4 empty in image 1
    score, area = M.pool_groups(torch.tensor(logits, dtype=torch.float32), torch.tensor(seg), 6)
    for b in range(3):
        for g in range(6):
            members = seg[b] == g
            assert area[b, g] == members.sum()
            if members.any():
                assert score[b, g].item() == pytest.approx(logits[b][members].mean(), abs=1e-6)
            else:
                assert score[b, g].item() == -np.inf


def _brute_top_area(score, area, r):
    """Groups in decreasing score order, added while the area kept so far is below r * total."""
    keep = np.zeros_like(score)
    kept = 0.0
    for g in sorted(range(len(score)), key=lambda g: -score[g]):
        if area[g] > 0 and kept < r * area.sum():
            keep[g] = 1
            kept += area[g]
    return keep


def test_top_area_matches_greedy_brute_force_and_covers_r():
    rng = np.random.default_rng(1)
    for _ in range(30):
        G = int(rng.integers(2, 12))
        area = rng.integers(0, 9, size=(4, G)).astype(float)
        area[:, 0] += 1
        score = rng.normal(size=(4, G))
        r = rng.uniform(0.01, 1.0, size=4)
        keep, thr = M.top_area(torch.tensor(score), torch.tensor(area), torch.tensor(r))
        for b in range(4):
            ref = _brute_top_area(score[b], area[b], r[b])
            assert np.array_equal(keep[b].numpy(), ref)
            assert (ref * area[b]).sum() >= r[b] * area[b].sum() - 1e-9      # covers at least r
            on, off = score[b][ref == 1], score[b][(ref == 0) & (area[b] > 0)]
            assert np.all(on > thr[b].item()) and np.all(off < thr[b].item())  # the threshold separates them


def test_relaxed_mask_forward_is_hard_and_backward_is_the_sigmoid_gradient():
    score = torch.tensor([[2.0, -1.0, 0.5, 0.0]], requires_grad=True)
    area = torch.tensor([[1.0, 1.0, 1.0, 1.0]])
    r = torch.tensor([0.5])
    m = M.relaxed_mask(score, area, r, 0.5, None)
    assert m.detach().tolist() == [[1.0, 0.0, 1.0, 0.0]]
    weights = torch.tensor([1.0, 2.0, 3.0, 4.0])
    (m * weights).sum().backward()
    thr = (0.5 + 0.0) / 2                                                 # between last kept and first dropped
    s = torch.sigmoid((score.detach() - thr) / 0.5)
    assert torch.allclose(score.grad, weights * s * (1 - s) / 0.5, atol=1e-6)


def test_channels_last_max_pool_is_max_pool2d_bit_for_bit():
    g = torch.Generator().manual_seed(0)
    x = torch.randint(-2, 3, (4, 8, 16, 16), generator=g).float()         # ties in most windows
    a, b = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    weights = torch.randn(4, 8, 8, 8, generator=g)
    ya, yb = torch.nn.MaxPool2d(2)(a), M.MaxPool2()(b)
    (ya * weights).sum().backward()
    (yb * weights).sum().backward()
    assert yb.is_contiguous() and b.grad.is_contiguous()
    assert torch.equal(ya, yb) and torch.equal(a.grad, b.grad)            # the same (first) maximum gets the gradient


def test_logistic_noise_has_the_logistic_moments():
    g = M.logistic_noise((200_000,), torch.Generator().manual_seed(0))
    assert abs(g.mean().item()) < 0.02
    assert g.var().item() == pytest.approx(np.pi ** 2 / 3, rel=0.02)


def test_dynamic_level_and_at_levels_on_a_hand_made_sweep():
    prob = np.zeros((3, 4, 10))
    prob[:, :, 0] = [[0.5, 0.95, 0.3, 0.2], [0.92, 0.1, 0.4, 0.3], [0.99, 0.2, 0.85, 0.6]]
    prob[:, :, 1] = 1 - prob[:, :, 0]
    level = M.dynamic_level(prob, 0.9)
    # confidence = max(p0, 1 - p0): image 0 first reaches 0.9 at level 1, image 1 at level 0, images 2-3 never
    assert level.tolist() == [1, 0, 2, 2]
    sw = {"prob": prob, "kept": np.array([[0.1] * 4, [0.5] * 4, [1.0] * 4])}
    out = M.at_levels(sw, level, np.array([0, 1, 0, 1]))
    assert out["kept"] == pytest.approx((0.5 + 0.1 + 1.0 + 1.0) / 4)
    # predictions there: class 0, 0, 0, 0 (p0 = 0.92, 0.95, 0.85, 0.6)
    assert out["acc"] == pytest.approx(0.5)


def test_fixed_kept_at_accuracy_interpolates_the_crossing():
    y = np.zeros(10, dtype=int)
    prob = np.zeros((3, 10, 2))
    for level, n_right in enumerate((2, 6, 10)):                         # accuracies 0.2, 0.6, 1.0
        prob[level, :n_right, 0] = 1
        prob[level, n_right:, 1] = 1
    sw = {"prob": prob, "kept": np.array([[0.1] * 10, [0.3] * 10, [0.9] * 10])}
    assert M.fixed_kept_at_accuracy(sw, y, 0.4) == pytest.approx(0.2)    # halfway from 0.2 to 0.6
    assert M.fixed_kept_at_accuracy(sw, y, 0.8) == pytest.approx(0.6)
    assert M.fixed_kept_at_accuracy(sw, y, 0.1) == pytest.approx(0.1)
    assert M.fixed_kept_at_accuracy(sw, y, 1.5) == pytest.approx(0.9)    # never reached: the densest level


def test_top_pixels_and_precision_against_a_direct_count():
    values = np.array([[5.0, 1.0, 3.0, 4.0], [0.0, 2.0, 2.0, 1.0]])
    m = M.top_pixels(values, 0.5)
    assert m.tolist() == [[True, False, False, True], [False, True, True, False]]
    target = np.array([[True, True, False, False], [False, False, True, True]])
    assert M.precision(m, target) == pytest.approx(2 / 4)


def test_saliency_matches_finite_differences():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(M.SIDE * M.SIDE, 3), torch.nn.Tanh(),
                              torch.nn.Linear(3, 3)).double()
    x = np.random.default_rng(0).random((1, M.SIDE, M.SIDE))
    X = torch.from_numpy(x)[:, None]
    cls = net(X).argmax(1).item()
    sal = M.saliency(net, x, 0.25)
    for pix in (0, 17, 500, 1023):
        e = np.zeros(M.SIDE * M.SIDE)
        e[pix] = 1e-6
        up = net(torch.from_numpy(x + e.reshape(1, M.SIDE, M.SIDE))[:, None])[0, cls]
        down = net(torch.from_numpy(x - e.reshape(1, M.SIDE, M.SIDE))[:, None])[0, cls]
        grad = ((up - down) / 2e-6).item()
        assert sal[0, pix] == pytest.approx(abs(grad * (x.ravel()[pix] - 0.25)), rel=1e-5, abs=1e-9)


def test_composed_images_have_the_digit_where_the_mask_says_and_a_class_coded_confounder():
    p = params_for("p2p")
    digits = np.zeros((2, 8, 8))
    digits[0, 2:6, 3] = 16                                                # a bar ("1")
    digits[1, 1:7, 1:7] = 12
    labels = np.array([1, 7])
    rng = np.random.default_rng(0)
    im = M.compose(p, digits, labels, 40, rng, confound=1.0)
    # digit pixels are exactly the bright strokes 0.5 + 0.5 * value / 16 pasted on the canvas
    assert np.all(im.x[im.digit] >= 0.5 + 0.5 * p.stroke_threshold - 1e-6)
    counts = im.digit.reshape(40, -1).sum(1)
    assert set(counts) == {4 * 2 * 2, 36 * 2 * 2}
    for i in range(40):
        r, c = M.SPUR_POS[im.y[i]]
        assert im.spur[i, r:r + M.SPUR, c:c + M.SPUR].all() and im.spur[i].sum() == M.SPUR ** 2
        assert not (im.spur[i] & im.digit[i]).any()
        assert np.all(im.x[i][im.spur[i]] == np.float32(0.8))
    # superpixels: labels 0..S-1 without gaps, and the SLIC call is what we say it is
    for s in im.seg:
        assert np.array_equal(np.unique(s), np.arange(s.max() + 1))
    clean = M.compose(p, digits, labels, 5, np.random.default_rng(0), confound=None)
    assert not clean.spur.any()


def test_pixel_level_is_the_same_model_with_one_pixel_groups():
    # with 1-pixel groups, pooled scores are the per-pixel logits and top-r keeps ceil(r * 1024) pixels
    torch.manual_seed(0)
    model = M.Selective("instance", 0.2)
    x = torch.rand(2, M.SIDE, M.SIDE)
    seg = torch.from_numpy(M.pixel_groups(2))
    score, area = model.scores(x, seg, M.SIDE * M.SIDE)
    assert torch.allclose(score, model.pixel_logits(x)) and torch.all(area == 1)
    keep, _ = M.top_area(score.detach(), area, torch.tensor([0.1, 0.1]))
    assert keep.sum(1).tolist() == [103.0, 103.0]
    assert np.array_equal(keep.numpy() > 0, M.top_pixels(score.detach().numpy(), 0.1))


def test_training_lowers_the_loss_and_is_deterministic():
    p = params_for("p2p", epochs=2)
    data = M.make_data(params_for("p2p", n_train=150, n_test=50), 0)
    tr = data["clean_train"]
    a = M.train_selective(p, "instance", tr.x, tr.y, tr.seg, seed=3)
    b = M.train_selective(p, "instance", tr.x, tr.y, tr.seg, seed=3)
    for pa, pb in zip(a.parameters(), b.parameters()):
        assert torch.equal(pa, pb)
    box = M.train_blackbox(p, tr.x, tr.y, seed=3)
    with torch.no_grad():
        trained = torch.nn.functional.cross_entropy(box(torch.from_numpy(tr.x)[:, None]), torch.from_numpy(tr.y))
    assert trained.item() < np.log(10)                                   # below the uniform guess


def test_metrics_and_controls_are_computed_as_defined():
    from flows.p2p.claims import PAPER
    from flows.p2p.evaluate import metrics_from
    from paperflows.core.claims import check_claims

    rng = np.random.default_rng(0)
    n = 5
    rows = pd.DataFrame({
        "seed": range(n),
        **{f"prec_{m}": v + rng.normal(0, 0.01, n) for m, v in
           (("p2p", 0.6), ("pixel", 0.4), ("global", 0.2), ("random_sp", 0.1), ("saliency", 0.5), ("dynamic", 0.5))},
        **{f"acc_{m}": v + rng.normal(0, 0.005, n) for m, v in
           (("p2p", 0.8), ("pixel", 0.79), ("global", 0.3), ("random_sp", 0.2), ("blackbox", 0.9),
            ("dynamic", 0.85), ("permuted", 0.7))},
        "kept_dynamic": np.full(n, 0.2), "kept_fixed_matched": np.full(n, 0.3),
        "kept_permuted": np.full(n, 0.2), "kept_fixed_matched_permuted": np.full(n, 0.15),
        **{f"conf_spur_{m}": v + rng.normal(0, 0.002, n) for m, v in (("p2p", 0.01), ("global", 0.08), ("saliency", 0.05))},
        **{f"conf_prec_{m}": np.full(n, 0.5) for m in ("p2p", "global", "saliency")},
        **{f"conf_acc_{m}": np.full(n, 0.5) for m in ("p2p", "global", "blackbox")},
        "conf_spur_rate": np.full(n, 0.0156),
        "superpixel_purity": 0.95 + rng.normal(0, 0.002, n), "digit_fraction": np.full(n, 0.1),
        "superpixels_per_image": np.full(n, 40.0),
    })
    metrics = metrics_from(rows)
    assert metrics["loc"]["p2p_minus_pixel"]["mean"] == pytest.approx((rows.prec_p2p - rows.prec_pixel).mean())
    assert metrics["dyn"]["kept_ratio"]["ratio"] == pytest.approx(0.2 / 0.3)
    assert metrics["dyn"]["permuted_kept_ratio"]["ratio"] == pytest.approx(0.2 / 0.15)
    results = {r.id: r for r in check_claims(PAPER, metrics, 3)}
    assert results["grouped_localizes_better_than_pixel"].verdict == "reproduced"
    assert results["dynamic_sparsity_keeps_less"].verdict == "reproduced"
    assert results["p2p_avoids_spurious_cue"].verdict == "reproduced"
    assert results["grouped_accuracy_matches_pixel"].control.failed
    assert results["superpixels_follow_the_object"].role == "sanity"
    assert results["superpixels_follow_the_object"].verdict == "reproduced"
    # a control that passes removes the verdict's power
    rows["kept_fixed_matched_permuted"] = 0.3
    results = {r.id: r for r in check_claims(PAPER, metrics_from(rows), 3)}
    assert results["dynamic_sparsity_keeps_less"].verdict == "inconclusive"


def test_params_reject_inconsistent_config():
    from flows.p2p.params import Params

    good = params_for("p2p", smoke=False).model_dump()
    for bad in ({"r_min": 0.7, "r_max": 0.6}, {"r_eval": 0.33}, {"levels": [0.1, 0.5]}, {"levels": [0.5, 0.1, 1.0]}):
        with pytest.raises(ValueError):
            Params.model_validate({**good, **bad})

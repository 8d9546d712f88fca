"""UEFL's pieces against independent references (the smoke run, determinism and params come from test_papers.py)."""

import math

import numpy as np
import pytest
import torch
from conftest import params_for
from scipy import ndimage
from sklearn.cluster import KMeans

from flows.uefl import method as M


# ---------------------------------------------------------------------------- extensible VQ
def test_vq_maps_each_position_to_its_nearest_allowed_codeword_with_a_straight_through_gradient():
    torch.manual_seed(0)
    vq = M.ExtensibleVQ(num_codes=5, dim=3, max_books=3, commitment=0.25)
    z = torch.randn(4, 3, 2, 2, requires_grad=True)
    for book in (0, 2):
        vq.book_index.fill_(book)
        q = vq(z)
        flat = z.detach().permute(0, 2, 3, 1).reshape(-1, 3).numpy()
        allowed = vq.codebooks[0].detach().numpy() if book == 0 else np.concatenate(
            [vq.codebooks[0].detach().numpy(), vq.codebooks[book].detach().numpy()])
        brute = np.array([allowed[np.argmin([np.sum((x - c) ** 2) for c in allowed])] for x in flat])
        got = q.detach().permute(0, 2, 3, 1).reshape(-1, 3).numpy()
        np.testing.assert_allclose(got, brute, atol=1e-6)
        # loss = (1 + commitment) x mean squared distance to the chosen codeword
        assert float(vq.last_loss.detach()) == pytest.approx(1.25 * np.mean((flat - brute) ** 2), rel=1e-5)
        # straight-through: d sum(q) / dz is all ones
        z.grad = None
        q.sum().backward()
        np.testing.assert_allclose(z.grad.numpy(), 1.0)
    # codebook 1 is never visible to a silo on book 2, codebook 2 is for it (a point on a book-2 codeword)
    vq.book_index.fill_(2)
    point = vq.codebooks[2][3].detach().reshape(1, 3, 1, 1)
    np.testing.assert_allclose(vq(point).detach().reshape(3).numpy(), vq.codebooks[2][3].detach().numpy(), atol=1e-6)
    vq.book_index.fill_(0)
    assert not torch.allclose(vq(point).reshape(3), vq.codebooks[2][3])


def test_vq_loss_gradients_move_codebook_and_encoder_with_the_commitment_split():
    vq = M.ExtensibleVQ(num_codes=1, dim=2, max_books=1, commitment=0.25)
    with torch.no_grad():
        vq.codebooks.zero_()
    z = torch.tensor([[[[2.0]], [[0.0]]]], requires_grad=True)     # one position, the point (2, 0)
    vq(z)
    vq.last_loss.backward()
    # d/dc mean((c - sg z)^2) = 2 (c - z) / dim ; d/dz 0.25 mean((z - sg c)^2) = 0.5 (z - c) / dim
    np.testing.assert_allclose(vq.codebooks.grad[0, 0].numpy(), [-2.0, 0.0])
    np.testing.assert_allclose(z.grad.reshape(2).numpy(), [0.5, 0.0])


# ---------------------------------------------------------------------------- uncertainty
def test_predictive_entropy_of_the_mc_average_matches_closed_forms():
    uniform = np.full((3, 2, 10), 0.1)
    np.testing.assert_allclose(M.predictive_entropy(uniform), math.log(10))
    onehot = np.zeros((2, 1, 4))
    onehot[:, 0, 1] = 1
    assert M.predictive_entropy(onehot)[0] == pytest.approx(0.0, abs=1e-12)
    disagree = np.zeros((2, 1, 4))
    disagree[0, 0, 0] = disagree[1, 0, 3] = 1                          # two confident passes that disagree
    assert M.predictive_entropy(disagree)[0] == pytest.approx(math.log(2))


def test_ece_against_a_brute_force_binning():
    rng = np.random.default_rng(1)
    conf = rng.uniform(0.1, 1.0, 500)
    correct = (rng.uniform(size=500) < conf ** 2).astype(float)
    bins = 7
    total = 0.0
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        sel = (conf > lo) & (conf <= hi)
        if sel.any():
            total += sel.sum() / 500 * abs(correct[sel].mean() - conf[sel].mean())
    assert M.expected_calibration_error(conf, correct, bins) == pytest.approx(total, rel=1e-12)
    assert M.expected_calibration_error(np.ones(4), np.array([1.0, 0, 1, 0]), 10) == pytest.approx(0.5)
    assert M.expected_calibration_error(np.full(4, 0.75), np.array([1.0, 1, 1, 0]), 10) == pytest.approx(0.0)


def test_seeded_dropout_is_reproducible_unbiased_and_off_in_eval():
    d = M.SeededDropout(0.25)
    x = torch.ones(20000)
    d.train()
    d.generator.manual_seed(3)
    a = d(x)
    d.generator.manual_seed(3)
    assert torch.equal(a, d(x))
    assert float((a == 0).float().mean()) == pytest.approx(0.25, abs=0.02)
    assert float(a.mean()) == pytest.approx(1.0, abs=0.03)
    d.eval()
    assert torch.equal(d(x), x)


# ---------------------------------------------------------------------------- data
def test_silos_carry_the_declared_shifts_and_the_twin_shares_the_split():
    p = params_for("uefl")
    silos, twin = M.build_silos(p, 4), M.build_silos(p, 4, homogeneous=True)
    assert [s.distribution for s in silos] == M.silo_distributions(p).tolist() == [0, 0, 1, 2]
    images, labels = M.digit_images()
    for s, t in zip(silos, twin):
        assert torch.equal(s.y_train, t.y_train) and torch.equal(s.y_test, t.y_test)
        raw = (t.X_train.numpy()[:, 0] + 1.0) * 8.0
        if s.distribution == 0:
            assert torch.equal(s.X_train, t.X_train)
        if s.distribution == 2:      # inverted, then a 3x3 box blur (zero padding)
            expect = ndimage.uniform_filter(16.0 - raw, size=(1, 3, 3), mode="constant") / 8.0 - 1.0
            np.testing.assert_allclose(s.X_train.numpy()[:, 0], expect, atol=1e-5)
        if s.distribution == 1:      # rotated 90 degrees, then clipped noise: the residual is noise only
            residual = (s.X_train.numpy()[:, 0] + 1.0) * 8.0 - np.rot90(raw, 1, axes=(1, 2))
            assert 0.5 < residual.std() < 3.0
    sizes = [len(s.y_train) + len(s.y_test) for s in silos]
    assert sum(sizes) == len(labels) and max(sizes) - min(sizes) <= 1


# ---------------------------------------------------------------------------- UEFL loop
def _fake_local_train(model, X, y, **kwargs):
    """Deterministic stand-in for local training: every parameter moves by the silo's size."""
    with torch.no_grad():
        for prm in model.parameters():
            prm.add_(float(len(X)))
    return len(X)


def test_rounds_average_everything_but_the_per_silo_codebooks(monkeypatch):
    p = params_for("uefl")
    silos = M.build_silos(p, 0)
    silos[0].X_train, silos[0].y_train = silos[0].X_train[:10], silos[0].y_train[:10]   # unequal sizes
    monkeypatch.setattr(M, "local_train", _fake_local_train)
    run = M.UEFLRun(p, silos, 0, 0)
    start = {k: v.clone() for k, v in run.global_state.items()}
    local0 = [{k: v.clone() for k, v in loc.items()} for loc in run.local]
    run.fl_rounds(1)
    sizes = np.array([len(s.y_train) for s in silos], float)
    shift = float((sizes * sizes).sum() / sizes.sum())      # size-weighted mean of the per-silo moves
    for k, v in run.global_state.items():
        if M.is_codebook(k):
            continue
        torch.testing.assert_close(v, start[k] + shift, rtol=0, atol=1e-4)
    for s, size in enumerate(sizes):
        torch.testing.assert_close(run.local[s]["vq.codebooks"], local0[s]["vq.codebooks"] + size, rtol=0, atol=1e-4)
    assert run.rounds_done == 1 and run.uploads == len(silos)


def test_threshold_rule_flags_the_uncertain_silos_and_stops(monkeypatch):
    p = params_for("uefl", max_iterations=4, threshold_margin=0.1)
    silos = M.build_silos(p, 0)
    script = iter([np.array([1.0, 1.0, 2.0, 1.2]),      # mean 1.3 -> threshold 1.43: silo 2 flagged
                   np.array([1.0, 1.0, 1.5, 1.44]),     # silos 2 and 3 above 1.43
                   np.array([1.0, 1.0, 1.0, 1.0])])     # all below: stop
    monkeypatch.setattr(M.UEFLRun, "fl_rounds", lambda self, n: setattr(self, "rounds_done", self.rounds_done + n))
    monkeypatch.setattr(M.UEFLRun, "entropies", lambda self, tag: next(script))
    extended = []
    monkeypatch.setattr(M.UEFLRun, "extend", lambda self, s, book: extended.append((s, book)))
    _, log = M.run_uefl(p, silos, 0)
    assert log["threshold"] == pytest.approx(1.1 * 1.3)
    assert log["flagged"] == [[0, 0, 1, 0], [0, 0, 1, 1]]
    assert extended[-3:] == [(2, 1), (2, 2), (3, 2)]                 # book t = iteration - 1
    assert log["iterations"] == 3 and log["rounds"] == p.rounds + 2 * p.rounds_plus
    # the ablation runs exactly the given number of iterations and never extends
    script = iter([np.array([1.0, 1.0, 2.0, 1.2])] * 3)
    extended.clear()
    _, log = M.run_uefl(p, silos, 0, extend=False, iterations=3)
    assert log["flagged"] == [[0] * 4] * 2 and log["rounds"] == p.rounds + 2 * p.rounds_plus
    assert all(book == 0 for _, book in extended)                    # only the K-means start of codebook 0


def test_extension_sets_a_kmeans_codebook_and_the_book_index_of_that_silo_only():
    p = params_for("uefl")
    silos = M.build_silos(p, 1)
    run = M.UEFLRun(p, silos, 1, 0)
    before = [{k: v.clone() for k, v in loc.items()} for loc in run.local]
    run.extend(2, 1)
    with torch.no_grad():
        feats = run.silo_model(2).features(silos[2].X_train).numpy().astype(float)
    new = run.local[2]["vq.codebooks"][1].numpy()
    # every new codeword is the mean of the features nearest to it (a K-means fixed point, scikit-learn's)
    assign = np.argmin(((feats[:, None, :] - new[None]) ** 2).sum(-1), axis=1)
    for c in np.unique(assign):
        np.testing.assert_allclose(new[c], feats[assign == c].mean(0), atol=1e-4)
    km = KMeans(n_clusters=p.num_codes, random_state=0, n_init=10).fit(feats)
    inertia = ((feats - new[assign]) ** 2).sum()
    assert inertia <= 1.5 * km.inertia_
    assert int(run.local[2]["vq.book_index"]) == 1
    torch.testing.assert_close(run.local[2]["vq.codebooks"][0], before[2]["vq.codebooks"][0])
    for s in (0, 1, 3):
        assert int(run.local[s]["vq.book_index"]) == 0
        torch.testing.assert_close(run.local[s]["vq.codebooks"], before[s]["vq.codebooks"])


def test_kmeans_codebook_pads_when_there_are_fewer_points_than_codes():
    feats = np.array([[0.0, 0.0], [1.0, 1.0], [1.0, 1.0]])
    centres = M.kmeans_codebook(feats, 5, seed=0)
    assert centres.shape == (5, 2)
    assert {tuple(c) for c in centres} <= {(0.0, 0.0), (1.0, 1.0)}


def test_capacity_matched_control_extends_the_least_uncertain_silos(monkeypatch):
    p = params_for("uefl", max_iterations=4, threshold_margin=0.1)
    silos = M.build_silos(p, 0)
    script = iter([np.array([1.0, 0.5, 2.0, 1.2]), np.array([0.9, 0.4, 1.5, 1.44]), np.array([1.0] * 4)])
    monkeypatch.setattr(M.UEFLRun, "fl_rounds", lambda self, n: setattr(self, "rounds_done", self.rounds_done + n))
    monkeypatch.setattr(M.UEFLRun, "entropies", lambda self, tag: next(script))
    extended = []
    monkeypatch.setattr(M.UEFLRun, "extend", lambda self, s, book: extended.append((s, book)))
    _, log = M.run_uefl(p, silos, 0, counts=[1, 2])       # as many new books as UEFL's [[0,0,1,0],[0,0,1,1]]
    assert log["flagged"] == [[0, 1, 0, 0], [1, 1, 0, 0]]   # the lowest entropies, never the uncertain silos
    assert extended[-3:] == [(1, 1), (0, 2), (1, 2)]
    assert log["iterations"] == 3 and log["rounds"] == p.rounds + 2 * p.rounds_plus


def test_claims_against_fedavg_wait_for_a_working_base_model():
    from flows.uefl.claims import PAPER
    from paperflows.core.claims import check_claim
    claim = next(c for c in PAPER.claims if c.id == "extension_gain_over_ablation")
    gate = next(c for c in PAPER.claims if c.id == "uefl_base_near_fedavg")
    m = {"gain": {"extension_minority_acc": {"mean": 0.06, "ci_low": 0.04, "ci_high": 0.08},
                  "least_uncertain_minority_acc": {"mean": -0.02, "ci_low": -0.03, "ci_high": -0.01},
                  "mean_acc": {"ablation": {"mean": -0.26, "ci_low": -0.3, "ci_high": -0.2}}}}
    base = check_claim(gate, m, 5).verdict
    assert base == "not reproduced"
    assert check_claim(claim, m, 5, {gate.id: base}).verdict == "inconclusive"
    m["gain"]["mean_acc"]["ablation"] = {"mean": -0.01, "ci_low": -0.02, "ci_high": 0.0}
    base = check_claim(gate, m, 5).verdict
    assert base == "reproduced" and check_claim(claim, m, 5, {gate.id: base}).verdict == "reproduced"
    assert all(set(c.requires) >= {gate.id} for c in PAPER.claims if c.id.startswith("uefl_") and c.role == "claim")

"""climb_multitask: the ECG world against neurokit2's R-peak detector, the wave model at a hand-computed point, the
probes and fusion heads against hand cases (the smoke run and determinism come from test_papers.py)."""

import neurokit2 as nk
import numpy as np
import pytest
import torch
from conftest import params_for

from flows.climb_multitask import method
from tasks.segmentation import GroupLook
from tasks.train import torch_single_thread

CLEAN = method.EcgDataset("clean_250hz", 250, 1.0, 0.0, 0.0, tuple(range(len(method.CONDITIONS))))


def _clean_records(condition: int, n: int, seed: int = 0) -> np.ndarray:
    p = params_for("climb_multitask", ecg_seconds=10.0, ecg_rate=250)
    return method.simulate_ecg(np.full(n, condition), CLEAN, p, np.random.default_rng(seed))


def _rr_intervals(record: np.ndarray) -> np.ndarray:
    _, info = nk.ecg_peaks(record, sampling_rate=250)
    return np.diff(info["ECG_R_Peaks"]) / 250


@pytest.mark.parametrize("condition", [0, 1, 2])
def test_neurokit2_finds_the_heart_rate_of_each_rhythm(condition):
    low, high = method.HEART_RATE.get(condition, (60.0, 90.0))
    for record in _clean_records(condition, 3):
        rate = 60 / _rr_intervals(record).mean()
        assert low - 4 <= rate <= high + 4


def test_atrial_fibrillation_is_irregular_and_normal_rhythm_is_not():
    cv = lambda rr: rr.std() / rr.mean()
    normal = [cv(_rr_intervals(r)) for r in _clean_records(0, 3)]
    af = [cv(_rr_intervals(r)) for r in _clean_records(3, 3)]
    assert max(normal) < 0.08 < min(af)


def test_r_wave_is_one_millivolt_and_wide_qrs_keeps_its_height():
    # one beat of 1 s starting at -0.5 s: the R wave (phase 0) falls at t = 0, where the sum is the hand value below
    rr, theta, a, b = np.ones((1, 3)), method.WAVE_THETA[None, None].repeat(3, 1), method.WAVE_A[None, None].repeat(3, 1), \
        method.WAVE_B[None, None].repeat(3, 1)
    at_r = method.ecg_waveform(rr, theta, a, b, np.array([0.0]), np.array([-0.5]))[0, 0]
    hand = sum(ai * bi**2 * np.exp(-ti**2 / (2 * bi**2)) for ai, bi, ti in zip(method.WAVE_A, method.WAVE_B, method.WAVE_THETA))
    assert at_r == pytest.approx(hand / (method.WAVE_A[2] * method.WAVE_B[2] ** 2))
    assert at_r == pytest.approx(1.0, abs=0.1)
    normal, block = _clean_records(0, 4).max(axis=1), _clean_records(7, 4).max(axis=1)
    assert np.median(block) == pytest.approx(np.median(normal), rel=0.2)


def test_low_voltage_and_datasets_shape_the_records():
    p = params_for("climb_multitask")
    x, y = method.draw_ecg_set(method.ECG_SOURCES[1], 40, p, np.random.default_rng(0))
    assert x.shape == (40, int(p.ecg_seconds * p.ecg_rate)) and x.dtype == np.float32
    assert np.bincount(y).tolist() == [10, 10, 10, 10]  # balanced over the dataset's own 4 labels
    assert _clean_records(5, 3).std(axis=1).max() < 0.5 * _clean_records(0, 3).std(axis=1).min()


def test_auc_on_hand_cases():
    assert method.auc(np.array([0.1, 0.4, 0.35, 0.8]), np.array([0, 0, 1, 1])) == pytest.approx(0.75)
    perfect = np.eye(3)[[0, 1, 2, 0, 1, 2]] * 5
    assert method.auc(perfect, np.array([0, 1, 2, 0, 1, 2])) == 1.0
    assert method.auc(-perfect, np.array([0, 1, 2, 0, 1, 2])) == 0.0


def test_episodes_draw_k_support_and_disjoint_queries_per_class():
    labels = np.repeat([0, 1, 2], 20)
    for support, query in method.episodes(labels, 5, 10, 3, np.random.default_rng(0)):
        assert np.bincount(labels[support]).tolist() == [5, 5, 5]
        assert np.bincount(labels[query]).tolist() == [10, 10, 10]
        assert not set(support) & set(query)


def test_few_shot_probe_separates_separable_embeddings_and_not_noise():
    rng = np.random.default_rng(0)
    labels = np.repeat([0, 1, 2], 30)
    separable = np.eye(3)[labels] * 3 + 0.3 * rng.standard_normal((90, 3))
    support, query = method.episodes(labels, 5, 20, 1, rng)[0]
    assert method.few_shot_auc(separable[support], labels[support], separable[query], labels[query]) > 0.99
    noise = rng.standard_normal((90, 3))
    assert abs(method.few_shot_auc(noise[support], labels[support], noise[query], labels[query]) - 0.5) < 0.2


def test_fusion_heads_read_the_packed_parts_they_claim():
    torch.manual_seed(0)
    n, n_tokens, width, n_ehr = 5, 4, 8, 3
    tokens, ehr = torch.randn(n, n_tokens, width), torch.randn(n, n_ehr)
    pack = lambda t, e: torch.cat([t.flatten(1), e], dim=1)
    for kind in ("ecg_only", *method.FUSIONS):
        head = method.FusionHead(kind, n_tokens, width, n_ehr).eval()
        out, other_ehr = head(pack(tokens, ehr)), head(pack(tokens, ehr + 1))
        assert out.shape == (n,)
        assert torch.allclose(out, other_ehr) == (kind == "ecg_only")
        assert not torch.allclose(out, head(pack(tokens + 1, ehr)))  # every head reads the ECG tokens
    with pytest.raises(ValueError, match="unknown fusion"):
        method.FusionHead("sum", n_tokens, width, n_ehr)


def test_fusion_outcome_is_balanced_and_rises_with_severity():
    rng = np.random.default_rng(0)
    conditions = np.arange(7000) % 7
    y = method.fusion_outcome(conditions, rng.standard_normal((7000, 6)), rng)
    assert y.mean() == pytest.approx(0.5, abs=0.01)
    assert y[conditions == 0].mean() + 0.3 < y[conditions == 3].mean()


def test_encoders_share_one_interface():
    p = params_for("climb_multitask")
    ecg, image = method.ecg_encoder(p, 0), method.image_encoder(p, 0)
    x_ecg, x_image = torch.randn(3, int(p.ecg_seconds * p.ecg_rate)), torch.randn(3, 1, p.image_size, p.image_size)
    assert ecg.tokens(x_ecg).shape == (3, p.tokens, p.width) and image.tokens(x_image).shape == (3, p.tokens, p.width)
    assert torch.allclose(ecg(x_ecg), ecg.tokens(x_ecg).mean(dim=1))
    with pytest.raises(ValueError, match="perfect square"):
        params_for("climb_multitask", tokens=12)


def test_pretraining_fits_its_sources_and_permuted_labels_leave_nothing_to_learn():
    p = params_for("climb_multitask", pretrain_epochs=12, width=16, tokens=4, batch_size=16)
    rng = np.random.default_rng(0)
    bright, dark = (tuple(GroupLook(polarity=sign, contrast=c, blur=0.5, texture_frequency=2.0, radius=(0.15, 0.25))
                          for c in (0.0, 2.0)) for sign in (1.0, -1.0))
    tasks = [(torch.as_tensor(x), torch.as_tensor(y), 2) for x, y in
             (method.draw_images(looks, 64, p, rng) for looks in (bright, dark))]
    with torch_single_thread():
        real = method.pretrain_multitask(method.image_encoder(p, 0), tasks, p, 0)
        control = method.pretrain_multitask(method.image_encoder(p, 0), [
            (x, torch.as_tensor(method.permuted(y.numpy(), rng)), k) for x, y, k in tasks], p, 0)
    chance = 2 * np.log(2)  # two binary heads, summed
    assert real[-1] < 0.7 * chance and control[-1] > 0.9 * chance


def test_speckle_is_standardised_and_multiplicative():
    rng = np.random.default_rng(0)
    flat = method.speckle(np.zeros((50, 1, 16, 16), dtype=np.float32), rng)
    assert flat.mean() == pytest.approx(0.0, abs=1e-5) and flat.std() == pytest.approx(1.0, abs=1e-4)
    # multiplicative: the spread scales with the echo, exp(0.5 * image); a half at 2 spreads e times wider
    halves = np.zeros((50, 1, 16, 16), dtype=np.float32)
    halves[..., 8:] = 2.0
    out = method.speckle(halves, rng)
    assert out[..., 8:].std() / out[..., :8].std() == pytest.approx(np.e, rel=0.05)

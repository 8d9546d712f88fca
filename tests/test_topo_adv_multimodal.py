"""topo_adv_multimodal against independent references: closed forms (FGSM step, InfoNCE), finite differences
(the back-propagated TC features), tasks.two_sample (MMD statistic, median heuristic), explicit loops
(permutation p-values, kernel products) and synthetic sweeps with a known answer (the claim statistics).
The smoke run, determinism and params come from test_papers.py."""

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import params_for
from scipy.special import logsumexp
from sklearn.metrics.pairwise import rbf_kernel

from flows.topo_adv_multimodal import evaluate, method
from paperflows.core.seeding import numpy_rng
from tasks import topology, two_sample


@pytest.fixture(scope="module")
def trained():
    p = params_for("topo_adv_multimodal", n_train=600, epochs=15, pgd_steps=10)
    pixels, labels = method.load_pixels()
    tokens, texts = method.captions(pixels, labels, numpy_rng(0, 1))
    order = numpy_rng(0, 0).permutation(len(labels))
    model = method.train_encoder(p, pixels[order[:600]], tokens[order[:600]], seed=0)
    pool = order[600:900]
    return p, model, torch.from_numpy(pixels[pool]), torch.from_numpy(labels[pool]), torch.from_numpy(tokens[pool])


def test_captions_name_the_class_and_the_ink():
    pixels, labels = method.load_pixels()
    tokens, texts = method.captions(pixels, labels, np.random.default_rng(0))
    assert pixels.min() == 0.0 and pixels.max() == 1.0
    vocab = {i: w for w, i in method.VOCAB.items()}
    for i in range(0, len(labels), 97):
        words = texts[i].split()
        assert method.NAMES[labels[i]] in words or method.NUMERALS[labels[i]] in words
        assert sorted(words) == sorted(vocab[j] for j in np.flatnonzero(tokens[i]) for _ in range(int(tokens[i, j])))
    ink = pixels.sum(1)
    thick = tokens[:, method.VOCAB["thick"]] == 1
    for k in range(10):
        assert ink[(labels == k) & thick].min() > np.median(ink[labels == k]) >= ink[(labels == k) & ~thick].max()


def test_info_nce_equals_the_symmetric_cross_entropy_by_hand():
    p = params_for("topo_adv_multimodal")
    model = method.DualEncoder(p)
    x, t = torch.rand(6, 64), torch.rand(6, len(method.VOCAB))
    with torch.no_grad():
        logits = (model.scale() * model.encode_image(x) @ model.encode_text(t).T).double().numpy()
        got = float(method.info_nce(model, x, t))
    rows = np.mean(logsumexp(logits, axis=1) - np.diag(logits))
    cols = np.mean(logsumexp(logits, axis=0) - np.diag(logits))
    assert got == pytest.approx(0.5 * (rows + cols), rel=1e-5)


def test_the_trained_encoder_classifies_zero_shot_well_above_chance(trained):
    p, model, x, y, _ = trained
    with torch.no_grad():
        accuracy = float((method.zero_shot(model)(x).argmax(1) == y).float().mean())
    assert accuracy > 0.7  # chance is 0.1


def test_fgsm_is_one_signed_gradient_step_and_pgd_beats_noise(trained):
    p, model, x, y, _ = trained
    logits = method.zero_shot(model)
    x0 = x.clone().requires_grad_(True)
    loss = torch.nn.functional.cross_entropy(logits(x0), y, reduction="sum")
    grad, = torch.autograd.grad(loss, x0)
    expected = (x + p.eps * grad.sign()).clamp(0, 1)
    torch.testing.assert_close(method.perturb(p, "fgsm", model, x, y, seed=0), expected)
    ce = {}
    for kind in method.PERTURBATIONS:
        adv = method.perturb(p, kind, model, x, y, seed=0)
        assert (adv - x).abs().max() <= p.eps + 1e-6 and adv.min() >= 0 and adv.max() <= 1
        with torch.no_grad():
            ce[kind] = float(torch.nn.functional.cross_entropy(logits(adv), y))
    with torch.no_grad():
        clean = float(torch.nn.functional.cross_entropy(logits(x), y))
    # the attacks raise the true pair's loss far more than random noise of the same budget
    assert min(ce["pgd"], ce["fgsm"]) > ce["noise"] + 1.0 and ce["noise"] < clean + 0.5
    assert ce["pgd_targeted"] > clean + 0.5  # pulling towards a wrong class also raises the true-class loss


def test_tc_features_are_the_finite_difference_gradients_of_the_losses(trained):
    p, model, x, y, t = trained
    with torch.no_grad():
        image, text = model.encode_image(x[:30]).double(), model.encode_text(t[:30]).double()
    features = method.tc_features(p, image, text)
    np.testing.assert_allclose(features["plain"], image.numpy())
    text_diagrams = topology.rips_diagrams(text)
    losses = {"tp": lambda z: topology.total_persistence_distance(topology.rips_diagrams(z), text_diagrams, p.tp_alpha),
              "mk": lambda z: topology.multiscale_kernel_loss(topology.rips_diagrams(z), text_diagrams, p.mk_sigma),
              "spread": lambda z: method.spread_loss(z, text)}
    step = 1e-6
    for name, loss in losses.items():
        assert np.abs(features[name]).sum() > 0
        for i, j in ((0, 0), (7, 3), (29, 31)):
            e = torch.zeros_like(image)
            e[i, j] = step
            numeric = float((loss(image + e) - loss(image - e)) / (2 * step))
            assert features[name][i, j] == pytest.approx(numeric, rel=1e-4, abs=1e-6), name


def test_tc_losses_are_zero_when_the_clouds_coincide():
    p = params_for("topo_adv_multimodal")
    z = torch.tensor(np.random.default_rng(0).standard_normal((30, 4)))
    losses = method.tc_losses(p, z, topology.rips_diagrams(z))
    tc = [k for k in losses if k.startswith(("tp_", "mk_"))]
    assert len(tc) == len(p.alphas) + len(p.sigmas) and all(abs(losses[k]) < 1e-6 for k in tc)
    shifted = method.tc_losses(p, 1.5 * z, topology.rips_diagrams(z))  # a dilation scales every bar by 1.5
    assert all(shifted[k] > 1e-3 for k in tc)
    assert shifted["pers0_image"] == pytest.approx(1.5 ** p.tp_alpha * losses["pers0_text"], rel=1e-9)
    assert shifted["tp_1"] == pytest.approx(0.5 * (losses["pers0_text"] + losses["pers1_text"]), rel=1e-9)


def test_gaussian_gram_is_a_product_of_median_heuristic_rbf_kernels():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((21, 3)), 5 * rng.standard_normal((21, 2))
    gram = method.gaussian_gram([a, b])
    expected = np.ones((21, 21))
    for z in (a, b):
        h = two_sample.median_bandwidth(z, z[:0])
        expected *= rbf_kernel(z, gamma=1.0 / (2 * h * h))
    np.testing.assert_allclose(gram, expected, rtol=1e-10, atol=1e-12)


def test_permutation_p_value_matches_explicit_block_means_and_mmd_rbf():
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((15, 2)), rng.standard_normal((12, 2)) + 0.7
    pooled = np.concatenate([x, y])
    gram = method.gaussian_gram([pooled])
    h = two_sample.median_bandwidth(x, y)

    def mmd(mask):
        return gram[np.ix_(mask, mask)].mean() + gram[np.ix_(~mask, ~mask)].mean() - 2 * gram[np.ix_(mask, ~mask)].mean()

    labels = np.arange(27) < 15
    assert mmd(labels) == pytest.approx(two_sample.mmd_rbf(x, y, bandwidth=h), rel=1e-10)
    perm_rng = np.random.default_rng(5)
    perms = [perm_rng.permutation(labels) for _ in range(99)]
    expected = (1 + sum(mmd(m) >= mmd(labels) for m in perms)) / 100
    assert method.mmd_permutation_p_value(gram, 15, 99, seed=5) == pytest.approx(expected)
    assert expected < 0.05  # a real shift: the test is not vacuous


def test_permutation_test_holds_its_level_under_the_null():
    rng = np.random.default_rng(3)
    rejections = [method.mmd_permutation_p_value(method.gaussian_gram([rng.standard_normal((40, 3))]), 20, 99, seed=s) <= 0.05
                  for s in range(200)]
    assert np.mean(rejections) < 0.1


def test_pooled_features_come_from_a_label_blind_partition():
    p = params_for("topo_adv_multimodal", batch=20)
    rng = np.random.default_rng(6)
    image, text = torch.tensor(rng.standard_normal((40, 5))), torch.tensor(rng.standard_normal((40, 5)))
    got = method.pooled_features(p, image, text, seed=11)
    order = np.random.default_rng(11).permutation(40)
    for rows in (order[:20], order[20:]):
        block = method.tc_features(p, image[torch.from_numpy(rows)], text[torch.from_numpy(rows)])
        for name in method.DETECTORS:
            np.testing.assert_allclose(got[name][rows], block[name])


def test_tc_feature_tests_hold_their_level_under_the_null():
    # both samples from one law: the pooled, label-blind features keep the permutation test at its level
    # (features computed per sample batch gave no false positives at all: a conservative, powerless test)
    p = params_for("topo_adv_multimodal", batch=20, n_permutations=99)
    rejections = {name: 0 for name in method.DETECTORS}
    for rep in range(100):
        rng = np.random.default_rng(100 + rep)
        image, text = torch.tensor(rng.standard_normal((40, 4))), torch.tensor(rng.standard_normal((40, 4)))
        p_values = method.detection_p_values(p, method.pooled_features(p, image, text, seed=rep), 20, seed=rep)
        for name, value in p_values.items():
            rejections[name] += value <= 0.05
    assert all(1 <= r <= 12 for r in rejections.values()), rejections


def test_monotonicity_statistics_on_a_synthetic_sweep():
    rhos = np.linspace(0, 1, 6)
    rng = np.random.default_rng(4)
    rows = []
    for seed in range(5):
        for rho in rhos:
            values = {"fgsm": rho, "pgd": -rho + 0.01 * seed, "pgd_targeted": rng.standard_normal(), "noise": rng.standard_normal()}
            rows += [{"seed": seed, "kind": k, "rho": rho, "batch": 0, "tp_1": v} for k, v in values.items()]
    out, table = evaluate._monotonicity(pd.DataFrame(rows), ["tp_1"])
    assert out["tp_1"]["fgsm"]["median"] == 1.0 and out["tp_1"]["fgsm"]["sign"] == 1.0
    assert out["tp_1"]["pgd"]["median"] == 1.0 and out["tp_1"]["pgd"]["sign"] == -1.0  # sign-aligned
    assert out["tp_1"]["second_best"]["value"] == 1.0  # two of the three attacks are monotone
    assert out["tp_1"]["noise"]["median"] < 0.8
    assert len(table) == 5 * 4




def test_detection_rates_and_paired_gains():
    rows = []
    for seed in range(3):
        for rep in range(10):
            for null in (False, True):
                for test, p_value in (("plain", 0.5), ("tp", 0.01 if (not null and rep < 6) else 0.5),
                                      ("mk", 0.5), ("spread", 0.5)):
                    rows.append({"seed": seed, "rep": rep, "null": null, "test": test, "p_value": p_value})
    det = evaluate._detection(pd.DataFrame(rows), level=0.05)
    assert det["power"]["tp"]["mean"] == pytest.approx(0.6) and det["power"]["plain"]["mean"] == 0.0
    assert det["fpr"]["tp"]["mean"] == 0.0
    assert det["gain"]["tp"]["mean"] == pytest.approx(0.6) and det["gain"]["spread"]["mean"] == 0.0

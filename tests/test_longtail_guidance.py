"""Longtail Guidance: the guidance gradient against finite differences of the signal through decoder and Tweedie
estimate, the epistemic head's invariance (bit-identical logits, untouched parameters), the mutual-information score
against hand-computed cases, the long-tailed split and allocation, and determinism by seed."""

import copy
import math

import numpy as np
import pytest
import torch
from conftest import params_for

from flows.longtail_guidance import method
from paperflows.core.seeding import torch_generator, torch_seeded
from tasks import diffusion

TINY = {"head_count": 20, "decay": 0.6, "min_count": 2, "n_tail": 5, "val_per_class": 3, "test_per_class": 5,
        "latent_dim": 4, "ae_hidden": 16, "ae_epochs": 3, "diffusion_steps": 25, "diff_width": 16, "diff_depth": 2,
        "diff_train_steps": 20, "label_dropout": 0.1, "cfg_scale": 1.0, "pred_hidden": [16, 8], "pred_epochs": 3,
        "lr": 1e-3, "weight_decay": 1e-4, "batch_size": 32, "n_heads": 3, "head_steps": 5, "head_lr": 1e-2,
        "n_generate": 20, "guidance_weights": [1.0], "signal_floor": 1e-3, "finetune_steps": 5, "finetune_lr": 5e-4}


def _trained_predictor(seed=0, n=60):
    g = torch_generator(seed)
    X = torch.rand((n, 64), generator=g) * 2 - 1
    y = torch.randint(10, (n,), generator=g)
    predictor = method.train_predictor(X, y, [16, 8], epochs=3, batch_size=16, lr=1e-2, weight_decay=0.0, seed=seed)
    return predictor, X, y


def test_mutual_information_closed_forms():
    # identical heads: zero epistemic uncertainty, whatever the prediction
    logits = torch.randn(4, 1, 10, generator=torch_generator(0)).repeat(1, 5, 1)
    assert torch.allclose(method.mutual_information(logits), torch.zeros(4), atol=1e-6)
    # two heads, p1 = (0.9, 0.1), p2 = (0.1, 0.9): MI = log 2 - H(0.9, 0.1)
    two = torch.log(torch.tensor([[[0.9, 0.1], [0.1, 0.9]]], dtype=torch.float64))
    h = -(0.9 * math.log(0.9) + 0.1 * math.log(0.1))
    assert method.mutual_information(two).item() == pytest.approx(math.log(2) - h, abs=1e-12)
    # K one-hot heads on K different classes: MI = log K (its maximum)
    k = 4
    one_hot = torch.full((1, k, k), -1e4, dtype=torch.float64)
    one_hot[0, range(k), range(k)] = 0.0
    assert method.mutual_information(one_hot).item() == pytest.approx(math.log(k), abs=1e-9)


def test_epistemic_head_leaves_predictor_bit_identical_and_flags_disagreement():
    predictor, X, y = _trained_predictor()
    params = copy.deepcopy(predictor.state_dict())
    with torch.no_grad():
        before = predictor(X)
    head = method.train_epistemic_head(predictor, X, y, n_heads=4, steps=20, lr=1e-2, weight_decay=0.0, seed=3)
    model = method.PredictorWithEpistemicHead(predictor, head)
    with torch.no_grad():
        logits, epistemic = model(X)
    assert torch.equal(logits, before)
    assert all(torch.equal(params[k], v) for k, v in predictor.state_dict().items())
    assert epistemic.shape == (len(X),) and torch.all(epistemic >= -1e-7)
    assert torch.all(epistemic <= math.log(4) + 1e-6)
    # a head made of identical copies gives zero epistemic uncertainty on every input
    with torch.no_grad():
        head.weight.copy_(head.weight[:1].expand_as(head.weight))
        head.bias.copy_(head.bias[:1].expand_as(head.bias))
        assert torch.allclose(model(X)[1], torch.zeros(len(X)), atol=1e-6)


def test_bootstrap_heads_differ():
    predictor, X, y = _trained_predictor()
    head = method.train_epistemic_head(predictor, X, y, n_heads=3, steps=5, lr=1e-2, weight_decay=0.0, seed=0)
    assert not torch.allclose(head.weight[0], head.weight[1])


def test_guidance_gradient_matches_finite_differences_through_decoder_and_tweedie():
    """w ∇_{z_t} log(f(D(ẑ0(z_t))) + floor) from ltg_guidance equals central differences of that scalar."""
    torch.set_default_dtype(torch.float64)
    try:
        with torch_seeded(0):
            net = diffusion.TimeConditionedMLP(4, width=16, depth=2, n_classes=10, embedding_dim=8)
            ae = method.Autoencoder(64, 4, 16)
            predictor = method.Predictor(64, [16, 8])
            head = method.EpistemicHead(8, 3)
        for module in (net, ae, predictor, head):
            module.requires_grad_(False)
        model = method.PredictorWithEpistemicHead(predictor, head)
        schedule = diffusion.ddpm_schedule(30)
        labels = torch.tensor([7, 2])
        eps_fn = diffusion.eps_from_net(net, labels, guidance_scale=1.0)
        shift, scale = torch.randn(4, generator=torch_generator(1)), torch.rand(4, generator=torch_generator(2)) + 0.5

        def decode(z):
            return ae.decoder(z * scale + shift)

        for signal in (method.epistemic_signal(model), method.entropy_signal(predictor)):
            weight, floor, t = 0.7, 1e-3, 12
            guidance = method.ltg_guidance(eps_fn, schedule, signal, decode, weight, floor)
            z_t = torch.randn(2, 4, generator=torch_generator(3))
            grad = guidance(z_t, t)

            def objective(z, t=t, weight=weight, floor=floor, signal=signal):  # written out without the toolkit
                ab = schedule.alpha_bar(t)
                z0 = (z - math.sqrt(1 - ab) * eps_fn(z, t)) / math.sqrt(ab)
                return weight * torch.log(signal(ae.decoder(z0 * scale + shift)) + floor).sum()

            fd = torch.zeros_like(z_t)
            h = 1e-6
            for i in range(z_t.shape[0]):
                for j in range(z_t.shape[1]):
                    e = torch.zeros_like(z_t)
                    e[i, j] = h
                    with torch.no_grad():
                        fd[i, j] = (objective(z_t + e) - objective(z_t - e)) / (2 * h)
            assert grad.abs().max() > 1e-4  # non-trivial
            torch.testing.assert_close(grad, fd, rtol=1e-5, atol=1e-7)
    finally:
        torch.set_default_dtype(torch.float32)


def test_long_tailed_split_counts_and_balance():
    counts = method.longtail_counts(120, 0.6, 2)
    assert counts == [120, 72, 43, 26, 16, 9, 6, 3, 2, 2]
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(10), 175)
    X = np.zeros((len(y), 64))
    split = method.long_tailed_split(X, y, counts, 10, 40, rng)
    ranks = split["rank"]
    assert np.bincount(ranks[split["train"]], minlength=10).tolist() == counts
    assert np.bincount(y[split["test"]], minlength=10).tolist() == [40] * 10
    assert np.bincount(y[split["val"]], minlength=10).tolist() == [10] * 10
    sets = [set(split[k].tolist()) for k in ("train", "val", "test")]
    assert not (sets[0] & sets[1]) and not (sets[0] & sets[2]) and not (sets[1] & sets[2])
    assert not (set(split["pool"].tolist()) & sets[2])
    assert sorted(split["order"].tolist()) == list(range(10))


def test_tail_weighted_allocation():
    counts = [120, 72, 43, 26, 16, 9, 6, 3, 2, 2]
    alloc = method.tail_weighted_allocation(counts, 500)
    assert alloc.sum() == 500 and alloc[0] == 0
    assert np.all(np.diff(alloc) >= 0)  # rarer classes get at least as many images
    deficit = 120 - np.array(counts)
    assert np.all(np.abs(alloc - 500 * deficit / deficit.sum()) < 1.0)


def test_unguided_generation_matches_weight_zero_and_guidance_changes_samples():
    with torch_seeded(0):
        net = diffusion.TimeConditionedMLP(4, width=16, depth=2, n_classes=10, embedding_dim=8)
        ae = method.Autoencoder(64, 4, 16)
        predictor = method.Predictor(64, [16, 8])
    for m in (net, ae, predictor):
        m.requires_grad_(False)
    schedule = diffusion.ddpm_schedule(25)
    labels = torch.tensor([0, 5, 9])
    z_T = torch.randn(3, 4, generator=torch_generator(0))
    signal = method.entropy_signal(predictor)
    a = method.generate(net, schedule, ae.decoder, labels, z_T, cfg_scale=1.0, seed=1)
    b = method.generate(net, schedule, ae.decoder, labels, z_T, cfg_scale=1.0, seed=1, signal=signal, weight=0.0)
    c = method.generate(net, schedule, ae.decoder, labels, z_T, cfg_scale=1.0, seed=1, signal=signal, weight=2.0)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.allclose(a[0], c[0])
    assert a[1].shape == (3, 64) and a[1].abs().max() <= 1.0


def _digits():
    from tasks.data import digits_pixels
    return digits_pixels()


def test_run_seed_is_deterministic_and_reports_invariance():
    p = params_for("longtail_guidance", **TINY)
    first = method.run_seed(p, 3)
    second = method.run_seed(p, 3)
    first.pop("timings"), second.pop("timings")
    assert first == second
    assert first["invariance"]["bit_identical"] and first["invariance"]["max_abs_logit_diff"] == 0.0
    assert sum(first["allocation"]) == TINY["n_generate"]
    assert {"none", "no_extra", "unguided", "ltg_epistemic", "ltg_entropy"} <= set(first["accuracy"])
    # the gain claims' control: fresh unguided draws (not copies of the unguided one), the best on validation kept
    reps = [f"unguided_rep{i}" for i in range(len(p.guidance_weights))]
    gen = {row["variant"]: row for row in first["generation"]}
    assert all(gen[k]["signal"] == "unguided" and gen[k]["weight"] == 0.0 for k in reps)
    assert gen[reps[0]]["epistemic_mean"] != gen["unguided"]["epistemic_mean"]
    best = max(reps, key=lambda k: (first["val_accuracy"][k]["tail"], -reps.index(k)))
    assert first["accuracy"]["unguided_selected"] == first["accuracy"][best]
    # the detection claim's control: the predictive entropy's AUROC, a valid AUROC and not the epistemic head's one
    assert 0.0 <= first["detection"]["auroc_entropy"] <= 1.0
    assert first["detection"]["auroc_entropy"] != first["detection"]["auroc_epistemic"]
    assert "auroc_epistemic_untrained" not in first["detection"]
    # a different seed draws a different split
    assert method.long_tailed_split(*_digits(), first["counts"], 3, 5, np.random.default_rng([4, 0]))["order"].tolist() \
        != first["digit_order"]


def test_params_reject_inconsistent_config():
    from flows.longtail_guidance.params import SMOKE, Params

    good = params_for("longtail_guidance").model_dump()
    Params.model_validate({**params_for("longtail_guidance", smoke=False).model_dump(), **SMOKE})
    for bad in ({"guidance_weights": [1.0, 1.0]}, {"guidance_weights": [0.0]}, {"diffusion_steps": 20}):
        with pytest.raises(ValueError):
            Params.model_validate({**good, **bad})

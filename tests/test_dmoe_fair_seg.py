"""dmoe_fair_seg: the dMoE layer against independent references (smoke run, determinism and params come
from test_papers.py)."""

import numpy as np
import pytest
import torch
from conftest import params_for

from flows.dmoe_fair_seg import method as M
from tasks.train import torch_single_thread

C, E, K, G = 6, 5, 2, 3


@pytest.fixture(autouse=True)
def one_thread():
    with torch_single_thread():   # tiny tensors: torch's own threads only spin on a shared machine
        yield


def layer(n_routers: int, seed: int = 0, dropout: float = 0.0, dtype=torch.float32) -> M.SparseMoE:
    torch.manual_seed(seed)
    moe = M.SparseMoE(C, E, K, n_routers, 2, dropout, torch.Generator().manual_seed(seed)).to(dtype)
    return moe.eval()


def reference_mixture(moe: M.SparseMoE, tokens: torch.Tensor, route: torch.Tensor) -> torch.Tensor:
    """Sample by sample, token by token: router route[i]'s logits, top k, softmax over them, and the
    dense sum of the chosen experts (every expert evaluated on every token)."""
    r = moe.router
    out = torch.zeros_like(tokens)
    for i in range(tokens.shape[0]):
        g = int(route[i]) if moe.n_routers > 1 else 0
        for t in range(tokens.shape[1]):
            x = tokens[i, t]
            logits = r.weight[g] @ x + r.bias[g]
            order = sorted(range(E), key=lambda e: -float(logits[e]))[:K]
            w = torch.exp(logits[order] - logits[order].max())
            w = w / w.sum()
            for weight, e in zip(w, order):
                out[i, t] += weight * moe.experts[e](x)
    return out


@pytest.mark.parametrize("n_routers", [1, G])
def test_sparse_dispatch_equals_a_dense_token_by_token_reference(n_routers):
    moe = layer(n_routers, seed=1)
    tokens = torch.randn(4, 7, C, generator=torch.Generator().manual_seed(2))
    route = torch.tensor([0, 2, 1, 2])
    with torch.no_grad():
        got = moe.mixture(tokens, route)
        want = reference_mixture(moe, tokens, route)
    assert torch.allclose(got, want, atol=1e-5)
    # and the feature-map form is the residual h + MoE(h) over the H*W tokens
    h = tokens[:, :6].transpose(1, 2).reshape(4, C, 2, 3)
    with torch.no_grad():
        assert torch.allclose(moe(h, route), h + reference_mixture(moe, tokens[:, :6], route).transpose(1, 2).reshape(4, C, 2, 3),
                              atol=1e-5)


def test_gates_are_top_k_and_sum_to_one():
    moe = layer(G, seed=3)
    x = torch.randn(3, 10, C)
    route = torch.tensor([0, 1, 2])
    weights, top = moe.router(x, route)
    assert weights.shape == top.shape == (3, 10, K)
    assert (weights > 0).all() and (weights[..., :-1] >= weights[..., 1:]).all()   # largest logit first
    assert torch.allclose(weights.sum(-1), torch.ones(3, 10))
    logits = torch.einsum("ntc,nec->nte", x, moe.router.weight[route]) + moe.router.bias[route][:, None]
    assert torch.equal(top, logits.topk(K, -1).indices)


def test_dmoe_routes_by_attribute_and_moe_ignores_it():
    x = torch.randn(2, 9, C, generator=torch.Generator().manual_seed(4))
    dmoe, moe = layer(G, seed=5), layer(1, seed=5)
    with torch.no_grad():
        a, b = dmoe.mixture(x, torch.tensor([0, 1])), dmoe.mixture(x, torch.tensor([0, 2]))
        assert torch.equal(a[0], b[0])                       # sample 0 keeps its router
        assert not torch.allclose(a[1], b[1])                # sample 1's router changed
        assert torch.equal(moe.mixture(x, torch.tensor([0, 1])), moe.mixture(x, torch.tensor([2, 0])))
        # with every router a copy of router 0, dMoE is exactly the one-router MoE with the same experts
        for name in ("weight", "bias", "noise_weight", "noise_bias"):
            getattr(dmoe.router, name)[:] = getattr(dmoe.router, name)[:1]
        same = layer(1, seed=0)
        same.load_state_dict({k: (v[:1] if k.startswith("router.") else v) for k, v in dmoe.state_dict().items()})
        assert torch.allclose(dmoe.mixture(x, torch.tensor([1, 2])), same.mixture(x, torch.tensor([0, 0])))


def test_gradients_match_finite_differences():
    moe = layer(G, seed=6, dtype=torch.float64)
    x = torch.randn(2, 5, C, dtype=torch.float64, requires_grad=True)
    route = torch.tensor([2, 1])
    # top-k selection is piecewise constant: away from ties the layer is smooth in x and every weight
    assert torch.autograd.gradcheck(lambda t: moe.mixture(t, route), (x,), eps=1e-6, atol=1e-5)
    w = moe.router.weight
    loss = lambda: (moe.mixture(x.detach(), route) ** 2).sum()
    loss().backward()
    analytic = w.grad[1, 0, 0].item()
    with torch.no_grad():
        w[1, 0, 0] += 1e-6
        up = loss().item()
        w[1, 0, 0] -= 2e-6
        down = loss().item()
        w[1, 0, 0] += 1e-6
    assert analytic == pytest.approx((up - down) / 2e-6, rel=1e-4, abs=1e-8)
    assert w.grad[0].abs().sum() == 0                        # router 0 serves no sample: no gradient


def test_training_noise_and_dropout_use_the_layer_generator_only():
    x = torch.randn(3, 8, C)
    route = torch.tensor([0, 1, 2])
    outs = []
    for _ in range(2):
        moe = layer(G, seed=7, dropout=0.3).train()
        state = torch.random.get_rng_state()
        outs.append(moe.mixture(x, route))
        assert torch.equal(state, torch.random.get_rng_state())   # the global RNG is never drawn from
    assert torch.equal(outs[0], outs[1])                      # same generator seed, same noise
    eval_out = layer(G, seed=7).mixture(x, route)
    assert not torch.allclose(outs[0], eval_out)              # training adds noise (and dropout)
    # the noise scale is softplus(noise logits): pushed to ~0, training gates equal evaluation gates
    moe = layer(G, seed=7).train()
    with torch.no_grad():
        moe.router.noise_bias.fill_(-60.0)
    assert torch.allclose(moe.router(x, route)[0], moe.eval().router(x, route)[0])


def test_expert_dropout_keeps_the_expected_mass():
    moe = layer(1, seed=8, dropout=0.25).train()
    y = torch.ones(200, 500)
    dropped = moe._dropout(y)
    assert (dropped == 0).float().mean().item() == pytest.approx(0.25, abs=0.01)
    assert dropped.mean().item() == pytest.approx(1.0, abs=0.02)
    assert torch.equal(moe.eval()._dropout(y), y)


def test_film_starts_as_identity_and_modulates_per_group():
    film = M.FiLM(4, G)
    h = torch.randn(3, 4, 2, 2)
    groups = torch.tensor([2, 0, 2])
    assert torch.equal(film(h, groups), h)
    with torch.no_grad():
        film.gamma[2] = torch.tensor([1.0, 0.0, -1.0, 0.5])
        film.beta[2] = 0.25
    out = film(h, groups)
    assert torch.equal(out[1], h[1])
    assert torch.allclose(out[0], h[0] * torch.tensor([2.0, 1.0, 0.0, 1.5])[:, None, None] + 0.25)


def test_balanced_weights_give_every_group_equal_mass():
    groups = np.array([0] * 80 + [1] * 15 + [2] * 5)
    w = M.balanced_weights(groups, 3)
    assert w.sum() == pytest.approx(1.0)
    for g in range(3):
        assert w[groups == g].sum() == pytest.approx(1 / 3)


def test_adapters_one_router_for_moe_one_per_group_for_dmoe():
    p = params_for("dmoe_fair_seg")
    assert M.adapter_factory(p, "unet", 0) is None
    assert M.adapter_factory(p, "moe", 0)(8).n_routers == 1
    assert M.adapter_factory(p, "dmoe", 0)(8).router.weight.shape == (p.n_groups, p.n_experts, 8)
    assert isinstance(M.adapter_factory(p, "film", 0)(8), M.FiLM)


def test_only_the_attribute_aware_models_solve_a_task_that_only_the_attribute_decides():
    """Pure-noise images whose mask is a vertical stripe placed by the group alone: no attribute-blind model
    can do better than hedge over the three stripes, while per-group routers (dMoE) can place the stripe."""
    from tasks.segmentation import TinyUNet, dice, predict_masks, train_segmentation

    p = params_for("dmoe_fair_seg", widths=[8, 16], n_experts=4)
    rng = np.random.default_rng(0)
    groups = rng.integers(0, 3, 192)
    images = rng.standard_normal((192, 1, 16, 16)).astype(np.float32)
    masks = np.zeros((192, 16, 16), bool)
    for g in range(3):
        masks[groups == g, :, 5 * g:5 * g + 6] = True
    scores = {}
    for kind in ("unet", "moe", "dmoe"):
        torch.manual_seed(0)
        model = TinyUNet(widths=[8, 16], adapter=M.adapter_factory(p, kind, 0))
        train_segmentation(model, images, masks, groups, epochs=20, batch_size=32, lr=0.003, seed=0)
        scores[kind] = dice(predict_masks(model, images, groups), masks).mean()
    assert scores["unet"] < 0.7 and scores["moe"] < 0.7      # blind: at best a hedge over the stripes
    assert scores["dmoe"] > 0.8, scores

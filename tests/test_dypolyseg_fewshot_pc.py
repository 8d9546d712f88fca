"""dypolyseg_fewshot_pc: the method's parts against independent references (smoke run, determinism and
params come from test_papers.py)."""

import numpy as np
import torch
from conftest import params_for
from sklearn.metrics import jaccard_score

from flows.dypolyseg_fewshot_pc import method


def test_knn_matches_brute_force():
    xyz = torch.randn(2, 30, 3, generator=torch.Generator().manual_seed(0))
    idx = method.knn(xyz, 5).numpy()
    x = xyz.numpy()
    for b in range(2):
        d = np.linalg.norm(x[b][:, None] - x[b][None], axis=-1)
        assert np.array_equal(np.sort(idx[b], axis=1), np.sort(np.argsort(d, axis=1)[:, :5], axis=1))
    assert (idx[..., 0] == np.arange(30)).all()                        # the nearest point is itself


def test_relative_positions_lie_in_the_unit_ball():
    xyz = torch.randn(1, 40, 3, generator=torch.Generator().manual_seed(1))
    idx = method.knn(xyz, 8)
    rel = method.relative_positions(xyz, idx)
    norms = rel.norm(dim=-1)
    assert torch.allclose(norms.amax(dim=-1), torch.ones(1, 40), atol=1e-4)
    assert torch.allclose(rel[0, 3, 1] * (xyz[0, idx[0, 3]] - xyz[0, 3]).norm(dim=-1).max(),
                          xyz[0, idx[0, 3, 1]] - xyz[0, 3], atol=1e-4)


def test_dynamic_monomials_are_signed_powers():
    rel = torch.tensor([[[[0.5, -0.5, 0.2]]]])                         # (1, 1, 1, 3)
    a = torch.tensor([[[1.0, 3.0]]])                                   # (1, 1, 2)
    out = method.dynamic_monomials(rel, a).view(3, 2)
    assert torch.allclose(out[:, 0], rel.view(3))                      # a = 1: identity
    assert torch.allclose(out[:, 1], rel.view(3) ** 3)                 # a = 3: the odd cube


def test_dyhoconv_exponents_start_at_one_to_k_and_are_dynamic():
    layer = method.DyHoConv(4, 8, orders=3)
    f = torch.randn(2, 5, 4)
    assert torch.allclose(layer.exponents(f), torch.tensor([1.0, 2.0, 3.0]).expand(2, 5, 3), atol=1e-5)
    torch.nn.init.normal_(layer.dynamic.weight)
    a = layer.exponents(f)
    assert (a > 0.5).all() and a[0, 0].sub(a[0, 1]).abs().max() > 1e-3  # per-point exponents differ
    # gradients reach the exponents and stay finite at the centre point (offset 0)
    xyz = torch.randn(1, 10, 3)
    idx = method.knn(xyz, 4)
    layer(method.relative_positions(xyz, idx), torch.randn(1, 10, 4), idx).sum().backward()
    assert torch.isfinite(layer.theta.grad).all() and layer.theta.grad.abs().sum() > 0


def test_selective_scan_matches_the_sequential_recurrence():
    g = torch.Generator().manual_seed(2)
    bt, H, L, P, N = 2, 3, 17, 4, 5
    u, B, C = torch.randn(bt, H, L, P, generator=g), torch.randn(bt, H, L, N, generator=g), torch.randn(bt, H, L, N, generator=g)
    log_decay = -torch.rand(bt, H, L, generator=g) * 2
    y = method.selective_scan(u, log_decay, B, C)
    h = torch.zeros(bt, H, N, P)
    for t in range(L):                                                 # h_t = a_t h_{t-1} + B_t u_t^T; y_t = C_t h_t
        h = torch.exp(log_decay[..., t])[..., None, None] * h + B[..., t, :, None] * u[..., t, None, :]
        assert torch.allclose(y[..., t, :], (C[..., t, :, None] * h).sum(-2), atol=1e-4)


def test_bidirectional_scan_is_the_forward_plus_the_flipped_backward_scan():
    g = torch.Generator().manual_seed(3)
    bt, H, L, P, N = 2, 3, 40, 4, 5
    u, B, C = torch.randn(bt, H, L, P, generator=g), torch.randn(bt, H, L, N, generator=g), torch.randn(bt, H, L, N, generator=g)
    log_decay = -torch.rand(bt, H, L, generator=g) * 2
    flip = lambda t: t.flip(2)                                          # noqa: E731 -- the sequence axis
    two_scans = (method.selective_scan(u, log_decay, B, C)
                 + flip(method.selective_scan(flip(u), flip(log_decay), flip(B), flip(C))))
    assert torch.allclose(method.bidirectional_scan(u, log_decay, B, C), two_scans, atol=1e-5)


def test_ssm_block_is_causal_in_each_direction_and_mixes_globally():
    torch.manual_seed(0)
    block = method.SSMBlock(8, d_state=4, heads=2)
    x = torch.randn(1, 12, 8)
    # the forward scan alone: changing token 9 leaves tokens 0..8 unchanged
    x2 = x.clone()
    x2[0, 9] += torch.randn(8)                                         # not a constant: LayerNorm would remove it
    xs, xs2 = block.norm(x), block.norm(x2)
    a = method.selective_scan(*block.scan_inputs(torch.nn.functional.silu(xs), xs))
    b = method.selective_scan(*block.scan_inputs(torch.nn.functional.silu(xs2), xs2))
    assert torch.allclose(a[0, :, :9], b[0, :, :9]) and not torch.allclose(a[0, :, 9:], b[0, :, 9:])  # (Bt, H, L, P)
    # the bidirectional block: token 0 sees the change at token 9
    assert not torch.allclose(block(x)[0, 0], block(x2)[0, 0])


def test_masked_prototypes_and_cosine_logits_match_numpy():
    g = torch.Generator().manual_seed(3)
    support = torch.randn(2, 2, 6, 4, generator=g)
    mask = torch.rand(2, 2, 6, generator=g) > 0.5
    protos = method.masked_prototypes(support, mask).numpy()
    s, m = support.numpy(), mask.numpy()
    assert np.allclose(protos[1], s[0][m[0]].mean(axis=0), atol=1e-6)
    assert np.allclose(protos[2], s[1][m[1]].mean(axis=0), atol=1e-6)
    assert np.allclose(protos[0], s[~m].mean(axis=0), atol=1e-6)
    q = torch.randn(3, 5, 4, generator=g)
    logits = method.cosine_logits(q, torch.from_numpy(protos), 10.0).numpy()
    qn = q.numpy() / np.linalg.norm(q.numpy(), axis=-1, keepdims=True)
    pn = protos / np.linalg.norm(protos, axis=-1, keepdims=True)
    assert np.allclose(logits, 10 * qn @ pn.T, atol=1e-5)


def test_pcm_starts_as_self_enhancement_and_then_reads_the_query():
    torch.manual_seed(4)
    pcm = method.PrototypeCompletion(6)
    protos, query = torch.randn(3, 6), torch.randn(2, 7, 6)
    out = pcm(protos, query)
    self_only = protos + pcm.self_mlp(torch.cat([protos, protos.mean(0, keepdim=True).expand_as(protos)], -1))
    assert out.shape == (2, 3, 6) and torch.allclose(out, self_only.expand(2, 3, 6), atol=1e-6)
    torch.nn.init.normal_(pcm.out.weight)
    out = pcm(protos, query)
    assert not torch.allclose(out[0], out[1])                          # each query scene completes differently


def test_iou_counts_and_miou_match_sklearn():
    rng = np.random.default_rng(5)
    pred, target = rng.integers(0, 3, (2, 50)), rng.integers(0, 3, (2, 50))
    counts = method.iou_counts(pred, target, np.array([7, 2]), 12)
    ref = jaccard_score(target.ravel(), pred.ravel(), labels=[1, 2], average=None)
    assert np.isclose(method.miou(counts, np.array([2, 7])), ref.mean())
    tp, fp, fn = counts[7]
    assert np.isclose(tp / (tp + fp + fn), ref[0])


def test_arms_build_the_described_networks_and_run_deterministically():
    p = params_for("dypolyseg_fewshot_pc")
    full, no_pcm, no_dyho, proto = (method.build_model(p, a) for a in ("dypolyseg", "no_pcm", "no_dyho", "protonet_pointnet"))
    assert full.pcm is not None and no_pcm.pcm is None and proto.pcm is None
    assert full.encoder.conv1.high is not None and no_dyho.encoder.conv1.high is None
    assert isinstance(proto.encoder, method.PointNetEncoder)
    a = method.run_arm(p, seed=0, arm="dypolyseg")
    b = method.run_arm(p, seed=0, arm="dypolyseg")
    assert a["miou"] == b["miou"] and a["loss_last"] == b["loss_last"] and 0 <= a["miou"] <= 100


def test_training_fits_a_fixed_episode():
    # a few dozen Adam steps on one repeated episode must drive its query loss well down (the gradient path works)
    p = params_for("dypolyseg_fewshot_pc", width=8, feature_dim=16)
    data = method.make_data(p, seed=1)
    ep = method.pc.few_shot_episode(data["train_lab"], data["base"], 2, 1, 1, np.random.default_rng(0))
    xyz, order, mask, target = method.episode_tensors(data["train_xyz"], data["train_order"], ep)
    torch.manual_seed(0)
    model = method.build_model(p, "dypolyseg")
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(60):
        loss = torch.nn.functional.cross_entropy(model(xyz, order, mask).flatten(0, 1), target.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]


def test_every_claim_requires_both_of_its_arms_above_the_all_background_gate():
    from flows.dypolyseg_fewshot_pc.claims import PAPER
    from paperflows.core.claims import check_claim
    by_id = {c.id: c for c in PAPER.claims}
    gate = by_id["no_pcm_learned_task"]
    m = {"miou": {"no_pcm": {"mean": 30.0}}, "miou_per_seed": {"no_pcm": [35.0, 40.0, 0.0, 30.0, 45.0]}}
    assert check_claim(gate, m, 5).verdict == "not reproduced"                # one seed all background
    m["miou_per_seed"]["no_pcm"][2] = 25.0
    assert check_claim(gate, m, 5).verdict == "reproduced"
    assert {c.id: set(c.requires) for c in PAPER.claims if c.role == "claim"} == {
        "beats_pointnet_protonet": {"dypolyseg_learned_task", "protonet_pointnet_learned_task"},
        "pcm_helps": {"dypolyseg_learned_task", "no_pcm_learned_task"},
        "dyho_helps": {"dypolyseg_learned_task", "no_dyho_learned_task"}}

"""tasks/segmentation.py and tasks/groups.py: Dice and IoU on hand masks, lesion images that follow their group's look,
a U-Net whose adapters see the groups and that learns to segment, and group summaries on a hand case."""

import numpy as np
import pytest
import torch
from torch import nn

from paperflows.core.seeding import torch_seeded
from tasks.groups import group_means, group_summary
from tasks.segmentation import GROUP_LOOKS, TinyUNet, dice, iou, lesion_images, predict_masks, train_segmentation


def test_dice_and_iou_on_hand_masks():
    target = np.zeros((3, 4, 4), dtype=bool)
    pred = np.zeros((3, 4, 4), dtype=bool)
    target[0, :2, :2] = True  # 4 pixels
    pred[0, :2, :1] = True  # 2 of them
    target[1, 0, 0] = True  # pred empty -> 0
    np.testing.assert_allclose(dice(pred, target), [2 * 2 / 6, 0.0, 1.0])  # image 2: both empty
    np.testing.assert_allclose(iou(pred, target), [2 / 4, 0.0, 1.0])
    with pytest.raises(ValueError, match="must both be"):
        dice(pred[0], target[0])


def test_lesion_images_follow_their_groups_look():
    data = lesion_images(600, 32, [0.5, 0.3, 0.2], np.random.default_rng(0), noise=0.0)
    assert data.images.shape == (600, 1, 32, 32) and data.images.dtype == np.float32
    assert np.bincount(data.groups).tolist() == pytest.approx([300, 180, 120], abs=40)
    for g, look in enumerate(GROUP_LOOKS):
        rows = data.groups == g
        inside = (data.images[rows, 0] * data.masks[rows]).sum() / data.masks[rows].sum()
        outside = (data.images[rows, 0] * ~data.masks[rows]).sum() / (~data.masks[rows]).sum()
        assert np.sign(inside - outside) == look.polarity
        # The mean lesion area is near π·E[a]·E[b] for semi-axes uniform on the group's radius range.
        expected = np.pi * (np.mean(look.radius) * 32) ** 2
        assert data.masks[rows].sum(axis=(1, 2)).mean() == pytest.approx(expected, rel=0.15)
    with pytest.raises(ValueError, match="group_probs"):
        lesion_images(10, 32, [0.5, 0.5], np.random.default_rng(0))


class _RecordGroups(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.channels, self.seen = channels, []

    def forward(self, h, groups):
        self.seen.append((h.shape[1], groups.clone()))
        return h


def test_unet_adapters_see_each_level_and_the_groups_and_the_net_learns():
    with torch_seeded(0):
        net = TinyUNet(widths=(8, 16, 32), adapter=_RecordGroups)
    x, groups = torch.zeros(2, 1, 16, 16), torch.tensor([0, 2])
    assert net(x, groups).shape == (2, 16, 16)
    assert [(a.seen[0][0], a.seen[0][1].tolist()) for a in net.adapters] == [(8, [0, 2]), (16, [0, 2]), (32, [0, 2])]
    data = lesion_images(256, 16, [1.0, 0.0, 0.0], np.random.default_rng(1))
    with torch_seeded(0):
        model = TinyUNet(widths=(8, 16))
    before = dice(predict_masks(model, data.images, data.groups), data.masks).mean()
    history = train_segmentation(model, data.images, data.masks, data.groups, epochs=8, batch_size=32, lr=5e-3, seed=0)
    after = dice(predict_masks(model, data.images, data.groups), data.masks).mean()
    assert history[-1] < history[0] and after > 0.6 > before


def test_group_summary_on_a_hand_case():
    values = np.array([1, 1, 0, 1, 0, 0, 1.0])
    groups = np.array([0, 0, 0, 0, 1, 1, 2])
    assert group_means(values, groups) == {0: 0.75, 1: 0.0, 2: 1.0}
    s = group_summary(values, groups)
    overall = 4 / 7
    assert s["overall"] == pytest.approx(overall) and s["worst"] == 0.0 and s["worst_group"] == 1 and s["gap"] == 1.0
    assert s["es"] == pytest.approx(overall / (1 + abs(0.75 - overall) + overall + abs(1 - overall)))
    equal = group_summary(np.ones(4), np.array([0, 1, 0, 1]))
    assert equal["es"] == equal["overall"] == 1.0 and equal["gap"] == 0.0
    with pytest.raises(ValueError, match="equal, non-empty"):
        group_means(values, groups[:3])

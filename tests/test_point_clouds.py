"""tasks/point_clouds.py: scenes, surface samplers, Morton order and few-shot episodes against independent checks."""

import numpy as np
import pytest

from tasks import point_clouds as pc


def test_sample_mesh_is_area_uniform_on_a_flat_box():
    # a 1 x 1 x 0.1 box: the two big faces hold 2 / (2 + 4 * 0.1) of the area
    v, f = pc._box_mesh(1.0, 1.0, 0.1)
    x = pc.sample_mesh(v, f, 40_000, np.random.default_rng(0))
    on_big = np.isclose(np.abs(x[:, 2]), 0.05)
    assert abs(on_big.mean() - 2 / 2.4) < 0.01
    # every sample on the surface: one coordinate at its bound, the others inside
    at_bound = np.isclose(np.abs(x), [0.5, 0.5, 0.05]).any(axis=1)
    assert at_bound.all() and (np.abs(x) <= [0.5 + 1e-9, 0.5 + 1e-9, 0.05 + 1e-9]).all()
    # uniform within a big face: the quarter x > 0.25 of its width holds about a quarter of its points
    assert abs((x[on_big, 0] > 0.25).mean() - 0.25) < 0.02


@pytest.mark.parametrize("name,radius", [("sphere", 0.5), ("torus", None), ("cylinder", None)])
def test_round_shapes_lie_on_their_surfaces(name, radius):
    x = pc.sample_shape(name, 2000, np.random.default_rng(1))
    if name == "sphere":
        assert np.allclose(np.linalg.norm(x, axis=1), radius)
    elif name == "torus":        # (sqrt(x^2 + y^2) - R)^2 + z^2 = r^2
        assert np.allclose((np.hypot(x[:, 0], x[:, 1]) - 0.35) ** 2 + x[:, 2] ** 2, 0.15**2)
    else:                        # side at r = 0.35 or caps at |z| = 0.5
        side = np.isclose(np.hypot(x[:, 0], x[:, 1]), 0.35)
        assert (side | np.isclose(np.abs(x[:, 2]), 0.5)).all()


def test_torus_density_is_uniform_in_area():
    # the outer half (cos phi > 0) of a torus has area fraction 1/2 + r / (pi R)
    x = pc.sample_shape("torus", 40_000, np.random.default_rng(2))
    outer = np.hypot(x[:, 0], x[:, 1]) > 0.35
    assert abs(outer.mean() - (0.5 + 0.15 / (np.pi * 0.35))) < 0.01


def test_scene_labels_shapes_and_floor():
    rng = np.random.default_rng(3)
    pts, lab = pc.make_scene(rng, 400, n_objects=(4, 4), floor_fraction=0.25, normalise=False, noise=0.0)
    assert pts.shape == (400, 3) and lab.shape == (400,) and pts.dtype == np.float32
    assert (lab == pc.FLOOR_LABEL).sum() == 100
    objects = np.unique(lab[lab != pc.FLOOR_LABEL])
    assert len(objects) == 4 and np.bincount(lab)[objects].tolist() == [75] * 4
    assert np.allclose(pts[lab == pc.FLOOR_LABEL, 2], 0)          # floor at z = 0, objects stand on it
    for c in objects:
        assert abs(pts[lab == c, 2].min()) < 1e-6
    # objects in distinct grid cells never overlap in their xy bounding circles' centres
    centres = np.array([pts[lab == c, :2].mean(axis=0) for c in objects])
    d = np.linalg.norm(centres[:, None] - centres[None], axis=-1)
    assert d[~np.eye(4, dtype=bool)].min() > 0.8


def test_scenes_are_deterministic_and_normalised():
    a = pc.make_scenes(np.random.default_rng(4), 3, 128)
    b = pc.make_scenes(np.random.default_rng(4), 3, 128)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert np.allclose(np.linalg.norm(a[0], axis=-1).max(axis=1), 1, atol=1e-6)
    assert np.allclose(a[0].mean(axis=1), 0, atol=1e-6)


def test_morton_order_matches_bit_interleaving_on_a_grid():
    grid = np.array([[x, y, z] for z in range(2) for y in range(2) for x in range(2)], dtype=float)
    shuffled = grid[np.random.default_rng(5).permutation(8)]
    order = pc.morton_order(shuffled, bits=1)
    # with one bit per axis the code is x + 2 y + 4 z
    codes = shuffled[order] @ np.array([1, 2, 4])
    assert codes.tolist() == list(range(8))


def test_few_shot_episode_masks_and_targets_follow_the_labels():
    pts, lab = pc.make_scenes(np.random.default_rng(6), 60, 128)
    ep = pc.few_shot_episode(lab, [0, 1, 2, 3, 4, 5], n_way=2, k_shot=2, n_query=1, rng=np.random.default_rng(7))
    scenes = np.concatenate([ep["support"].ravel(), ep["query"]])
    assert len(set(scenes.tolist())) == len(scenes)                 # all distinct scenes
    assert set(ep["ways"].tolist()) <= set(range(6))
    for w, c in enumerate(ep["ways"]):
        assert np.array_equal(ep["support_mask"][w], lab[ep["support"][w]] == c)
        assert ep["support_mask"][w].any(axis=1).all()              # each support scene holds the class
    for q, s in enumerate(ep["query"]):
        expected = np.zeros(128, dtype=int)
        for w, c in enumerate(ep["ways"]):
            expected[lab[s] == c] = w + 1
        assert np.array_equal(ep["query_target"][q], expected)
    with pytest.raises(ValueError):
        pc.few_shot_episode(lab, [0], n_way=2, k_shot=1, n_query=1, rng=np.random.default_rng(0))


# ---- shape-classification sets (random SO(3) poses, anisotropic scale, jitter) ---------------------

@pytest.mark.parametrize("name", ["cone", "ellipsoid", "capsule", "ring"])
def test_more_shapes_lie_on_their_analytic_surfaces(name):
    x = pc.sample_shape(name, 3000, np.random.default_rng(11))
    rho, z = np.hypot(x[:, 0], x[:, 1]), x[:, 2]
    if name == "cone":           # side: rho = r (1/2 - z) with r = 0.5, h = 1; base disc at z = -1/2
        on = np.isclose(rho, 0.5 * (0.5 - z)) | (np.isclose(z, -0.5) & (rho <= 0.5 + 1e-12))
    elif name == "ellipsoid":    # (x/a)^2 + (y/b)^2 + (z/c)^2 = 1
        on = np.isclose((x / [0.5, 0.3, 0.2]) ** 2 @ np.ones(3), 1.0)
    elif name == "capsule":      # tube rho = r for |z| <= h/2, else a sphere of radius r about (0, 0, +-h/2)
        cap = np.hypot(rho, np.abs(z) - 0.25)
        on = (np.isclose(rho, 0.25) & (np.abs(z) <= 0.25 + 1e-12)) | (np.isclose(cap, 0.25) & (np.abs(z) >= 0.25 - 1e-12))
    else:                        # ring: walls at rho in {0.38, 0.5}, annuli at |z| = 0.125
        on = ((np.isclose(rho, 0.5) | np.isclose(rho, 0.38)) & (np.abs(z) <= 0.125 + 1e-12)) | \
             (np.isclose(np.abs(z), 0.125) & (rho >= 0.38 - 1e-12) & (rho <= 0.5 + 1e-12))
    assert on.all()


def test_random_rotations_are_proper_and_uniform():
    R = pc.random_rotations(20_000, np.random.default_rng(12))
    assert R.shape == (20_000, 3, 3)
    assert np.allclose(R @ R.transpose(0, 2, 1), np.eye(3), atol=1e-10)
    assert np.allclose(np.linalg.det(R), 1.0)
    # Haar measure on SO(3): E[R] = 0 and E[R_ij^2] = 1/3 for every entry; the rotated pole is uniform on S^2
    assert np.abs(R.mean(axis=0)).max() < 0.02
    assert np.abs((R**2).mean(axis=0) - 1 / 3).max() < 0.01
    pole = R[:, :, 2]
    assert abs((pole[:, 2] > 0.5).mean() - 0.25) < 0.01          # cap area fraction (1 - cos 60deg) / 2
    # the trace of a Haar rotation has density (1 - cos t) / pi in the angle t: E[trace] = 1 + 2 E[cos t] = 0
    assert abs(np.trace(R, axis1=1, axis2=2).mean()) < 0.03


def test_shape_set_rotates_scales_and_jitters_as_set():
    rng = np.random.default_rng(13)
    x, y = pc.shape_classification_set(["sphere", "torus"], 40, 256, rng, rotate=True, jitter=0.0, scale_range=(1, 1))
    assert x.shape == (80, 256, 3) and x.dtype == np.float32 and y.tolist() == [0] * 40 + [1] * 40
    assert np.allclose(np.linalg.norm(x[:40], axis=-1), 0.5, atol=1e-6)   # a rotated sphere stays on it
    # a rotated torus keeps its rotation-invariant radial range R - r <= |p| <= R + r, and its axis (the
    # scatter matrix's least-variance eigenvector) is spread over the sphere rather than stuck at z
    norms = np.linalg.norm(x[40:], axis=-1)
    assert (norms >= 0.2 - 1e-6).all() and (norms <= 0.5 + 1e-6).all()
    _, vecs = np.linalg.eigh(np.einsum("mpi,mpj->mij", x[40:], x[40:]))
    assert np.abs(vecs[:, 2, 0]).mean() < 0.8                      # |cos| of axis vs z: uniform gives 1/2
    # jitter: the radial residual of a unit-scale sphere has the set std
    xj, _ = pc.shape_classification_set(["sphere"], 20, 2000, np.random.default_rng(14), jitter=0.01, scale_range=(1, 1))
    radial = np.linalg.norm(xj.astype(float), axis=-1) - 0.5
    assert abs(radial.std() - 0.01) < 0.0005 and abs(radial.mean()) < 0.0005
    # anisotropic scale: without rotation, the per-axis extents of a box vary within the range
    xs, _ = pc.shape_classification_set(["box"], 30, 500, np.random.default_rng(15), rotate=False, jitter=0.0,
                                        scale_range=(0.5, 1.5))
    ext = xs.max(axis=1) - xs.min(axis=1)                          # (30, 3), box side 0.8 times the factors
    assert (ext >= 0.8 * 0.5 - 1e-3).all() and (ext <= 0.8 * 1.5 + 1e-3).all() and ext.std() > 0.1


def test_shape_set_is_deterministic_and_leaves_existing_streams_alone():
    a = pc.shape_classification_set(["cone", "box"], 3, 64, np.random.default_rng(16))
    b = pc.shape_classification_set(["cone", "box"], 3, 64, np.random.default_rng(16))
    assert all(np.array_equal(u, v) for u, v in zip(a, b))
    # the scene generator's outputs do not depend on the new code
    s1 = pc.make_scenes(np.random.default_rng(4), 2, 32)
    assert s1[0].shape == (2, 32, 3)

"""Procedural 3-D point-cloud scenes with per-point semantic labels, and few-shot episodes over them.

A scene is a floor plane with a few primitive solids standing on it (boxes, spheres, cones, tori, ...),
each sampled on its surface, randomly scaled, stretched and rotated about the vertical axis, plus
Gaussian jitter. Every point carries the class of the primitive it was sampled from; floor points carry
:data:`FLOOR_LABEL`. The generator is pure NumPy and deterministic given a ``numpy.random.Generator``.

Shapes: ``points`` is ``(n_points, 3)`` float32, ``labels`` is ``(n_points,)`` int64; a batch of scenes
is ``(n_scenes, n_points, 3)`` and ``(n_scenes, n_points)``.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

SHAPES: tuple[str, ...] = ("box", "sphere", "cylinder", "cone", "torus", "pyramid",
                           "capsule", "wedge", "ring", "slab", "ellipsoid", "tetrahedron")
"""The primitive classes; a class id is the index in this tuple."""
FLOOR_LABEL: int = len(SHAPES)
"""Label of floor points (not one of the shape classes)."""


# ---------------------------------------------------------------------------------------------------
# surface samplers; each returns (n, 3) points of a shape centred near the origin, extent about 1
# ---------------------------------------------------------------------------------------------------

def sample_mesh(vertices: np.ndarray, faces: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` points uniform on the surface of a triangle mesh (``vertices`` (V, 3), ``faces`` (F, 3) int):
    a face with probability proportional to its area, then uniform barycentric coordinates."""
    tri = vertices[faces]                                               # (F, 3, 3)
    area = 0.5 * np.linalg.norm(np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), axis=1)
    face = rng.choice(len(faces), size=n, p=area / area.sum())
    u, v = rng.random(n), rng.random(n)
    flip = u + v > 1                                                    # fold the square onto the triangle
    u[flip], v[flip] = 1 - u[flip], 1 - v[flip]
    t = tri[face]
    return t[:, 0] + u[:, None] * (t[:, 1] - t[:, 0]) + v[:, None] * (t[:, 2] - t[:, 0])


def _box_mesh(sx: float, sy: float, sz: float) -> tuple[np.ndarray, np.ndarray]:
    v = np.array([[x, y, z] for x in (-sx / 2, sx / 2) for y in (-sy / 2, sy / 2) for z in (-sz / 2, sz / 2)])
    f = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1],
                  [2, 3, 7], [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]])
    return v, f


def _pyramid_mesh() -> tuple[np.ndarray, np.ndarray]:
    v = np.array([[-.5, -.5, -.5], [.5, -.5, -.5], [.5, .5, -.5], [-.5, .5, -.5], [0, 0, .5]])
    f = np.array([[0, 1, 2], [0, 2, 3], [0, 1, 4], [1, 2, 4], [2, 3, 4], [3, 0, 4]])
    return v, f


def _wedge_mesh() -> tuple[np.ndarray, np.ndarray]:
    # triangular prism lying on a rectangle: a ramp
    v = np.array([[-.5, -.5, -.3], [.5, -.5, -.3], [-.5, -.5, .3], [-.5, .5, -.3], [.5, .5, -.3], [-.5, .5, .3]])
    f = np.array([[0, 1, 2], [3, 5, 4], [0, 3, 4], [0, 4, 1], [0, 2, 5], [0, 5, 3], [1, 4, 5], [1, 5, 2]])
    return v, f


def _tetra_mesh() -> tuple[np.ndarray, np.ndarray]:
    v = np.array([[.5, 0, -.4], [-.25, .433, -.4], [-.25, -.433, -.4], [0, 0, .45]])
    f = np.array([[0, 1, 2], [0, 1, 3], [1, 2, 3], [2, 0, 3]])
    return v, f


def _unit_sphere(n: int, rng: np.random.Generator) -> np.ndarray:
    x = rng.standard_normal((n, 3))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _cylinder(n: int, rng: np.random.Generator, r: float, h: float, caps: bool = True) -> np.ndarray:
    side, cap = 2 * np.pi * r * h, (np.pi * r * r if caps else 0.0)
    where = rng.choice(3, size=n, p=np.array([side, cap, cap]) / (side + 2 * cap))
    theta = rng.uniform(0, 2 * np.pi, n)
    rad = np.where(where == 0, r, r * np.sqrt(rng.random(n)))         # sqrt: uniform on the cap disc
    z = np.where(where == 0, rng.uniform(-h / 2, h / 2, n), np.where(where == 1, -h / 2, h / 2))
    return np.stack([rad * np.cos(theta), rad * np.sin(theta), z], axis=1)


def _cone(n: int, rng: np.random.Generator) -> np.ndarray:
    r, h = 0.5, 1.0
    side, base = np.pi * r * np.hypot(r, h), np.pi * r * r
    on_side = rng.random(n) < side / (side + base)
    theta = rng.uniform(0, 2 * np.pi, n)
    s = np.sqrt(rng.random(n))                                          # area grows linearly with slant
    rad = np.where(on_side, r * s, r * np.sqrt(rng.random(n)))
    z = np.where(on_side, h / 2 - h * s, -h / 2)
    return np.stack([rad * np.cos(theta), rad * np.sin(theta), z], axis=1)


def _torus(n: int, rng: np.random.Generator, big: float = 0.35, small: float = 0.15) -> np.ndarray:
    # rejection on the tube angle makes the density uniform on the surface
    phi = np.empty(0)
    while phi.size < n:
        cand = rng.uniform(0, 2 * np.pi, 2 * n)
        keep = rng.random(2 * n) < (big + small * np.cos(cand)) / (big + small)
        phi = np.concatenate([phi, cand[keep]])
    phi = phi[:n]
    theta = rng.uniform(0, 2 * np.pi, n)
    rad = big + small * np.cos(phi)
    return np.stack([rad * np.cos(theta), rad * np.sin(theta), small * np.sin(phi)], axis=1)


def _capsule(n: int, rng: np.random.Generator, r: float = 0.25, h: float = 0.5) -> np.ndarray:
    side, caps = 2 * np.pi * r * h, 4 * np.pi * r * r
    on_side = rng.random(n) < side / (side + caps)
    tube = _cylinder(n, rng, r, h, caps=False)
    ball = r * _unit_sphere(n, rng)
    ball[:, 2] += np.sign(ball[:, 2]) * h / 2
    return np.where(on_side[:, None], tube, ball)


def _ring(n: int, rng: np.random.Generator) -> np.ndarray:
    # a short thick-walled tube: outer wall, inner wall, top and bottom annuli
    ro, ri, h = 0.5, 0.38, 0.25
    areas = np.array([2 * np.pi * ro * h, 2 * np.pi * ri * h, np.pi * (ro**2 - ri**2), np.pi * (ro**2 - ri**2)])
    where = rng.choice(4, size=n, p=areas / areas.sum())
    theta = rng.uniform(0, 2 * np.pi, n)
    annulus = np.sqrt(rng.uniform(ri**2, ro**2, n))
    rad = np.select([where == 0, where == 1], [ro, ri], annulus)
    z = np.select([where <= 1, where == 2], [rng.uniform(-h / 2, h / 2, n), -h / 2], h / 2)
    return np.stack([rad * np.cos(theta), rad * np.sin(theta), z], axis=1)


_SAMPLERS: dict[str, Callable[[int, np.random.Generator], np.ndarray]] = {
    "box": lambda n, rng: sample_mesh(*_box_mesh(0.8, 0.8, 0.8), n, rng),
    "sphere": lambda n, rng: 0.5 * _unit_sphere(n, rng),
    "cylinder": lambda n, rng: _cylinder(n, rng, 0.35, 1.0),
    "cone": _cone,
    "torus": _torus,
    "pyramid": lambda n, rng: sample_mesh(*_pyramid_mesh(), n, rng),
    "capsule": _capsule,
    "wedge": lambda n, rng: sample_mesh(*_wedge_mesh(), n, rng),
    "ring": _ring,
    "slab": lambda n, rng: sample_mesh(*_box_mesh(1.0, 1.0, 0.15), n, rng),
    "ellipsoid": lambda n, rng: _unit_sphere(n, rng) * np.array([0.5, 0.3, 0.2]),
    "tetrahedron": lambda n, rng: sample_mesh(*_tetra_mesh(), n, rng),
}


def sample_shape(name: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` surface points (``(n, 3)`` float64) of the primitive ``name`` in its canonical pose
    (centred at the origin, largest extent about 1)."""
    if name not in _SAMPLERS:
        raise ValueError(f"unknown shape {name!r}; known: {', '.join(SHAPES)}")
    return _SAMPLERS[name](n, rng)


# ---------------------------------------------------------------------------------------------------
# scenes
# ---------------------------------------------------------------------------------------------------

def make_scene(rng: np.random.Generator, n_points: int, n_objects: tuple[int, int] = (3, 5),
               classes: Sequence[int] | None = None, floor_fraction: float = 0.25,
               noise: float = 0.01, normalise: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """One scene: ``(points (n_points, 3) float32, labels (n_points,) int64)``.

    ``n_objects``: inclusive range of the number of primitives, drawn without replacement from ``classes``
    (default: all of :data:`SHAPES`). Each primitive gets a random scale in [0.7, 1.3], a per-axis stretch
    in [0.85, 1.15] and a rotation about z, and stands on the floor in its own cell of a 3 x 3 grid (so
    objects never overlap). ``floor_fraction`` of the points lie on the floor (label :data:`FLOOR_LABEL`),
    the rest are split evenly over the objects. With ``normalise`` the scene is centred and scaled into
    the unit ball, as few-shot pipelines do per block.
    """
    pool = np.arange(len(SHAPES)) if classes is None else np.asarray(classes)
    k = int(rng.integers(n_objects[0], n_objects[1] + 1))
    if k > len(pool) or k > 9:
        raise ValueError(f"cannot place {k} distinct objects from {len(pool)} classes on 9 cells")
    chosen = rng.choice(pool, size=k, replace=False)
    n_floor = int(round(floor_fraction * n_points))
    counts = np.full(k, (n_points - n_floor) // k)
    counts[: (n_points - n_floor) % k] += 1                             # spread the remainder
    cells = rng.choice(9, size=k, replace=False)
    cell = 1.6
    parts, labels = [], []
    for cls, m, c in zip(chosen, counts, cells):
        pts = sample_shape(SHAPES[cls], int(m), rng)
        pts = pts * rng.uniform(0.7, 1.3) * rng.uniform(0.85, 1.15, size=3)
        a = rng.uniform(0, 2 * np.pi)
        rot = np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])
        pts = pts @ rot.T
        centre = (np.array([c % 3, c // 3]) - 1) * cell + rng.uniform(-0.15, 0.15, size=2)
        pts[:, :2] += centre
        pts[:, 2] -= pts[:, 2].min()                                    # stand on the floor
        parts.append(pts)
        labels.append(np.full(int(m), cls))
    half = 1.5 * cell
    floor = np.column_stack([rng.uniform(-half, half, (n_floor, 2)), np.zeros(n_floor)])
    points = np.concatenate([floor, *parts]) + noise * rng.standard_normal((n_points, 3))
    lab = np.concatenate([np.full(n_floor, FLOOR_LABEL), *labels]).astype(np.int64)
    if normalise:
        points = points - points.mean(axis=0)
        points = points / np.linalg.norm(points, axis=1).max()
    order = rng.permutation(n_points)                                   # no information in the point order
    return points[order].astype(np.float32), lab[order]


def make_scenes(rng: np.random.Generator, n_scenes: int, n_points: int, **scene_kwargs) -> tuple[np.ndarray, np.ndarray]:
    """``n_scenes`` scenes from :func:`make_scene`: ``(points (S, n_points, 3), labels (S, n_points))``."""
    scenes = [make_scene(rng, n_points, **scene_kwargs) for _ in range(n_scenes)]
    return np.stack([s[0] for s in scenes]), np.stack([s[1] for s in scenes])


# ---------------------------------------------------------------------------------------------------
# serialisation and few-shot episodes
# ---------------------------------------------------------------------------------------------------

def morton_order(points: np.ndarray, bits: int = 10) -> np.ndarray:
    """Permutation ``(n,)`` sorting ``points`` ``(n, 3)`` along the Morton (z-order) curve of a
    ``2**bits`` grid over their bounding box: neighbours in the order are mostly neighbours in space."""
    lo, hi = points.min(axis=0), points.max(axis=0)
    grid = ((points - lo) / np.maximum(hi - lo, 1e-12) * (2**bits - 1)).astype(np.int64)
    code = np.zeros(len(points), dtype=np.int64)
    for b in range(bits):
        for axis in range(3):
            code |= ((grid[:, axis] >> b) & 1) << (3 * b + axis)
    return np.argsort(code, kind="stable")


def few_shot_episode(labels: np.ndarray, classes: Sequence[int], n_way: int, k_shot: int, n_query: int,
                     rng: np.random.Generator, min_points: int = 1) -> dict[str, np.ndarray]:
    """An N-way K-shot episode over scenes with per-point ``labels`` ``(S, n_points)``.

    Draws ``n_way`` classes from ``classes``; for each, ``k_shot`` support scenes and ``n_query`` query
    scenes that contain at least ``min_points`` points of it (all distinct scenes). Returns
    ``ways`` (n_way,), ``support`` (n_way, k_shot) and ``query`` (n_way * n_query,) scene indices,
    ``support_mask`` (n_way, k_shot, n_points) bool (the way's points in its support scenes) and
    ``query_target`` (n_way * n_query, n_points) int64: 0 = background, 1 + w = the w-th way.
    """
    present = np.stack([(labels == c).sum(axis=1) >= min_points for c in range(int(labels.max()) + 1)])
    eligible = [c for c in classes if present[c].sum() >= k_shot + n_query]
    if len(eligible) < n_way:
        raise ValueError(f"only {len(eligible)} classes appear in {k_shot + n_query} scenes or more")
    ways = rng.choice(eligible, size=n_way, replace=False)
    used: set[int] = set()
    support, query = [], []
    for c in ways:
        free = np.array([s for s in np.flatnonzero(present[c]) if s not in used])
        if len(free) < k_shot + n_query:
            raise ValueError(f"class {c}: too few unused scenes")
        pick = rng.choice(free, size=k_shot + n_query, replace=False)
        used.update(int(s) for s in pick)
        support.append(pick[:k_shot])
        query.extend(pick[k_shot:])
    support_arr, query_arr = np.array(support), np.array(query)
    support_mask = labels[support_arr] == ways[:, None, None]
    target = np.zeros((len(query_arr), labels.shape[1]), dtype=np.int64)
    for w, c in enumerate(ways):
        target[labels[query_arr] == c] = w + 1
    return {"ways": ways, "support": support_arr, "query": query_arr, "support_mask": support_mask,
            "query_target": target}


# ---------------------------------------------------------------------------------------------------
# single-object clouds for shape classification (random SO(3) poses, anisotropic scale, jitter)
# ---------------------------------------------------------------------------------------------------

def random_rotations(n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` rotation matrices ``(n, 3, 3)`` drawn uniformly (Haar measure) on SO(3).

    A uniform unit quaternion (a normalised 4-D Gaussian) is a uniform rotation; scipy's ``Rotation``
    does the quaternion-to-matrix conversion."""
    from scipy.spatial.transform import Rotation

    q = rng.standard_normal((n, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return Rotation.from_quat(q).as_matrix()


def shape_classification_set(classes: Sequence[str], n_per_class: int, n_points: int, rng: np.random.Generator,
                             rotate: bool = True, jitter: float = 0.01,
                             scale_range: tuple[float, float] = (0.8, 1.2)) -> tuple[np.ndarray, np.ndarray]:
    """A shape-classification set: ``(clouds (m, n_points, 3) float32, labels (m,) int64)``, ``m =
    len(classes) * n_per_class``, class-major order; label ``i`` is ``classes[i]`` (names of :data:`SHAPES`).

    Each cloud is :func:`sample_shape` in its canonical pose, stretched by an independent factor per axis
    drawn uniformly from ``scale_range`` (anisotropic scale), rotated by a uniform SO(3) rotation when
    ``rotate``, and jittered by i.i.d. Gaussian noise of std ``jitter`` per coordinate. Clouds are not
    re-centred or normalised (surface samplers are centred near the origin already).
    """
    clouds, labels = [], []
    for label, name in enumerate(classes):
        for _ in range(n_per_class):
            pts = sample_shape(name, n_points, rng) * rng.uniform(scale_range[0], scale_range[1], size=3)
            clouds.append(pts)
            labels.append(label)
    x = np.stack(clouds)                                                # (m, n_points, 3)
    if rotate:
        x = np.einsum("mij,mpj->mpi", random_rotations(len(x), rng), x)
    x = x + jitter * rng.standard_normal(x.shape)
    return x.astype(np.float32), np.asarray(labels, dtype=np.int64)

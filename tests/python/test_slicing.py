"""g[...] reads and writes: numpy basic indexing against numpy on the same values."""

import random

import numpy as np
import pytest

import deepgrid


def random_index(rng, n):
    kind = rng.randrange(5)
    if kind == 0:
        return rng.randrange(-n, n)
    if kind == 1:
        return slice(None)
    bound = lambda: rng.choice([None, rng.randrange(-n - 2, n + 2)])  # noqa: E731
    return slice(bound(), bound(), rng.choice([None, 1, 2, 3, -1, -2, -5]))


def random_key(rng, shape):
    key = [random_index(rng, n) for n in shape]
    form = rng.randrange(4)
    if form == 0:
        return tuple(key[: rng.randrange(1, 4)])  # fewer indices than axes
    if form == 1:
        return (Ellipsis, key[2]) if rng.random() < 0.5 else (key[0], Ellipsis)
    if form == 2:
        return (None, key[0], key[1], None, key[2])
    return tuple(key)


def test_random_reads_match_numpy(grid):
    g, a = grid
    rng = random.Random(0)
    for _ in range(300):
        key = random_key(rng, g.shape)
        got, want = g[key], a[key]
        assert got.shape == want.shape, key
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want, err_msg=str(key))


def test_common_forms(grid):
    g, a = grid
    np.testing.assert_array_equal(g[5], a[5])
    np.testing.assert_array_equal(g[:, 10, :], a[:, 10, :])
    np.testing.assert_array_equal(g[2:9, 3:30, 4:40], a[2:9, 3:30, 4:40])
    np.testing.assert_array_equal(g[-1, -1, -1], a[-1, -1, -1])
    np.testing.assert_array_equal(np.asarray(g), a)
    assert g[3:3].shape == (0, 37, 41)


def test_random_writes_match_numpy(grid):
    g, a = grid
    a = a.copy()
    rng = random.Random(1)
    for trial in range(150):
        key = random_key(rng, g.shape)
        shape = a[key].shape
        values = np.arange(np.prod(shape), dtype=np.float64).reshape(shape) + 1000 * trial
        if trial % 3 == 0:
            values = float(trial)  # a scalar broadcasts
        g[key] = values
        a[key] = values
    np.testing.assert_array_equal(g[...], a)
    reopened = deepgrid.open(g.path)
    np.testing.assert_array_equal(reopened[...], a)
    assert reopened.step == 0  # writes leave the time step alone


def test_writes_cast_and_broadcast(grid):
    g, _ = grid
    g[0] = np.arange(41, dtype=np.int64)  # one row broadcast over y, cast to float32
    np.testing.assert_array_equal(g[0], np.broadcast_to(np.arange(41, dtype=np.float32), (37, 41)))


def test_float64_grid(tmp_path):
    g = deepgrid.create(tmp_path / "g", (4, 5, 6), dtype="float64", init="random:2")
    assert g.dtype == np.float64
    g[1, 2] = np.pi
    assert g[1, 2, 3] == np.pi  # not rounded to float32


def test_read_only_grid_refuses_writes(grid):
    g, _ = grid
    ro = deepgrid.open(g.path)
    with pytest.raises(deepgrid.InvalidArgument, match="mode='r\\+'"):
        ro[0] = 1.0
    before = g.checksum()["sha256"]
    assert deepgrid.open(g.path).checksum()["sha256"] == before


@pytest.mark.parametrize(
    "key, error",
    [
        ((23,), IndexError),
        ((0, -38), IndexError),
        ((0, 0, 0, 0), IndexError),
        (([1, 2],), IndexError),
        ((np.array([True]),), IndexError),
        ((..., ...), IndexError),
        ((1.5,), IndexError),
    ],
)
def test_bad_keys(grid, key, error):
    g, _ = grid
    with pytest.raises(error):
        g[key]


def test_shape_properties(grid):
    g, a = grid
    assert g.shape == a.shape and len(g) == a.shape[0] and g.ndim == 3
    assert g.size == a.size and g.nbytes == a.nbytes
    info = g.info()
    assert info["shape"] == {"nx": 41, "ny": 37, "nz": 23}
    assert len(info["layout"]["files"]) == 3

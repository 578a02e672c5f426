"""Shared fixtures: small grids with random values in a temporary directory."""

import os
import shutil

import matplotlib
import numpy as np
import pytest

import deepgrid

matplotlib.use("Agg")  # no display in tests


@pytest.fixture(autouse=True, scope="session")
def machine_cache(tmp_path_factory):
    """Runs measure this machine into the C++ tests' cache (build/tests/cache, which CI's release
    stage fills before pytest runs) or a fresh one, never into the user's ~/.cache/deepgrid; a
    DEEPGRID_CACHE_DIR already set is kept."""
    if os.environ.get("DEEPGRID_CACHE_DIR"):
        yield
        return
    shared = os.path.join(os.path.dirname(__file__), "..", "..", "build", "tests", "cache")
    cache = shared if os.path.isdir(shared) else str(tmp_path_factory.mktemp("cache"))
    os.environ["DEEPGRID_CACHE_DIR"] = os.path.abspath(cache)
    yield
    del os.environ["DEEPGRID_CACHE_DIR"]


@pytest.fixture
def grid(tmp_path):
    """A 3-store float32 grid (odd extents: planes padded, several chunks) and its values."""
    stores = [tmp_path / f"ssd{i}" for i in range(3)]
    for s in stores:
        s.mkdir()
    g = deepgrid.create(tmp_path / "g", shape=(23, 37, 41), init="random:3", store=stores)
    g.to_npy(tmp_path / "g.npy")
    return g, np.load(tmp_path / "g.npy")


@pytest.fixture
def cli():
    """The deepgrid command installed beside this Python (the wheel's script)."""
    import sys

    path = os.path.join(os.path.dirname(sys.executable), "deepgrid")
    assert os.access(path, os.X_OK), f"the wheel did not install the deepgrid command at {path}"
    return path


def sha256_of(grid_or_path):
    g = grid_or_path if isinstance(grid_or_path, deepgrid.Grid) else deepgrid.open(grid_or_path)
    return g.checksum()["sha256"]


def copy_grid(src, dst):
    shutil.copytree(src, dst)
    return str(dst)

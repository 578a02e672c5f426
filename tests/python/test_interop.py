"""Streaming interop round trips: .npy, zarr v3, HDF5, any array, dask, xarray."""

import dask
import h5py
import numpy as np
import xarray as xr
import zarr

import deepgrid


class CountingSource:
    """An array that records the slices read from it (to check streaming)."""

    def __init__(self, a):
        self.a, self.shape, self.dtype, self.reads = a, a.shape, a.dtype, []

    def __getitem__(self, key):
        out = self.a[key]
        self.reads.append(out.shape)
        return out


def test_npy_round_trip(grid, tmp_path):
    g, a = grid
    back = deepgrid.from_npy(tmp_path / "g.npy", tmp_path / "back", store=[str(tmp_path)])
    np.testing.assert_array_equal(back[...], a)
    assert back.checksum()["sha256"] == g.checksum()["sha256"]


def test_from_array_streams_planes(tmp_path):
    a = np.random.default_rng(0).random((30, 20, 10))
    src = CountingSource(a)
    g = deepgrid.from_array(src, tmp_path / "g", planes=4)
    assert g.dtype == np.float64
    np.testing.assert_array_equal(g[...], a)
    assert max(shape[0] for shape in src.reads) == 4 and len(src.reads) == 8
    two_d = deepgrid.from_array(a[0], tmp_path / "flat", dtype="float32")
    assert two_d.shape == (1, 20, 10)
    np.testing.assert_array_equal(two_d[0], a[0].astype(np.float32))


def test_zarr_round_trip(grid, tmp_path):
    g, a = grid
    z = g.to_zarr(tmp_path / "g.zarr", planes=5)
    assert z.metadata.zarr_format == 3 and z.chunks == (5, 37, 41)
    assert z.attrs["deepgrid_step"] == 0
    reopened = zarr.open_array(tmp_path / "g.zarr", mode="r")
    np.testing.assert_array_equal(reopened[...], a)
    back = deepgrid.from_zarr(str(tmp_path / "g.zarr"), tmp_path / "back")
    np.testing.assert_array_equal(back[...], a)


def test_hdf5_round_trip(grid, tmp_path):
    g, a = grid
    g.to_hdf5(tmp_path / "g.h5", "fields/u", planes=7, compression="gzip")
    with h5py.File(tmp_path / "g.h5", "r") as f:
        d = f["fields/u"]
        assert d.chunks == (7, 37, 41) and d.compression == "gzip"
        np.testing.assert_array_equal(d[...], a)
        back = deepgrid.from_hdf5(d, tmp_path / "back1")
    np.testing.assert_array_equal(back[...], a)
    back2 = deepgrid.from_hdf5(tmp_path / "g.h5", tmp_path / "back2", dataset="fields/u")
    np.testing.assert_array_equal(back2[...], a)


def test_dask_is_lazy_and_chunked_along_z(grid):
    g, a = grid
    d = g.to_dask(planes=6)
    assert d.chunks == ((6, 6, 6, 5), (37,), (41,))
    g[0, 0, 0] = 42.0  # read at compute time, not at to_dask()
    expected = a.copy()
    expected[0, 0, 0] = 42.0
    with dask.config.set(scheduler="threads"):
        np.testing.assert_array_equal(d.compute(), expected)
        assert np.isclose(d.mean().compute(), expected.mean(dtype=np.float64), rtol=1e-6)
        np.testing.assert_array_equal(d[3:14:2, 5, ::-1].compute(), expected[3:14:2, 5, ::-1])


def test_xarray_view(grid):
    g, a = grid
    x = g.to_xarray()
    assert isinstance(x, xr.DataArray) and x.dims == ("z", "y", "x")
    assert x.attrs["step"] == 0 and x.attrs["path"] == g.path
    np.testing.assert_array_equal(x.sel(z=4).values, a[4])
    np.testing.assert_allclose(x.mean(dim=("y", "x")).values, a.mean(axis=(1, 2)), rtol=1e-5)

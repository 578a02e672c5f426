"""Streaming interop: .npy, zarr v3, HDF5, dask and xarray, one chunk of planes at a time.

Nothing here holds more than one chunk of planes (about 8 MiB, the grid's own layout unit,
or ``planes`` planes when given) in memory, whatever the grid's size.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _core
from ._extras import require
from ._grid import Field, Grid, as_field, create
from .errors import InvalidArgument


def _plane_batches(nz: int, planes: int):
    for z0 in range(0, nz, planes):
        yield z0, min(z0 + planes, nz)


# --- into a grid ------------------------------------------------------------------------
def from_npy(
    npy: str | os.PathLike[str], path: str | os.PathLike[str], store: Sequence[str] = ()
) -> Grid:
    """Creates a grid from a float32/float64 C-order .npy of shape (nz, ny, nx) or (ny, nx)."""
    native = _core.import_npy(os.fspath(npy), os.fspath(path), [os.fspath(s) for s in store])
    return Grid(native, "r+")


def from_array(
    source: Any,
    path: str | os.PathLike[str],
    *,
    store: Sequence[str] = (),
    dtype: Any = None,
    planes: int | None = None,
) -> Grid:
    """Creates a grid from any sliceable array of shape (nz, ny, nx) or (ny, nx): a zarr
    array, an h5py dataset, a numpy memmap, a dask array... read ``planes`` planes at a time.

    dtype: the grid's, float32 or float64 (default: the source's when it is one of them).
    """
    shape = tuple(source.shape)
    if len(shape) not in (2, 3):
        raise InvalidArgument(f"the source must have shape (nz, ny, nx) or (ny, nx); got {shape}")
    dtype = np.dtype(dtype if dtype is not None else source.dtype)
    if dtype not in (np.float32, np.float64):
        raise InvalidArgument(
            f"deepgrid grids hold float32 or float64; the source is {dtype}: pass dtype='float32'"
        )
    g = create(path, shape, dtype=dtype, store=store)
    if len(shape) == 2:
        g[0] = np.asarray(source[...])
        return g
    for z0, z1 in _plane_batches(shape[0], planes or g.chunk_planes()):
        g[z0:z1] = np.asarray(source[z0:z1])
    return g


def from_zarr(source: Any, path: str | os.PathLike[str], **kwargs: Any) -> Grid:
    """Creates a grid from a zarr array (or the path of one); options as :func:`from_array`."""
    zarr = require("zarr", "from_zarr")

    array = zarr.open_array(source, mode="r") if isinstance(source, (str, os.PathLike)) else source
    return from_array(array, path, **kwargs)


def from_hdf5(
    source: Any, path: str | os.PathLike[str], dataset: str | None = None, **kwargs: Any
) -> Grid:
    """Creates a grid from an h5py dataset, or from ``dataset`` in the HDF5 file ``source``."""
    if not isinstance(source, (str, os.PathLike)):
        return from_array(source, path, **kwargs)
    h5py = require("h5py", "from_hdf5")

    if dataset is None:
        raise InvalidArgument("name the dataset: from_hdf5(file, path, dataset='name')")
    with h5py.File(source, "r") as f:
        return from_array(f[dataset], path, **kwargs)


# --- out of a grid ----------------------------------------------------------------------
def _copy_to(grid: Grid | Field, target: Any, planes: int | None) -> None:
    for z0, z1 in _plane_batches(grid.shape[0], planes or grid.chunk_planes()):
        target[z0:z1] = grid[z0:z1]


def to_zarr(
    grid: Grid | Field, store: Any, *, planes: int | None = None, overwrite: bool = False, **kwargs: Any
) -> Any:
    """Writes the grid to a new zarr v3 array at ``store`` (a path or a zarr store), in
    chunks of ``planes`` z-planes; extra keyword arguments go to ``zarr.create_array``.
    The array's attributes record the grid's step and path."""
    zarr = require("zarr", "to_zarr")

    nz, ny, nx = grid.shape
    kwargs.setdefault("chunks", (min(planes or grid.chunk_planes(), nz), ny, nx))
    array = zarr.create_array(
        store, shape=grid.shape, dtype=grid.dtype, overwrite=overwrite, zarr_format=3, **kwargs
    )
    _copy_to(grid, array, planes)
    array.attrs.update({"deepgrid_step": grid.step, "deepgrid_source": grid.path})
    return array


def to_hdf5(grid: Grid | Field, file: Any, name: str = "grid", *, planes: int | None = None, **kwargs: Any) -> None:
    """Writes the grid to dataset ``name`` of an HDF5 file (a path, or an open h5py File or
    Group); extra keyword arguments go to ``create_dataset`` (e.g. compression="gzip")."""
    h5py = require("h5py", "to_hdf5")

    if isinstance(file, (str, os.PathLike)):
        with h5py.File(file, "a") as f:
            to_hdf5(grid, f, name, planes=planes, **kwargs)
        return
    nz, ny, nx = grid.shape
    kwargs.setdefault("chunks", (min(planes or grid.chunk_planes(), nz), ny, nx))
    dataset = file.create_dataset(name, shape=grid.shape, dtype=grid.dtype, **kwargs)
    _copy_to(grid, dataset, planes)
    dataset.attrs["deepgrid_step"] = grid.step
    dataset.attrs["deepgrid_source"] = grid.path


class _DaskSource:
    """What dask.array.from_array reads from: slices of the grid (thread-safe reads)."""

    def __init__(self, grid: Grid | Field) -> None:
        self._grid = grid
        self.shape = grid.shape
        self.dtype = grid.dtype
        self.ndim = 3

    def __getitem__(self, key: Any) -> np.ndarray:
        return self._grid[key]


def to_dask(grid: Grid | Field, planes: int | None = None) -> Any:
    """A lazy dask array, chunked along z (``planes`` planes per chunk, default the layout's).
    Reads happen when it is computed, so it sees the grid as it is then."""
    da = require("dask.array", "to_dask")

    nz, ny, nx = grid.shape
    name = f"deepgrid-{grid.info()['id']}-{as_field(grid).name}-step{grid.step}-{planes}"
    meta = np.empty((0, 0, 0), dtype=grid.dtype)
    return da.from_array(
        _DaskSource(grid), chunks=(planes or grid.chunk_planes(), ny, nx), name=name,
        lock=False, asarray=True, fancy=False, meta=meta,
    )


def to_xarray(grid: Grid | Field, planes: int | None = None) -> Any:
    """A lazy xarray DataArray over :func:`to_dask`, dims (z, y, x) with index coordinates,
    the grid's step and path in ``attrs``."""
    xr = require("xarray", "to_xarray")

    nz, ny, nx = grid.shape
    return xr.DataArray(
        to_dask(grid, planes),
        dims=("z", "y", "x"),
        coords={"z": np.arange(nz), "y": np.arange(ny), "x": np.arange(nx)},
        name=os.path.basename(os.path.normpath(grid.path)),
        attrs={"step": grid.step, "path": grid.path, "field": as_field(grid).name},
    )

"""Grid: an on-disk grid with numpy-style slicing that reads and writes only what it needs."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from . import _core
from ._indexing import check_writable, select

if TYPE_CHECKING:
    import dask.array
    import matplotlib.axes
    import xarray
    import zarr


class Grid:
    """A grid directory, opened by :func:`create` or :func:`open`.

    ``g[...]`` follows numpy basic indexing (integers, slices with any step, ``...``,
    ``None``) and reads only the planes, and within them the blocks of rows, that the slice
    touches. ``g[...] = values`` writes them back (values broadcast and are cast to the grid's
    dtype); it needs ``mode="r+"`` and leaves the time step unchanged.
    """

    def __init__(self, native: _core.Grid, mode: str) -> None:
        # A Grid holds no files or lock between operations: each one opens the directory
        # (shared lock to read, exclusive to write) and lets go when done, so that runs, the
        # CLI and other processes can use the grid in between.
        self._path = native.path
        self._mode = mode
        self._shape: tuple[int, int, int] = tuple(native.shape)  # type: ignore[assignment]
        self._dtype = np.dtype(native.dtype)

    @property
    def _open(self) -> _core.Grid:
        """The grid opened to read (a shared lock, so reads in several threads coexist)."""
        return _core.open_grid(self._path, False)

    @property
    def _open_to_write(self) -> _core.Grid:
        return _core.open_grid(self._path, True)

    # --- what the grid is ---------------------------------------------------------------
    @property
    def path(self) -> str:
        return self._path

    @property
    def shape(self) -> tuple[int, int, int]:
        """numpy shape ``(nz, ny, nx)``: x is the fastest axis."""
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def step(self) -> int:
        """The time step the data hold (advanced by :func:`deepgrid.run`)."""
        return self._open.step

    @property
    def mode(self) -> str:
        """``"r"`` (read-only) or ``"r+"`` (values can be written)."""
        return self._mode

    ndim = 3

    @property
    def size(self) -> int:
        nz, ny, nx = self.shape
        return nz * ny * nx

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __len__(self) -> int:
        return self.shape[0]

    def info(self) -> dict[str, Any]:
        """The manifest (shape, dtype, layout, files, step, history) as a dict."""
        info = json.loads(self._open.manifest_json())
        info["directory"] = self.path
        info["direct_io"] = self._open.direct_io
        return info

    def checksum(self) -> dict[str, Any]:
        """SHA-256 of the values (as ``deepgrid checksum``), min, max, mean, L2 norm, NaNs."""
        return self._open.summary()

    def refresh(self) -> None:
        """Checks that the grid can still be opened (each access reads the manifest anew)."""
        self._open  # noqa: B018 (opening is the check)

    def close(self) -> None:
        """Nothing to release (a Grid holds no lock between operations); for ``with``."""

    def __enter__(self) -> Grid:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"deepgrid.Grid({self.path!r}, shape={self.shape}, dtype={self.dtype}, step={self.step})"

    # --- slicing ------------------------------------------------------------------------
    def __getitem__(self, key: object) -> np.ndarray:
        sel = select(key, self.shape)
        box = self._open.read_box(*sel.ranges)
        return box[sel.box_to_result].reshape(sel.result_shape)

    def __setitem__(self, key: object, values: Any) -> None:
        check_writable(self._mode, self.path)
        sel = select(key, self.shape)
        values = np.broadcast_to(np.asarray(values), sel.result_shape)
        box = np.empty(sel.box_shape, dtype=self.dtype)
        # Dropping the None axes (size 1) gives the shape of box[box_to_result].
        box[sel.box_to_result] = values.reshape(box[sel.box_to_result].shape)
        if not sel.empty:
            self._open_to_write.write_box(*sel.ranges, box)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        """The whole grid in memory (only for grids that fit)."""
        a = self[...]
        return a if dtype is None else a.astype(dtype, copy=False)

    def chunk_planes(self) -> int:
        """Planes per chunk of the on-disk layout (about 8 MiB): the unit interop streams."""
        return self._open.planes_per_chunk

    # --- interop (streamed one chunk of planes at a time) --------------------------------
    def to_npy(self, path: str | os.PathLike[str]) -> None:
        """Writes the grid to a .npy file of shape (nz, ny, nx)."""
        self._open.export_npy(os.fspath(path))

    def to_zarr(self, store: Any, **kwargs: Any) -> zarr.Array:
        """Writes the grid to a new zarr v3 array (see :func:`deepgrid._interop.to_zarr`)."""
        from ._interop import to_zarr

        return to_zarr(self, store, **kwargs)

    def to_hdf5(self, file: Any, name: str = "grid", **kwargs: Any) -> None:
        """Writes the grid to an HDF5 dataset (a path or an open h5py File/Group)."""
        from ._interop import to_hdf5

        to_hdf5(self, file, name, **kwargs)

    def to_dask(self, planes: int | None = None) -> dask.array.Array:
        """A lazy dask array over the grid, chunked along z (reads happen at compute)."""
        from ._interop import to_dask

        return to_dask(self, planes)

    def to_xarray(self, planes: int | None = None) -> xarray.DataArray:
        """A lazy xarray DataArray (dims z, y, x; the step and path as attributes)."""
        from ._interop import to_xarray

        return to_xarray(self, planes)

    # --- pictures -----------------------------------------------------------------------
    def plot(self, **kwargs: Any) -> matplotlib.axes.Axes:
        """Draws a slice with matplotlib (see :func:`deepgrid._plot.plot_slice`)."""
        from ._plot import plot_slice

        return plot_slice(self, **kwargs)


def create(
    path: str | os.PathLike[str],
    shape: Sequence[int],
    dtype: Any = "float32",
    init: str = "zero",
    store: Sequence[str | os.PathLike[str]] = (),
) -> Grid:
    """Creates a grid directory and returns it opened for writing.

    shape: ``(nz, ny, nx)`` (or ``(ny, nx)`` for a 2D grid, stored with nz = 1).
    dtype: float32 or float64. init: ``zero``, ``const:V``, ``random:SEED``, ``gaussian``,
    ``sine``. store: directories (one per SSD) to stripe the data over.
    """
    shape = tuple(int(n) for n in shape)
    if len(shape) == 2:
        shape = (1, *shape)
    if len(shape) != 3:
        from .errors import InvalidArgument

        raise InvalidArgument(f"shape must be (nz, ny, nx) or (ny, nx); got {shape}")
    native = _core.create(
        os.fspath(path), shape, np.dtype(dtype).name, init, [os.fspath(s) for s in store]
    )
    return Grid(native, "r+")


def open(path: str | os.PathLike[str], mode: str = "r") -> Grid:  # noqa: A001 (like io.open)
    """Opens a grid directory: ``mode="r"`` to read, ``"r+"`` to also write values."""
    if mode not in ("r", "r+"):
        from .errors import InvalidArgument

        raise InvalidArgument(f"mode must be 'r' or 'r+'; got {mode!r}")
    return Grid(_core.open_grid(os.fspath(path), mode == "r+"), mode)

"""Grid: an on-disk grid with numpy-style slicing that reads and writes only what it needs."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from . import _core
from ._indexing import check_writable, select
from .errors import InvalidArgument, UnknownField
from .schemes import Scheme, SchemeLike

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

    A grid made for a scheme stores several fields (:attr:`fields`); ``g["m"]`` is the
    :class:`Field` view of one, sliced the same way (``g["m"][:, :, 10:20]``,
    ``g["m"][...] = velocity``). Plain ``g[...]`` is the grid's first state field (``u`` of
    the wave schemes), and so are ``to_npy``, ``to_dask`` and ``plot`` unless given a field.
    """

    def __init__(self, native: _core.Grid, mode: str) -> None:
        # A Grid holds no files or lock between operations: each one opens the directory
        # (shared lock to read, exclusive to write) and lets go when done, so that runs, the
        # CLI and other processes can use the grid in between.
        self._path = native.path
        self._mode = mode
        self._shape: tuple[int, int, int] = tuple(native.shape)  # type: ignore[assignment]
        self._dtype = np.dtype(native.dtype)
        # A grid's fields are fixed at creation.
        self._fields: tuple[str, ...] = tuple(native.fields) or ("u",)
        self._scheme_json: str = native.scheme_json
        self._main = Field(self, _main_field(self._fields, self._scheme_json))

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        # By path and mode: a worker process (dask, Ray, concurrent.futures) opens the grid as
        # it is when it gets it.
        return (open, (self._path, self._mode))

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

    @property
    def fields(self) -> tuple[str, ...]:
        """The names of what the grid stores per point, in plane order: ``("u",)`` for a
        grid of one field; a scheme's components (``("u", "u@1", "m")``) for its grids."""
        return self._fields

    @property
    def scheme(self) -> Scheme | None:
        """The scheme the grid was made for (``create(..., scheme=...)``), which
        :func:`deepgrid.run` runs when given no stencil (a plain stencil too, made with
        ``scheme="7pt"``); ``None`` for a grid made without one."""
        return Scheme._from_grid_record(self._scheme_json) if self._scheme_json else None

    def field(self, name: str | None = None) -> Field:
        """The view of field ``name`` (``g.field("m")`` is ``g["m"]``); the first state field
        when ``None``. Raises :class:`deepgrid.UnknownField` (a KeyError) for other names."""
        if name is None:
            return self._main
        if name not in self._fields:
            raise UnknownField(
                f"grid {self.path} has no field {name!r}; its fields are {', '.join(self._fields)}"
            )
        return Field(self, name)

    def info(self) -> dict[str, Any]:
        """The manifest (shape, dtype, layout, files, step, history) as a dict."""
        info = json.loads(self._open.manifest_json())
        info["directory"] = self.path
        info["direct_io"] = self._open.direct_io
        return info

    def checksum(self, field: str | None = None) -> dict[str, Any]:
        """SHA-256 of the values (as ``deepgrid checksum``), min, max, mean, L2 norm, NaNs:
        of every field (each plane's fields in order), or of ``field``."""
        if field is None:
            return self._open.summary()
        return self.field(field).checksum()

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
        fields = f", fields={self.fields}" if len(self.fields) > 1 else ""
        return f"deepgrid.Grid({self.path!r}, shape={self.shape}, dtype={self.dtype}{fields}, step={self.step})"

    # --- slicing (of the first state field; g["name"] is another field) -------------------
    def __getitem__(self, key: object) -> Any:
        if isinstance(key, str):
            return self.field(key)
        return self._main[key]

    def __setitem__(self, key: object, values: Any) -> None:
        if isinstance(key, str):  # g["m"] = values: the whole field
            self.field(key)[...] = values
        else:
            self._main[key] = values

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        """The first state field in memory (only for grids that fit)."""
        return self._main.__array__(dtype, copy)

    def chunk_planes(self) -> int:
        """Planes per chunk of the on-disk layout (about 8 MiB): the unit interop streams."""
        return self._open.planes_per_chunk

    # --- interop and pictures, of the first state field or of ``field`` -----------------
    def to_npy(self, path: str | os.PathLike[str], field: str | None = None) -> None:
        """Writes the first state field (or ``field``) to a .npy file of shape (nz, ny, nx)."""
        self.field(field).to_npy(path)

    def to_vtkhdf(
        self,
        path: str | os.PathLike[str],
        *,
        spacing: float | Sequence[float] = 1.0,
        origin: float | Sequence[float] = 0.0,
        downsample: int = 1,
        fields: Sequence[str] | None = None,
    ) -> None:
        """Writes the grid to a VTKHDF file that ParaView, VisIt and PyVista open: every field
        (or ``fields``) a named point array, ``spacing`` and ``origin`` one number or (x, y, z),
        every ``downsample``-th point along each axis. Streamed plane by plane."""
        names = self._fields if fields is None else tuple(fields)
        for name in names:
            self.field(name)  # (an unknown name raises here, naming the grid's fields)
        components = [self._fields.index(n) for n in names]
        self._open.export_vtkhdf(
            os.fspath(path), _xyz(spacing, "spacing"), _xyz(origin, "origin"), int(downsample),
            components,
        )

    def to_zarr(self, store: Any, field: str | None = None, **kwargs: Any) -> zarr.Array:
        """Writes a field to a new zarr v3 array (see :func:`deepgrid._interop.to_zarr`)."""
        return self.field(field).to_zarr(store, **kwargs)

    def to_hdf5(self, file: Any, name: str = "grid", field: str | None = None, **kwargs: Any) -> None:
        """Writes a field to an HDF5 dataset (a path or an open h5py File/Group)."""
        self.field(field).to_hdf5(file, name, **kwargs)

    def to_dask(self, planes: int | None = None, field: str | None = None) -> dask.array.Array:
        """A lazy dask array over a field, chunked along z (reads happen at compute)."""
        return self.field(field).to_dask(planes)

    def to_xarray(self, planes: int | None = None, field: str | None = None) -> xarray.DataArray:
        """A lazy xarray DataArray (dims z, y, x; the step and path as attributes)."""
        return self.field(field).to_xarray(planes)

    def plot(self, field: str | None = None, **kwargs: Any) -> matplotlib.axes.Axes:
        """Draws a slice of a field with matplotlib (see :func:`deepgrid._plot.plot_slice`)."""
        return self.field(field).plot(**kwargs)


class Field:
    """One field of a grid (``g["m"]``): numpy-style slicing that reads and writes only that
    field's values, as :class:`Grid` does for the whole grid; writes need ``mode="r+"``."""

    def __init__(self, grid: Grid, name: str) -> None:
        self._grid = grid
        self._name = name
        self._component = grid.fields.index(name)

    def __reduce__(self) -> tuple[Any, tuple[Grid, str]]:
        return (Field, (self._grid, self._name))

    @property
    def grid(self) -> Grid:
        return self._grid

    @property
    def name(self) -> str:
        return self._name

    @property
    def path(self) -> str:
        return self._grid.path

    @property
    def shape(self) -> tuple[int, int, int]:
        return self._grid.shape

    @property
    def dtype(self) -> np.dtype:
        return self._grid.dtype

    @property
    def step(self) -> int:
        return self._grid.step

    ndim = 3

    def __len__(self) -> int:
        return self.shape[0]

    def info(self) -> dict[str, Any]:
        return self._grid.info()

    def chunk_planes(self) -> int:
        return self._grid.chunk_planes()

    def checksum(self) -> dict[str, Any]:
        """SHA-256 of this field's values (as ``deepgrid checksum --field``), min, max..."""
        return self._grid._open.summary(self._component)

    def __repr__(self) -> str:
        return f"deepgrid.Field({self.path!r}, {self.name!r}, shape={self.shape}, dtype={self.dtype})"

    def __getitem__(self, key: object) -> np.ndarray:
        sel = select(key, self.shape)
        box = self._grid._open.read_box(*sel.ranges, component=self._component)
        return box[sel.box_to_result].reshape(sel.result_shape)

    def __setitem__(self, key: object, values: Any) -> None:
        check_writable(self._grid.mode, self.path)
        sel = select(key, self.shape)
        values = np.broadcast_to(np.asarray(values), sel.result_shape)
        box = np.empty(sel.box_shape, dtype=self.dtype)
        # Dropping the None axes (size 1) gives the shape of box[box_to_result].
        box[sel.box_to_result] = values.reshape(box[sel.box_to_result].shape)
        if not sel.empty:
            self._grid._open_to_write.write_box(*sel.ranges, box, component=self._component)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        """The whole field in memory (only for grids that fit)."""
        a = self[...]
        return a if dtype is None else a.astype(dtype, copy=False)

    # --- interop (streamed one chunk of planes at a time) --------------------------------
    def to_npy(self, path: str | os.PathLike[str]) -> None:
        """Writes the field to a .npy file of shape (nz, ny, nx)."""
        self._grid._open.export_npy(os.fspath(path), self._component)

    def load_npy(self, path: str | os.PathLike[str]) -> None:
        """Replaces the field's values with a .npy file's (of the grid's shape and dtype),
        streamed one chunk of planes at a time, as ``deepgrid import IN.npy DIR --field``."""
        check_writable(self._grid.mode, self.path)
        self._grid._open_to_write.import_npy(os.fspath(path), self._component)

    def to_zarr(self, store: Any, **kwargs: Any) -> zarr.Array:
        from ._interop import to_zarr

        return to_zarr(self, store, **kwargs)

    def to_hdf5(self, file: Any, name: str = "grid", **kwargs: Any) -> None:
        from ._interop import to_hdf5

        to_hdf5(self, file, name, **kwargs)

    def to_dask(self, planes: int | None = None) -> dask.array.Array:
        from ._interop import to_dask

        return to_dask(self, planes)

    def to_xarray(self, planes: int | None = None) -> xarray.DataArray:
        from ._interop import to_xarray

        return to_xarray(self, planes)

    def plot(self, **kwargs: Any) -> matplotlib.axes.Axes:
        from ._plot import plot_slice

        return plot_slice(self, **kwargs)


def as_field(source: Grid | Field) -> Field:
    """A field as it is, a grid as its first state field (what interop and plots read)."""
    return source if isinstance(source, Field) else source.field()


def _xyz(value: float | Sequence[float], what: str) -> tuple[float, float, float]:
    """One number for every axis, or three (x, y, z)."""
    if isinstance(value, (int, float)):
        return (float(value),) * 3
    values = tuple(float(v) for v in value)
    if len(values) != 3:
        raise InvalidArgument(f"{what} is {value!r}; give one number or three, (x, y, z)")
    return values  # type: ignore[return-value]


def _main_field(fields: tuple[str, ...], scheme_json: str) -> str:
    """The grid's first state field: the first component that is neither an older time level
    (``u@1``) nor a coefficient field of the grid's scheme."""
    declared = json.loads(scheme_json).get("fields", []) if scheme_json else []
    coefficients = {f["name"] for f in declared if f.get("coefficient")}
    return next((c for c in fields if "@" not in c and c not in coefficients), fields[0])


def create(
    path: str | os.PathLike[str],
    shape: Sequence[int],
    dtype: Any = "float32",
    init: str = "zero",
    store: Sequence[str | os.PathLike[str]] = (),
    scheme: SchemeLike | None = None,
) -> Grid:
    """Creates a grid directory and returns it opened for writing.

    shape: ``(nz, ny, nx)`` (or ``(ny, nx)`` for a 2D grid, stored with nz = 1).
    dtype: float32 or float64. init: ``zero``, ``const:V``, ``random:SEED``, ``gaussian``,
    ``sine``. store: directories (one per SSD) to stripe the data over.
    scheme: a grid of a scheme's fields (a :class:`Scheme` or what it takes: ``"wave8"``, a
    file, a dict), as ``deepgrid create --scheme``: ``init`` fills every state field (older
    levels equal to the current one) and coefficient fields get the scheme's value; the grid
    records the scheme, which :func:`deepgrid.run` runs when given no stencil.
    """
    shape = tuple(int(n) for n in shape)
    if len(shape) == 2:
        shape = (1, *shape)
    if len(shape) != 3:
        from .errors import InvalidArgument

        raise InvalidArgument(f"shape must be (nz, ny, nx) or (ny, nx); got {shape}")
    scheme_json = Scheme(scheme).to_json() if scheme is not None else ""
    native = _core.create(
        os.fspath(path), shape, np.dtype(dtype).name, init, [os.fspath(s) for s in store],
        scheme_json,
    )
    return Grid(native, "r+")


def open(path: str | os.PathLike[str], mode: str = "r") -> Grid:  # noqa: A001 (like io.open)
    """Opens a grid directory: ``mode="r"`` to read, ``"r+"`` to also write values."""
    if mode not in ("r", "r+"):
        from .errors import InvalidArgument

        raise InvalidArgument(f"mode must be 'r' or 'r+'; got {mode!r}")
    return Grid(_core.open_grid(os.fspath(path), mode == "r+"), mode)


def relocate(path: str | os.PathLike[str], store: Sequence[str | os.PathLike[str]]) -> dict[str, Any]:
    """Moves a grid's data files to new ``store`` directories (new disks), one per data file, and
    records them: each file is copied there, or taken where a copy is already there, and checked
    against the grid's checksums. The one way to change where a grid's data live
    (docs/security.md). Returns ``{"copied": n, "found": n, "checked": bool}``."""
    return dict(_core.relocate(os.fspath(path), [os.fspath(s) for s in store]))


def upgrade(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Brings a grid made by an earlier deepgrid to this one's format: a scheme's coefficient
    fields kept in the data files (the wave equations' ``m`` in grids made before format version
    5) move to coefficient files, which later runs read and never write, and checksums of planes
    of several fields are recorded by component (docs/format.md). Moving the coefficients copies
    the grid (room for its files again); a grid that needs nothing is left as it is. Returns
    ``{"from_version": n, "to_version": n, "coefficient_files": [names], "checksums_by_component":
    bool}``. A serial grid; ``deepgrid upgrade DIR`` also takes a distributed one."""
    return dict(_core.upgrade(os.fspath(path)))

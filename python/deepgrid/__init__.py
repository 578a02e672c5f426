"""deepgrid: stencil computations on 3D grids stored on SSDs, from Python.

>>> g = deepgrid.create("g", shape=(64, 128, 128), init="gaussian")
>>> deepgrid.run(g, deepgrid.stencils.seven_point(), steps=10)
>>> g[32].mean()
"""

from . import stencils
from ._grid import Grid, create, open
from ._interop import from_array, from_hdf5, from_npy, from_zarr
from ._plot import plot_bench
from ._run import run
from .errors import (
    CorruptGrid,
    Error,
    GridBusy,
    InvalidArgument,
    NoSpace,
    NotFound,
    ResourceExhausted,
    StorageError,
    Unsupported,
)
from .stencils import Stencil

__version__ = "0.1.0"

__all__ = [
    "CorruptGrid",
    "Error",
    "Grid",
    "GridBusy",
    "InvalidArgument",
    "NoSpace",
    "NotFound",
    "ResourceExhausted",
    "Stencil",
    "StorageError",
    "Unsupported",
    "create",
    "from_array",
    "from_hdf5",
    "from_npy",
    "from_zarr",
    "open",
    "plot_bench",
    "run",
    "stencils",
]

"""deepgrid: stencil computations on 3D grids stored on SSDs, from Python.

>>> g = deepgrid.create("g", shape=(64, 128, 128), init="gaussian")
>>> deepgrid.run(g, deepgrid.stencils.seven_point(), steps=10)
>>> g[32].mean()

Schemes of several fields (the acoustic wave equation and its velocity model):

>>> w = deepgrid.create("w", shape=(64, 128, 128), scheme="wave8")
>>> w["m"][...] = 0.1
>>> deepgrid.run(w, steps=100, probes={...}, traces="traces.npy")
"""

from . import schemes, stencils
from ._grid import Field, Grid, create, open, relocate, upgrade
from ._interop import from_array, from_hdf5, from_npy, from_zarr
from ._plot import plot_bench
from ._run import devices, run
from ._traces import traces_to_segy
from .errors import (
    CorruptGrid,
    Error,
    GridBusy,
    InvalidArgument,
    NoSpace,
    NotFound,
    ResourceExhausted,
    StorageError,
    UnknownField,
    Unsupported,
)
from .schemes import Scheme, SchemeField
from .stencils import Stencil

__version__ = "0.1.0"

__all__ = [
    "CorruptGrid",
    "Error",
    "Field",
    "Grid",
    "GridBusy",
    "InvalidArgument",
    "NoSpace",
    "NotFound",
    "ResourceExhausted",
    "Scheme",
    "SchemeField",
    "Stencil",
    "StorageError",
    "UnknownField",
    "Unsupported",
    "create",
    "devices",
    "from_array",
    "from_hdf5",
    "from_npy",
    "from_zarr",
    "open",
    "plot_bench",
    "relocate",
    "run",
    "schemes",
    "stencils",
    "traces_to_segy",
    "upgrade",
]

"""deepgrid.traces_to_segy: receivers' traces as SEG-Y for seismic tools."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from . import _core
from ._grid import _xyz
from ._run import Probes, _probes_json
from .errors import InvalidArgument

Spacing = float | Sequence[float]


def traces_to_segy(
    traces: str | os.PathLike[str] | np.ndarray,
    out: str | os.PathLike[str],
    *,
    probes: Probes,
    dt: float,
    spacing: Spacing = 1.0,
) -> None:
    """Writes receivers' traces as a SEG-Y rev 1 file ``out`` (named .sgy or .segy).

    ``traces``: a traces file (.npy, as ``run(..., traces=...)`` writes it; read a bounded
    piece at a time) or an array of shape (steps, receivers), e.g. ``report["traces"]``.
    ``probes``: the probes (a JSON file or a dict of its form) of the run that recorded them:
    one trace per receiver, in their order, with its coordinates and the first source's in the
    trace headers. ``dt``: seconds per step, the sample interval (required; written in whole
    microseconds, 1 to 32767). ``spacing``: metres per grid cell, one number or (dx, dy, dz).

    Samples are big-endian IEEE float32 (format code 5), the values rounded to float32; the
    header fields are those of ``deepgrid traces`` (docs/schemes.md). The same C++ writer
    serves both.
    """
    probes_json = _probes_json(probes)
    h = _xyz(spacing, "spacing")
    if isinstance(traces, (str, os.PathLike)):
        _core.traces_npy_to_segy(os.fspath(traces), os.fspath(out), probes_json, float(dt), h)
        return
    values = np.ascontiguousarray(traces, dtype=np.float64)
    if values.ndim != 2:
        raise InvalidArgument(
            f"traces of shape {values.shape}: give an array of shape (steps, receivers)"
        )
    _core.traces_array_to_segy(values, os.fspath(out), probes_json, float(dt), h)

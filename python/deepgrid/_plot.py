"""Pictures with matplotlib: a slice of a grid, and `deepgrid bench` results."""

from __future__ import annotations

import csv
import json
import os
from typing import TYPE_CHECKING, Any

from ._extras import require
from ._grid import Field, Grid, as_field
from .errors import InvalidArgument

if TYPE_CHECKING:
    import matplotlib.axes

# The axes left in the picture of a slice across each axis: (horizontal, vertical).
_IN_PLANE = {"z": ("x", "y"), "y": ("x", "z"), "x": ("y", "z")}
_AXIS_NUMBER = {"z": 0, "y": 1, "x": 2}


def _slice_axis(z: Any, y: Any, x: Any) -> tuple[str, Any]:
    given = [(name, v) for name, v in (("z", z), ("y", y), ("x", x)) if v is not None]
    if len(given) > 1:
        raise InvalidArgument("give one of z=, y= or x= (the axis the slice is across)")
    return given[0] if given else ("z", "mid")


def _resolve_index(value: Any, n: int, axis: str) -> int:
    if value == "mid":
        return (n - 1) // 2 if n > 1 else 0
    i = int(value)
    if not -n <= i < n:
        raise InvalidArgument(f"{axis}={i} is outside the grid's {n} planes along {axis}")
    return i + n if i < 0 else i


def _source_label(grid: Grid | Field) -> str:
    """The grid directory's name, and the field's of a grid of several."""
    field = as_field(grid)
    label = os.path.basename(os.path.normpath(grid.path))
    return f"{label} {field.name}" if len(field.grid.fields) > 1 else label


def plot_slice(
    grid: Grid | Field,
    *,
    z: int | str | None = None,
    y: int | str | None = None,
    x: int | str | None = None,
    ax: matplotlib.axes.Axes | None = None,
    cmap: str = "viridis",
    vmin: float | None = None,
    vmax: float | None = None,
    out: str | os.PathLike[str] | None = None,
) -> matplotlib.axes.Axes:
    """Draws the slice across one axis (``z="mid"`` by default; an index or ``"mid"``) with
    a colour bar and axis labels, reading only that slice. ``out`` also saves the figure."""
    plt = require("matplotlib.pyplot", "plot")

    axis, value = _slice_axis(z, y, x)
    index = _resolve_index(value, grid.shape[_AXIS_NUMBER[axis]], axis)
    key: list[Any] = [slice(None)] * 3
    key[_AXIS_NUMBER[axis]] = index
    data = grid[tuple(key)]
    if ax is None:
        _, ax = plt.subplots()
    image = ax.imshow(data, origin="lower", cmap=cmap, vmin=vmin, vmax=vmax, interpolation="nearest")
    horizontal, vertical = _IN_PLANE[axis]
    ax.set_xlabel(horizontal)
    ax.set_ylabel(vertical)
    ax.set_title(f"{_source_label(grid)}: {axis} = {index}, step {grid.step}")
    ax.figure.colorbar(image, ax=ax, label="value")
    if out is not None:
        ax.figure.savefig(out, dpi=120, bbox_inches="tight")
    return ax


def _bench_rows(source: Any) -> list[dict[str, Any]]:
    if not isinstance(source, (str, os.PathLike)):
        return list(source)
    with open(source) as f:
        text = f.read()
    if text.lstrip().startswith(("[", "{")):
        rows = json.loads(text)
        return rows if isinstance(rows, list) else [rows]
    return list(csv.DictReader(text.splitlines()))


def _bench_label(row: dict[str, Any]) -> str:
    label = str(row.get("method", "?"))
    bt = int(float(row.get("bt") or 0))
    ratio = float(row.get("mem_ratio") or 0)
    if bt:
        label += f" bt {bt}"
    if ratio:
        label += f" mem 1/{ratio:g}"
    return label


def plot_bench(
    source: Any,
    *,
    metric: str = "mlups",
    ax: matplotlib.axes.Axes | None = None,
    out: str | os.PathLike[str] | None = None,
) -> matplotlib.axes.Axes:
    """Bar chart of `deepgrid bench` results: a --csv file, a --json output file, or a list of
    row dicts. ``metric``: a column such as mlups, gflops, seconds, ratio_to_incore."""
    plt = require("matplotlib.pyplot", "plot_bench")

    rows = [r for r in _bench_rows(source) if not r.get("skipped")]
    if not rows:
        raise InvalidArgument("no benchmark rows to plot (every row was skipped or the file is empty)")
    if metric not in rows[0]:
        raise InvalidArgument(f"no column {metric!r} in the results; columns: {', '.join(rows[0])}")
    if ax is None:
        _, ax = plt.subplots(figsize=(max(4.0, 0.9 * len(rows)), 3.5))
    labels = [_bench_label(r) for r in rows]
    ax.bar(range(len(rows)), [float(r[metric]) for r in rows], color="tab:blue")
    ax.set_xticks(range(len(rows)), labels, rotation=30, ha="right")
    ax.set_ylabel({"mlups": "MLUP/s", "gflops": "GFlop/s", "seconds": "time (s)"}.get(metric, metric))
    ax.set_title("deepgrid bench")
    if out is not None:
        ax.figure.savefig(out, dpi=120, bbox_inches="tight")
    return ax

"""deepgrid.run: advance a stored grid, with progress and a clean Ctrl-C."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from . import _core
from ._extras import require
from ._grid import Grid, _xyz
from .errors import InvalidArgument, UnknownField
from .schemes import Scheme, SchemeLike

ProgressCallback = Callable[[int, int], "bool | None"]
Probes = Mapping[str, Any] | str | os.PathLike[str]


def _probes_json(probes: Probes | None) -> str:
    """A probes file's text (docs/schemes.md), from the file or from data of its form."""
    if probes is None:
        return ""
    if isinstance(probes, Mapping):
        return json.dumps(probes)
    with open(probes, encoding="utf-8") as f:  # noqa: PTH123 (any PathLike)
        return f.read()


def _has_receivers(probes_json: str) -> bool:
    try:
        return bool(json.loads(probes_json).get("receivers"))
    except (ValueError, AttributeError):
        return False  # not a JSON object: the core's parser says what is wrong


def _mem_bytes(mem: int | str | None) -> int:
    if mem is None:
        return 0
    return _core.parse_size(mem) if isinstance(mem, str) else int(mem)


class _TqdmProgress:
    """A tqdm bar over the steps, fed by the run's per-pass callback."""

    def __init__(self) -> None:
        self._tqdm = require("tqdm.auto", "run's progress bar").tqdm
        self._bar: Any = None

    def __call__(self, done: int, total: int) -> None:
        if self._bar is None:
            self._bar = self._tqdm(total=total, unit="step", desc="deepgrid run")
        self._bar.update(done - self._bar.n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def run(
    grid: Grid | str | os.PathLike[str],
    stencil: SchemeLike | None = None,
    steps: int | None = None,
    *,
    probes: Probes | None = None,
    traces: str | os.PathLike[str] | None = None,
    dt: float | None = None,
    spacing: float | Sequence[float] = 1.0,
    mem: int | str | None = None,
    method: str = "auto",
    device: int | str | None = None,
    device_mem: int | str | None = None,
    device_overlap: str = "auto",
    boundary: str = "dirichlet:0",
    threads: int = 0,
    bt: int = 0,
    tile: tuple[int, int] | None = None,
    band_rows: int | None = None,
    io: str = "uring",
    resume: bool = False,
    flush_subnormals: bool = False,
    progress: bool | ProgressCallback | None = None,
    snapshots: str | os.PathLike[str] | None = None,
    every: int = 0,
    snapshot_fields: Sequence[str] | None = None,
    origin: float | Sequence[float] = 0.0,
    downsample: int = 1,
) -> dict[str, Any]:
    """Advances the grid ``steps`` steps and returns the run report as a dict.

    ``stencil``: a :class:`Stencil`, a :class:`Scheme`, or what ``Scheme`` takes (a preset
    name such as ``"7pt"`` or ``"wave8"``, a JSON file, a dict); ``None`` runs the grid's own
    scheme (the one it was created with).

    ``probes``: point sources and receivers (docs/schemes.md), a probes JSON file or a dict of
    its form. The receivers' traces, an array of float64 (steps, receivers), are returned as
    ``report["traces"]``, and also written to ``traces`` (.npy) when given; a stopped run keeps
    what it recorded there, and ``resume=True`` fills in the rest. ``traces`` named .sgy or
    .segy is written as SEG-Y when the run finishes (recorded meanwhile in ``traces + ".npy"``),
    with ``dt`` seconds per step (required) and ``spacing`` metres per cell, as
    :func:`traces_to_segy` writes it.

    Options are those of ``deepgrid run``: ``mem`` a hard memory cap (``"2GiB"`` or bytes),
    ``method`` auto | incore | stream | naive, ``boundary`` ``dirichlet:V`` | ``neumann`` |
    ``periodic``; ``device`` runs on an accelerator through OpenCL (a number from
    :func:`devices`, ``"gpu"`` or ``"cpu"``; it implies ``method="device"``) within
    ``device_mem`` of its memory, ``device_overlap`` auto | on | off: a wavefront's copies
    beside its steps (docs/devices.md); ``band_rows`` sweeps the stream method in bands of that
    many rows instead of whole planes (large planes; ``0``: whole planes; ``None``: the planner's
    choice; docs/cli.md, "--band-rows");
    ``flush_subnormals`` computes with subnormal numbers taken as zero (x86
    computes them far slower: a field decaying into zero can run several times faster; every
    method gives the same bits). ``progress``: ``None`` shows a tqdm bar when stderr is a
    terminal, ``True`` always, ``False`` never; a callable ``progress(done, total)`` is called
    after each pass instead (returning ``False`` stops the run after that pass).

    ``snapshots``: a directory that receives the grid (or ``snapshot_fields``) at every
    ``every``-th step (counted from the grid's creation) as VTKHDF files, with
    ``series.vtkhdf`` for ParaView to open as one animation; ``spacing``, ``origin`` (one
    number or (x, y, z)) and ``downsample`` as for :meth:`Grid.to_vtkhdf`
    (docs/visualisation.md). ``report["snapshots"]`` counts those written.

    The GIL is released while the engine works, so other threads keep running. Ctrl-C stops
    the run after the current pass, with the grid consistent at the steps done (recorded in
    its manifest), and then raises KeyboardInterrupt.

    A run that was stopped (Ctrl-C, a callback, an error, or a crash of the process) is finished
    by ``resume=True`` (its own stencil, boundary and target step replace ``stencil`` and
    ``steps``) or by the same call again, bitwise as if it had never stopped.
    """
    path = grid.path if isinstance(grid, Grid) else os.fspath(grid)
    if steps is None and not resume:
        raise InvalidArgument("run() needs steps: the number of time steps to advance")
    if stencil is None and not resume and not _core.open_grid(path, False).scheme_json:
        raise InvalidArgument(
            f"grid {path} has no scheme of its own (it was created without scheme=); give a "
            'stencil or scheme: deepgrid.run(g, "7pt", steps)'
        )
    args = _core.RunArgs()
    args.stencil_json = Scheme(stencil).to_json() if stencil is not None else ""
    args.probes_json = _probes_json(probes)
    if dt is not None:

        args.segy_dt = float(dt)
        args.segy_spacing = _xyz(spacing, "spacing")
    args.steps = int(steps or 0)
    args.boundary = boundary
    args.method = method
    args.io = io
    args.mem = _mem_bytes(mem)
    args.device = "" if device is None else str(device)
    args.device_mem = _mem_bytes(device_mem)
    args.device_overlap = device_overlap
    args.threads = threads
    args.bt = bt
    args.tile_x, args.tile_y = tile if tile is not None else (0, 0)
    args.band_rows = -1 if band_rows is None else int(band_rows)  # (-1: kAutoBandRows)
    args.resume = resume
    args.flush_subnormals = flush_subnormals
    if snapshots is not None:
        fields = _core.open_grid(path, False).fields or ["u"]
        names = fields if snapshot_fields is None else list(snapshot_fields)
        unknown = [n for n in names if n not in fields]
        if unknown:
            raise UnknownField(
                f"grid {path} has no field {unknown[0]!r}; its fields are {', '.join(fields)}"
            )
        args.snapshots = os.fspath(snapshots)
        args.every = int(every)
        args.snapshot_components = [fields.index(n) for n in names]
        args.spacing, args.origin = _xyz(spacing, "spacing"), _xyz(origin, "origin")
        args.downsample = int(downsample)
    elif every:
        raise InvalidArgument("every= needs snapshots=: the directory to write them into")
    bar = None
    callback = progress if callable(progress) else None
    if progress is True or (progress is None and sys.stderr is not None and sys.stderr.isatty()):
        bar = callback = _TqdmProgress()
    with tempfile.TemporaryDirectory(prefix="deepgrid-traces-") as scratch:
        if _has_receivers(args.probes_json):
            args.traces = os.fspath(traces) if traces is not None else os.path.join(scratch, "t.npy")
        try:
            report = json.loads(_core.run(path, args, callback))
        finally:
            if bar is not None:
                bar.close()
        if args.traces:
            report["traces"] = np.load(_core.traces_npy_path(args.traces))
    return report


def devices() -> list[dict[str, Any]]:
    """The accelerators deepgrid can run on (OpenCL devices), as ``deepgrid devices --json``
    lists them: ``index`` (what ``run(..., device=)`` takes), ``name``, ``type`` (gpu or cpu),
    ``memory_bytes``, ``fp64``, ``vendor``, ``driver``... Empty when there is none (or the
    build has no OpenCL)."""
    return [json.loads(d) for d in _core.devices()]

"""deepgrid.run: advance a stored grid, with progress and a clean Ctrl-C."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

from . import _core
from ._grid import Grid
from .stencils import Stencil

ProgressCallback = Callable[[int, int], "bool | None"]


def _stencil_json(stencil: Stencil | str) -> str:
    if isinstance(stencil, str):  # a stencil or scheme preset (docs/schemes.md), or a JSON file
        return _core.resolve_scheme(stencil)
    return stencil.to_json()


def _mem_bytes(mem: int | str | None) -> int:
    if mem is None:
        return 0
    return _core.parse_size(mem) if isinstance(mem, str) else int(mem)


class _TqdmProgress:
    """A tqdm bar over the steps, fed by the run's per-pass callback."""

    def __init__(self) -> None:
        from tqdm.auto import tqdm

        self._tqdm = tqdm
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
    stencil: Stencil | str,
    steps: int,
    *,
    mem: int | str | None = None,
    method: str = "auto",
    boundary: str = "dirichlet:0",
    threads: int = 0,
    bt: int = 0,
    tile: tuple[int, int] | None = None,
    io: str = "uring",
    resume: bool = False,
    progress: bool | ProgressCallback | None = None,
) -> dict[str, Any]:
    """Advances the grid ``steps`` steps and returns the run report as a dict.

    Options are those of ``deepgrid run``: ``mem`` a hard memory cap (``"2GiB"`` or bytes),
    ``method`` auto | incore | stream | naive, ``boundary`` ``dirichlet:V`` | ``neumann`` |
    ``periodic``. ``progress``: ``None`` shows a tqdm bar when stderr is a terminal, ``True``
    always, ``False`` never; a callable ``progress(done, total)`` is called after each pass
    instead (returning ``False`` stops the run after that pass).

    The GIL is released while the engine works, so other threads keep running. Ctrl-C stops
    the run after the current pass, with the grid consistent at the steps done (recorded in
    its manifest), and then raises KeyboardInterrupt.

    A run that was stopped (Ctrl-C, a callback, an error, or a crash of the process) is finished
    by ``resume=True`` (its own stencil, boundary and target step replace ``stencil`` and
    ``steps``) or by the same call again, bitwise as if it had never stopped.
    """
    args = _core.RunArgs()
    args.stencil_json = _stencil_json(stencil)
    args.steps = int(steps)
    args.boundary = boundary
    args.method = method
    args.io = io
    args.mem = _mem_bytes(mem)
    args.threads = threads
    args.bt = bt
    args.tile_x, args.tile_y = tile if tile is not None else (0, 0)
    args.resume = resume
    bar = None
    callback = progress if callable(progress) else None
    if progress is True or (progress is None and sys.stderr is not None and sys.stderr.isatty()):
        bar = callback = _TqdmProgress()
    path = grid.path if isinstance(grid, Grid) else os.fspath(grid)
    try:
        report = json.loads(_core.run(path, args, callback))
    finally:
        if bar is not None:
            bar.close()
    return report

"""Library errors arrive as deepgrid.Error subclasses with the library's message."""

import os
import re
import subprocess
import sys

import pytest

import deepgrid
from deepgrid.errors import error_class


def test_hierarchy():
    assert issubclass(deepgrid.InvalidArgument, ValueError)
    assert issubclass(deepgrid.StorageError, OSError)
    assert issubclass(deepgrid.NoSpace, deepgrid.StorageError)
    assert issubclass(deepgrid.ResourceExhausted, MemoryError)
    for cls in (deepgrid.InvalidArgument, deepgrid.NotFound, deepgrid.StorageError,
                deepgrid.NoSpace, deepgrid.CorruptGrid, deepgrid.Unsupported,
                deepgrid.ResourceExhausted, deepgrid.GridBusy):
        assert issubclass(cls, deepgrid.Error)
    codes = ["invalid_argument", "not_found", "io", "no_space", "corrupt", "unsupported", "resource",
             "busy"]
    assert len({error_class(c) for c in codes}) == len(codes)


def test_invalid_argument_message(tmp_path):
    with pytest.raises(deepgrid.InvalidArgument, match="does not exist; create a grid"):
        deepgrid.open(tmp_path / "missing")
    with pytest.raises(deepgrid.InvalidArgument, match="init"):
        deepgrid.create(tmp_path / "g", (2, 2, 2), init="nonsense")
    with pytest.raises(deepgrid.InvalidArgument, match="dtype"):
        deepgrid.create(tmp_path / "g", (2, 2, 2), dtype="int32")
    assert not (tmp_path / "g").exists()  # nothing was created


def test_corrupt_grid(tmp_path):
    g = deepgrid.create(tmp_path / "g", (4, 8, 8), init="random:1")
    data = os.path.join(g.path, "data.0.dgd")
    os.truncate(data, 4096)
    with pytest.raises(deepgrid.CorruptGrid, match="data.0.dgd has 4096 bytes"):
        deepgrid.open(g.path)


def test_unsupported_version(tmp_path):
    g = deepgrid.create(tmp_path / "g", (2, 8, 8))
    manifest = os.path.join(g.path, "manifest.json")
    text = open(manifest).read()
    newer = re.sub(r'"version": \d+', '"version": 99', text)
    assert newer != text
    open(manifest, "w").write(newer)
    with pytest.raises(deepgrid.Unsupported, match="upgrade deepgrid"):
        deepgrid.open(g.path)


def test_bad_stencil_and_run_options(tmp_path):
    g = deepgrid.create(tmp_path / "g", (8, 8, 8))
    with pytest.raises(deepgrid.InvalidArgument, match="twice"):
        deepgrid.Stencil(points=[(0, 0, 0, 1.0), (0, 0, 0, 0.5)])
    with pytest.raises(deepgrid.InvalidArgument, match="unknown method"):
        deepgrid.run(g, "7pt", 1, method="fast", progress=False)
    with pytest.raises(deepgrid.InvalidArgument):
        deepgrid.run(g, "7pt", 1, mem="lots", progress=False)
    assert g.step == 0


def test_grid_busy(tmp_path):
    # A Grid holds no lock between operations; a process holding the grid makes them wait.
    g = deepgrid.create(tmp_path / "g", (64, 64, 64), init="random:1")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_SCRIPT, g.path], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        with pytest.raises(deepgrid.GridBusy, match="in use by pid"):
            g[0]
    finally:
        holder.kill()
        holder.wait()
    assert g[0].shape == (64, 64)  # free again once the holder is gone


HOLD_SCRIPT = """
import sys, time
from deepgrid import _core
grid = _core.open_grid(sys.argv[1], True)
print("holding", flush=True)
time.sleep(60)
"""

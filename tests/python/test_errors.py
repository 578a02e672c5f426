"""Library errors arrive as deepgrid.Error subclasses with the library's message."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

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


def _bait(tmp_path, size):
    """A file outside the grid that a crafted manifest points at; returns it and its bytes."""
    (tmp_path / "outside").mkdir()
    bait = tmp_path / "outside" / "data.0.dgd"
    content = os.urandom(size)
    bait.write_bytes(content)
    return bait, content


def test_a_manifest_pointing_outside_the_grid_is_refused(tmp_path):
    g = deepgrid.create(tmp_path / "g", (4, 8, 8), init="random:1")
    manifest = tmp_path / "g" / "manifest.json"
    m = json.loads(manifest.read_text())
    bait, content = _bait(tmp_path, m["layout"]["files"][0]["bytes"])
    for path in (str(bait), "../outside/data.0.dgd"):
        m["layout"]["files"][0]["path"] = path
        manifest.write_text(json.dumps(m))
        with pytest.raises(deepgrid.CorruptGrid, match="outside itself"):
            deepgrid.open(g.path, "r+")
        with pytest.raises(deepgrid.CorruptGrid, match="outside itself"):
            deepgrid.run(g.path, "7pt", 1)
    assert bait.read_bytes() == content


def _build_test_kernel(out, *defines):
    """tests/kernels/test_kernel.c built as a user would (docs/kernels.md)."""
    root = Path(__file__).resolve().parents[2]
    cc = shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler (cc) to build the test kernel with")
    subprocess.run([cc, "-shared", "-fPIC", "-O2", f"-I{root / 'include'}", *defines,
                    str(root / "tests" / "kernels" / "test_kernel.c"), "-o", str(out)], check=True)


def test_a_kernel_library_rebuilt_after_create_is_refused(tmp_path):
    lib = tmp_path / "libk.so"
    _build_test_kernel(lib)
    g = deepgrid.create(tmp_path / "g", (4, 8, 8), scheme=str(lib))
    assert g.info()["scheme"]["sha256"]
    _build_test_kernel(tmp_path / "new.so", "-DTEST_KERNEL_F32_ONLY")
    os.replace(tmp_path / "new.so", lib)  # another build in its place
    with pytest.raises(deepgrid.InvalidArgument, match="SHA-256"):
        deepgrid.run(g.path, steps=1)
    with pytest.raises(deepgrid.InvalidArgument, match="SHA-256"):
        deepgrid.open(g.path).scheme  # noqa: B018 (the property loads the library)


def test_relocate_moves_the_data_to_new_stores(tmp_path):
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
    g = deepgrid.create(tmp_path / "g", (4, 8, 8), init="random:2", store=[tmp_path / "a"])
    before = g[:]
    assert deepgrid.relocate(g.path, [tmp_path / "b"]) == {"copied": 1, "found": 0, "checked": True}
    assert not any((tmp_path / "a").iterdir())
    again = deepgrid.open(g.path)
    assert again.info()["stores"] == [str(tmp_path / "b")]
    assert (again[:] == before).all()


def test_upgrade_leaves_a_grid_of_this_format_as_it_is(tmp_path):
    # (grids made before coefficient files are upgraded in tests/coef_files_test.cc)
    g = deepgrid.create(tmp_path / "w", shape=(9, 11, 13), scheme="wave2", init="random:6")
    before = g.info()
    version = json.loads((tmp_path / "w" / "manifest.json").read_text())["version"]
    assert deepgrid.upgrade(g.path) == {
        "from_version": version,
        "to_version": version,
        "coefficient_files": [],
        "checksums_by_component": False,
    }
    assert deepgrid.open(g.path).info() == before
    with pytest.raises(deepgrid.InvalidArgument, match="does not exist"):
        deepgrid.upgrade(tmp_path / "none")


def test_a_missing_extra_names_the_feature_and_the_install(tmp_path, monkeypatch):
    g = deepgrid.create(tmp_path / "g", (2, 8, 8))
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if it were not installed
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ModuleNotFoundError, match=r"plot needs matplotlib.*deepgrid\[interop\]"):
        g.plot()
    monkeypatch.setitem(sys.modules, "h5py", None)
    with pytest.raises(ModuleNotFoundError, match=r"to_hdf5 needs h5py"):
        g.to_hdf5(tmp_path / "g.h5")

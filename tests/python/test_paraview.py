"""VTKHDF output read back by VTK's own reader (the vtk wheel, as ParaView reads it)."""

import subprocess

import numpy as np
import pytest

import deepgrid

vtk = pytest.importorskip("vtk", reason="the vtk wheel (pip install vtk) reads VTKHDF files back")
from vtk.util.numpy_support import vtk_to_numpy  # noqa: E402


def read_image(path, time=None):
    reader = vtk.vtkHDFReader()
    reader.SetFileName(str(path))
    if time is None:
        reader.Update()
    else:
        reader.UpdateInformation()
        reader.UpdateTimeStep(time)
    return reader, reader.GetOutput()


def array(image, name):
    nx, ny, nz = image.GetDimensions()
    values = image.GetPointData().GetArray(name)
    assert values is not None, f"no array {name}"
    return vtk_to_numpy(values).reshape(nz, ny, nx)


def array_names(image):
    data = image.GetPointData()
    return sorted(data.GetArrayName(i) for i in range(data.GetNumberOfArrays()))


def test_every_field_as_a_named_array(tmp_path):
    g = deepgrid.create(tmp_path / "w", shape=(9, 11, 13), dtype="float64", scheme="wave2",
                        init="random:5")
    g["m"] = np.full(g.shape, 0.25)
    g.to_vtkhdf(tmp_path / "w.vtkhdf", spacing=(10, 20, 5), origin=(0, 0, -100))
    _, image = read_image(tmp_path / "w.vtkhdf")
    assert image.GetDimensions() == (13, 11, 9)
    assert image.GetSpacing() == (10, 20, 5) and image.GetOrigin() == (0, 0, -100)
    assert array_names(image) == sorted(g.fields)
    for name in g.fields:
        values = array(image, name)
        assert values.dtype == np.float64
        np.testing.assert_array_equal(values, g[name][...])


def test_downsampled_and_chosen_fields(tmp_path):
    g = deepgrid.create(tmp_path / "w", shape=(9, 11, 13), scheme="wave2", init="random:6")
    g.to_vtkhdf(tmp_path / "w.vtkhdf", spacing=2.5, downsample=4, fields=["u"])
    _, image = read_image(tmp_path / "w.vtkhdf")
    assert image.GetDimensions() == (4, 3, 3)  # points 0, 4, 8, 12 / 0, 4, 8 / 0, 4, 8
    assert image.GetSpacing() == (10, 10, 10)
    assert array_names(image) == ["u"]
    np.testing.assert_array_equal(array(image, "u"), g["u"][::4, ::4, ::4])


def test_bad_options_raise_and_write_nothing(tmp_path):
    g = deepgrid.create(tmp_path / "g", shape=(4, 5, 6))
    with pytest.raises(deepgrid.InvalidArgument, match="downsample"):
        g.to_vtkhdf(tmp_path / "g.vtkhdf", downsample=0)
    with pytest.raises(deepgrid.InvalidArgument, match="spacing"):
        g.to_vtkhdf(tmp_path / "g.vtkhdf", spacing=(1, 2))
    with pytest.raises(deepgrid.UnknownField):
        g.to_vtkhdf(tmp_path / "g.vtkhdf", fields=["v"])
    assert not (tmp_path / "g.vtkhdf").exists()


def test_cli_export_infers_the_format_from_the_name(tmp_path, cli, grid):
    g, a = grid
    for name in ("g.vtkhdf", "g.h5"):
        subprocess.run([cli, "export", g.path, str(tmp_path / name)], check=True,
                       capture_output=True)
        _, image = read_image(tmp_path / name)
        np.testing.assert_array_equal(array(image, "u"), a)
    bad = subprocess.run([cli, "export", g.path, str(tmp_path / "g.zarr")], capture_output=True,
                         text=True)
    assert bad.returncode == 2 and ".vtkhdf" in bad.stderr and "to_zarr" in bad.stderr
    assert not (tmp_path / "g.zarr").exists()


def test_snapshots_are_one_animation_of_the_run(tmp_path):
    """Snapshots every 5 steps, read as VTK's reader reads series.vtkhdf (ParaView's
    animation), hold what a plain run stopped at those steps holds."""
    def wave(name):
        g = deepgrid.create(tmp_path / name, shape=(10, 12, 14), scheme="wave2", init="gaussian")
        g["m"] = np.full(g.shape, 0.2, dtype=np.float32)
        return g

    g, ref = wave("g"), wave("ref")
    report = deepgrid.run(g, steps=12, mem="1MiB", method="stream", snapshots=tmp_path / "s",
                          every=5, snapshot_fields=["u"], spacing=(1, 2, 3), progress=False)
    assert report["snapshots"] == 3  # steps 0, 5, 10
    reader, _ = read_image(tmp_path / "s" / "series.vtkhdf", time=0.0)
    times = reader.GetOutputInformation(0).Get(vtk.vtkStreamingDemandDrivenPipeline.TIME_STEPS())
    assert tuple(times) == (0.0, 5.0, 10.0)
    done = 0
    for t in times:
        deepgrid.run(ref, steps=int(t) - done, progress=False)
        done = int(t)
        _, image = read_image(tmp_path / "s" / "series.vtkhdf", time=t)
        assert array_names(image) == ["u"] and image.GetSpacing() == (1, 2, 3)
        np.testing.assert_array_equal(array(image, "u"), ref["u"][...])
    with pytest.raises(deepgrid.InvalidArgument, match="snapshots="):
        deepgrid.run(g, steps=1, every=2, progress=False)

"""Pictures: g.plot() slices and plot_bench() of real `deepgrid bench` output."""

import subprocess

import numpy as np
import pytest

import deepgrid


def test_plot_slice(grid, tmp_path):
    g, a = grid
    ax = g.plot(y=-3, out=tmp_path / "y.png")
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("x", "z")
    np.testing.assert_array_equal(ax.images[0].get_array(), a[:, -3, :])
    assert len(ax.figure.axes) == 2  # the image and its colour bar
    assert "y = 34" in ax.get_title()
    assert (tmp_path / "y.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    mid = g.plot()
    np.testing.assert_array_equal(mid.images[0].get_array(), a[11])
    with pytest.raises(deepgrid.InvalidArgument):
        g.plot(z=1, x=2)
    with pytest.raises(deepgrid.InvalidArgument):
        g.plot(x=41)


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_plot_bench(tmp_path, cli, fmt):
    out = tmp_path / f"bench.{fmt}"
    cmd = [cli, "bench", "--methods", "incore,stream", "--shape", "64x64x64", "--steps", "2",
           "--mem-ratio", "2", "--dir", str(tmp_path / "scratch")]
    if fmt == "csv":
        subprocess.run([*cmd, "--csv", str(out)], check=True, capture_output=True)
    else:
        out.write_text(subprocess.run([*cmd, "--json"], check=True, capture_output=True, text=True).stdout)
    ax = deepgrid.plot_bench(out, out=tmp_path / "bench.png")
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels[0].startswith("incore") and labels[1].startswith("stream bt ")
    assert labels[1].endswith("mem 1/2")
    assert ax.get_ylabel() == "MLUP/s" and all(p.get_height() > 0 for p in ax.patches)
    assert (tmp_path / "bench.png").stat().st_size > 0
    with pytest.raises(deepgrid.InvalidArgument, match="no column"):
        deepgrid.plot_bench(out, metric="nonsense")

"""What pip installs: type stubs, the py.typed marker and the deepgrid command."""

import os
import subprocess

import deepgrid


def test_stubs_ship_with_the_package():
    here = os.path.dirname(deepgrid.__file__)
    assert os.path.exists(os.path.join(here, "py.typed"))
    stub = open(os.path.join(here, "_core.pyi")).read()
    assert "def read_box(self, z: tuple[int, int, int]" in stub


def test_the_command_is_installed(cli, tmp_path):
    out = subprocess.run([cli, "--version"], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "deepgrid " + deepgrid.__version__
    g = deepgrid.create(tmp_path / "g", (3, 4, 5), init="random:1")
    info = subprocess.run([cli, "checksum", g.path, "--json"], check=True, capture_output=True, text=True)
    assert g.checksum()["sha256"] in info.stdout

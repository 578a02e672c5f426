"""Schemes and fields from Python: Scheme objects checked by the core, grids of several fields
with per-field slicing, runs of a grid's own scheme with probes, the same as the command line."""

import json
import subprocess

import numpy as np
import pytest

import deepgrid
from conftest import sha256_of

WAVE8 = {
    "name": "wave8",
    "fields": [{"name": "u", "levels": 2}, {"name": "m", "coefficient": True, "value": 0.1}],
    "update": {
        "u": [
            {"coef": 2, "field": "u"},
            {"coef": -1, "field": "u@1"},
            {"coef": "m", "stencil": "laplacian8", "field": "u"},
        ]
    },
}

SHOT = {
    "sources": [{"field": "u", "at": [6, 9, 11], "ricker": {"frequency": 0.08, "delay": 6, "amplitude": 1}}],
    "receivers": [{"field": "u", "at": [[10, 9, 11], [14, 9, 11], [6, 4, 11]]}],
}


def cli_out(cli, *args):
    return subprocess.run([cli, *args], check=True, capture_output=True, text=True).stdout


def two_layer_velocity(shape):
    """m = (v dt / h)^2: 0.05 above z = 10, 0.2 below, a faster stripe in x."""
    m = np.full(shape, 0.05, dtype=np.float32)
    m[10:] = 0.2
    m[:, :, 12:16] = 0.15
    return m


# --- Scheme -------------------------------------------------------------------------------
def test_scheme_from_a_dict_equals_the_same_from_json_and_the_preset(tmp_path):
    path = tmp_path / "wave8.json"
    path.write_text(json.dumps(WAVE8))
    from_dict = deepgrid.Scheme(WAVE8)
    from_file = deepgrid.Scheme(path)
    from_text = deepgrid.Scheme.from_json(json.dumps(WAVE8))
    assert from_dict == from_file == from_text == deepgrid.Scheme("wave8")
    assert from_dict != deepgrid.Scheme("wave4")  # the comparison can fail
    assert deepgrid.Scheme(from_dict.to_dict()) == from_dict  # to_json round-trips


@pytest.mark.parametrize("name, radius", [("wave2", 1), ("wave4", 2), ("wave8", 4), ("heat-var", 1)])
def test_scheme_properties(name, radius):
    s = deepgrid.Scheme(name)
    assert s.name == name and s.radius == radius and not s.is_stencil
    state, coefficient = s.fields
    assert (state.name, state.kind) == ("u", "state")
    assert coefficient.kind == "coefficient" and coefficient.levels == 1 and coefficient.value == 0.1
    levels = 2 if name.startswith("wave") else 1
    assert state.levels == levels
    assert s.components == ["u", "u@1"][:levels] + [coefficient.name]
    assert name in repr(s)
    assert name in deepgrid.schemes.preset_names()


def test_a_stencil_is_a_scheme_of_one_field():
    s = deepgrid.Scheme(deepgrid.stencils.seven_point())
    assert s.is_stencil and s.components == ["u"] and s.radius == 1
    assert s == deepgrid.Scheme("7pt")


@pytest.mark.parametrize(
    "bad, named",
    [
        ({"fields": [{"name": "u", "levels": 9}], "update": {"u": [{"field": "u"}]}}, "levels"),
        ({"fields": [{"name": "u"}], "update": {"u": [{"field": "v"}]}}, "'v'"),
        ({"fields": [{"name": "u"}], "update": {"u": [{"field": "u@1"}]}}, "'u@1'"),
        ({"fields": [{"name": "u"}], "update": {"u": [{"coef": "kappa", "field": "u"}]}}, "'kappa'"),
        ({"fields": [{"name": "u"}, {"name": "w"}], "update": {"u": [{"field": "u"}]}}, "w has no update"),
        ({"fields": [{"name": "u"}], "update": {"u": [{"stencil": "9x", "field": "u"}]}}, "'9x'"),
        (
            {"fields": [{"name": "u"}, {"name": "k", "coefficient": True}],
             "update": {"u": [{"field": "u"}], "k": [{"field": "u"}]}},
            "coefficient field k",
        ),
    ],
)
def test_bad_schemes_raise_naming_the_entry(bad, named):
    with pytest.raises(deepgrid.InvalidArgument) as e:
        deepgrid.Scheme(bad)
    message = str(e.value)
    assert named in message and "\n" not in message


def test_unknown_preset_and_wrong_type():
    with pytest.raises(deepgrid.InvalidArgument, match="unknown stencil or scheme 'wave9'"):
        deepgrid.Scheme("wave9")
    with pytest.raises(TypeError, match="a scheme is"):
        deepgrid.Scheme(42)


# --- grids of several fields ---------------------------------------------------------------
def test_create_with_a_scheme_initialises_fields_as_the_cli(tmp_path, cli):
    g = deepgrid.create(tmp_path / "py", (12, 14, 16), init="random:4", scheme="wave8")
    cli_out(cli, "create", str(tmp_path / "cli"), "--shape", "16x14x12", "--init", "random:4",
            "--scheme", "wave8")
    assert g.fields == ("u", "u@1", "m")
    assert g.scheme == deepgrid.Scheme("wave8")
    assert sha256_of(g) == sha256_of(tmp_path / "cli")
    assert np.array_equal(g["u@1"][...], g["u"][...])  # at rest: the older level is the same
    assert np.all(g["m"][...] == np.float32(0.1))
    assert g.info()["fields"] == ["u", "u@1", "m"]
    assert "fields=('u', 'u@1', 'm')" in repr(g)


def test_a_stencil_scheme_makes_a_grid_of_one_field(tmp_path):
    g = deepgrid.create(tmp_path / "g", (4, 5, 6), init="random:1", scheme="7pt")
    assert g.fields == ("u",) and g.scheme == deepgrid.Scheme("7pt")
    plain = deepgrid.create(tmp_path / "plain", (4, 5, 6), init="random:1")
    assert plain.scheme is None
    deepgrid.run(g, steps=2)  # its own stencil, recorded
    deepgrid.run(plain, "7pt", steps=2)
    assert sha256_of(g) == sha256_of(plain)
    assert np.array_equal(g["u"][...], g[...])
    g["u"][1, 2] = 3.0  # a field view writes the one-field grid as g[...] does
    assert np.all(g[1, 2] == 3.0)


def test_field_views_slice_and_write_one_field(tmp_path):
    g = deepgrid.create(tmp_path / "g", (10, 12, 20), init="random:7", scheme="wave4")
    u_before = g["u"][...]
    m = g["m"]
    assert isinstance(m, deepgrid.Field) and m.name == "m" and m.shape == g.shape
    m[:, :, 10:20] = 0.25
    assert np.all(m[:, :, 10:20] == np.float32(0.25)) and np.all(m[:, :, :10] == np.float32(0.1))
    m[2, ::-3, 4] = np.arange(4)
    assert np.array_equal(m[2, ::-3, 4], np.arange(4, dtype=np.float32))
    g["u@1"] = np.zeros(g.shape)  # a whole field by name
    assert not g["u@1"][...].any()
    assert np.array_equal(g["u"][...], u_before)  # the other fields are untouched
    assert np.array_equal(g[...], u_before)  # plain g[...] is the first state field, u
    assert g.field().name == "u" and m.checksum()["max"] == 3.0


def test_plain_indexing_is_the_first_state_field_even_after_a_coefficient(tmp_path):
    scheme = {"fields": [{"name": "k", "coefficient": True, "value": 0.5}, {"name": "v"}],
              "update": {"v": [{"coef": "k", "field": "v"}]}}
    g = deepgrid.create(tmp_path / "g", (3, 4, 5), init="const:2", scheme=scheme)
    assert g.fields == ("k", "v") and g.field().name == "v"
    assert np.all(g[...] == 2.0) and np.all(g["k"][...] == 0.5)


def test_unknown_fields_raise_a_key_error_listing_the_fields(tmp_path):
    g = deepgrid.create(tmp_path / "g", (4, 4, 4), scheme="wave2")
    with pytest.raises(KeyError) as e:
        g["v"]
    assert isinstance(e.value, deepgrid.UnknownField) and isinstance(e.value, deepgrid.InvalidArgument)
    assert str(e.value) == f"grid {g.path} has no field 'v'; its fields are u, u@1, m"
    with pytest.raises(KeyError, match="its fields are u$"):
        deepgrid.create(tmp_path / "plain", (4, 4, 4))["m"]
    with pytest.raises(KeyError, match="no field 'velocity'"):
        g.to_npy(tmp_path / "v.npy", field="velocity")


def test_writing_a_field_of_a_read_only_grid_is_refused(tmp_path):
    deepgrid.create(tmp_path / "g", (4, 6, 8), scheme="wave2")
    ro = deepgrid.open(tmp_path / "g")
    with pytest.raises(deepgrid.InvalidArgument, match="read-only"):
        ro["m"][0] = 1.0
    with pytest.raises(deepgrid.InvalidArgument, match="read-only"):
        ro["m"] = 1.0
    assert np.all(ro["m"][...] == np.float32(0.1))  # nothing changed


def test_load_npy_fills_one_field_as_import_field(tmp_path, cli):
    g = deepgrid.create(tmp_path / "g", (6, 7, 9), init="random:3", scheme="wave2")
    cli_dir = str(tmp_path / "cli")
    cli_out(cli, "create", cli_dir, "--shape", "9x7x6", "--init", "random:3", "--scheme", "wave2")
    velocity = two_layer_velocity(g.shape)
    np.save(tmp_path / "m.npy", velocity)
    g["m"].load_npy(tmp_path / "m.npy")
    cli_out(cli, "import", str(tmp_path / "m.npy"), cli_dir, "--field", "m")
    assert np.array_equal(g["m"][...], velocity)
    assert sha256_of(g) == sha256_of(cli_dir)
    np.save(tmp_path / "f64.npy", velocity.astype(np.float64))
    with pytest.raises(deepgrid.InvalidArgument):
        g["m"].load_npy(tmp_path / "f64.npy")  # not the grid's dtype
    with pytest.raises(deepgrid.InvalidArgument, match="read-only"):
        deepgrid.open(g.path)["m"].load_npy(tmp_path / "m.npy")
    assert np.array_equal(g["m"][...], velocity)


def test_field_interop_and_checksums_match_the_cli(tmp_path, cli):
    g = deepgrid.create(tmp_path / "g", (8, 10, 12), init="random:2", scheme="heat-var")
    g["kappa"][...] = np.linspace(0, 0.1, 12, dtype=np.float32)
    g.to_npy(tmp_path / "k.npy", field="kappa")
    cli_out(cli, "export", g.path, str(tmp_path / "k-cli.npy"), "--field", "kappa")
    assert np.array_equal(np.load(tmp_path / "k.npy"), np.load(tmp_path / "k-cli.npy"))
    assert np.array_equal(np.load(tmp_path / "k.npy"), g["kappa"][...])
    cli_sum = json.loads(cli_out(cli, "checksum", g.path, "--field", "kappa", "--json"))
    assert g.checksum("kappa")["sha256"] == cli_sum["sha256"] != g.checksum("u")["sha256"]
    cli_all = json.loads(cli_out(cli, "checksum", g.path, "--json"))
    assert g.checksum()["sha256"] == cli_all["sha256"]
    assert np.array_equal(g.to_dask(field="kappa").compute(), g["kappa"][...])
    assert g.to_xarray(field="kappa").attrs["field"] == "kappa"
    ax = g.plot(field="kappa", y=3)
    assert "kappa" in ax.get_title() and "y = 3" in ax.get_title()


# --- runs -----------------------------------------------------------------------------------
@pytest.mark.parametrize("method, mem", [("incore", None), ("stream", "2MiB")])
def test_wave8_from_python_matches_the_cli_bitwise(tmp_path, cli, method, mem):
    """A wave8 grid made and filled from Python, run with a shot and receivers, against the same
    problem through the command line (create --scheme, import --field, run --probes)."""
    shape = (24, 18, 22)
    velocity = two_layer_velocity(shape)
    g = deepgrid.create(tmp_path / "py", shape, init="zero", scheme=deepgrid.Scheme(WAVE8))
    g["m"][...] = velocity
    cli_dir = str(tmp_path / "cli")
    np.save(tmp_path / "m.npy", velocity)
    cli_out(cli, "create", cli_dir, "--shape", "22x18x24", "--scheme", "wave8")
    cli_out(cli, "import", str(tmp_path / "m.npy"), cli_dir, "--field", "m")
    assert sha256_of(g) == sha256_of(cli_dir)

    report = deepgrid.run(g, steps=30, probes=SHOT, method=method, mem=mem, bt=4, progress=False)
    (tmp_path / "shot.json").write_text(json.dumps(SHOT))
    cli_args = ["--steps", "30", "--method", method, "--bt", "4", "--probes",
                str(tmp_path / "shot.json"), "--traces", str(tmp_path / "cli.npy"), "--json"]
    cli_report = json.loads(cli_out(cli, "run", cli_dir, *cli_args, *(["--mem", mem] if mem else [])))
    assert report["method"] == cli_report["method"] == method
    assert report["stencil"] == "wave8" and g.step == 30
    assert sha256_of(g) == sha256_of(cli_dir)
    traces = report["traces"]
    assert traces.shape == (30, 3) and traces.dtype == np.float64
    assert np.array_equal(traces, np.load(tmp_path / "cli.npy"))
    assert np.abs(traces[:, 0]).max() > 1e-3  # the shot reached the nearest receiver
    assert not np.array_equal(g["u"][...], g["u@1"][...])  # the wave moves
    assert np.array_equal(g["m"][...], velocity)  # coefficient fields stay


def test_probes_from_a_file_and_traces_written(tmp_path):
    g = deepgrid.create(tmp_path / "g", (16, 18, 20), scheme="wave2")
    probes = tmp_path / "shot.json"
    probes.write_text(json.dumps(SHOT))
    report = deepgrid.run(g, "wave2", 12, probes=probes, traces=tmp_path / "t.npy", progress=False)
    assert np.array_equal(np.load(tmp_path / "t.npy"), report["traces"])
    assert report["traces"].shape == (12, 3)
    without = deepgrid.run(g, steps=2, progress=False)
    assert "traces" not in without and g.step == 14


def test_bad_runs_raise_clear_errors_and_change_nothing(tmp_path):
    g = deepgrid.create(tmp_path / "g", (8, 8, 8), scheme="wave2")
    bad = {"receivers": [{"field": "p", "at": [[1, 1, 1]]}]}
    with pytest.raises(deepgrid.InvalidArgument, match="'p'"):
        deepgrid.run(g, steps=2, probes=bad, progress=False)
    with pytest.raises(deepgrid.InvalidArgument, match="needs steps"):
        deepgrid.run(g)
    with pytest.raises(deepgrid.InvalidArgument, match="hold u, u@1, m but heat-var needs u, kappa"):
        deepgrid.run(g, "heat-var", 2, progress=False)
    plain = deepgrid.create(tmp_path / "plain", (8, 8, 8))
    with pytest.raises(deepgrid.InvalidArgument, match="has no scheme of its own"):
        deepgrid.run(plain, steps=2, progress=False)
    assert g.step == 0 == plain.step

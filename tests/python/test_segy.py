"""SEG-Y traces (deepgrid.traces_to_segy, run(traces="x.sgy"), deepgrid traces), read back
with the segyio package: samples bitwise as float32 of the .npy values, the sample interval,
receiver and source coordinates."""

import json
import subprocess

import numpy as np
import pytest

import deepgrid

segyio = pytest.importorskip("segyio", reason="segyio (the interop extra) reads SEG-Y back")

SHOT = {
    "sources": [{"field": "u", "at": [4, 9, 3], "ricker": {"frequency": 0.08, "delay": 12}}],
    "receivers": [{"field": "u", "at": [[6, 9, 3], [9, 9, 3], [12, 7, 5]]}],
}
SPACING = (2.5, 1.25, 0.1)


def read_back(path):
    """Samples (traces, samples), trace headers and the sample interval, as segyio reads them."""
    with segyio.open(path, "r", ignore_geometry=True) as f:
        headers = [dict(h) for h in f.header]  # (segyio reuses one buffer for each)
        return f.trace.raw[:], headers, f.bin[segyio.BinField.Interval], f.text[0]


def scaled(h, field, scalar):
    s = h[scalar]
    return h[field] / -s if s < 0 else h[field] * (s or 1)


def check_segy(path, values, dt_us):
    samples, headers, interval, text = read_back(path)
    assert samples.dtype == np.float32
    assert np.array_equal(samples.view(np.uint32), values.T.astype(np.float32).view(np.uint32))
    assert interval == dt_us
    coords = segyio.TraceField.SourceGroupScalar
    depths = segyio.TraceField.ElevationScalar
    for h, at in zip(headers, SHOT["receivers"][0]["at"], strict=True):
        assert h[segyio.TraceField.TRACE_SAMPLE_INTERVAL] == dt_us
        assert scaled(h, segyio.TraceField.GroupX, coords) == pytest.approx(at[0] * SPACING[0])
        assert scaled(h, segyio.TraceField.GroupY, coords) == pytest.approx(at[1] * SPACING[1])
        assert scaled(h, segyio.TraceField.ReceiverGroupElevation, depths) == pytest.approx(
            -at[2] * SPACING[2])
        assert scaled(h, segyio.TraceField.SourceX, coords) == pytest.approx(4 * SPACING[0])
        assert scaled(h, segyio.TraceField.SourceY, coords) == pytest.approx(9 * SPACING[1])
        assert scaled(h, segyio.TraceField.SourceDepth, depths) == pytest.approx(3 * SPACING[2])
    assert [h[segyio.TraceField.TRACE_SEQUENCE_FILE] for h in headers] == [1, 2, 3]
    assert b"deepgrid" in bytes(text)


@pytest.fixture
def shot_run(tmp_path):
    """A wave2 grid run 40 steps with the shot: its traces (.npy) and report."""
    g = deepgrid.create(tmp_path / "g", (10, 16, 16), scheme="wave2", init="zero")
    g["m"][...] = 0.2
    report = deepgrid.run(g, steps=40, probes=SHOT, traces=tmp_path / "t.npy", progress=False)
    assert np.abs(report["traces"]).max() > 1e-3  # the shot reached the receivers
    return tmp_path, report


def test_traces_to_segy_from_npy_and_from_array(shot_run):
    tmp, report = shot_run
    deepgrid.traces_to_segy(tmp / "t.npy", tmp / "a.sgy", probes=SHOT, dt=0.0005, spacing=SPACING)
    check_segy(tmp / "a.sgy", np.load(tmp / "t.npy"), 500)
    deepgrid.traces_to_segy(report["traces"], tmp / "b.segy", probes=SHOT, dt=0.0005,
                            spacing=SPACING)
    assert (tmp / "a.sgy").read_bytes() == (tmp / "b.segy").read_bytes()


def test_run_writes_segy_and_the_cli_converts_alike(shot_run, tmp_path, cli):
    tmp, report = shot_run
    g = deepgrid.create(tmp_path / "g2", (10, 16, 16), scheme="wave2", init="zero")
    g["m"][...] = 0.2
    again = deepgrid.run(g, steps=40, probes=SHOT, traces=tmp / "r.sgy", dt=0.001,
                         spacing=SPACING, progress=False)
    assert np.array_equal(again["traces"], report["traces"])
    check_segy(tmp / "r.sgy", report["traces"], 1000)
    (tmp / "shot.json").write_text(json.dumps(SHOT))
    subprocess.run([cli, "traces", str(tmp / "t.npy"), str(tmp / "c.sgy"), "--probes",
                    str(tmp / "shot.json"), "--dt", "0.001", "--spacing", "2.5,1.25,0.1"],
                   check=True, capture_output=True)
    check_segy(tmp / "c.sgy", report["traces"], 1000)
    assert (tmp / "c.sgy").read_bytes()[3200:] == (tmp / "r.sgy").read_bytes()[3200:]


def test_bad_segy_input_raises_and_writes_nothing(shot_run):
    tmp, report = shot_run
    with pytest.raises(deepgrid.InvalidArgument, match="time per step"):
        deepgrid.traces_to_segy(report["traces"], tmp / "x.sgy", probes=SHOT, dt=0)
    with pytest.raises(deepgrid.InvalidArgument, match=r"\.sgy or \.segy"):
        deepgrid.traces_to_segy(report["traces"], tmp / "x.npy", probes=SHOT, dt=0.001)
    with pytest.raises(deepgrid.InvalidArgument, match="3 columns but the probes list 1"):
        one = {"receivers": [{"at": [1, 1, 1]}]}
        deepgrid.traces_to_segy(report["traces"], tmp / "x.sgy", probes=one, dt=0.001)
    assert not list(tmp.glob("x.*"))

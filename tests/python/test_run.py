"""deepgrid.run: the same results as the command line, progress, stopping, GIL, Ctrl-C."""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import deepgrid
from conftest import copy_grid, sha256_of


def cli_run(cli, path, *args):
    out = subprocess.run([cli, "run", path, *args, "--json"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


@pytest.mark.parametrize("method, mem, band_rows",
                         [("incore", None, 0), ("stream", "256KiB", 0), ("stream", "256KiB", 8)])
def test_run_matches_the_command_line(tmp_path, cli, method, mem, band_rows):
    g = deepgrid.create(tmp_path / "a", (24, 40, 36), init="random:5")
    other = copy_grid(g.path, tmp_path / "b")
    in_core = copy_grid(g.path, tmp_path / "c")
    report = deepgrid.run(g, deepgrid.stencils.nineteen_point(), 7, method=method, mem=mem,
                          band_rows=band_rows, boundary="neumann", progress=False)
    cli_args = ["--stencil", "19pt", "--steps", "7", "--method", method, "--boundary", "neumann",
                "--band-rows", str(band_rows)]
    cli_report = cli_run(cli, other, *cli_args, *(["--mem", mem] if mem else []))
    assert report["method"] == cli_report["method"] == method
    assert report["band_rows"] == cli_report["band_rows"] == band_rows
    assert (report["steps"], report["step_from"], report["step_to"]) == (7, 0, 7)
    assert g.step == 7  # the Grid object sees the new step
    assert sha256_of(g) == sha256_of(other)
    deepgrid.run(in_core, "19pt", 7, method="incore", boundary="neumann", progress=False)
    assert sha256_of(g) == sha256_of(in_core)


def test_a_device_run_matches_the_in_core_run_bitwise(tmp_path, cli):
    if not deepgrid.devices():
        pytest.skip("no OpenCL device here (scripts/setup.sh installs PoCL's CPU device)")
    listed = json.loads(subprocess.run([cli, "devices", "--json"], check=True, capture_output=True,
                                       text=True).stdout)["devices"]
    assert deepgrid.devices() == listed
    g = deepgrid.create(tmp_path / "a", (21, 17, 13), scheme="wave4", init="random:3")
    other = copy_grid(g.path, tmp_path / "b")
    report = deepgrid.run(g, steps=6, device=0, device_mem="1MiB", boundary="periodic",
                          progress=False)
    assert report["method"] == "device"
    assert report["device_placement"] == "device-resident"
    deepgrid.run(other, steps=6, method="incore", boundary="periodic", progress=False)
    assert sha256_of(g) == sha256_of(other)
    # A budget below the grid's two copies (111 KiB): it goes through the device as a
    # wavefront, its copies and steps in turn or beside each other.
    for overlap in ("off", "on"):
        report = deepgrid.run(g, steps=6, device=0, device_mem="80KiB", boundary="periodic",
                              device_overlap=overlap, progress=False)
        assert report["device_placement"] == "host-resident"
        deepgrid.run(other, steps=6, method="incore", boundary="periodic", progress=False)
        assert sha256_of(g) == sha256_of(other)
    with pytest.raises(deepgrid.InvalidArgument, match="is not auto, on or off"):
        deepgrid.run(g, steps=1, device=0, device_overlap="maybe", progress=False)
    # A --mem below them too: the grid stays on disk, swept through the device (three tiers).
    report = deepgrid.run(g, steps=6, device=0, device_mem="80KiB", mem="100KiB",
                          boundary="periodic", progress=False)
    assert report["device_placement"] == "three-tier"
    deepgrid.run(other, steps=6, method="incore", boundary="periodic", progress=False)
    assert sha256_of(g) == sha256_of(other)
    with pytest.raises(deepgrid.InvalidArgument, match="--device-mem"):
        deepgrid.run(g, steps=1, device=0, device_mem="12KiB", progress=False)


def test_flushed_subnormals_leave_none_and_match_the_command_line(tmp_path, cli):
    # Values near the smallest normal f32 decay into the subnormal range (a 7pt stencil whose
    # weights add up to 0.4): a flushed run writes
    # none of them (zeros instead), an IEEE run keeps them, and the command line's flushed run
    # gives the same bits as the package's.
    tiny = np.finfo(np.float32).tiny
    g = deepgrid.create(tmp_path / "g", (12, 10, 8), init="zero")
    shape = g[:, :, :].shape
    g[:, :, :] = np.random.default_rng(3).random(shape, dtype=np.float32) * 4 * tiny
    ieee = copy_grid(g.path, tmp_path / "ieee")
    other = copy_grid(g.path, tmp_path / "cli")
    shrinking = deepgrid.stencils.seven_point([0.1, 0.05])
    report = deepgrid.run(g, shrinking, 3, boundary="periodic", flush_subnormals=True, progress=False)
    assert report["flush_subnormals"] is True
    cli_report = cli_run(cli, other, "--stencil", "7pt", "--coeffs", "0.1,0.05", "--steps", "3",
                         "--boundary", "periodic", "--flush-subnormals")
    assert cli_report["flush_subnormals"] is True
    assert sha256_of(g) == sha256_of(other)
    ieee_report = deepgrid.run(ieee, shrinking, 3, boundary="periodic", progress=False)
    assert ieee_report["flush_subnormals"] is False

    def subnormals(a):
        return int(np.count_nonzero((a != 0) & (np.abs(a) < tiny)))

    assert subnormals(deepgrid.open(ieee)[:, :, :]) > 0
    assert subnormals(g[:, :, :]) == 0


def test_run_changes_values_as_a_heat_step(tmp_path):
    # One 7pt step with dirichlet:0 on a constant field: interior points keep the value,
    # face points lose 1/8 per missing neighbour.
    g = deepgrid.create(tmp_path / "g", (6, 6, 6), init="const:1")
    deepgrid.run(g, "7pt", 1, progress=False)
    assert g[3, 3, 3] == 1.0
    assert g[0, 3, 3] == 0.875
    assert g[0, 0, 0] == 0.625


def test_custom_stencil_and_coefficients(tmp_path, cli):
    g = deepgrid.create(tmp_path / "g", (10, 12, 14), init="random:9")
    other = copy_grid(g.path, tmp_path / "h")
    s = deepgrid.Stencil(points=[(0, 0, 0, 0.6), (-1, 0, 0, 0.3), (0, -1, 0, 0.1)], name="upwind")
    assert s.points[0] == (0, -1, 0, 0.1)  # canonical (dz, dy, dx) order
    assert s.radius == 1
    deepgrid.run(g, s, 3, boundary="periodic", progress=False)
    stencil_file = tmp_path / "upwind.json"
    stencil_file.write_text(s.to_json())
    cli_run(cli, other, "--stencil", str(stencil_file), "--steps", "3", "--boundary", "periodic")
    assert sha256_of(g) == sha256_of(other)
    seven = deepgrid.stencils.seven_point([0.4, 0.1])
    assert sorted(c for *_, c in seven.points) == [0.1] * 6 + [0.4]
    assert deepgrid.stencils.five_point().points != deepgrid.stencils.nine_point().points
    assert "27pt" in deepgrid.stencils.preset_names()


def test_progress_callback_and_stopping(tmp_path):
    g = deepgrid.create(tmp_path / "g", (16, 32, 32), init="random:1")
    seen = []

    def progress(done, total):
        seen.append((done, total))
        return done < 4  # stop once 4 or more steps are done

    report = deepgrid.run(g, "7pt", 20, method="incore", bt=2, progress=progress)
    assert seen[0] == (2, 20) and seen[-1][0] == report["steps"] == 4
    assert g.step == 4 == deepgrid.open(g.path).step
    fresh = deepgrid.create(tmp_path / "f", (16, 32, 32), init="random:1")
    deepgrid.run(fresh, "7pt", 4, method="incore", progress=False)
    assert sha256_of(g) == sha256_of(fresh)  # stopped cleanly: exactly 4 steps' values


@pytest.mark.parametrize("again", ["same call", "resume"])
def test_a_stopped_stream_run_is_finished_bitwise(tmp_path, again):
    g = deepgrid.create(tmp_path / "g", (40, 32, 32), init="random:2")
    options = dict(method="stream", mem="1MiB", bt=3, boundary="periodic")
    report = deepgrid.run(g, "7pt", 12, progress=lambda done, total: done < 6, **options)
    assert report["steps"] == 6 and report["step_target"] == 12
    if again == "same call":
        finished = deepgrid.run(g, "7pt", 12, progress=False, **options)
    else:
        finished = deepgrid.run(g, "27pt", 1, resume=True, progress=False, mem="1MiB")
    assert finished["resumed"] and finished["step_to"] == 12 == deepgrid.open(g.path).step
    fresh = deepgrid.create(tmp_path / "f", (40, 32, 32), init="random:2")
    deepgrid.run(fresh, "7pt", 12, progress=False, **options)
    assert sha256_of(g) == sha256_of(fresh)


def test_a_large_grid_resumes_with_the_unfinished_runs_stencil(tmp_path):
    # From 1 GiB a run left to choose measures the machine to weigh the stream (plan.h,
    # weighs_stream) for the scheme it will run: resuming, the unfinished run's, not the grid's
    # own, which a grid of one field has none of. (Zeros: the files are allocated, not written.)
    g = deepgrid.create(tmp_path / "g", (256, 1024, 1024), init="zero")
    stopped = deepgrid.run(g, "7pt", 2, method="incore", bt=1, progress=lambda done, total: False)
    assert stopped["steps"] == 1
    finished = deepgrid.run(g, resume=True, progress=False)
    assert finished["resumed"] and finished["step_to"] == 2 == deepgrid.open(g.path).step


def test_progress_bar(tmp_path, capsys):
    g = deepgrid.create(tmp_path / "g", (8, 16, 16))
    deepgrid.run(g, "7pt", 3, bt=1, method="incore", progress=True)
    err = capsys.readouterr().err
    assert "deepgrid run" in err and "3/3" in err


def test_gil_is_released_during_a_run(tmp_path):
    g = deepgrid.create(tmp_path / "g", (64, 128, 128), init="random:1")

    def ticks_during(steps):
        """Runs `steps` steps while another thread ticks every millisecond; the run's report
        and the ticks that fell inside it."""
        ticks = []
        stop = threading.Event()

        def count():
            while not stop.is_set():
                ticks.append(time.perf_counter())
                time.sleep(0.001)

        t = threading.Thread(target=count)
        t.start()
        started = time.perf_counter()
        report = deepgrid.run(g, "27pt", steps, method="incore", bt=40, threads=1, progress=False)
        ended = time.perf_counter()
        stop.set()
        t.join()
        return report, [x for x in ticks if started < x < ended], ended - started

    # Runs long enough to tell, whatever the machine's speed: the steps double until one lasts
    # 0.2 s (40 steps took 0.2-0.5 s on the development VMs).
    steps = 40
    report, during, seconds = ticks_during(steps)
    while report["seconds"] <= 0.2 and steps < 40 * 2**6:
        steps *= 2
        report, during, seconds = ticks_during(steps)
    assert report["steps"] == steps and report["seconds"] > 0.2, "the run is too short to tell"
    # Passes of bt = 40 hold no GIL: the other thread keeps ticking through them.
    assert len(during) > 20, f"only {len(during)} ticks in a {seconds:.2f} s run"


CTRL_C_SCRIPT = """
import sys, deepgrid
def progress(done, total):
    print("progress", done, flush=True)
try:
    deepgrid.run(sys.argv[1], "27pt", 100000, method="stream", mem="1MiB", bt=1, progress=progress)
except KeyboardInterrupt:
    print("interrupted", deepgrid.open(sys.argv[1]).step, flush=True)
    sys.exit(130)
"""


def test_ctrl_c_stops_cleanly(tmp_path):
    g = deepgrid.create(tmp_path / "g", (32, 64, 64), init="random:4")
    proc = subprocess.Popen([sys.executable, "-c", CTRL_C_SCRIPT, g.path], stdout=subprocess.PIPE, text=True)
    lines = []
    for line in proc.stdout:
        lines.append(line.split())
        if len(lines) == 3:
            proc.send_signal(signal.SIGINT)
            break
    rest = proc.communicate(timeout=120)[0].split("\n")
    assert proc.returncode == 130, rest
    final = [line.split() for line in rest if line.startswith("interrupted")]
    assert final, rest
    step = int(final[0][1])
    assert 3 <= step < 100000
    g.refresh()
    assert g.step == step
    # The grid holds exactly `step` steps: the same as a fresh run of that many.
    fresh = deepgrid.create(tmp_path / "f", (32, 64, 64), init="random:4")
    deepgrid.run(fresh, "27pt", step, method="incore", progress=False)
    assert sha256_of(g) == sha256_of(fresh)


def _shot(grid, scheme, steps):
    """One shot in a worker process: what dask or Ray would fan out."""
    return deepgrid.run(grid, scheme, steps, progress=False)


def test_grids_schemes_and_reports_travel_to_worker_processes(tmp_path):
    import multiprocessing
    import pickle
    from concurrent.futures import ProcessPoolExecutor

    grids = [deepgrid.create(tmp_path / f"shot{i}", (8, 16, 16), scheme="wave2", init="gaussian")
             for i in range(3)]
    scheme = deepgrid.Scheme("wave2")
    assert pickle.loads(pickle.dumps(scheme)) == scheme
    field = pickle.loads(pickle.dumps(grids[0]["m"]))
    assert field.name == "m" and field.grid.path == grids[0].path
    spawn = multiprocessing.get_context("spawn")  # (OpenMP is not safe in forked children)
    with ProcessPoolExecutor(2, mp_context=spawn) as pool:
        reports = list(pool.map(_shot, grids[:2], [scheme] * 2, [3, 5]))
    assert [r["steps"] for r in reports] == [3, 5]
    assert pickle.loads(pickle.dumps(reports[1]))["step_to"] == 5
    reopened = [pickle.loads(pickle.dumps(g)) for g in grids[:2]]
    assert [g.step for g in reopened] == [3, 5]  # opened as they are now
    deepgrid.run(grids[2], scheme, 3, progress=False)  # the same shot in this process
    assert np.array_equal(grids[2][:], reopened[0][:])

#!/usr/bin/env python3
"""Devito on exactly deepgrid's wave2/wave4/wave8 update (issue 31).

deepgrid's scheme presets (src/model/scheme.cc, Scheme::preset): a field u of two time levels
(u, u@1) and a coefficient m (default 0.1),

    u' = 2 u - u@1 + m * lap_r(u),

lap_r the sum over x, y, z of the central second derivative of order r (2, 4 or 8), unit spacing,
unit time step, zero (dirichlet:0) values outside the grid, f32. In Devito that is a TimeFunction
u (time_order=2, space_order=r), a Function m and Eq(u.forward, 2*u - u.backward + m*u.laplace)
on a Grid of spacing 1; the equation has no dt, so the time step is 1 by construction.

Benchmark mode (default) prints one JSON object: MLUP/s = points * steps / the operator's own
section timings (its performance summary, not Python overhead), and Devito's GFlop/s. The first
apply compiles, autotunes (--autotune) and pages the arrays in; the timed applies reuse the
tuned block sizes and the best of --repeats counts, as in `deepgrid bench`.

--check mode runs a small grid (default 48x40x36, 10 steps, random u, u@1 = u, m = 0.1) and
verifies that it is the same problem: Devito's Laplacian weights against deepgrid's
second_derivative_weights (read from src/model/scheme.cc), Devito's halo still zero after the
run (deepgrid's dirichlet:0), and the values against a float64 NumPy reference and, with
--deepgrid, against deepgrid's own run of the same grid (create/import/run/export). Agreement
is to ~1e-5 relative, not bitwise: the two evaluate the sums in different orders.

Axes: deepgrid's shape is NXxNYxNZ with x fastest in memory, its .npy files (nz, ny, nx). The
Devito grid here is built as (nz, ny, nx), so Devito's last (fastest) dimension is deepgrid's x
and the arrays compare element for element.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

# The environment the comparison runs in (compare_wave.sh sets the same); set before importing
# Devito, which reads it at import time.
os.environ.setdefault("DEVITO_LANGUAGE", "openmp")
os.environ.setdefault("DEVITO_LOGGING", "ERROR")
# The 'advanced' profiler times the same sections with the same generated C as 'basic' (checked
# on 4.8.23: identical code), and also fills in each section's flops and iteration shapes.
os.environ.setdefault("DEVITO_PROFILING", "advanced")
os.environ.setdefault("OMP_NUM_THREADS", "2")

# After the environment above.
import devito  # noqa: E402
import numpy as np  # noqa: E402
from devito import Eq, Function, Grid, Operator, TimeFunction  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SCHEME_CC = REPO / "src" / "model" / "scheme.cc"
ORDERS = {"wave2": 2, "wave4": 4, "wave8": 8}
M_DEFAULT = 0.1  # the presets' default coefficient value


def parse_shape(text):
    parts = [int(p) for p in text.lower().split("x")]
    if len(parts) != 3 or min(parts) < 1:
        raise argparse.ArgumentTypeError(f"shape '{text}' is not NXxNYxNZ, e.g. 256x256x256")
    return tuple(parts)


def shape_text(shape):
    return "x".join(str(n) for n in shape)


def build(scheme, shape, m_value):
    """The grid, u, m and the operator; shape is deepgrid's (nx, ny, nz)."""
    nx, ny, nz = shape
    dshape = (nz, ny, nx)
    grid = Grid(shape=dshape, extent=tuple(float(n - 1) for n in dshape), dtype=np.float32)
    spacing = [float(h) for h in grid.spacing]
    if spacing != [1.0, 1.0, 1.0]:
        raise SystemExit(f"Devito grid spacing is {spacing}, not 1")
    u = TimeFunction(name="u", grid=grid, time_order=2, space_order=ORDERS[scheme])
    m = Function(name="m", grid=grid, space_order=0)
    m.data[:] = np.float32(m_value)
    op = Operator(
        [Eq(u.forward, 2 * u - u.backward + m * u.laplace)],
        opt="advanced",
        name=f"deepgrid_{scheme}",
    )
    return grid, u, m, op


def set_state(u, u0):
    """u = u@1 = u0: all of Devito's time buffers (it keeps time_order + 1 = 3)."""
    for k in range(u.data.shape[0]):
        u.data[k] = u0


def step_args(steps):
    """Devito's time range for `steps` updates: u.backward reads time - 1, so Devito's default
    time_m is 1, and time 1 .. steps each write buffer (time + 1) % 3. Given explicitly."""
    return {"time_m": 1, "time_M": steps}


def final_u(u, steps):
    """The newest level after step_args(steps)."""
    return np.array(u.data[(steps + 1) % u.data.shape[0]])


def timed_seconds(summary):
    """The operator's own time: the sum of its sections' timers, and its flops in that time."""
    seconds = sum(entry.time for entry in summary.values())
    gflop = sum(entry.gflopss * entry.time for entry in summary.values() if entry.gflopss)
    ops = [entry.ops for entry in summary.values() if entry.ops]
    return seconds, gflop, ops


def timed_steps(summary):
    """The time steps the sections ran, from their iteration shapes (time first)."""
    return {shapes[0] for entry in summary.values() for shapes in entry.itershapes or ()}


def run_bench(args):
    shape = args.shape
    _, u, _, op = build(args.scheme, shape, args.m)
    rng = np.random.default_rng(args.seed)
    # deepgrid bench starts from random values in [0, 1) too (no subnormals either way).
    set_state(u, rng.random(u.data.shape[1:], dtype=np.float32))
    nthreads = int(os.environ["OMP_NUM_THREADS"])
    t0 = time.perf_counter()
    autotune = False if args.autotune == "off" else (args.autotune, "preemptive")
    op.apply(**step_args(args.steps), autotune=autotune, nthreads=nthreads)
    warmup_wall = time.perf_counter() - t0
    tuned = {}
    # The tuned block sizes, for the timed runs: Devito applies them only to the apply that
    # tuned, and keeps them in the operator's (private) state.
    if autotune and op._state.get("autotuning"):
        tuned = dict(op._state["autotuning"][-1]["tuned"])
    tuned["nthreads"] = tuned.get("nthreads", nthreads)
    points = float(np.prod(shape))
    runs = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        summary = op.apply(**step_args(args.steps), **tuned)
        wall = time.perf_counter() - t0
        seconds, gflop, ops = timed_seconds(summary)
        if timed_steps(summary) != {args.steps}:
            raise SystemExit(f"Devito ran {timed_steps(summary)} time steps, not {args.steps}")
        runs.append(
            {
                "seconds": seconds,
                "mlups": points * args.steps / seconds / 1e6,
                "gflops": gflop / seconds,
                "flops_per_point": ops,
                "apply_wall": wall,
            }
        )
    best = min(runs, key=lambda r: r["seconds"])
    if not np.isfinite(final_u(u, args.steps)).all():
        raise SystemExit("Devito's field is not finite after the run")
    return {
        "tool": "devito",
        "devito_version": devito.__version__,
        "scheme": args.scheme,
        "shape": shape_text(shape),
        "steps": args.steps,
        "dtype": "f32",
        "opt": "advanced",
        "language": os.environ.get("DEVITO_LANGUAGE"),
        "threads": tuned["nthreads"],
        "autotune": args.autotune,
        "tuned": tuned,
        "repeats": args.repeats,
        "seconds": best["seconds"],
        "mlups": best["mlups"],
        "gflops": best["gflops"],
        "flops_per_point": best["flops_per_point"],
        "mlups_each": [r["mlups"] for r in runs],
        # Python's clock around each timed apply (argument processing included), beside the
        # sections' own time above: a check that the sections cover the work.
        "apply_wall_seconds_each": [r["apply_wall"] for r in runs],
        "warmup_wall_seconds": warmup_wall,
        # Other work on the machine skews both tools (OpenMP threads wait on each other).
        "loadavg_1min_after": os.getloadavg()[0],
    }


# ---------------------------------------------------------------------------------------------
# --check


def deepgrid_weights(order):
    """second_derivative_weights(order) as written in src/model/scheme.cc, centre first."""
    text = SCHEME_CC.read_text()
    match = re.search(r"\bw" + str(order) + r"\s*=\s*\{([^}]*)\}", text)
    if not match:
        raise SystemExit(
            f"no w{order} = {{...}} in {SCHEME_CC}: has second_derivative_weights "
            "moved? Update deepgrid_weights() in this script"
        )
    weights = []
    for item in match.group(1).split(","):
        num, _, den = item.replace(" ", "").partition("/")
        weights.append(Fraction(num) / Fraction(den or "1"))
    return weights


def devito_weights(scheme):
    """Devito's Laplacian as its generated code computes it: u.laplace of a unit impulse.

    Returns the centre weight and {axis: {offset: weight}} over the nonzero values.
    """
    r = ORDERS[scheme]
    n = 2 * r + 3
    grid = Grid(shape=(n, n, n), extent=(n - 1.0,) * 3, dtype=np.float32)
    u = TimeFunction(name="u", grid=grid, time_order=2, space_order=r)
    v = Function(name="v", grid=grid, space_order=0)
    c = n // 2
    u.data[0, c, c, c] = 1
    Operator([Eq(v, u.laplace)], opt="advanced", name="laplace_impulse").apply(time_M=0)
    got = np.array(v.data, dtype=np.float64)
    centre = got[c, c, c]
    got[c, c, c] = 0
    axes = {}
    for axis in range(3):
        line = [c, c, c]
        axes[axis] = {}
        for off in range(-c, c + 1):
            if off == 0:
                continue
            line[axis] = c + off
            if got[tuple(line)] != 0:
                axes[axis][off] = float(got[tuple(line)])
                got[tuple(line)] = 0
    if got.any():
        raise SystemExit("Devito's Laplacian has weights off the axes: not a star stencil")
    return float(centre), axes


def check_weights(scheme):
    """Devito's Laplacian weights against deepgrid's second_derivative_weights (f32 rounding)."""
    w = deepgrid_weights(ORDERS[scheme])
    centre, axes = devito_weights(scheme)
    worst = abs(centre - 3 * float(w[0])) / abs(3 * float(w[0]))
    want = {s * d: float(w[d]) for d in range(1, len(w)) for s in (-1, 1)}
    for axis, offs in axes.items():
        if sorted(offs) != sorted(want):
            raise SystemExit(
                f"Devito's offsets along axis {axis} are {sorted(offs)}, deepgrid's {sorted(want)}"
            )
        for off, val in offs.items():
            worst = max(worst, abs(val - want[off]) / abs(want[off]))
    if worst > 2.5e-7:  # two f32 roundings
        raise SystemExit(f"Devito's Laplacian weights differ from deepgrid's by {worst:.3g}")
    return {
        "deepgrid_weights": [str(x) for x in w],
        "devito_weights_x": [axes[2][d] for d in range(1, len(w))],
        "devito_centre": centre,
        "max_relative_weight_difference": worst,
    }


def reference(scheme, u0, m_value, steps):
    """The update in float64 NumPy with explicit zero padding (deepgrid's dirichlet:0)."""
    w = [float(x) for x in deepgrid_weights(ORDERS[scheme])]
    r = len(w) - 1
    m = float(np.float32(m_value))
    prev, cur = u0.astype(np.float64), u0.astype(np.float64)
    n = cur.shape
    for _ in range(steps):
        p = np.pad(cur, r)
        lap = 3 * w[0] * cur
        for d in range(1, r + 1):
            for axis in range(3):
                for s in (-d, d):
                    sl = [slice(r, r + n[0]), slice(r, r + n[1]), slice(r, r + n[2])]
                    sl[axis] = slice(r + s, r + s + n[axis])
                    lap = lap + w[d] * p[tuple(sl)]
        prev, cur = cur, 2 * cur - prev + m * lap
    return cur


def halo_is_zero(u):
    """Every value of u outside the grid (all time buffers) is still 0 after the run."""
    full = np.array(u.data_with_halo)
    halo = u.halo[1:]  # (left, right) per space dimension; data_with_halo has no padding here
    inner = tuple(slice(lo, lo + n) for (lo, _), n in zip(halo, u.data.shape[1:], strict=True))
    full[(slice(None), *inner)] = 0
    return bool(not full.any()), [list(h) for h in halo]


def run_deepgrid(binary, scheme, shape, steps, threads, u0_path, work):
    grid = work / "deepgrid_grid"
    out = work / "deepgrid_u.npy"
    m_out = work / "deepgrid_m.npy"
    cmds = [
        [
            binary,
            "create",
            str(grid),
            "--shape",
            shape_text(shape),
            "--dtype",
            "f32",
            "--scheme",
            scheme,
            "--init",
            "zero",
        ],
        [binary, "import", str(u0_path), str(grid), "--field", "u"],
        [binary, "import", str(u0_path), str(grid), "--field", "u@1"],
        [
            binary,
            "run",
            str(grid),
            "--steps",
            str(steps),
            "--boundary",
            "dirichlet:0",
            "--threads",
            str(threads),
        ],
        [binary, "export", str(grid), str(out), "--field", "u"],
        [binary, "export", str(grid), str(m_out), "--field", "m"],
    ]
    for cmd in cmds:
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(
                f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}{done.stderr}"
            )
    return np.load(out), np.load(m_out)


def difference(a, b):
    """Max |a - b| and that over max |b| (normwise: pointwise ratios blow up near zeros)."""
    diff = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))
    return diff, diff / float(np.max(np.abs(b)))


def run_check(args):
    shape = args.check_shape
    steps = args.check_steps
    work = Path(args.out_dir) if args.out_dir else Path(tempfile.mkdtemp(prefix="devito_check_"))
    work.mkdir(parents=True, exist_ok=True)
    _, u, _, op = build(args.scheme, shape, args.m)
    report = {
        "tool": "devito-check",
        "devito_version": devito.__version__,
        "scheme": args.scheme,
        "shape": shape_text(shape),
        "steps": steps,
        "dir": str(work),
    }
    report["weights"] = check_weights(args.scheme)

    rng = np.random.default_rng(args.seed)
    u0 = rng.random(u.data.shape[1:], dtype=np.float32)  # (nz, ny, nx): deepgrid's .npy layout
    u0_path = work / "u0.npy"
    np.save(u0_path, u0)
    set_state(u, u0)
    op.apply(**step_args(steps), nthreads=int(os.environ["OMP_NUM_THREADS"]))
    dv = final_u(u, steps)
    np.save(work / "devito_u.npy", dv)
    zero, halo = halo_is_zero(u)
    report["devito_halo"] = halo
    report["devito_halo_still_zero"] = zero
    if not zero:
        raise SystemExit("Devito wrote values outside the grid: not deepgrid's dirichlet:0")

    ref = reference(args.scheme, u0, args.m, steps)
    ok = True
    d, rel = difference(dv, ref)
    report["devito_vs_f64_reference"] = {"max_abs": d, "max_rel": rel}
    ok &= rel <= args.rtol
    if args.deepgrid:
        dg, dg_m = run_deepgrid(
            args.deepgrid,
            args.scheme,
            shape,
            steps,
            int(os.environ["OMP_NUM_THREADS"]),
            u0_path,
            work,
        )
        if dg.shape != dv.shape:
            raise SystemExit(f"deepgrid's export has shape {dg.shape}, Devito's {dv.shape}")
        if not np.all(dg_m == np.float32(args.m)):
            raise SystemExit(f"deepgrid's m is not {args.m} everywhere")
        d, rel = difference(dv, dg)
        report["devito_vs_deepgrid"] = {
            "max_abs": d,
            "max_rel": rel,
            "bitwise_equal": bool(np.array_equal(dv, dg)),
        }
        ok &= rel <= args.rtol
        d, rel = difference(dg, ref)
        report["deepgrid_vs_f64_reference"] = {"max_abs": d, "max_rel": rel}
        ok &= rel <= args.rtol
    report["rtol"] = args.rtol
    report["ok"] = bool(ok)
    return report


def main():
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--scheme", choices=sorted(ORDERS), default="wave8")
    p.add_argument("--shape", type=parse_shape, default=(256, 256, 256), help="NXxNYxNZ")
    p.add_argument("--steps", type=int, default=20, help="time steps per timed apply")
    p.add_argument("--repeats", type=int, default=3, help="timed applies (the best counts)")
    p.add_argument("--autotune", choices=["off", "basic", "aggressive"], default="aggressive")
    p.add_argument("--m", type=float, default=M_DEFAULT, help="the coefficient m everywhere")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--check",
        action="store_true",
        help="verify the problem on a small grid instead of benchmarking",
    )
    p.add_argument("--check-shape", type=parse_shape, default=(48, 40, 36))
    p.add_argument("--check-steps", type=int, default=10)
    p.add_argument("--deepgrid", help="--check: also run this deepgrid binary and compare")
    p.add_argument("--out-dir", help="--check: where the .npy files go (default: a temp dir)")
    p.add_argument(
        "--rtol", type=float, default=1e-5, help="--check: max |difference| / max |value| allowed"
    )
    args = p.parse_args()
    if args.steps < 1 or args.repeats < 1 or args.check_steps < 1:
        p.error("--steps, --repeats and --check-steps must be >= 1")
    report = run_check(args) if args.check else run_bench(args)
    print(json.dumps(report))
    return 0 if report.get("ok", True) else 1


if __name__ == "__main__":
    sys.exit(main())

"""The stream method at 1/16 of a 4 GiB grid as a share of the in-core compute rate, by plane
size: whole planes and the planner's bands of rows (session 51), and bands after session 52's
kept files and I/O across bands (docs/performance/large-planes.md). Reads the two CSVs those
sections recorded; writes a PNG.

    .venv/bin/python bench/plot_bands.py docs/results/bands_2026-11-29_epyc_s51.csv \
        docs/results/band_sweep_costs_2026-11-29_epyc_s52.csv \
        docs/results/bands_share_2026-11-29_epyc.png
"""

import csv
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STEPS = 32


def points(shape):
    nx, ny, nz = (int(v) for v in shape.split("x"))
    return nx * ny * nz


def incore_compute_rates(rows):
    """MLUP/s of the in-core runs' compute phase, by shape."""
    rates = {}
    for r in rows:
        if r["run"] == "--method incore":
            rate = points(r["shape"]) * STEPS / float(r["compute_seconds"]) / 1e6
            rates.setdefault(r["shape"], []).append(rate)
    return rates


def shares(rows, run, rates):
    """Each stream run's MLUP/s over the median in-core compute rate of its shape."""
    out = {}
    for r in rows:
        if r["run"] == run and r["mlups"]:
            share = float(r["mlups"]) / statistics.median(rates[r["shape"]])
            out.setdefault(r["shape"], []).append(share)
    return out


def main(s51_path, s52_path, png):
    with open(s51_path) as f:
        s51 = list(csv.DictReader(f))
    with open(s52_path) as f:
        s52 = [dict(r, run=r["band_rows_option"]) for r in csv.DictReader(f)]
    s52_now = [r for r in s52 if r["commit"] == "c2a4b23" or r["run"] == "--method incore"]
    r51, r52 = incore_compute_rates(s51), incore_compute_rates(s52_now)
    now = shares(s52_now, "auto", r52)
    # 1024^3 in session 52: the runs of --band-rows 256 (the planner's choice in session 51)
    now.update(shares(s52_now, "--band-rows 256", r52))
    series = [
        ("whole planes (session 51)", shares(s51, "whole planes (--band-rows 0)", r51), "s",
         "tab:gray"),
        ("bands, the planner's (session 51)", shares(s51, "planner (--band-rows auto)", r51), "o",
         "tab:blue"),
        ("bands after kept files and I/O across bands (session 52)", now, "D", "tab:red"),
    ]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for offset, (label, by_shape, marker, color) in zip((-0.08, 0, 0.08), series):
        for shape, values in by_shape.items():
            side = int(shape.split("x")[0])
            x = [side * 2**offset] * len(values)
            ax.scatter(x, values, marker=marker, color=color, label=label)
            label = None
    ax.annotate("whole planes do not fit\n1/16 at 4096²", (4096 * 2**-0.08, 0.03), ha="center",
                fontsize=8, color="tab:gray")
    ax.set_xscale("log", base=2)
    ax.set_xticks([1024, 2048, 4096],
                  ["1024²\n(1024³)", "2048²\n(2048×2048×256)", "4096²\n(4096×4096×64)"])
    ax.set_ylim(0, 1)
    ax.axhline(0.9, color="black", linestyle=":", linewidth=1)
    ax.text(1024 * 2**-0.25, 0.91, "issue 32's target", fontsize=8)
    ax.set_xlabel("plane size (4 GiB grids of f32, 7pt, 32 steps, --mem 256MiB = 1/16)")
    ax.set_ylabel("stream MLUP/s ÷ in-core compute MLUP/s")
    ax.set_title("Out of core on large planes, a 2-core EPYC VM, 2026-11-29")
    ax.legend(fontsize=8, loc="upper right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


if __name__ == "__main__":
    main(*sys.argv[1:4])

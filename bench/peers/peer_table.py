#!/usr/bin/env python3
"""The table of bench/peers/compare_wave.sh from its JSON lines (standard library only).

Each input line is one JSON object: a `devito_wave.py --check` report ("tool": "devito-check"),
a `devito_wave.py` benchmark ("tool": "devito"), a `deepgrid bench --json` result (it has
"method": "incore") or the CPU time others took during a run ("tool": "cpu"). Rows are (scheme,
shape, steps); the ratio is deepgrid's median MLUP/s over Devito's; "others' CPU" is the largest
share of the machine's CPU time that other processes and the hypervisor took during one of the
row's runs. --out FILE writes the rows as JSON (FILE ending in .json, with every run's record)
or else CSV.
"""

import argparse
import csv
import json
import statistics
import sys


def load(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def rows_of(records):
    checks = {r["scheme"]: r for r in records if r.get("tool") == "devito-check"}
    rows = {}
    for r in records:
        if r.get("tool") == "devito":
            key, tool = (r["scheme"], r["shape"], r["steps"]), "devito"
        elif r.get("method") == "incore":
            key, tool = (r["stencil"], r["shape"], r["steps"]), "deepgrid"
        elif r.get("tool") == "cpu":
            key, tool = (r["scheme"], r["shape"], r["steps"]), "cpu"
        else:
            continue
        row = rows.setdefault(key, {"devito": [], "deepgrid": [], "cpu": []})
        row[tool].append(r)
    out = []
    for (scheme, shape, steps), runs in rows.items():
        dv = [r["mlups"] for r in runs["devito"]]
        dg = [r["mlups"] for r in runs["deepgrid"]]
        check = checks.get(scheme, {}).get("devito_vs_deepgrid", {})
        others = [r["others_cpu_share"] for r in runs["cpu"]]
        out.append(
            {
                "scheme": scheme,
                "shape": shape,
                "steps": steps,
                "threads": runs["devito"][0]["threads"] if runs["devito"] else None,
                "devito_version": runs["devito"][0]["devito_version"] if runs["devito"] else None,
                "devito_tuned": runs["devito"][0]["tuned"] if runs["devito"] else None,
                "devito_mlups": dv,
                "deepgrid_mlups": dg,
                "devito_median": statistics.median(dv) if dv else None,
                "deepgrid_median": statistics.median(dg) if dg else None,
                "ratio_deepgrid_over_devito": (
                    statistics.median(dg) / statistics.median(dv) if dv and dg else None
                ),
                "devito_gflops_median": (
                    statistics.median(r["gflops"] for r in runs["devito"]) if dv else None
                ),
                "deepgrid_gflops_median": (
                    statistics.median(r["gflops"] for r in runs["deepgrid"]) if dg else None
                ),
                "check_max_rel_difference": check.get("max_rel"),
                # The most CPU time other processes and the hypervisor took during one run.
                "others_cpu_share_max": max(others) if others else None,
                "runs": runs,
            }
        )
    return out


def fmt(values):
    return " ".join(f"{v:.0f}" for v in values) if values else "-"


def num(v, spec):
    return "-" if v is None else format(v, spec)


def print_table(rows, checks):
    for scheme, c in sorted(checks.items()):
        d = c.get("devito_vs_deepgrid", {})
        print(
            f"check {scheme} {c['shape']} {c['steps']} steps: Devito vs deepgrid max |diff| "
            f"{num(d.get('max_abs'), '.3g')} ({num(d.get('max_rel'), '.3g')} of max |u|), "
            f"bitwise equal: {d.get('bitwise_equal')}; "
            f"weights max rel diff {c['weights']['max_relative_weight_difference']:.2g}; "
            f"halo still zero: {c['devito_halo_still_zero']}; ok: {c['ok']}"
        )
    head = [
        "scheme",
        "shape",
        "steps",
        "Devito MLUP/s (each)",
        "deepgrid MLUP/s (each)",
        "Devito med",
        "deepgrid med",
        "deepgrid/Devito",
        "others' CPU",
    ]
    body = [
        [
            r["scheme"],
            r["shape"],
            str(r["steps"]),
            fmt(r["devito_mlups"]),
            fmt(r["deepgrid_mlups"]),
            num(r["devito_median"], ".1f"),
            num(r["deepgrid_median"], ".1f"),
            num(r["ratio_deepgrid_over_devito"], ".2f"),
            num(r["others_cpu_share_max"], ".0%"),
        ]
        for r in rows
    ]
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]
    for line in [head, *body]:
        print("  ".join(x.ljust(w) for x, w in zip(line, widths, strict=True)).rstrip())
    busy = [r for r in rows if (r["others_cpu_share_max"] or 0) > 0.05]
    if busy:
        print(
            "note: other processes or the hypervisor took over 5% of the CPU time during a run "
            "of " + ", ".join(f"{r['scheme']} {r['shape']}" for r in busy) + ": run again on "
            "a quiet machine"
        )


def write_out(path, rows):
    if path.endswith(".json"):
        with open(path, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)
            f.write("\n")
        return
    fields = [
        "scheme",
        "shape",
        "steps",
        "threads",
        "devito_version",
        "devito_mlups",
        "deepgrid_mlups",
        "devito_median",
        "deepgrid_median",
        "ratio_deepgrid_over_devito",
        "devito_gflops_median",
        "deepgrid_gflops_median",
        "check_max_rel_difference",
        "others_cpu_share_max",
    ]
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(fields)
        for r in rows:
            w.writerow(
                [
                    ";".join(f"{v:.2f}" for v in r[k]) if isinstance(r[k], list) else r[k]
                    for k in fields
                ]
            )


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("records", help="JSON lines, one run or check each")
    p.add_argument("--out", help="also write the rows: FILE.json (with the runs) or CSV")
    args = p.parse_args()
    records = load(args.records)
    rows = rows_of(records)
    checks = {r["scheme"]: r for r in records if r.get("tool") == "devito-check"}
    print_table(rows, checks)
    if args.out:
        write_out(args.out, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())

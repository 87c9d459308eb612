#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Turns tests/bench/clone.sh's raw TSVs into tests/bench/clone.md and PNG
plots (gnuplot). Usage: clone-report.py RAW_DIR OUT.md PLOTS_DIR"""
import os
import statistics as st
import sys

sys.dont_write_bytecode = True   # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchplot import read_rows, run_gnuplot  # noqa: E402

raw, out_md, plots = sys.argv[1:4]
plots = os.path.abspath(plots)
os.makedirs(plots, exist_ok=True)


def rows(name):
    return read_rows(raw, name)


def mib(size):
    return int(size[:-1]) * (1024 if size.endswith("G") else 1)


def gnuplot(script, name):
    run_gnuplot(plots, script, name)


meta = open(os.path.join(raw, "clone-meta.txt")).read().strip() if os.path.exists(os.path.join(raw, "clone-meta.txt")) else ""
md = ["# Clone benchmark (tests/bench/clone.sh)", "", f"Run: {meta}", ""]

times = rows("clone-times.tsv")  # shape, size, method, rep, seconds, files
shapes = [x for x in ("mixed", "large") if any(r[0] == x for r in times)]
sizes = sorted({r[1] for r in times}, key=mib)
methods = ["nvmevol", "cp-reflink", "cp-a"]
label = {"nvmevol": "nvmevol clone (Create -o from=)", "cp-reflink": "cp -a --reflink=always + sync",
         "cp-a": "cp -a + sync"}
shape_label = {"mixed": "half 16 MiB, half 256 KiB files", "large": "64 files"}
med = {}
md += ["## Clone time vs tree size", "",
       "Median seconds (min–max) of each method on the same loop XFS partition, alternated; "
       "the clone is timed from the Create request to its reply (flushed and committed), the copies "
       "until `sync -f` returns. cp -a reads a source that is still in the page cache (its best case).", "",
       "| tree | files | " + " | ".join(label[m] for m in methods) + " | cp -a ÷ clone |",
       "|---|---:|" + "---:|" * (len(methods) + 1)]
for sh in shapes:
    for s in sizes:
        cells = []
        files = next((r[5] for r in times if r[0] == sh and r[1] == s), "")
        for m in methods:
            v = [float(r[4]) for r in times if r[0] == sh and r[1] == s and r[2] == m]
            med[(sh, s, m)] = st.median(v) if v else float("nan")
            cells.append(f"{med[(sh, s, m)]:.3f} ({min(v):.3f}–{max(v):.3f})" if v else "n/a")
        ratio = med[(sh, s, "cp-a")] / med[(sh, s, "nvmevol")] if med[(sh, s, "nvmevol")] else float("nan")
        md.append(f"| {s}, {shape_label[sh]} | {files} | " + " | ".join(cells) + f" | {ratio:,.0f}× |")
md.append("")

with open(os.path.join(plots, "clone-times.dat"), "w") as f:
    for s in sizes:
        f.write(f"{mib(s)} " + " ".join(f"{med.get((sh, s, m), float('nan')):.4f}" for sh in ("mixed", "large")
                                        for m in methods) + "\n")
gnuplot(f"""set terminal pngcairo size 860,480
set output 'clone-times.png'
set title 'Clone time vs tree size (median of alternated runs)'
set logscale xy
set xlabel 'tree size (MiB)'
set xrange [70:12000]
set ylabel 'seconds (log)'
set key top left
set grid
set xtics ({", ".join(f'"{s}" {mib(s)}' for s in sizes)})
plot 'clone-times.dat' using 1:2 with linespoints lw 2 title 'nvmevol clone, mixed tree', \\
     '' using 1:5 with linespoints lw 2 title 'nvmevol clone, 64 large files', \\
     '' using 1:3 with linespoints lw 1 dt 2 title 'cp -a --reflink=always, mixed', \\
     '' using 1:4 with linespoints lw 2 title 'cp -a, mixed', \\
     '' using 1:7 with linespoints lw 2 title 'cp -a, 64 large files'
""", "clone-times")
os.unlink(os.path.join(plots, "clone-times.dat"))

stall = rows("clone-stall.tsv")
if stall:
    md += ["## What the freeze costs a neighbour volume", "",
           "The largest tree's volume is mounted and written (8 KiB every 5th probe write) while it is cloned; a "
           "neighbour volume on the same partition writes 4 KiB + fdatasync in a loop and logs each write's latency.",
           "", "| tree | run | neighbour write p50 / p99 before (ms) | worst write during the clone (ms) | "
           "clone request (ms) | frozen_ms (Status) | writes > 50 ms | daemon's account |",
           "|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in stall:
        md.append(f"| {r[0]} | {r[1]} | {r[2]} / {r[3]} | {r[4]} | {r[5]} | {r[6]} | {r[7]} | {r[8] if len(r) > 8 else ''} |")
    md.append("")
    trace = [r for r in rows("clone-stall-trace.tsv") if r[0] == "1"]
    with open(os.path.join(plots, "clone-stall.dat"), "w") as f:
        for r in trace:
            f.write(f"{r[1]} {r[2]}\n")
    first = stall[0]
    gnuplot(f"""set terminal pngcairo size 900,420
set output 'clone-stall.png'
set title 'Neighbour volume: 4 KiB write + fdatasync latency around a clone of a {first[0]} volume in use (run 1)'
set xlabel 'ms since the clone request'
set ylabel 'write latency (ms, log)'
set logscale y
set grid
set xrange [-1500:{float(first[5]) + 1500:.0f}]
set arrow from 0, graph 0 to 0, graph 1 nohead dt 2
set arrow from {first[5]}, graph 0 to {first[5]}, graph 1 nohead dt 2
plot 'clone-stall.dat' using 1:2 with points pt 7 ps 0.4 title 'writes (started at x): all over 1 ms, 1 in 10 below'
""", "clone-stall")
    os.unlink(os.path.join(plots, "clone-stall.dat"))
    md += ["![clone time](plots/clone-times.png)", "", "![stall](plots/clone-stall.png)", ""]

with open(out_md, "w") as f:
    f.write("\n".join(md) + "\n")
print("\n".join(md))

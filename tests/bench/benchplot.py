# SPDX-License-Identifier: MIT
"""Shared by the benchmark reports: raw TSV rows and gnuplot runs."""
import os
import subprocess
import sys


def read_rows(raw, name):
    """The tab-separated rows of RAW/NAME ([] if there is no such file)."""
    p = os.path.join(raw, name)
    if not os.path.exists(p):
        return []
    with open(p) as f:
        return [line.rstrip("\n").split("\t") for line in f if line.strip()]


def run_gnuplot(plots, script, name):
    """Runs @script in PLOTS (it writes its own PNG there); a failure is reported, not raised."""
    path = os.path.join(plots, name + ".gp")
    with open(path, "w") as f:
        f.write(script)
    try:
        subprocess.run(["gnuplot", path], check=True, cwd=plots, capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        print(f"{os.path.basename(sys.argv[0])}: gnuplot {name}: {e}", file=sys.stderr)
    os.unlink(path)

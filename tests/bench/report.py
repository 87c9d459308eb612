#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Turns tests/bench/run.sh's raw TSVs into RESULTS.md (markdown tables) and
PNG plots (gnuplot). Usage: report.py RAW_DIR RESULTS.md PLOTS_DIR

A hand-written analysis (profiles of missed aims, suggested fixes) is kept in
tests/bench/ANALYSIS.md and appended verbatim when it exists."""
import os
import statistics as st
import sys

sys.dont_write_bytecode = True   # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchplot import read_rows, run_gnuplot  # noqa: E402

raw, out_md, plots = sys.argv[1:4]
plots = os.path.abspath(plots)
os.makedirs(plots, exist_ok=True)
bench_dir = os.path.dirname(os.path.abspath(out_md))


def rows(name):
    return read_rows(raw, name)


def med(v):
    return st.median(v) if v else float("nan")


def fmt(x, d=0):
    if x != x:
        return "n/a"
    if d == 0 and abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:,.{d}f}" if d else f"{x:,.1f}" if abs(x) < 100 else f"{x:,.0f}"


def rng(v, d=0):
    return f"{fmt(min(v), d)}–{fmt(max(v), d)}" if v else "n/a"


def gnuplot(script, name):
    run_gnuplot(plots, script, name)


def mark(ok):
    return "met" if ok else "**missed**"


md = []
aims = []
meta = open(os.path.join(raw, "meta.txt")).read().strip() if os.path.exists(os.path.join(raw, "meta.txt")) else ""
md.append("# nvmevol benchmarks\n")
md.append("Produced by `tests/bench/run.sh` (do not edit by hand; the analysis at the end comes from "
          "`tests/bench/ANALYSIS.md`). Contenders alternate within each repetition (the first one rotates); "
          "tables show the **median** over repetitions, the min–max range, and **ratios of medians**. "
          "The machine is a noisy 2-CPU VM: only ratios measured side by side in one run mean anything.\n")
md.append("```\n" + meta + "\n```\n")
md.append("@@AIMS@@\n")

# ---------------------------------------------------------------- data path
WL = [("randwrite", "4 KiB random write, direct, libaio QD32", "IOPS"),
      ("randread", "4 KiB random read, direct, libaio QD32", "IOPS"),
      ("seqwrite", "1 MiB sequential write, direct, libaio QD8", "MiB/s"),
      ("fsyncwrite", "4 KiB write + fsync after each (buffered, psync)", "IOPS"),
      ("bufread", "4 KiB random read, buffered, psync", "IOPS")]
DC_ALL = ["host", "nvmevol", "bind", "overlay2-xfs", "local-xfs"]
data = {}
data_rep = {}
for wl, c, rep, v in rows("data.tsv"):
    data.setdefault((wl, c), []).append(float(v))
    data_rep[(wl, c, rep)] = float(v)


def paired(wl, c):
    """Median over repetitions of c/host measured in the same repetition."""
    rs = [data_rep[(w, cc, r)] / data_rep[(w, "host", r)] for (w, cc, r) in data_rep
          if w == wl and cc == c and (w, "host", r) in data_rep and data_rep[(w, "host", r)] > 0]
    return med(rs), rs
DC = [c for c in DC_ALL if any(k[1] == c for k in data)]
if data:
    md.append("## 1. Data path: fio inside a container\n")
    md.append("All on file-backed loop devices (direct-io=on) of the same size on the same host disk, 256 MiB "
              "file laid out beforehand. **host** = fio on the host straight onto the XFS partition that holds "
              "the nvmevol volume (the limit); **nvmevol** = a container with an nvmevol volume on that "
              "partition; **bind** (when present) = a container with a plain `--mount type=bind` of a directory on "
              "that same partition, i.e. what any container costs (seccomp filter on every syscall, cgroup) without "
              "nvmevol; **overlay2-xfs** = the container's own layer on a second dockerd whose data-root is an "
              "identical XFS loop partition; **local-xfs** = a Docker `local` volume on that daemon. Buffered random "
              "reads run on a file read once beforehand (page-cache hits) when the run says `--invalidate=0` in "
              "meta, otherwise from a cold cache.\n")
    md.append("| workload | unit | " + " | ".join(DC) + " | " + " | ".join(f"{c} ÷ host" for c in DC[1:]) +
              " | nvmevol ÷ host, paired (range) |")
    md.append("|---|---|" + "---:|" * (2 * len(DC)))
    plot_rows = []
    for wl, label, unit in WL:
        if (wl, "host") not in data:
            continue
        h = med(data[(wl, "host")])
        cells = [f"{fmt(med(data.get((wl, c), [])))} ({rng(data.get((wl, c), []))})" for c in DC]
        ratios = [med(data.get((wl, c), [])) / h for c in DC[1:]]
        pm, prs = paired(wl, "nvmevol")
        md.append(f"| {label} | {unit} | " + " | ".join(cells) + " | " + " | ".join(f"{r:.3f}" for r in ratios) +
                  f" | {pm:.3f} ({rng(prs, 2)}) |")
        aims.append((f"data path {wl}: nvmevol ÷ host ≥ 0.97", f"{ratios[0]:.3f}", ratios[0] >= 0.97))
        plot_rows.append((wl, ratios))
    md.append("\nCells: median (min–max) over the repetitions. *c ÷ host* = ratio of the medians; *paired* = the "
              "median over repetitions of nvmevol ÷ host measured in the same repetition (back to back), which "
              "cancels slow drifts of the machine's load.\n")
    with open(os.path.join(plots, "data.dat"), "w") as f:
        for wl, r in plot_rows:
            f.write(f"{wl} " + " ".join(f"{x:.4f}" for x in r) + "\n")
    gnuplot("""set terminal pngcairo size 900,480
set output 'data-path.png'
set title 'fio in a container, median throughput relative to host-direct (1.0 = host)'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set yrange [0:*]
set grid y
set key outside right
set arrow from graph 0, first 0.97 to graph 1, first 0.97 nohead dt 2 lc rgb 'red'
plot 'data.dat' using 2:xtic(1) title 'nvmevol'""" + "".join(f", '' using {3 + k} title '{c}'" for k, c in enumerate(DC[2:])) + """
""", "data-path")
    os.unlink(os.path.join(plots, "data.dat"))
    md.append("![data path](plots/data-path.png)\n")

# ---------------------------------------------------------------- copy-up
cu = {}
for c, rep, v in rows("copyup.tsv"):
    cu.setdefault(c, []).append(float(v) / 1000.0)
if cu:
    md.append("## 1b. Copy-up: the first 4 KiB write into a 1 GiB file that lives in the image\n")
    md.append("`open(O_WRONLY)` + `pwrite` 4 KiB at offset 0 + `close`, timed inside a fresh container "
              "(`tests/bench/firstwrite.c`). overlay2 copies the whole file up on the first open for writing "
              "(on XFS a reflink clone, on ext4 a full copy); on an nvmevol volume mounted over the image's "
              "directory Docker copied the file into the volume once at its first mount, and every later "
              "write is an in-place write.\n")
    md.append("| where the file is | median ms | min–max ms | ÷ nvmevol |")
    md.append("|---|---:|---:|---:|")
    base = med(cu.get("nvmevol", []))
    for c in ["overlay2-ext4", "overlay2-xfs", "nvmevol"]:
        if c in cu:
            md.append(f"| {c} | {fmt(med(cu[c]), 3)} | {rng(cu[c], 3)} | {med(cu[c]) / base:,.0f}× |")
    md.append("")
    with open(os.path.join(plots, "copyup.dat"), "w") as f:
        for c in ["overlay2-ext4", "overlay2-xfs", "nvmevol"]:
            if c in cu:
                f.write(f"{c} {med(cu[c]):.4f} {min(cu[c]):.4f} {max(cu[c]):.4f}\n")
    gnuplot("""set terminal pngcairo size 700,420
set output 'copyup.png'
set title 'first 4 KiB write into a 1 GiB image file (ms, log scale)'
set style data histograms
set style histogram errorbars gap 1 lw 1
set style fill solid 0.8 border -1
set logscale y
set grid y
set key off
plot 'copyup.dat' using 2:3:4:xtic(1)
""", "copyup")
    os.unlink(os.path.join(plots, "copyup.dat"))
    md.append("![copy-up](plots/copyup.png)\n")

# ------------------------------------------------------------ control plane
CP_ALL = ["local", "refplugin", "nvmevol-off", "nvmevol-warn", "nvmevol-warn-nocache"]
cp = {}
cp_rep = {}
for phase, c, rep, v in rows("control.tsv"):
    cp.setdefault((phase, c), []).append(float(v) / 1000.0)
    cp_rep[(phase, c, rep)] = float(v) / 1000.0


def cp_paired(phase, c, ref):
    """Per repetition c/ref (the two ran next to each other), and their median."""
    rs = [cp_rep[(p, cc, r)] / cp_rep[(p, ref, r)] for (p, cc, r) in cp_rep
          if p == phase and cc == c and (p, ref, r) in cp_rep and cp_rep[(p, ref, r)] > 0]
    return med(rs), rs


if cp:
    md.append("## 2a. Control plane through Docker: `docker volume create` + `docker run --rm -v v:/d busybox true` + `docker volume rm`\n")
    md.append("One cycle = the three CLI commands against the private dockerd (the plugin installed with "
              "plugin/build.sh + plugin/install.sh). `refplugin` = `tests/bench/refplugin.c`, the smallest "
              "managed plugin (every request answered at once, a volume a directory bound under its propagated "
              "mount, no state, no fsync): what dockerd charges any plugin. `nvmevol-off` / `nvmevol-warn` = "
              "volume option `selftest=off` / `selftest=warn` (default budget 300 ms). Phase *default* keeps the "
              "plugin's `NVMEVOL_SELFTEST_CACHE_SECONDS=300` (a warn mount reuses the partition's cached result); "
              "phase *nocache* sets it to 0, so every first mount of a warn volume runs the self-test. One "
              "warm-up cycle per contender is not counted; the order rotates every repetition. *paired* = the "
              "median over repetitions of the cycle's time over local's in the same repetition (and its "
              "quartiles).\n")
    md.append("| phase | contender | cycles | median ms | min–max ms | ÷ local (medians) | paired ÷ local, median (IQR) |")
    md.append("|---|---|---:|---:|---:|---:|---:|")
    for phase in ["default", "nocache"]:
        loc = med(cp.get((phase, "local"), []))
        for c in CP_ALL:
            v = cp.get((phase, c))
            if not v:
                continue
            r = med(v) / loc
            pm, prs = cp_paired(phase, c, "local")
            q = st.quantiles(prs, n=4) if len(prs) >= 4 else [float("nan")] * 3
            md.append(f"| {phase} | {c} | {len(v)} | {fmt(med(v))} | {rng(v)} | {r:.3f} | {pm:.3f} ({q[0]:.3f}–{q[2]:.3f}) |")
            if c == "nvmevol-off":
                # Met only when both agree: at a few cycles on a busy machine they can fall on either side.
                aims.append(("control plane: nvmevol (self-test off) ÷ local ≤ 1.05 (issue 23; medians, paired in brackets)",
                             f"{r:.3f} ({pm:.3f})", r <= 1.05 and pm <= 1.05))
    if cp.get(("default", "refplugin")) and cp.get(("default", "nvmevol-off")):
        rr = med(cp[("default", "refplugin")]) / med(cp[("default", "local")])
        nr = med(cp[("default", "nvmevol-off")]) / med(cp[("default", "refplugin")])
        md.append(f"\nOf the gap: the reference plugin ÷ local = {rr:.3f} (what any managed plugin pays in "
                  f"Docker), nvmevol (self-test off) ÷ the reference plugin = {nr:.3f} (nvmevol's own share).\n")
    md.append("")
    cpu = {}
    loads = []
    devchange = {}
    for row in rows("control-cpu.tsv"):
        phase, c, rep, d, k, pl, load = row[:7]
        cpu.setdefault((phase, c), []).append((float(d), float(k), float(pl)))
        loads.append(float(load))
        if len(row) > 7:
            devchange[(phase, c, rep)] = row[7] == "1"
    if devchange:
        md.append("The host's block devices (`/proc/partitions` and each disk's `diskseq`, what nvmevol's rescan "
                  "compares) changed during some cycles: other sessions' loop devices on this shared machine. After "
                  "such a change nvmevol's Create of a new name (and Docker's Get before it) waits for a rescan. "
                  "Cycles during which nothing changed, by themselves:\n")
        md.append("| phase | contender | cycles with a change | cycles without | median ms without | ÷ local without |")
        md.append("|---|---|---:|---:|---:|---:|")
        for phase in ["default", "nocache"]:
            quiet = {c: [cp_rep[(phase, c, r)] for (p, c2, r), ch in devchange.items()
                         if p == phase and c2 == c and not ch and (phase, c, r) in cp_rep] for c in CP_ALL}
            loc = med(quiet.get("local", []))
            for c in CP_ALL:
                n_ch = sum(1 for (p, c2, r), ch in devchange.items() if p == phase and c2 == c and ch)
                if not quiet.get(c) and not n_ch:
                    continue
                q = quiet.get(c, [])
                md.append(f"| {phase} | {c} | {n_ch} | {len(q)} | {fmt(med(q))} | {med(q) / loc:.3f} |")
        md.append("")
    if cpu:
        md.append("CPU time per cycle of the long-lived processes (`/proc/PID/stat`, utime + stime, in ticks of "
                  "10 ms, so the mean over the cycles is what counts): dockerd, its containerd, and the plugin. "
                  "The container's own processes (runc, the shim, busybox) are not in it. Load average during "
                  f"the cycles: {min(loads):.1f}–{max(loads):.1f}.\n")
        md.append("| phase | contender | cycles | dockerd ms (mean) | containerd ms (mean) | plugin ms (mean) |")
        md.append("|---|---|---:|---:|---:|---:|")
        for phase in ["default", "nocache"]:
            for c in CP_ALL:
                v = cpu.get((phase, c))
                if v:
                    md.append(f"| {phase} | {c} | {len(v)} | {st.mean(x[0] for x in v):.1f} | "
                              f"{st.mean(x[1] for x in v):.1f} | {st.mean(x[2] for x in v):.1f} |")
        md.append("")
    sc = {}
    for c, who, name, v in rows("control-strace.tsv"):
        sc.setdefault((c, who), {})[name] = float(v)
    if sc:
        md.append("System calls per cycle under `strace -f -c` (5 untimed cycles per contender, after the timed "
                  "ones; counts do not depend on the load). dockerd: all its threads; plugin: the plugin's "
                  "process and threads.\n")
        cs = [c for c in CP_ALL if (c, "dockerd") in sc]
        md.append("| system call | " + " | ".join(f"dockerd, {c}" for c in cs) + " | " +
                  " | ".join(f"plugin, {c}" for c in cs if (c, "plugin") in sc) + " |")
        md.append("|---|" + "---:|" * (len(cs) + sum(1 for c in cs if (c, "plugin") in sc)))
        names = set()
        for k, d in sc.items():
            names |= {n for n, x in d.items() if n != "total" and x >= 5}
        cols = [(c, "dockerd") for c in cs] + [(c, "plugin") for c in cs if (c, "plugin") in sc]
        for n in ["total"] + sorted(names, key=lambda n: -max(sc[k].get(n, 0) for k in cols)):
            md.append(f"| {n} | " + " | ".join(fmt(sc[k].get(n, 0)) for k in cols) + " |")
        md.append("")
    wall = {}
    for c, name, v in rows("control-wall.tsv"):
        wall.setdefault(c, {})[name] = float(v)
    if wall:
        # Calls that wait for a client, a timer or another thread: their wall time is idle time.
        waits = {"futex", "pselect6", "select", "poll", "ppoll", "epoll_wait", "epoll_pwait", "accept", "accept4",
                 "clock_nanosleep", "nanosleep", "recvfrom", "read", "wait4", "restart_syscall", "rt_sigtimedwait"}
        wc = [c for c in CP_ALL if c in wall]
        md.append("The plugin's wall time per cycle in its system calls (`strace -f -c -w`, the same untimed cycles, "
                  "summed over its threads; strace's stops make each call slower than untraced). Calls that wait "
                  "for a client, a timer or another thread are left out; *all others* is their sum.\n")
        md.append("| system call | " + " | ".join(f"plugin, {c} (ms)" for c in wc) + " |")
        md.append("|---|" + "---:|" * len(wc))
        names = {n for c in wc for n, x in wall[c].items() if n not in waits and x >= 0.05}
        for n in sorted(names, key=lambda n: -max(wall[c].get(n, 0) for c in wc)):
            md.append(f"| {n} | " + " | ".join(f"{wall[c].get(n, 0):.2f}" for c in wc) + " |")
        md.append("| *all others* | " + " | ".join(
            f"{sum(x for n, x in wall[c].items() if n not in waits):.2f}" for c in wc) + " |")
        md.append("")
    with open(os.path.join(plots, "control.dat"), "w") as f:
        for phase in ["default", "nocache"]:
            for c in CP_ALL:
                v = cp.get((phase, c))
                if v:
                    f.write(f"{phase}:{c} {med(v):.2f} {min(v):.2f} {max(v):.2f}\n")
    gnuplot("""set terminal pngcairo size 900,420
set output 'control-plane.png'
set title 'volume create + run --rm -v + volume rm (ms per cycle; median, min-max)'
set style data histograms
set style histogram errorbars gap 1 lw 1
set style fill solid 0.8 border -1
set yrange [0:*]
set grid y
set key off
set xtics rotate by -20
plot 'control.dat' using 2:3:4:xtic(1)
""", "control-plane")
    os.unlink(os.path.join(plots, "control.dat"))
    md.append("![control plane](plots/control-plane.png)\n")

# ---------------------------------------------------------------- endpoints
ep = {}
order = []
for n, name, rnd, cnt, p50, p99, mx, mean in rows("endpoints.tsv"):
    if name not in order:
        order.append(name)
    ep.setdefault((int(n), name), []).append((float(p50), float(p99), float(mx), int(cnt)))
if ep:
    md.append("## 2b. Plugin socket, per endpoint (daemon run directly, self-test off)\n")
    md.append("`tests/bench/sockbench.c`: HTTP/1.1 over the unix socket on one keep-alive connection, like "
              "Docker's plugin client (the *new connection* row pays connect + libmicrohttpd's thread per "
              "connection). Get picks a random existing volume; Create/Mount/Unmount/Remove work on extra "
              "volumes so the count stays at N. Each round is one batch; the table shows the median over "
              "rounds of each round's p50 and p99 (µs), and the range of the per-round p50.\n")
    ns = sorted({n for n, _ in ep})
    md.append("| endpoint | " + " | ".join(f"{n:,} vols p50 µs | p99 µs | p50 range" for n in ns) + " |")
    md.append("|---|" + "---:|---:|---:|" * len(ns))
    for name in order:
        cells = []
        for n in ns:
            v = ep.get((n, name))
            if not v:
                cells += ["", "", ""]
                continue
            p50s = [x[0] for x in v]
            cells += [fmt(med(p50s)), fmt(med([x[1] for x in v])), rng(p50s)]
        md.append(f"| {name} | " + " | ".join(cells) + " |")
    md.append("")
    if (10000, "List") in ep:
        l50 = med([x[0] for x in ep[(10000, "List")]]) / 1000
        l99 = med([x[1] for x in ep[(10000, "List")]]) / 1000
        aims.append(("List with 10,000 volumes ≤ 50 ms (p50; p99 in brackets)", f"{l50:.1f} ms ({l99:.1f})", l50 <= 50))
    with open(os.path.join(plots, "endpoints.dat"), "w") as f:
        for name in order:
            vals = []
            for n in ns:
                v = ep.get((n, name), [(float("nan"),) * 2])
                vals += [med([x[0] for x in v]), med([x[1] for x in v])]
            f.write('"' + name.replace("Capabilities (new connection)", "Caps(new conn)") + '" ' +
                    " ".join(f"{x:.1f}" for x in vals) + "\n")
    cols = []
    for i, n in enumerate(ns):
        cols.append(f"'' using {2 + 2 * i} title 'p50 {n} vols'")
        cols.append(f"'' using {3 + 2 * i} title 'p99 {n} vols'")
    cols[0] = cols[0].replace("''", "'endpoints.dat'", 1).replace("using 2", "using 2:xtic(1)", 1)
    gnuplot("""set terminal pngcairo size 1000,460
set output 'endpoints.png'
set title 'plugin socket latency per endpoint (microseconds, log scale)'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set logscale y
set grid y
set key outside right
set xtics rotate by -20
plot """ + ", ".join(cols) + "\n", "endpoints")
    os.unlink(os.path.join(plots, "endpoints.dat"))
    md.append("![endpoints](plots/endpoints.png)\n")

dm = {}
for metric, n, v in rows("daemon.tsv"):
    if v not in ("", "-1"):
        dm.setdefault((metric, int(n)), []).append(float(v))
if dm:
    md.append("### Daemon start-up and memory (daemon run directly, self-test off)\n")
    md.append("*ready* = from fork+exec to the first List answered with 200 (the daemon `listen()`s at once "
              "but answers only after start-up), measured by sockbench over repeated SIGTERM + restart. "
              "VmRSS from /proc/PID/status: right after start (*fresh*), after creating the volumes "
              "(*loaded*, same process), and after the endpoint batches.\n")
    md.append("| volumes | ready median ms | ready min–max | VmRSS fresh KiB (median) | VmRSS loaded KiB | VmRSS after batches KiB | VmHWM KiB |")
    md.append("|---:|---:|---:|---:|---:|---:|---:|")
    for n in sorted({n for _, n in dm}):
        r = dm.get(("ready_ms", n), [])
        md.append(f"| {n:,} | {fmt(med(r), 1)} | {rng(r, 1)} | {fmt(med(dm.get(('rss_kib', n), [])))} | "
                  f"{fmt(med(dm.get(('rss_kib_loaded', n), [])))} | {fmt(med(dm.get(('rss_kib_after_bench', n), [])))} | "
                  f"{fmt(med(dm.get(('hwm_kib_after_bench', n), [])))} |")
    md.append("")
    if ("ready_ms", 10000) in dm:
        r = med(dm[("ready_ms", 10000)])
        aims.append(("exec to ready with 10,000 volumes ≤ 200 ms", f"{r:.0f} ms", r <= 200))
    if ("rss_kib", 10000) in dm:
        fresh = med(dm[("rss_kib", 10000)]) / 1024
        worst = max(dm.get(("rss_kib_after_bench", 10000), [0]) + dm[("rss_kib", 10000)]) / 1024
        aims.append(("VmRSS with 10,000 volumes ≤ 8 MiB (fresh start; after load + batches in brackets)",
                     f"{fresh:.1f} MiB ({worst:.1f})", fresh <= 8))

# ----------------------------------------------------------------- self-test
stp = os.path.join(raw, "selftest.md")
if os.path.exists(stp):
    md.append("## 3. Self-test vs fio (tests/bench/selftest-vs-fio.sh)\n")
    md.append(open(stp).read().strip() + "\n")

# ------------------------------------------------------------------ postgres
pg = {}
for c, rep, v in rows("pgbench.tsv"):
    pg.setdefault(c, []).append(float(v))
if pg:
    md.append("## 4. PostgreSQL 15 + pgbench (TPC-B-like, scale 10, -c 4 -j 2, unix socket in the container)\n")
    md.append("PGDATA on: **host** = a bind mount of a directory on the XFS partition that holds the nvmevol "
              "volume (host-direct); **nvmevol** = an nvmevol volume (`-o uid=999 -o gid=999 -o mode=0700`); "
              "**overlay2-xfs** = the container layer on the identical XFS data-root partition. All three "
              "servers run at the same time (idle while the others are measured).\n")
    md.append("| PGDATA on | median TPS | min–max TPS | ÷ host |")
    md.append("|---|---:|---:|---:|")
    h = med(pg.get("host", []))
    for c in ["host", "nvmevol", "overlay2-xfs"]:
        if c in pg:
            md.append(f"| {c} | {fmt(med(pg[c]), 1)} | {rng(pg[c], 1)} | {med(pg[c]) / h:.3f} |")
    md.append("")
    if "nvmevol" in pg:
        r = med(pg["nvmevol"]) / h
        aims.append(("pgbench: nvmevol ÷ host ≥ 0.97", f"{r:.3f}", r >= 0.97))
    with open(os.path.join(plots, "pg.dat"), "w") as f:
        for c in ["host", "nvmevol", "overlay2-xfs"]:
            if c in pg:
                f.write(f"{c} {med(pg[c]):.2f} {min(pg[c]):.2f} {max(pg[c]):.2f}\n")
    gnuplot("""set terminal pngcairo size 700,420
set output 'pgbench.png'
set title 'pgbench TPS (median, min-max)'
set style data histograms
set style histogram errorbars gap 1 lw 1
set style fill solid 0.8 border -1
set yrange [0:*]
set grid y
set key off
plot 'pg.dat' using 2:3:4:xtic(1)
""", "pgbench")
    os.unlink(os.path.join(plots, "pg.dat"))
    md.append("![pgbench](plots/pgbench.png)\n")

# ------------------------------------------------------------------ volumes
vol = {}
pop = {}
for kind, c, rep, v in rows("volumes.tsv"):
    if kind in ("populate", "remove"):
        pop[(kind, c)] = (int(rep), float(v))
    else:
        vol.setdefault((kind, c), []).append(float(v) / 1000.0)
vmd = []
if vol:
    n = next(iter(pop.values()))[0] if pop else 0
    vmd.append(f"#### `docker volume ls` and `docker volume create` with {n:,} volumes: Docker's `local` driver and nvmevol (`tests/bench/run.sh --only volumes`)\n")
    vmd.append("Two dockerds of the same version, data-roots on the same root disk: **local** = a dockerd with "
              f"{n:,} `local` volumes and no plugin; **nvmevol** = the plugin's dockerd with {n:,} nvmevol volumes "
              "(self-test off) and no local volume. Both populated through the API (one keep-alive connection, "
              "one request after the other). Then, alternated: `docker volume ls` (the CLI, whole table), and "
              "`docker volume create` of one more volume (its `rm` untimed). CLI start-up is in every figure, "
              "for both.\n")
    vmd.append("| figure | local median ms | min–max | nvmevol median ms | min–max | nvmevol ÷ local |")
    vmd.append("|---|---:|---:|---:|---:|---:|")
    for kind, label in [("ls", "docker volume ls"), ("create", "docker volume create")]:
        a, b = vol.get((kind, "local"), []), vol.get((kind, "nvmevol"), [])
        if a and b:
            vmd.append(f"| {label} ({len(a)} + {len(b)} runs) | {fmt(med(a), 1)} | {rng(a, 1)} | {fmt(med(b), 1)} | "
                      f"{rng(b, 1)} | {med(b) / med(a):.2f} |")
    for kind, label in [("populate", "creates per second through the API"), ("remove", "removes per second through the API")]:
        if (kind, "local") in pop and (kind, "nvmevol") in pop:
            (na, sa), (nb, sb) = pop[(kind, "local")], pop[(kind, "nvmevol")]
            vmd.append(f"| {label} ({na:,} each) | {na / sa:,.0f} /s | | {nb / sb:,.0f} /s | | "
                      f"{(sb / nb) / (sa / na):.2f} (time) |")
    vmd.append("")

# ------------------------------------------------------ scale (issue 23)
# tests/bench/scale.sh --save prints its table into raw/scale.txt: embedded verbatim where the
# hand-written section 6 asks for it (@@SCALE@@), else at the end; each figure with a goal also
# goes into the Aims table.
smd = []
scp = os.path.join(raw, "scale.txt")
if os.path.exists(scp):
    stxt = open(scp).read().rstrip()
    smd = ["```", stxt, "```", ""]
    cols = []
    for line in stxt.splitlines():
        cells = [c.strip() for c in line.split(" | ")]
        if cells[0] == "figure":
            cols = [c.split()[0] for c in cells[1:-2]] if "ratio" in line else []
            dock = "local" in cells
            continue
        if not cols or len(cells) < 3:
            continue
        if dock:   # figure | local | nvmevol | ÷ local | ratio | goal [| why]
            r = cells[4].split()
            if len(r) == 2:
                aims.append((f"issue 23, through Docker: {cells[0]}, nvmevol ÷ local {cells[5]}", cells[3], r[1] == "met"))
            continue
        goal = cells[1 + len(cols)] if len(cells) > 1 + len(cols) else ""
        for col, cell in zip(cols, cells[1:1 + len(cols)]):
            v = cell.split()
            if len(v) == 3:
                aims.append((f"issue 23, {col} volumes: {cells[0]} {goal}", f"{v[0]} ({v[1]} of the goal)", v[2] == "met"))

# --------------------------------------------------------------------- aims
at = ["## Aims\n", "| aim | measured | |", "|---|---:|---|"]
for a, v, ok in aims:
    at.append(f"| {a} | {v} | {mark(ok)} |")
text = "\n".join(md).replace("@@AIMS@@", "\n".join(at) + "\n")
an = os.path.join(bench_dir, "ANALYSIS.md")
if os.path.exists(an):
    text += "\n" + open(an).read()
# The volumes table goes where the hand-written section 6 asks for it (@@VOLUMES@@), else at the end.
if "@@VOLUMES@@" in text:
    text = text.replace("@@VOLUMES@@", "\n".join(vmd))
elif vmd:
    text += "\n" + "\n".join(vmd) + "\n"
if "@@SCALE@@" in text:
    text = text.replace("@@SCALE@@", "\n".join(smd))
elif smd:
    text += "\n" + "\n".join(smd) + "\n"
with open(out_md, "w") as f:
    f.write(text)
print(f"wrote {out_md}")

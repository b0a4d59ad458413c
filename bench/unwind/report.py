#!/usr/bin/env python3
"""Merges the unwinding benchmark's runs (bench/run_unwind.sh) into one JSON and a markdown table.

Inputs in --work: time.json, time_llvm.json and time_capi.json (timings), cg.N.json + cg.N.out.* (callgrind:
frames per block and the dumps named by their trigger "hot-D"/"cold-D"), st.N.json + st.N.trace
(strace: system calls between the "begin LABEL" and "end" marker writes).
"""
import argparse
import datetime
import glob
import json
import os
import platform
import re
import subprocess

# The configuration the ratios are taken against: the pcs-only fast walk, the counterpart of
# libunwind's unw_backtrace and of a profiler's sampling path.
OURS = "ehelf backtrace_local"


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""


def machine():
    model = ""
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "load_average_at_end": os.getloadavg(),
    }


def versions():
    out = {}
    for pkg in ["libc6", "libgcc-s1", "libunwind8", "libdw1", "valgrind", "gcc-12"]:
        v = sh(f"dpkg-query -W -f='${{Version}}' {pkg} 2>/dev/null")
        if v:
            out[pkg] = v
    out["libunwind-14-dev (LLVM, unpacked)"] = sh(
        "apt-cache show libunwind-14-dev 2>/dev/null | awk '/^Version:/ {print $2; exit}'")
    out["ehelf"] = sh("git rev-parse --short HEAD")
    dirty = sh("git status --porcelain -- src")
    out["ehelf_src_uncommitted_changes"] = bool(dirty)
    return out


def callgrind_dumps(prefix):
    """label -> Ir of every dump of one callgrind run."""
    res = {}
    for path in glob.glob(prefix + ".*"):
        label, total = None, None
        with open(path, errors="replace") as f:
            for line in f:
                m = re.match(r"desc: Trigger: Client Request: (\S+)", line)
                if m:
                    label = m.group(1)
                m = re.match(r"(?:summary|totals): (\d+)", line)
                if m:
                    total = int(m.group(1))
        if label and total is not None:
            res[label] = total
    return res


def strace_counts(path):
    """label -> (system calls inside the marked regions, regions)."""
    res = {}
    label = None
    for line in open(path, errors="replace"):
        m = re.search(r'write\(-1, "begin ([^"]+)"', line)
        if m:
            label = m.group(1)
            calls, regions = res.get(label, (0, 0))
            res[label] = (calls, regions + 1)
            continue
        if re.search(r'write\(-1, "end"', line):
            label = None
            continue
        if label and re.match(r"^\d+\s+\w+\(", line) and "resumed>" not in line:
            calls, regions = res[label]
            res[label] = (calls + 1, regions)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--command", default="bench/run_unwind.sh")
    ap.add_argument("--json", required=True)
    ap.add_argument("--md", required=True)
    a = ap.parse_args()

    rows = {}  # (peer, regime, target) -> dict
    peers, cold_means, skipped = [], {}, []
    timing_meta = {}
    for name in ["time.json", "time_llvm.json", "time_capi.json"]:
        path = os.path.join(a.work, name)
        if not os.path.exists(path):
            continue
        d = json.load(open(path))
        timing_meta[name] = {k: d[k] for k in ("timer_overhead_ns", "base_frames", "comparators")}
        skipped += d["skipped"]
        for p in d["peers"]:
            if p["name"] not in peers:
                peers.append(p["name"])
                cold_means[p["name"]] = p["cold_means"]
        for r in d["results"]:
            key = (r["peer"], r["regime"], r["target_depth"])
            if key in rows:  # the reference peers appear in both binaries: keep the first
                continue
            rows[key] = {
                "peer": r["peer"], "regime": r["regime"], "target_depth": r["target_depth"],
                "depth": r["depth"], "qsort_levels": r["levels"],
                "frames_returned": [r["frames_min"], r["frames_max"]],
                "frames_found": [r["found_min"], r["found_max"]],
                "ns_per_frame_median": r["ns_per_frame_median"],
                "ns_per_frame_best": r["ns_per_frame_best"],
                "ns_per_frame_mean": r["ns_per_frame_mean"],
                "timed_unwinds": r["unwinds"], "measurements": r["measurements"],
            }

    # callgrind: instructions per frame returned
    for js in glob.glob(os.path.join(a.work, "cg.*.json")):
        n = re.search(r"cg\.(\d+)\.json", js).group(1)
        d = json.load(open(js))
        dumps = callgrind_dumps(os.path.join(a.work, f"cg.{n}.out"))
        for r in d["results"]:
            key = (r["peer"], r["regime"], r["target_depth"])
            label = f'{r["regime"]}-{r["target_depth"]}'
            if key not in rows or label not in dumps or not r["frames_total"]:
                continue
            rows[key]["instructions_per_frame"] = dumps[label] / r["frames_total"]
            rows[key]["callgrind_unwinds"] = r["unwinds"]
            rows[key]["callgrind_frames_found"] = [r["found_min"], r["found_max"]]

    # strace: system calls per unwind and per frame
    for js in glob.glob(os.path.join(a.work, "st.*.json")):
        n = re.search(r"st\.(\d+)\.json", js).group(1)
        d = json.load(open(js))
        trace = os.path.join(a.work, f"st.{n}.trace")
        if not os.path.exists(trace):
            continue
        counts = strace_counts(trace)
        for r in d["results"]:
            key = (r["peer"], r["regime"], r["target_depth"])
            label = f'{r["regime"]}-{r["target_depth"]}'
            if key not in rows or label not in counts or not r["unwinds"]:
                continue
            calls, _ = counts[label]
            rows[key]["syscalls_per_unwind"] = calls / r["unwinds"]
            rows[key]["syscalls_per_frame"] = calls / max(1, r["frames_total"])

    depths = sorted({k[2] for k in rows})
    regimes = ["hot", "cold"]
    now = datetime.datetime.now(datetime.timezone.utc).astimezone()
    out = {
        "benchmark": "in-process unwinding, qsort call chains (bench/unwind)",
        "date": now.isoformat(timespec="seconds"),
        "command": a.command,
        "machine": machine(),
        "versions": versions(),
        "ratios_against": OURS,
        "peers": [{"name": p, "cold_means": cold_means[p]} for p in peers],
        "skipped": skipped,
        "harness": timing_meta,
        "results": sorted(rows.values(), key=lambda r: (peers.index(r["peer"]) if r["peer"] in peers
                                                        else 99, r["regime"] != "hot",
                                                        r["target_depth"])),
    }
    with open(a.json, "w") as f:
        json.dump(out, f, indent=2)
        f.write("\n")

    # ---- markdown ----
    def cell(peer, regime, depth, field, fmt):
        r = rows.get((peer, regime, depth))
        if not r or r.get(field) is None:
            return "–"
        v = r[field]
        o = rows.get((OURS, regime, depth), {}).get(field)
        s = fmt(v)
        if peer != OURS and o:
            s += f" ({v / o:.2g}×)"
        return s

    cols = [(reg, d) for reg in regimes for d in depths]
    head = "| unwinder | " + " | ".join(f"{reg} {d}" for reg, d in cols) + " |"
    sep = "|---|" + "---:|" * len(cols)
    m = now.strftime("%Y-%m-%d %H:%M %Z")
    mach = out["machine"]
    lines = [
        "# In-process unwinding: ehelf against its peers",
        "",
        f"Date: {m}. Machine: {mach['cpu']}, {mach['cores']} cores (shared with other work: "
        f"load average {mach['load_average_at_end'][0]:.1f} at the end), Linux {mach['kernel']}. "
        f"Command: `{a.command}`. ehelf {out['versions'].get('ehelf', '?')}"
        + (" (with uncommitted changes in src/)" if out["versions"].get("ehelf_src_uncommitted_changes") else "")
        + ".",
        "",
        "Workload: call chains of the given depth (frames of a full walk, counted by libgcc's "
        "`_Unwind_Backtrace`) in which every level is glibc's `qsort` calling back into a generated "
        "comparator built with `-O2 -fomit-frame-pointer` (under it `qsort_r` and one to four "
        "`msort_with_tmp` frames), run on a thread of its own (outermost frames `start_thread`, "
        "`clone3`); the harness frames above the chain have frame pointers. "
        "**hot**: one chain per depth, unwound over and over (median of interleaved ~1 ms batches). "
        "**cold**: a new chain per sample made of comparators never used before (new return "
        "addresses), caches flushed before each unwind where the unwinder has a way (see the notes), "
        "one unwind per sample, median over samples; CPU caches are not flushed. "
        f"Ratios in parentheses are against **{OURS}** (`Unwinder::backtrace_local` from "
        "`capture_walk_start()`: the linked rule cache, filled from the compact tables; the other "
        "ehelf rows are the general `Unwinder::backtrace`, which fills a `FrameInfo` per frame, "
        "with each backend).",
        "",
        "## ns per frame (wall clock, median)",
        "",
        head, sep,
    ]
    for p in peers:
        lines.append(f"| {p} | " + " | ".join(
            cell(p, reg, d, "ns_per_frame_median", lambda v: f"{v:.1f}") for reg, d in cols) + " |")
    lines += [
        "",
        "## Instructions per frame (callgrind, collection on around the unwinds only)",
        "",
        head, sep,
    ]
    for p in peers:
        lines.append(f"| {p} | " + " | ".join(
            cell(p, reg, d, "instructions_per_frame", lambda v: f"{v:.0f}") for reg, d in cols) + " |")
    lines += [
        "",
        "## Frames found / frames in the chain; system calls per unwind (strace)",
        "",
        head, sep,
    ]
    for p in peers:
        cells = []
        for reg, d in cols:
            r = rows.get((p, reg, d))
            if not r:
                cells.append("–")
                continue
            lo, hi = r["frames_found"]
            found = f"{lo}" if lo == hi else f"{lo}–{hi}"
            s = f"{found}/{r['depth']}"
            if r.get("syscalls_per_unwind") is not None:
                s += f", {r['syscalls_per_unwind']:.3g} sys"
            cells.append(s)
        lines.append(f"| {p} | " + " | ".join(cells) + " |")
    lines += ["", "Notes:", ""]
    lines.append("- ns and instructions are per frame the unwinder returned (the frame-pointer "
                 "walk returns only the frames it finds, so its per-frame cost is over those).")
    lines.append("- A frame is *found* when it is the reference's frame at the same position; "
                 "the first frame is the walking function's own.")
    for p in peers:
        lines.append(f"- {p}, cold: {cold_means[p]}.")
    for s in skipped:
        lines.append(f"- skipped: {s}")
    # Targets set for the fast walk
    t = []
    for reg, d in cols:
        r = rows.get((OURS, reg, d))
        if not r:
            continue
        ipf = r.get("instructions_per_frame")
        ns = r.get("ns_per_frame_median")
        all_found = r["frames_found"][0] == r["depth"]
        if reg == "hot":
            ok = ipf is not None and ipf <= 40 and ns is not None and ns <= 3 and all_found
            t.append(f"hot {d}: {ipf:.0f} instr, {ns:.1f} ns, "
                     f"{'all' if all_found else 'not all'} frames found: "
                     f"{'meets' if ok else 'misses'} the target (<= 40 instr, <= 3 ns, all frames)"
                     if ipf is not None else f"hot {d}: no callgrind data")
        else:
            ok = ipf is not None and ipf <= 150
            t.append(f"cold {d}: {ipf:.0f} instr: {'meets' if ok else 'misses'} the target (<= 150)"
                     if ipf is not None else f"cold {d}: no callgrind data")
    lines += ["", f"Targets ({OURS}): " + "; ".join(t) + ".", ""]
    with open(a.md, "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()

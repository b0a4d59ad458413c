#!/usr/bin/env bash
# Size and time report of `ehelf compile` for the paper's set of programs (its Table 2):
# hackbench, sqlite3 and python3, each with the shared libraries it loads (ldd), compiled with
# both register sets. Also times libc's compile alone (median of 5 runs, one job).
#
# Writes bench/results/compile_sizes.json (every --json report, the libc timings, the machine)
# and bench/results/compile_sizes.md (tables, date, machine and the command to rerun).
#
# Usage: bench/bench_compile.sh [--ehelf PATH] [--runs N] [--hackbench-c]
#   --ehelf        the ehelf binary (default build/bin/ehelf)
#   --runs         libc timing runs (default 5)
#   --hackbench-c  build bench/hackbench.c even if perf is installed
# hackbench is `perf bench sched messaging` when perf is installed (the binary is perf itself),
# otherwise bench/hackbench.c built here. sqlite3 is installed with apt-get if missing.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ehelf="$repo/build/bin/ehelf"
runs=5
force_c=0
while [ $# -gt 0 ]; do
  case $1 in
    --ehelf) ehelf=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --hackbench-c) force_c=1; shift ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_compile: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -x "$ehelf" ] || { echo "bench_compile: no ehelf at $ehelf (build first or pass --ehelf)" >&2; exit 2; }
ehelf=$(readlink -f "$ehelf")
results="$repo/bench/results"
mkdir -p "$results"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export EHELF_CACHE="$work/cache"

is_elf() { [ -f "$1" ] && [ "$(head -c 4 "$1" | od -An -c | tr -d ' ')" = '177ELF' ]; }

# ---- the programs ----
hackbench="" hackbench_label=""
if [ $force_c -eq 0 ] && command -v perf >/dev/null &&
   perf bench sched messaging -l 1 >/dev/null 2>&1 && is_elf "$(readlink -f "$(command -v perf)")"; then
  hackbench=$(readlink -f "$(command -v perf)")
  hackbench_label="hackbench (perf bench sched messaging: $hackbench)"
else
  cc -O2 -g0 -pthread -o "$work/hackbench" "$repo/bench/hackbench.c"
  "$work/hackbench" 2 10 5 >/dev/null
  hackbench="$work/hackbench"
  hackbench_label="hackbench (bench/hackbench.c, cc -O2 -pthread)"
fi
if ! command -v sqlite3 >/dev/null; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq sqlite3 >/dev/null
fi
sqlite=$(readlink -f "$(command -v sqlite3)")
python=$(readlink -f /usr/bin/python3)
python_pkg=$(dpkg -S "$python" 2>/dev/null | cut -d: -f1 | head -1 || true)
[ -n "$python_pkg" ] || echo "bench_compile: warning: $python does not come from a Debian package" >&2

# The program, then the libraries ldd lists (resolved, in ldd's order, without duplicates).
with_libraries() {
  {
    echo "$1"
    ldd "$1" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' |
      xargs -r readlink -f
  } | awk '!seen[$0]++'
}
declare -A label
label[hackbench]=$hackbench_label
label[sqlite3]="sqlite3 ($sqlite)"
label[python3]="python3 ($python${python_pkg:+, Debian package $python_pkg})"
with_libraries "$hackbench" >"$work/files.hackbench"
with_libraries "$sqlite" >"$work/files.sqlite3"
with_libraries "$python" >"$work/files.python3"

# ---- compile each set with each register set: --report (text) and --json ----
for set in hackbench sqlite3 python3; do
  mapfile -t files <"$work/files.$set"
  for regs in minimal callee-saved; do
    echo "== $set, --registers $regs: ${#files[@]} files" >&2
    "$ehelf" compile --cache --jobs 2 --registers "$regs" --report "${files[@]}" \
      >"$work/report.$set.$regs.txt"
    "$ehelf" compile --cache --jobs 2 --registers "$regs" --json "${files[@]}" \
      >"$work/report.$set.$regs.json"
  done
done

# ---- libc alone: wall time of the whole command, one job, median of $runs ----
libc=$(readlink -f /usr/lib/x86_64-linux-gnu/libc.so.6)
cut -d' ' -f1-3 /proc/loadavg >"$work/loadavg"
for regs in minimal callee-saved; do
  : >"$work/libc_times.$regs"
  for i in $(seq "$runs"); do
    t0=$(date +%s.%N)
    "$ehelf" compile --registers "$regs" -o "$work/libc.$regs.$i.so" --json "$libc" \
      >"$work/libc.$regs.$i.json"
    t1=$(date +%s.%N)
    echo "$t0 $t1" >>"$work/libc_times.$regs"
  done
done

# ---- the results ----
rerun="bench/bench_compile.sh"
[ "$ehelf" != "$(readlink -f "$repo/build/bin/ehelf")" ] && rerun+=" --ehelf ${ehelf#"$repo/"}"
[ "$runs" != 5 ] && rerun+=" --runs $runs"
[ $force_c -eq 1 ] && rerun+=" --hackbench-c"
python3 - "$work" "$results" "$rerun" "$runs" "$ehelf" \
  "${label[hackbench]}" "${label[sqlite3]}" "${label[python3]}" <<'PY'
import datetime, json, os, platform, statistics, subprocess, sys
work, results, rerun, runs, ehelf = sys.argv[1:6]
labels = dict(zip(["hackbench", "sqlite3", "python3"], sys.argv[6:9]))
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
machine = {"kernel": platform.release(), "cpu": cpu, "cpus": os.cpu_count(),
           "loadavg_before_libc_timing": open(f"{work}/loadavg").read().strip()}
try:
    version = subprocess.run([ehelf, "--version"], capture_output=True, text=True).stdout.strip()
except OSError:
    version = ""
try:
    commit = subprocess.run(["git", "-C", os.path.dirname(results), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
except OSError:
    commit = ""
cc = subprocess.run(["cc", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")

data = {"date": now, "machine": machine, "command": rerun, "ehelf_commit": commit,
        "compiler": cc, "sets": {}, "libc_compile": {}}
for s in labels:
    data["sets"][s] = {"label": labels[s], "registers": {}}
    for regs in ("minimal", "callee-saved"):
        data["sets"][s]["registers"][regs] = json.load(open(f"{work}/report.{s}.{regs}.json"))
for regs in ("minimal", "callee-saved"):
    walls = []
    for line in open(f"{work}/libc_times.{regs}"):
        t0, t1 = map(float, line.split())
        walls.append(t1 - t0)
    phases = [json.load(open(f"{work}/libc.{regs}.{i}.json"))[0] for i in range(1, int(runs) + 1)]
    data["libc_compile"][regs] = {
        "wall_seconds": walls, "median_wall_seconds": statistics.median(walls),
        "median_load_ms": statistics.median(p["load_ms"] for p in phases),
        "median_codegen_ms": statistics.median(p["codegen_ms"] for p in phases),
        "median_cc_ms": statistics.median(p["cc_ms"] for p in phases)}
json.dump(data, open(f"{results}/compile_sizes.json", "w"), indent=1)

def kib(b): return f"{b / 1024:.1f}"
def pct(r): return 100.0 * (r["eh_elf_text_bytes"] + r["eh_elf_rodata_bytes"]) / r["text_rodata_bytes"] if r["text_rodata_bytes"] else 0
md = []
md.append("# `ehelf compile`: eh_elf sizes and compile time (the paper's Table 2)\n")
md.append(f"- Date: {now}" + (f" (repository at {commit})" if commit else ""))
md.append(f"- Machine: Linux {machine['kernel']}, {cpu}, {machine['cpus']} CPUs (load average "
          f"{machine['loadavg_before_libc_timing']} before the libc timing)")
md.append(f"- C compiler: {cc} (ehelf's default -O1)")
md.append(f"- Rerun: `{rerun}` (from the repository root; writes this file and "
          "`bench/results/compile_sizes.json`)")
md.append("")
md.append("Columns: sizes in KiB. *.text+.rodata* is the original program size; *eh_elf code* and "
          "*data* are the eh_elf's .text (lookup and row bodies) and .rodata (range table and page "
          "index); *% orig* is (code + data) / (.text + .rodata); *growth* is (code + data) / "
          ".eh_frame. *fallback* counts ranges whose row the eh_elf hands back to the interpreter "
          "(EHELF_NEEDS_INTERPRETER). Each set was compiled with `--jobs 2`; *ms* is the per-file "
          "time (load + codegen + cc) under that parallelism.\n")
if labels["hackbench"].startswith("hackbench (perf"):
    md.append("hackbench is `perf bench sched messaging` here, so its set is perf and perf's "
              "libraries (the paper's hackbench is a small program linked with libc only; "
              "`--hackbench-c` measures bench/hackbench.c instead).\n")
goal_rows = []
for s in labels:
    mins = {r["source"]: r for r in data["sets"][s]["registers"]["minimal"]}
    cs = {r["source"]: r for r in data["sets"][s]["registers"]["callee-saved"]}
    md.append(f"## {labels[s]}\n")
    md.append("| file | .text+.rodata | .eh_frame | .eh_frame_hdr | minimal: code | data | % orig | growth | fallback | ms | callee-saved: code | data | % orig | growth | fallback | ms |")
    md.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    tot = {k: 0 for k in ("t", "e", "h", "mc", "md", "cc", "cd")}
    for src, m in mins.items():
        c = cs.get(src)
        name = os.path.basename(src)
        row = [name, kib(m["text_rodata_bytes"]), kib(m["eh_frame_bytes"]), kib(m["eh_frame_hdr_bytes"]),
               kib(m["eh_elf_text_bytes"]), kib(m["eh_elf_rodata_bytes"]), f"{pct(m):.1f}",
               f"{m['growth']:.2f}", str(m["fallback_ranges"]),
               f"{m['load_ms'] + m['codegen_ms'] + m['cc_ms']:.0f}"]
        if c:
            row += [kib(c["eh_elf_text_bytes"]), kib(c["eh_elf_rodata_bytes"]), f"{pct(c):.1f}",
                    f"{c['growth']:.2f}", str(c["fallback_ranges"]),
                    f"{c['load_ms'] + c['codegen_ms'] + c['cc_ms']:.0f}"]
            tot["cc"] += c["eh_elf_text_bytes"]; tot["cd"] += c["eh_elf_rodata_bytes"]
        else:
            row += ["—"] * 6
        tot["t"] += m["text_rodata_bytes"]; tot["e"] += m["eh_frame_bytes"]; tot["h"] += m["eh_frame_hdr_bytes"]
        tot["mc"] += m["eh_elf_text_bytes"]; tot["md"] += m["eh_elf_rodata_bytes"]
        md.append("| " + " | ".join(row) + " |")
        if name.startswith("libc.so") or name.startswith("libstdc++.so"):
            goal_rows.append((name, m, c))
    g = lambda a, b: f"{a / b:.2f}" if b else "—"
    p = lambda a, b: f"{100.0 * a / b:.1f}" if b else "—"
    md.append(f"| **total** | {kib(tot['t'])} | {kib(tot['e'])} | {kib(tot['h'])} | {kib(tot['mc'])} | "
              f"{kib(tot['md'])} | {p(tot['mc'] + tot['md'], tot['t'])} | {g(tot['mc'] + tot['md'], tot['e'])} | | | "
              f"{kib(tot['cc'])} | {kib(tot['cd'])} | {p(tot['cc'] + tot['cd'], tot['t'])} | "
              f"{g(tot['cc'] + tot['cd'], tot['e'])} | | |")
    md.append("")

md.append("## Goals\n")
md.append("| goal | measured | met |")
md.append("|---|---|---|")
seen = set()
for name, m, c in goal_rows:
    if name in seen:
        continue
    seen.add(name)
    for regs, r in (("minimal", m), ("callee-saved", c)):
        if r:
            md.append(f"| growth <= 1.5x .eh_frame: {name}, {regs} | {r['growth']:.2f}x | "
                      f"{'yes' if r['growth'] <= 1.5 else '**no**'} |")
for regs in ("minimal", "callee-saved"):
    t = data["libc_compile"][regs]
    md.append(f"| libc compile <= 2 s, {regs} (median of {runs}, wall, one job) | "
              f"{t['median_wall_seconds']:.2f} s (load {t['median_load_ms']:.0f} ms, codegen "
              f"{t['median_codegen_ms']:.0f} ms, cc {t['median_cc_ms']:.0f} ms) | "
              f"{'yes' if t['median_wall_seconds'] <= 2 else '**no**'} |")
md.append("")
md.append("## `ehelf compile --report` output\n")
for s in labels:
    for regs in ("minimal", "callee-saved"):
        md.append(f"{s}, `--registers {regs}`:\n")
        md.append("```")
        md.append(open(f"{work}/report.{s}.{regs}.txt").read().rstrip())
        md.append("```\n")
open(f"{results}/compile_sizes.md", "w").write("\n".join(md))
print(f"wrote {results}/compile_sizes.md and compile_sizes.json")
PY

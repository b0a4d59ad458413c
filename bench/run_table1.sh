#!/usr/bin/env bash
# The paper's Table 1 on the same samples (bench/table1/): records five workloads with
# `perf record -e cpu-clock --call-graph dwarf` (hardware counters are unavailable in VMs like this
# one) until each has at least TABLE1_MIN_SAMPLES user samples, compiles eh_elfs for every module
# they map into a temporary $EHELF_CACHE, then per recording:
#   1. bench/table1's program: every peer (ehelf fast walk; ehelf general walk with the compiled,
#      table and interpreter backends; libunwind remote over the stack copy, cached and
#      UNW_CACHE_NONE; elfutils libdwfl with sample callbacks) walks every sample from the same
#      registers and stack bytes: frames, time, early stops, frames compared per sample;
#   2. each peer under callgrind over about TABLE1_CALLGRIND_SAMPLES samples spread over the
#      recording (every k-th; one uncollected warm-up pass, then collection toggled around one
#      pass): instructions per frame;
# and writes bench/results/table1.json and bench/results/table1.md (bench/table1/report.py).
#
# Environment: TABLE1_MIN_SAMPLES (20000), TABLE1_CALLGRIND_SAMPLES (4000), TABLE1_ROUNDS (5),
# TABLE1_WORKLOADS (all: "xz sqlite3 find python3 hackbench"), TABLE1_KEEP (a directory: keep the
# recordings there and reuse them on the next run).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
command_line="bench/run_table1.sh${*:+ $*}"
for v in TABLE1_MIN_SAMPLES TABLE1_CALLGRIND_SAMPLES TABLE1_ROUNDS TABLE1_WORKLOADS; do
  [ -n "${!v:-}" ] && command_line="$v=${!v} $command_line"
done
min_samples="${TABLE1_MIN_SAMPLES:-20000}"
callgrind_samples="${TABLE1_CALLGRIND_SAMPLES:-4000}"
rounds="${TABLE1_ROUNDS:-5}"
workloads="${TABLE1_WORKLOADS:-xz sqlite3 find python3 hackbench}"

bash scripts/setup.sh > /dev/null
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build build -j2 --target ehelf ehelf_perf > /dev/null
cmake -S bench/table1 -B build-table1 -DEHELF_BUILD_DIR="$repo/build" > /dev/null
cmake --build build-table1 -j2 > /dev/null
bin="$repo/build-table1/bin/table1"
ehelf="$repo/build/bin/ehelf"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
keep="${TABLE1_KEEP:-$work/recordings}"
mkdir -p "$keep"
export EHELF_CACHE="$work/cache"
mkdir -p "$EHELF_CACHE"

# Inputs of the workloads, made once.
make_inputs() {
  head -c 48M /usr/lib/x86_64-linux-gnu/libLLVM-15.so.1 > "$work/xz.in" 2>/dev/null ||
    find /usr/lib -type f -size +1M | head -40 | xargs cat | head -c 48M > "$work/xz.in"
}

# The command of a workload at scale $2 (doubled until the recording has enough samples).
workload_command() {
  local name="$1" scale="$2"
  case "$name" in
  xz) echo "head -c $((scale * 10))M $work/xz.in | xz -9 -T1 -c > /dev/null" ;;
  sqlite3)
    echo "/usr/bin/sqlite3 :memory: \"create table t(a, b); with recursive c(x) as (select 1 union all select x + 1 from c where x < $((scale * 3500000))) insert into t select x, hex(randomblob(16)) from c; create index i on t(b); select count(*), sum(length(b)) from t where a % 7 = 3 group by a % 13 order by 2;\" > /dev/null" ;;
  find) echo "for i in \$(seq $((scale * 14))); do find /usr > /dev/null; done" ;;
  python3) echo "/usr/bin/python3 -c 'import json, re
d = {}
for i in range($((scale * 700000))):
    d[str(i)] = [i, str(i * i), {\"k\": i % 7}]
s = json.dumps(d)
print(len(re.findall(r\"[0-9]+\", s)), len(json.loads(s)))' > /dev/null" ;;
  hackbench) echo "perf bench sched messaging -g 10 -l $((scale * 1500)) > /dev/null" ;;
  *) echo "unknown workload $name" >&2; exit 2 ;;
  esac
}

user_samples() { "$bin" "$1" --only "ehelf fast walk" --rounds 0 | python3 -c 'import json,sys; print(json.load(sys.stdin)["samples"])'; }

make_inputs
for w in $workloads; do
  data="$keep/$w.data"
  scale=1
  while :; do
    if [ ! -s "$data" ]; then
      echo "recording $w (scale $scale)"
      perf record -q -e cpu-clock -F 4000 --call-graph dwarf -o "$data" -- \
        sh -c "$(workload_command "$w" "$scale")" 2> "$work/$w.record.log" || {
        cat "$work/$w.record.log" >&2
        exit 1
      }
    fi
    n="$(user_samples "$data")"
    echo "$w: $n user samples"
    [ "$n" -ge "$min_samples" ] && break
    [ "$scale" -ge 16 ] && { echo "$w: fewer than $min_samples samples at scale $scale" >&2; exit 1; }
    rm -f "$data"
    scale=$((scale * 2))
  done
  # eh_elfs for every file the recording maps (the compiled backend's peer needs them).
  "$bin" "$data" --list-files > "$work/$w.files"
  xargs -a "$work/$w.files" "$ehelf" compile --cache -j2 > /dev/null 2> "$work/$w.compile.log" ||
    echo "$w: some files did not compile (their tables unwind them): $(head -c 300 "$work/$w.compile.log")"
done

peers=("ehelf fast walk" "ehelf general, compiled" "ehelf general, table" "ehelf general, interp"
  "libunwind remote, cached" "libunwind remote, UNW_CACHE_NONE" "elfutils libdwfl")
runs=()
for w in $workloads; do
  data="$keep/$w.data"
  echo "== $w: timing"
  "$bin" "$data" --workload "$w" --rounds "$rounds" --json "$work/$w.json"
  runs+=("$work/$w.json")
  : > "$work/$w.callgrind.jsonl"
  samples="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["samples"])' "$work/$w.json")"
  stride=$(( (samples + callgrind_samples - 1) / callgrind_samples ))
  for p in "${peers[@]}"; do
    echo "== $w: callgrind, $p"
    out="$work/callgrind.out"
    valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file="$out" \
      "$bin" "$data" --only "$p" --callgrind --stride "$stride" \
      2> "$work/valgrind.log" > "$work/cg.json" || { tail -5 "$work/valgrind.log" >&2; exit 1; }
    ir="$(awk '/^(summary|totals):/ {print $2; exit}' "$out")"
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["instructions"]=int(sys.argv[2]); print(json.dumps(d))' \
      "$work/cg.json" "$ir" >> "$work/$w.callgrind.jsonl"
  done
done

mkdir -p bench/results
python3 bench/table1/report.py --command "$command_line" \
  --json bench/results/table1.json --md bench/results/table1.md "${runs[@]}"
cat bench/results/table1.md

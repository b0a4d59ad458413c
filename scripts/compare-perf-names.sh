#!/usr/bin/env bash
# Names as perf prints them: records real programs with `perf record --call-graph dwarf`, prints
# each recording with `perf script` and with `ehelf perf`, and compares the names of frames at
# the same address in the same sample. Prints, per program, the share of such frames whose names
# agree and the disagreements by category (with an example each).
#
# Usage: scripts/compare-perf-names.sh [--ehelf PATH] [--keep]
# Programs: perl and python3 running loops, xz -9 on generated data, sqlite3 building a table.
# Exit status: 0 when at least 99.9% of the frames agree on every program, 1 otherwise.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ehelf="$here/build/bin/ehelf"
keep=0
while [ $# -gt 0 ]; do
  case $1 in
    --ehelf) ehelf=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "compare-perf-names: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -x "$ehelf" ] || { echo "compare-perf-names: no ehelf at $ehelf (build first)" >&2; exit 2; }
work=$(mktemp -d)
[ "$keep" = 1 ] && echo "work directory: $work" || trap 'rm -rf "$work"' EXIT
cd "$work"
head -c 20000000 /dev/urandom | base64 > data.txt
declare -A programs=(
  [perl]="perl -e 'my %h; for my \$i (1..400000) { \$h{\$i % 1000} .= chr(65 + \$i % 26); } my \$s = 0; \$s += length(\$_) for values %h; print \"\$s\\n\";'"
  [python3]="python3 -c 'import re, json; d = [json.dumps({\"k\": i, \"v\": str(i) * 5}) for i in range(200000)]; print(sum(len(re.findall(\"[0-9]+\", x)) for x in d))'"
  [xz]="xz -9 -k -c data.txt > /dev/null"
  [sqlite3]="sqlite3 :memory: 'create table t(a, b); with recursive c(x) as (select 1 union all select x + 1 from c where x < 300000) insert into t select x, hex(randomblob(16)) from c; create index i on t(b); select count(*) from t where b like \"A%\";'"
)
fail=0
for name in perl python3 xz sqlite3; do
  if ! perf record -q -e cpu-clock -F 999 --call-graph dwarf -o "$name.data" -- bash -c "${programs[$name]}" > /dev/null 2> "$name.log"; then
    echo "$name: perf record failed: $(tail -1 "$name.log")"; fail=1; continue
  fi
  perf script -i "$name.data" --no-inline -F comm,pid,tid,time,ip,sym,dso > "$name.perf" 2> /dev/null
  "$ehelf" perf "$name.data" > "$name.ehelf" 2> /dev/null
  python3 - "$name" "$name.ehelf" "$name.perf" << 'PY' || fail=1
import collections, re, sys
name, ours_path, theirs_path = sys.argv[1:]
def samples(path):
    out = {}
    for block in open(path).read().split('\n\n'):
        lines = [l for l in block.split('\n') if l.strip()]
        if lines:
            frames = []
            for l in lines[1:]:
                m = re.match(r'\t\s*([0-9a-f]+) (.*) \((.*)\)$', l)
                if m:
                    frames.append(m.groups())
            out.setdefault(lines[0].strip(), []).append(frames)
    return out
ours, theirs = samples(ours_path), samples(theirs_path)
same = total = 0
by = collections.Counter()
example = {}
def category(o, t, dso):
    if t == '[unknown]': return 'perf has no name'
    if t.endswith('@plt') and o.endswith('@plt'):
        # perf 6.1 names PLT entries in .rela.plt's order, which libc's is not in (its IRELATIVE
        # relocations come last); ehelf, as objdump, by the GOT slot the entry jumps through.
        return "PLT entry: perf's name in .rela.plt order, ehelf's (objdump's) by its GOT slot"
    if o == '[unknown]': return 'ehelf has no name' + (' (plt)' if t.endswith('@plt') else '')
    if '(' in t or '<' in t: return 'C++ spelling'
    if 'clone' in t or 'clone' in o: return 'clone suffix'
    if o.lstrip('_') in t or t.lstrip('_') in o: return 'alias'
    return 'other'
for header, stacks in theirs.items():
    for t_frames, o_frames in zip(stacks, ours.get(header, [])):
        for (ta, tn, td), (oa, on, od) in zip(t_frames, o_frames):
            if ta != oa or td != od:
                continue
            total += 1
            if tn == on:
                same += 1
            else:
                c = category(on, tn, td)
                by[c] += 1
                example.setdefault(c, f"{td.rsplit('/', 1)[-1]}+{ta}: ehelf {on!r}, perf {tn!r}")
share = 100.0 * same / total if total else 0.0
print(f"{name}: {same} of {total} frames at the same address have perf's name ({share:.3f}%)")
for c, n in by.most_common():
    print(f"  {c}: {n}, e.g. {example[c]}")
if total == 0 or share < 99.9:
    sys.exit(1)
PY
done
exit $fail

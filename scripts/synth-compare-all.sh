#!/usr/bin/env bash
# Static validation of the machine's shipped tables: `ehelf synth --compare` on every
# ELF file with unwind tables under the given directories. Prints the share of analysed
# instructions whose rows agree with the shipped tables, the disagreements by category (with an
# example each), the files agreeing least, and the speed (MB of code analysed per second).
#
# Usage: scripts/synth-compare-all.sh [--ehelf PATH] [--jobs N] [--strip] [DIR...]
#   --strip  synthesize each file with its tables removed (objcopy), as for a binary that lacks
#            them, and compare with the tables it shipped (`synth STRIPPED --compare-with FILE`)
#   DIR...  default: /usr/bin and /usr/lib/x86_64-linux-gnu (recursively)
# Exit status: 0 when done (disagreements are results, not failures), 2 on a setup error.
# Run it niced on a shared machine.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/ehelf-binary.sh"
jobs=2
strip=0
dirs=()
while [ $# -gt 0 ]; do
  case $1 in
    --ehelf) ehelf=${2:-}; shift 2 ;;
    --jobs) jobs=${2:-2}; shift 2 ;;
    --strip) strip=1; shift ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "synth-compare-all: unknown option $1" >&2; exit 2 ;;
    *) dirs+=("$1"); shift ;;
  esac
done
[ ${#dirs[@]} -eq 0 ] && dirs=(/usr/bin /usr/lib/x86_64-linux-gnu)
[ -n "$ehelf" ] && [ -x "$ehelf" ] || { echo "synth-compare-all: no ehelf binary (build first)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# ELF files with .eh_frame (by magic, then section), each once: hard links (Mesa's drivers are one
# 25 MB file under ten names) and files reached twice are compared once, under their first name.
find "${dirs[@]}" -type f -size +0 -printf '%D:%i\t%p\n' 2>/dev/null | sort -t$'\t' -k2 |
  awk -F'\t' '!seen[$1]++ { print $2 }' | while read -r f; do
  [ "$(head -c 4 "$f" 2>/dev/null | od -An -c | tr -d ' ')" = '177ELF' ] &&
    # (Not grep -q: it exits at the first match, readelf may then die of SIGPIPE, and under
    # pipefail the file was left out: 1,733 to 1,735 files from one run to the next.)
    readelf -SW "$f" 2>/dev/null | grep ' \.eh_frame ' >/dev/null && printf '%s\0' "$f"
done >"$work/files"
start=$(date +%s)
# One JSON line per file (the file name first), errors kept apart.
xargs -0 -P "$jobs" -I{} sh -c '
  if [ "$3" = 1 ]; then
    stripped=$(mktemp "$4/stripped.XXXXXX")
    objcopy --remove-section .eh_frame --remove-section .eh_frame_hdr "$2" "$stripped" 2>/dev/null &&
      out=$("$1" synth "$stripped" --compare-with "$2" --json --max-print 200 2>/dev/null |
            sed "s|\"file\":\"[^\"]*\"|\"file\":\"$2\"|")
    rm -f "$stripped"
  else
    out=$("$1" synth --compare --json --max-print 200 "$2" 2>/dev/null)
  fi
  [ -n "$out" ] && printf "%s\n" "$out" || printf "{\"file\": \"%s\", \"error\": true}\n" "$2"
' _ "$ehelf" {} "$strip" "$work" <"$work/files" >"$work/results.jsonl"
end=$(date +%s)
python3 - "$work/results.jsonl" "$((end - start))" <<'PY'
import json, sys
from collections import defaultdict
files = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ok = [f for f in files if "compared" in f]
errors = [f["file"] for f in files if "compared" not in f]
compared = sum(f["compared"] for f in ok)
agreeing = sum(f["agreeing"] for f in ok)
text = sum(f["text_bytes"] for f in ok)
seconds = sum(f["seconds"] for f in ok)
cats = defaultdict(int)
example = {}
for f in ok:
    for k, v in f["categories"].items():
        cats[k] += v
    for d in f["disagreements"]:
        if d["category"] not in example:
            example[d["category"]] = f"{f['file']}: {d['function']} {d['address']} {d['instruction']}"
print(f"files: {len(ok)} compared, {len(errors)} not readable, wall time {sys.argv[2]} s")
print(f"instructions agreeing: {agreeing:,} / {compared:,} ({100.0 * agreeing / max(compared, 1):.3f}%)")
shipped = sum(f.get("shipped_bytes", 0) for f in ok)
missed = sum(f.get("missed_bytes", 0) for f in ok)
print(f"coverage: {shipped - missed:,} of {shipped:,} bytes with shipped rows analysed"
      f" ({100.0 * (shipped - missed) / max(shipped, 1):.2f}%); not analysed there:"
      f" {sum(f.get('missed_instructions', 0) for f in ok):,} instructions besides the PLT and padding")
print(f"functions not fully analysed: {sum(f['functions_failed'] for f in ok):,} of {sum(f['functions'] for f in ok):,}; conflicts: {sum(f['conflicts'] for f in ok):,}; jump tables read: {sum(f['jump_tables'] for f in ok):,}")
print(f"code analysed: {text / 1e6:.1f} MB in {seconds:.1f} s of synthesis ({text / 1e6 / max(seconds, 1e-9):.2f} MB/s per core)")
print("disagreements by category:")
for k, v in sorted(cats.items(), key=lambda kv: -kv[1]):
    print(f"  {v:>10,}  {k}   e.g. {example.get(k, '')}")
print("files agreeing least (compared >= 1000):")
worst = sorted((f for f in ok if f["compared"] >= 1000), key=lambda f: f["agreeing"] / f["compared"])[:15]
for f in worst:
    print(f"  {100.0 * f['agreeing'] / f['compared']:8.3f}%  {f['agreeing']:,}/{f['compared']:,}  {f['file']}")
for e in errors[:10]:
    print(f"not readable: {e}")
PY

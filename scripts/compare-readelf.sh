#!/usr/bin/env bash
# Compares `ehelf dump FILE` with `readelf -wF FILE` on every ELF file under the given
# directories (default: /usr/bin /usr/sbin /usr/lib/x86_64-linux-gnu, recursively).
# Prints "N of M identical", then the files that differ, then the files where readelf itself
# printed warnings (reported separately: readelf's own output is then not a trustworthy oracle).
# Usage: scripts/compare-readelf.sh [--ehelf PATH] [--list FILE] [--jobs N] [DIR|FILE...]
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
ehelf="$here/build/bin/ehelf"
jobs=2
list=""
while [ $# -gt 0 ]; do
  case "$1" in
    --ehelf) ehelf=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --list) list=$2; shift 2 ;;
    *) break ;;
  esac
done
[ $# -eq 0 ] && [ -z "$list" ] && set -- /usr/bin /usr/sbin /usr/lib/x86_64-linux-gnu
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# ELF64 x86_64 files only (magic, class 2, machine 0x3e); no symlinks, so each file counts once.
if [ -n "$list" ]; then cp "$list" "$work/files"; else
  find "$@" -type f -size +63c 2>/dev/null | sort > "$work/all"
  python3 - "$work/all" > "$work/files" <<'PY'
import sys
for path in open(sys.argv[1]).read().splitlines():
    try:
        with open(path, 'rb') as f:
            h = f.read(20)
    except OSError:
        continue
    if h[:4] == b'\x7fELF' and h[4] == 2 and h[18:20] == b'\x3e\x00':
        print(path)
PY
fi

compare_one() {
  f=$1; ehelf=$2; work=$3
  key=$(printf '%s' "$f" | md5sum | cut -c1-16)
  readelf -wF "$f" > "$work/$key.r" 2> "$work/$key.rerr"
  "$ehelf" dump "$f" > "$work/$key.e" 2> "$work/$key.eerr"
  erc=$?
  if [ -s "$work/$key.rerr" ]; then status=readelf-warned
  elif cmp -s "$work/$key.r" "$work/$key.e"; then status=identical
  else status=different; fi
  if [ "$status" = different ]; then
    line=$(cmp "$work/$key.r" "$work/$key.e" 2>&1 | head -1)
    printf '%s\t%s\t%s\n' "$status" "$f" "$line (ehelf exit $erc: $(head -c 200 "$work/$key.eerr" | tr '\n' ' '))"
  elif [ "$status" = readelf-warned ]; then
    same=$(cmp -s "$work/$key.r" "$work/$key.e" && echo "output identical" || echo "output differs")
    printf '%s\t%s\t%s; readelf: %s\n' "$status" "$f" "$same" "$(head -1 "$work/$key.rerr")"
  else
    printf '%s\t%s\n' "$status" "$f"
  fi
  rm -f "$work/$key".*
}
export -f compare_one
tr '\n' '\0' < "$work/files" | xargs -0 -P "$jobs" -I{} bash -c 'compare_one "$@"' _ {} "$ehelf" "$work" > "$work/results"

total=$(wc -l < "$work/results")
identical=$(grep -c '^identical' "$work/results")
different=$(grep -c '^different' "$work/results")
warned=$(grep -c '^readelf-warned' "$work/results")
echo "$identical of $total identical ($different different, $warned where readelf warned)"
if [ "$different" -gt 0 ]; then
  echo "Different:"
  grep '^different' "$work/results" | cut -f2- | sed 's/^/  /'
fi
if [ "$warned" -gt 0 ]; then
  echo "readelf warned (not counted as differences):"
  grep '^readelf-warned' "$work/results" | cut -f2- | sed 's/^/  /'
fi
[ "$different" -eq 0 ]

#!/usr/bin/env bash
# `ehelf perf` names C++ frames as `perf script` does (perf prints libiberty's names without
# parameters): the fixture cxx_names (lambdas, a local class, templates whose return type the
# demangler prints first, operators, clones) recorded by `perf record --call-graph dwarf`; every
# address in the fixture that both print gets the same name from both, and the lambdas are
# among them. `ehelf perf -r` prints the mangled names `perf script --no-demangle` prints, and
# `ehelf record -r` the fixture's symbols as `nm` lists them.
source "$(dirname "$0")/common.sh" "$@"
target="$(cd "$build" && pwd)/tests/fixtures/cxx_names"
cd "$work" || exit 1
command -v perf > /dev/null || { echo "SKIP: perf is not installed"; exit 77; }

if ! perf_record -q -e cpu-clock -F 2000 --call-graph dwarf -o perf.data "$target" 8000 \
  > /dev/null 2> record.err; then
  if grep -qi "paranoid\|permission" record.err; then
    echo "SKIP: perf_event_open is not permitted here: $(head -1 record.err)"
    exit 77
  fi
  bad "perf record: $(cat record.err)"
  exit 1
fi

# names FILE: "address<TAB>name" of every frame in the fixture, once per line.
names() {
  awk -v dso="($target)" '/^\t/ && $NF == dso {
      addr = $1; $1 = ""; $NF = ""; sub(/^ +/, ""); sub(/ +$/, ""); sub(/\+0x[0-9a-f]+$/, "")
      print addr "\t" $0 }' "$1" | sort -u
}
compare() { # compare LABEL OURS THEIRS
  names "$2" > ours.names
  names "$3" > theirs.names
  join -t "$(printf '\t')" ours.names theirs.names | awk -F'\t' '$2 != $3' > differ.names
  local common
  common=$(join -t "$(printf '\t')" ours.names theirs.names | wc -l)
  if [ "$common" -lt 10 ]; then
    bad "$1: only $common addresses of the fixture named by both"
  elif [ -s differ.names ]; then
    bad "$1: $(wc -l < differ.names) of $common addresses named otherwise than perf, e.g.:"
    head -5 differ.names | sed 's/^/       address, ours, perf: /'
  else
    ok "$1: $common addresses of the fixture named as perf names them"
  fi
}

perf script -i perf.data --no-inline -F comm,pid,tid,time,ip,sym,dso > perf.txt 2> /dev/null
"$ehelf" perf perf.data > ours.txt 2> ours.err || bad "ehelf perf: $(cat ours.err)"
compare "demangled" ours.txt perf.txt
for lambda in 'main::{lambda(long)#1}::operator()' \
  'shapes::Meter::measured(long) const::{lambda(long)#1}::operator()'; do
  grep -qF "$lambda" theirs.names && grep -qF "$lambda" ours.names &&
    ok "both name a frame $lambda" || bad "no frame named $lambda by both"
done

perf script -i perf.data --no-inline --no-demangle -F comm,pid,tid,time,ip,sym,dso \
  > perf-raw.txt 2> /dev/null
"$ehelf" perf -r perf.data > ours-raw.txt 2> ours.err || bad "ehelf perf -r: $(cat ours.err)"
compare "mangled (-r)" ours-raw.txt perf-raw.txt

# ehelf record -r: the fixture's frames by their symbols' names, as nm lists them; without -r
# by the names perf gives them.
nm --defined-only "$target" | awk '{ print $3 }' | sort -u > nm.names
lambda_symbol=$(grep '^_ZZ4main' nm.names | while read -r s; do
  [ "$(c++filt -p <<< "$s")" = 'main::{lambda(long)#1}::operator()' ] && echo "$s"; done | head -1)
[ -n "$lambda_symbol" ] || bad "nm: no symbol of the fixture is main's lambda"
frames() { sed 's/ [0-9]*$//' "$1" | tr ';' '\n' | sort -u; }
if "$ehelf" record -q -r -F 2999 -o raw.folded -- "$target" 20000 > /dev/null 2> record.err; then
  frames raw.folded > raw.frames
  fixture_frames=$(comm -12 raw.frames nm.names | grep -c '^_Z')
  if grep -qxF "$lambda_symbol" raw.frames && ! grep -qF '{lambda' raw.frames &&
    [ "$fixture_frames" -ge 5 ]; then
    ok "record -r: $fixture_frames mangled symbols of the fixture as frames, $lambda_symbol among them"
  else
    bad "record -r: $fixture_frames of the fixture's mangled symbols as frames; lambda $lambda_symbol $(grep -cxF "$lambda_symbol" raw.frames) times"
  fi
else
  bad "record -r: $(cat record.err)"
fi
if "$ehelf" record -q -F 2999 -o named.folded -- "$target" 20000 > /dev/null 2> record.err; then
  frames named.folded > named.frames
  grep -qxF 'main::{lambda(long)#1}::operator()' named.frames && ! grep -qxF "$lambda_symbol" named.frames &&
    ok "record: main's lambda named as perf names it" ||
    bad "record: main's lambda not named main::{lambda(long)#1}::operator()"
else
  bad "record: $(cat record.err)"
fi
exit $fail

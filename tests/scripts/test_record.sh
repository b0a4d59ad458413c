#!/usr/bin/env bash
# ehelf record on real processes: the 70/30 split of a fixture (and perf's own DWARF unwinding of
# the same program as the oracle for the split), threads, fork+exec, a signal handler, a running
# process attached with -p, C++ frames through exceptions; the output formats (folded, svg,
# pprof decoded with python3-protobuf against profile.proto's field numbers, script); bad flags.
# All in user-space mode (--unwind user), whose oracles these are; test_record_kernel.sh holds the
# in-kernel walk to this mode on the same fixture.
source "$(dirname "$0")/common.sh" "$@"
fixtures="$(cd "$build" && pwd)/tests/fixtures"
# Debian's python3 has python3-protobuf (scripts/setup.sh); another python3 first on PATH may not.
py=/usr/bin/python3
[ -x "$py" ] || py=python3
target="$fixtures/record_target"
cd "$work" || exit 1

# Where perf_event_open is not permitted, the command says so in one line naming the sysctl.
if ! "$ehelf" record --unwind user -q -o probe.folded -- true 2> probe.err; then
  if grep -q perf_event_paranoid probe.err; then
    echo "SKIP: perf_event_open is not permitted here: $(cat probe.err)"
    exit 77
  fi
  bad "record of true: $(cat probe.err)"
  exit 1
fi

# count FILE PATTERN: samples of the folded stacks matching PATTERN (an extended regex)
count() { grep -E "$2" "$1" | awk '{ n += $NF } END { print n + 0 }'; }
total() { awk '{ n += $NF } END { print n + 0 }' "$1"; }

# ---- the split, and the summary ----
"$ehelf" record --unwind user -o split.folded -- "$target" split 400 > split.out 2> split.err ||
  bad "record split: $(cat split.err)"
a=$(count split.folded ';main;path_a;spin( |;)')
b=$(count split.folded ';main;path_b;spin( |;)')
all=$(total split.folded)
echo "split: path_a $a, path_b $b, all $all"
if [ "$all" -lt 200 ]; then
  bad "split: only $all samples"
else
  python3 -c "import sys; a,b=$a,$b; r=a/(a+b); sys.exit(0 if 0.62<=r<=0.78 and (a+b)>=0.8*$all else 1)" &&
    ok "split: path_a takes $a of $((a + b)) samples through the two paths (70% expected)" ||
    bad "split: path_a $a, path_b $b of $all: $(grep -vE ';path_[ab];' split.folded | sort -k2 -n -r | head -5)"
fi
grep -qE '^record_target;_start;__libc_start_main[^;]*;__libc_start_call_main;main;path_a;spin ' split.folded &&
  ok "split: stacks reach _start" || bad "split: no stack from _start: $(head -3 split.folded)"
for line in 'samples \(cpu-clock\)' 'top functions by self samples' 'spin$' \
  'profile written to split.folded'; do
  grep -qE "$line" split.err || bad "summary lacks '$line': $(cat split.err)"
done
ok "summary: $(head -1 split.err)"

# perf's own DWARF unwinding of the same program splits the same way (the oracle).
if perf record -q -e cpu-clock -F 999 --call-graph dwarf -o perf.data -- "$target" split 400 > /dev/null 2>&1; then
  perf script -i perf.data -F comm,ip,sym 2> /dev/null | awk '
    /^$/ { if (s) { if (s ~ /path_a/) a++; else if (s ~ /path_b/) b++ } s = ""; next }
    /^[ \t]/ { s = s " " $2 }
    END { if (s) { if (s ~ /path_a/) a++; else if (s ~ /path_b/) b++ } print a + 0, b + 0 }' > perf.split
  read -r pa pb < perf.split
  python3 -c "import sys; r1=$a/($a+$b); r2=$pa/max(1,$pa+$pb); print(f'ours {r1:.3f}, perf {r2:.3f}'); sys.exit(0 if abs(r1-r2)<=0.08 else 1)" &&
    ok "split agrees with perf record --call-graph dwarf + perf script (path_a $pa, path_b $pb)" ||
    bad "split differs from perf's: ours $a/$b, perf $pa/$pb"
else
  echo "SKIP perf comparison: perf record failed"
fi

# ---- threads ----
"$ehelf" record --unwind user -q --tid-roots -o threads.folded -- "$target" threads 300 2> threads.err ||
  bad "record threads: $(cat threads.err)"
ta=$(count threads.folded ';start_thread;.*thread_a;thread_a_work;spin( |;)')
tb=$(count threads.folded ';start_thread;.*thread_b;thread_b_work;spin( |;)')
roots=$(grep -E 'thread_[ab]_work' threads.folded | cut -d';' -f1 | sort -u | wc -l)
[ "$ta" -gt 50 ] && [ "$tb" -gt 50 ] && [ "$roots" -eq 2 ] &&
  ok "threads: thread_a $ta, thread_b $tb samples, from clone through start_thread, 2 thread roots" ||
  bad "threads: a $ta, b $tb, roots $roots: $(head -5 threads.folded)"

# ehelf perf spells the per-thread roots as ehelf record does (--tid-roots), and as
# stackcollapse-perf.pl (--tid): the same roots, those of perf script's threads.
if perf record -q -e cpu-clock -F 499 --call-graph dwarf -o threads.data -- "$target" threads 100 > /dev/null 2>&1; then
  "$ehelf" perf -f folded --tid-roots threads.data > perf-roots.folded 2> perf-roots.err
  "$ehelf" perf -f folded --tid threads.data > perf-tid.folded 2>> perf-roots.err
  perf script -i threads.data -F comm,pid,tid 2> /dev/null | awk 'NF == 2 { split($2, a, "/"); print $1 "-" a[1] "/" a[2] }' | sort -u > perf-roots.want
  cut -d';' -f1 perf-roots.folded | sort -u > perf-roots.got
  [ -s perf-roots.want ] && cmp -s perf-roots.want perf-roots.got && cmp -s perf-roots.folded perf-tid.folded &&
    ok "ehelf perf --tid-roots = --tid: perf script's $(wc -l < perf-roots.want) threads as roots" ||
    bad "ehelf perf --tid-roots: $(cat perf-roots.err) roots $(tr '\n' ' ' < perf-roots.got), perf script $(tr '\n' ' ' < perf-roots.want)"
else
  echo "SKIP ehelf perf --tid-roots: perf record failed"
fi

# ---- fork + exec ----
"$ehelf" record --unwind user -q --pid-roots -o fork.folded -- "$target" fork 200 2> fork.err ||
  bad "record fork: $(cat fork.err)"
pc=$(count fork.folded ';main;child_work;spin( |;)')
pp=$(count fork.folded ';main;parent_work;spin( |;)')
cpid=$(grep ';child_work;' fork.folded | cut -d';' -f1 | sort -u)
ppid=$(grep ';parent_work;' fork.folded | cut -d';' -f1 | sort -u)
[ "$pc" -gt 50 ] && [ "$pp" -gt 50 ] && [ -n "$cpid" ] && [ "$cpid" != "$ppid" ] &&
  ok "fork+exec: parent_work $pp in $ppid, the exec'd child's child_work $pc in $cpid" ||
  bad "fork: child $pc ($cpid), parent $pp ($ppid): $(cat fork.folded | head)"

# ---- a signal handler: walks cross the signal frame down to main ----
# (Taken again once when too few samples landed in the handler: how many do is the timers'
# luck, seen at 0-6 in 1 run of 5 on an idle machine; the walk through the frame is what is
# checked.)
for attempt in 1 2; do
  "$ehelf" record --unwind user -q -o signal.folded -- "$target" signal 300 2> signal.err ||
    bad "record signal: $(cat signal.err)"
  hs=$(count signal.folded ';main;main_work;spin;.*on_prof;handler_work( |;)')
  ha=$(count signal.folded ';on_prof;handler_work( |;)')
  [ "$ha" -gt 10 ] && break
done
[ "$hs" -gt 10 ] && [ "$hs" -ge $((ha * 9 / 10)) ] &&
  ok "signal: $hs of $ha handler samples walk through the signal frame to main_work and _start" ||
  bad "signal: $hs of $ha through the signal frame: $(grep handler_work signal.folded | head -3)"

# ---- a return address held in a register: the first frame's rule reads rcx ----
"$ehelf" record --unwind user -q -o ra.folded -- "$fixtures/ra_register" 300 2> ra.err || bad "record ra: $(cat ra.err)"
rt=$(count ra.folded ';_start;__libc_start_main[^;]*;__libc_start_call_main;main;call_it;ra_in_rcx ')
ri=$(count ra.folded ';ra_in_rcx ')
[ "$rt" -gt 10 ] && [ "$rt" -eq "$ri" ] &&
  ok "return address in rcx: $rt of $ri samples in ra_in_rcx walk through call_it to _start" ||
  bad "return address in rcx: $rt of $ri: $(grep ra_in_rcx ra.folded | head -3)"

# ---- -p: a running process, left running ----
"$target" wait > wait.out &
wpid=$!
for _ in $(seq 50); do grep -q ready wait.out 2> /dev/null && break; sleep 0.1; done
"$ehelf" record --unwind user -p "$wpid" -d 1.5 -o attach.folded 2> attach.err || bad "record -p: $(cat attach.err)"
at=$(count attach.folded ';main;attached_work;spin( |;)')
kill -0 "$wpid" 2> /dev/null && alive=yes || alive=no
[ "$at" -gt 50 ] && [ "$alive" = yes ] && grep -q '1 thread' attach.err &&
  ok "-p: $at samples in attached_work through main, from /proc/PID/maps; the process still runs" ||
  bad "-p: $at samples, alive $alive: $(cat attach.err) $(head -3 attach.folded)"
kill "$wpid"
wait "$wpid" 2> /dev/null

# ---- SIGINT ends the recording: the profile is written, the command is ended ----
timeout --preserve-status -s INT 1.5 "$ehelf" record --unwind user -o int.folded -- "$target" wait > int.out 2> int.err
st=$?
ti=$(count int.folded ';main;attached_work;spin( |;)')
left=$(pgrep -f "$target wait" | wc -l)
# timeout signals its whole process group, the command too (as Ctrl-C does): it ends by SIGINT
# (130); a command that outlives the recording would get SIGTERM (143).
{ [ "$st" -eq 130 ] || [ "$st" -eq 143 ]; } && [ "$ti" -gt 50 ] && [ "$left" -eq 0 ] &&
  grep -q 'profile written to int.folded' int.err &&
  ok "SIGINT: $ti samples written, the command ended (its status $st passed on)" ||
  bad "SIGINT: $ti samples, exit $st, $left left running: $(cat int.err)"

# ---- the kernel refuses the event: one line at once, nothing left behind ----
# Each run is bounded: timeout --foreground signals ehelf alone (as a SIGINT to ehelf alone
# would), so that a hang fails instead of blocking and a command left behind stays visible.
# left_behind MARKER: processes whose command line holds MARKER (killed once counted).
left_behind() {
  local pids
  pids=$(pgrep -f -- "$1")
  [ -n "$pids" ] && kill -KILL $pids 2> /dev/null
  echo "$pids" | grep -c .
}
if perf stat -e cycles -x, true > /dev/null 2> cycles.err && ! grep -q 'not supported\|not counted' cycles.err; then
  echo "SKIP refused event: this machine counts cycles"
else
  marker="refused-$$-cycles"
  timeout --foreground -s INT -k 5 30 "$ehelf" record --unwind user -q -e cycles -o refused.folded -- \
    "$target" wait "$marker" > refused.out 2> refused.err
  st=$?
  left=$(left_behind "$marker")
  [ "$st" -eq 2 ] && [ "$(wc -l < refused.err)" -eq 1 ] &&
    grep -q "event 'cycles' is not supported here" refused.err && [ "$left" -eq 0 ] &&
    [ ! -s refused.out ] &&
    ok "refused event: exit 2 at once, nothing left running: $(cat refused.err)" ||
    bad "refused event: exit $st (124: it hung), $left left running: $(cat refused.err)"
fi

# -F above the kernel's limit: lowered to it with one line naming the limit and where it is set,
# as perf record does (its own warning is the oracle for the limit and the rate taken).
limit=$(cat /proc/sys/kernel/perf_event_max_sample_rate)
marker="refused-$$-rate"
# (true: at the limit, sampling interrupts slow a program down tenfold and more)
timeout --foreground -s INT -k 5 120 "$ehelf" record --unwind user -q -F $((limit * 2)) -o fast.folded -- \
  true "$marker" > fast.out 2> fast.err
st=$?
left=$(left_behind "$marker")
fs=$(total fast.folded 2> /dev/null)
if perf record -e cpu-clock -F $((limit * 2)) -o fast.data -- true > /dev/null 2> perf-fast.err; then
  perf_rates=$(grep -o 'throttling from [0-9,]* Hz to [0-9,]* Hz' perf-fast.err | tr -d ,)
else
  perf_rates="throttling from $((limit * 2)) Hz to $limit Hz" # perf failed: the limit itself
fi
ours="throttling from $(sed -n 's/.*-F \([0-9]*\) is above.*sampling at \([0-9]*\) per second.*/\1 Hz to \2 Hz/p' fast.err)"
[ "$st" -eq 0 ] && [ "$fs" -gt 0 ] && [ "$left" -eq 0 ] && [ "$(wc -l < fast.err)" -eq 1 ] &&
  grep -q "limit of $limit samples per second (/proc/sys/kernel/perf_event_max_sample_rate" fast.err &&
  [ "$ours" = "$perf_rates" ] &&
  ok "-F $((limit * 2)): $fs samples at the limit, as perf ($perf_rates): $(cat fast.err)" ||
  bad "-F above the limit: exit $st (124: it hung), $fs samples, $left left, perf '$perf_rates', ours '$ours': $(cat fast.err)"

# ---- a signal to ehelf alone while it records: the command is ended, the profile written ----
for sig in INT TERM; do
  marker="alone-$$-$sig"
  "$ehelf" record --unwind user -q -o "alone-$sig.folded" -- "$target" wait "$marker" > "alone-$sig.out" 2> "alone-$sig.err" &
  rpid=$!
  for _ in $(seq 100); do grep -q ready "alone-$sig.out" 2> /dev/null && break; sleep 0.1; done
  sleep 0.5 # a few samples
  kill -"$sig" "$rpid"
  for _ in $(seq 300); do kill -0 "$rpid" 2> /dev/null || break; sleep 0.1; done
  kill -0 "$rpid" 2> /dev/null && { kill -KILL "$rpid"; hung=yes; } || hung=no
  wait "$rpid"
  st=$?
  left=$(left_behind "$marker")
  sa=$(count "alone-$sig.folded" ';main;attached_work;spin( |;)' 2> /dev/null)
  # The command got SIGTERM from ehelf (143), as under perf record.
  [ "$hung" = no ] && [ "$st" -eq 143 ] && [ "$left" -eq 0 ] && [ "${sa:-0}" -gt 0 ] &&
    ok "SIG$sig to ehelf alone: the command ended by SIGTERM, $sa samples written" ||
    bad "SIG$sig to ehelf alone: hung $hung, exit $st, $left left, $sa samples: $(cat "alone-$sig.err")"
done
# A command that ignores SIGTERM is killed at the second SIGINT (Ctrl-C twice).
marker="alone-$$-ignore"
"$ehelf" record --unwind user -q -o ignore.folded -- sh -c "trap '' TERM; exec '$target' wait $marker" > ignore.out 2> ignore.err &
rpid=$!
for _ in $(seq 100); do grep -q ready ignore.out 2> /dev/null && break; sleep 0.1; done
kill -INT "$rpid"
sleep 0.5
kill -0 "$rpid" 2> /dev/null && first=waits || first=ended
for _ in $(seq 300); do
  kill -0 "$rpid" 2> /dev/null || break
  kill -INT "$rpid"
  sleep 0.1
done
kill -0 "$rpid" 2> /dev/null && { kill -KILL "$rpid"; hung=yes; } || hung=no
wait "$rpid"
st=$?
left=$(left_behind "$marker")
[ "$first" = waits ] && [ "$hung" = no ] && [ "$st" -eq 137 ] && [ "$left" -eq 0 ] &&
  [ -s ignore.folded ] &&
  ok "a command ignoring SIGTERM: ehelf waited for it, then killed it at the next SIGINT (137)" ||
  bad "a command ignoring SIGTERM: first SIGINT $first, hung $hung, exit $st, $left left: $(cat ignore.err)"

# ---- C++: demangled names, frames through exceptions ----
"$ehelf" record --unwind user -q -o cxx.folded -- "$fixtures/record_cxx" 30000 2> cxx.err ||
  bad "record cxx: $(cat cxx.err)"
deep=$(count cxx.folded ';main;shapes::Worker::run;shapes::Worker::deep;shapes::Worker::deep;')
add=$(count cxx.folded 'shapes::Worker::deep;shapes::Accumulator<double>::add ')
unw=$(count cxx.folded 'shapes::Worker::deep;(__cxa_throw|_Unwind_RaiseException)')
[ "$deep" -gt 20 ] && [ "$add" -gt 5 ] && [ "$unw" -gt 5 ] &&
  ok "C++: $deep samples in nested Worker::deep, $add in Accumulator<double>::add, $unw in the throw path" ||
  bad "C++: deep $deep, add $add, throw $unw: $(sort -k2 -n -r cxx.folded | head -5)"

# ---- JIT code named from /tmp/perf-PID.map ----
"$ehelf" record --unwind user -q -o jit.folded -- "$fixtures/record_jit" 600 > jit.pid 2> jit.err ||
  bad "record jit: $(cat jit.err)"
jit=$(count jit.folded ';jitted_loop( |;)')
jall=$(total jit.folded)
rm -f "/tmp/perf-$(cat jit.pid).map"
[ "$jit" -gt $((jall / 2)) ] &&
  ok "JIT: $jit of $jall samples named jitted_loop from /tmp/perf-PID.map" ||
  bad "JIT: $jit of $jall: $(head -3 jit.folded)"

# ---- JIT frames: code in no module, walked through by following rbp ----
"$ehelf" record --unwind user -o jitfp.folded -- "$fixtures/jit_frames" 800 > /dev/null 2> jitfp.err ||
  bad "record jit_frames: $(cat jitfp.err)"
through=$(count jitfp.folded ';main;run_jitted;\[anon\];\[anon\];\[anon\];spin_in_callback( |;)')
jfall=$(total jitfp.folded)
[ "$through" -gt $((jfall / 2)) ] && grep -q "frames in code outside any module (JIT) unwound by rbp" jitfp.err &&
  ok "JIT frames: $through of $jfall samples walked through 3 frames in no module to main" ||
  bad "JIT frames: $through of $jfall: $(sort -k2 -n -r jitfp.folded | head -3); $(cat jitfp.err)"

# ---- -t: some threads of a running process, as perf record -t ----
"$target" threads 100000 > threads2.out &
wpid=$!
for _ in $(seq 50); do [ "$(ls /proc/$wpid/task 2> /dev/null | wc -l)" -ge 3 ] && break; sleep 0.1; done
tid=$(ls /proc/$wpid/task | sort -n | tail -1)
"$ehelf" record --unwind user -t "$tid" -d 1 --tid-roots -o tid.folded 2> tid.err || bad "record -t: $(cat tid.err)"
"$ehelf" record --unwind user --pid "$wpid" -d 1 --tid-roots -o tidall.folded 2> tidall.err || bad "record --pid: $(cat tidall.err)"
kill "$wpid"
wait "$wpid" 2> /dev/null
roots=$(cut -d';' -f1 tid.folded | sort -u)
wa=$(count tid.folded ';thread_a_work;spin( |;)')
wb=$(count tid.folded ';thread_b_work;spin( |;)')
allroots=$(grep -E 'thread_[ab]_work' tidall.folded | cut -d';' -f1 | sort -u | wc -l)
# The thread's own root alone (its id from /proc/PID/task), one of the two workers, where the
# whole process (--pid, perf record's spelling) has both.
[ "$roots" = "record_target-$wpid/$tid" ] && [ $((wa + wb)) -gt 20 ] &&
  { [ "$wa" -eq 0 ] || [ "$wb" -eq 0 ]; } && [ "$allroots" -eq 2 ] &&
  ok "-t $tid: $((wa + wb)) samples, all in that thread ($roots); --pid: both threads" ||
  bad "-t: roots '$roots', a $wa, b $wb, whole process $allroots threads: $(cat tid.err)"

# ---- -a: the whole system, the fixture among the others ----
"$target" wait > wait2.out &
wpid=$!
"$ehelf" record --unwind user -a -d 1 -o all.folded 2> all.err || bad "record -a: $(cat all.err)"
kill "$wpid"
wait "$wpid" 2> /dev/null
sys=$(count all.folded '^record_target;_start;.*;main;attached_work;spin( |;)')
[ "$sys" -gt 50 ] && ok "-a: $sys samples of the fixture's attached_work among the system's" ||
  bad "-a: $sys: $(head -3 all.folded)"

# ---- formats ----
"$ehelf" record --unwind user -q -o split.svg -- "$target" split 100 2> svg.err || bad "record svg: $(cat svg.err)"
python3 - split.svg << 'PY' && ok "svg: well-formed, path_a and path_b frames, the script" || bad "svg"
import sys, xml.etree.ElementTree as E
root = E.parse(sys.argv[1]).getroot()
ns = '{http://www.w3.org/2000/svg}'
titles = [t.text for e in root.iter(ns + 'text') if e.get('id') == 'names' for t in e.iter(ns + 'tspan')]
assert 'path_a' in titles and 'path_b' in titles, titles[:10]
assert root.find(ns + 'script') is not None
PY

# --inverted (flamegraph.pl's name; --icicle too): the root on the first row, each callee a row
# below its caller; the same frames as the flame graph of the same stacks, from ehelf record and
# from ehelf perf (the fork recording's perf.data, or a new one).
"$ehelf" record --unwind user -q -f folded -o inv.folded -- "$target" split 100 2> inv.err
perf record -q -e cpu-clock -F 499 --call-graph dwarf -o inv.data -- "$target" split 100 > /dev/null 2>&1
"$ehelf" perf -f svg -o perf-flame.svg inv.data 2>> inv.err
"$ehelf" perf -f svg --icicle -o perf-icicle.svg inv.data 2>> inv.err
"$ehelf" record --unwind user -q --inverted -o record-icicle.svg -- "$target" split 100 2>> inv.err
python3 - perf-flame.svg perf-icicle.svg record-icicle.svg << 'PY' && ok "--inverted/--icicle: icicle graphs from ehelf perf and ehelf record" || bad "--inverted: $(cat inv.err)"
import re, sys, xml.etree.ElementTree as E
ns = '{http://www.w3.org/2000/svg}'
def frames(path):
    root = E.parse(path).getroot()
    area = next(s for s in root.iter(ns + 'svg') if s.get('id') == 'frames')
    levels = int(area.get('viewBox').split()[3])
    out = {}
    names = [t.text for e in root.iter(ns + 'text') if e.get('id') == 'names' for t in e.iter(ns + 'tspan')]
    for p in area.iter(ns + 'path'):
        for i, (s, row, n) in zip(p.get('data-names').split(), re.findall(r'M(\d+) (\d+)h(\d+)', p.get('d'))):
            out.setdefault(names[int(i)], []).append((int(s), int(row), int(n)))
    return area.get('data-inverted'), levels, out
flame_mode, flame_levels, flame = frames(sys.argv[1])
for path in sys.argv[2:]:
    mode, levels, icicle = frames(path)
    assert mode == '1' and flame_mode in (None, '0'), (path, mode, flame_mode)
    assert icicle['all'][0][1] == 0, icicle['all']               # the root at the top
    for caller, callee in [('main', 'path_a'), ('path_a', 'spin'), ('__libc_start_call_main', 'main')]:
        assert icicle[callee][0][1] == icicle[caller][0][1] + 1, (path, caller, callee)
    if path.startswith('perf'): # the same stacks: each frame's row mirrored
        assert levels == flame_levels
        assert {(k, s, levels - 1 - r, n) for k, fs in icicle.items() for s, r, n in fs} == \
               {(k, s, r, n) for k, fs in flame.items() for s, r, n in fs}
PY

"$ehelf" record --unwind user -q -o prof.pb.gz -F 1999 -- "$target" split 200 2> pprof.err ||
  bad "record pprof: $(cat pprof.err)"
"$ehelf" record --unwind user -q -f folded -o prof.folded -F 1999 -- "$target" split 200 2>> pprof.err
SCRIPTS="$scripts_dir" "$py" - prof.pb.gz << 'PY' && ok "pprof: decoded against profile.proto's field numbers" || bad "pprof"
import os, sys
sys.path.insert(0, os.environ['SCRIPTS'])
import pprof_profile
p = pprof_profile.load(sys.argv[1])
s = p.string_table
assert s[0] == ''
assert [(s[v.type], s[v.unit]) for v in p.sample_type] == [('samples', 'count'), ('cpu', 'nanoseconds')]
assert (s[p.period_type.type], s[p.period_type.unit]) == ('cpu', 'nanoseconds')
assert p.period == 1000000000 // 1999, p.period
assert p.time_nanos > 1.7e18 and p.duration_nanos > 0
functions = {f.id: s[f.name] for f in p.function}
locations = {l.id: l for l in p.location}
mappings = {m.id: m for m in p.mapping}
samples = a = b = 0
for smp in p.sample:
    names = [functions[locations[i].line[0].function_id] for i in smp.location_id]
    samples += smp.value[0]
    assert smp.value[1] >= smp.value[0] * 100000, smp.value  # ns of cpu-clock per sample
    if names[:3] == ['spin', 'path_a', 'main']: a += smp.value[0]
    if names[:3] == ['spin', 'path_b', 'main']: b += smp.value[0]
    labels = {s[l.key]: (s[l.str] if l.str else l.num) for l in smp.label}
    assert labels['comm'] == 'record_target' and labels['pid'] > 0, labels
    for i in smp.location_id:
        loc = locations[i]
        if loc.mapping_id:
            m = mappings[loc.mapping_id]
            assert m.memory_start <= loc.address < m.memory_limit and m.has_functions
assert samples > 100 and a > b > 0, (samples, a, b)
assert any(s[m.filename].endswith('/record_target') for m in p.mapping)
print(f'pprof: {samples} samples, path_a {a}, path_b {b}, {len(p.location)} locations, '
      f'{len(p.function)} functions, {len(p.mapping)} mappings')
PY

"$ehelf" record --unwind user -q -f script -o split.txt -- "$target" split 100 2> script.err ||
  bad "record script: $(cat script.err)"
heads=$(grep -cE '^record_target +[0-9]+/[0-9]+ +[0-9]+\.[0-9]+: *$' split.txt)
grep -qE '^\s+[0-9a-f]+ spin \(.*/record_target\)$' split.txt && [ "$heads" -gt 50 ] &&
  ok "script: $heads samples in perf script's layout" || bad "script: $heads: $(head -5 split.txt)"

# ---- other events and a fixed period ----
"$ehelf" record --unwind user -q -e task-clock -o task.folded -- "$target" split 100 2> task.err ||
  bad "record -e task-clock: $(cat task.err)"
"$ehelf" record --unwind user -q -c 2000000 -o period.folded -- "$target" split 100 2> period.err ||
  bad "record -c: $(cat period.err)"
tk=$(count task.folded ';path_a;spin( |;)')
pd=$(count period.folded ';path_a;spin( |;)')
# -c 2000000 ns of cpu-clock: one sample every 2 ms of CPU, half the default rate.
[ "$tk" -gt 20 ] && [ "$pd" -gt 10 ] && [ "$pd" -lt "$tk" ] &&
  ok "-e task-clock: $tk samples in path_a; -c 2000000: $pd" || bad "task-clock $tk, -c $pd"

# -c with a software event counted per event (page faults): one sample every N faults, each
# weighing N, as perf stat counts the faults of the same run (the kernel samples every event of
# such a counter when the period is also asked for: every fault was a sample).
"$ehelf" record --unwind user -q -e page-faults -c 64 -o faults.folded -- "$target" faults 100 \
  2> faults.err || bad "record -e page-faults -c 64: $(cat faults.err)"
"$ehelf" record --unwind user -q --period -e page-faults -c 64 -o faults-period.folded -- \
  "$target" faults 100 2> faults-period.err ||
  bad "record --period -e page-faults -c 64: $(cat faults-period.err)"
if faults=$(page_faults "$target" faults 100) && [ "$faults" -gt 102400 ] 2> /dev/null; then
  fs=$(total faults.folded)
  fw=$(total faults-period.folded)
  fp=$(count faults.folded ';main;fault_pages( |;)')
  # (a counter per CPU, each may end with up to 63 faults not sampled; the loader's faults may
  # differ by a few from perf stat's run)
  lo=$((faults / 64 - $(nproc) - 1))
  # fault_pages' own faults are 100 x 1,024 (and under a sanitizer its shadow's first touches,
  # ~128; the sanitizer's runtime faults elsewhere too): 1,600 samples, give or take 1%
  [ "$fs" -ge "$lo" ] && [ "$fs" -le $((faults / 64 + 1)) ] && [ "$fp" -ge $((1600 - $(nproc) - 1)) ] &&
    [ "$fp" -le 1616 ] &&
    [ $((fw % 64)) -eq 0 ] && [ "$fw" -ge $((lo * 64)) ] && [ "$fw" -le $(((faults / 64 + 1) * 64)) ] &&
    ok "-e page-faults -c 64: $fs samples ($fp in fault_pages) for perf stat's $faults faults; --period: $fw" ||
    bad "-e page-faults -c 64: $fs samples ($fp in fault_pages), --period $fw, for $faults faults"
else
  echo "SKIP -e page-faults -c 64: perf stat counted no page faults: $faults"
fi

# ---- bad input: one line, non-zero exit, nothing left running ----
expect_error() { # expect_error WHAT PATTERN ARGS...
  local what=$1 pattern=$2
  shift 2
  if "$ehelf" record --unwind user -q -o bad.folded "$@" > bad.out 2> bad.err; then
    bad "$what: exit 0"
  elif [ "$(wc -l < bad.err)" -ne 1 ] || ! grep -qE -e "$pattern" bad.err; then
    bad "$what: $(cat bad.err)"
  else
    ok "$what: $(cat bad.err)"
  fi
}
expect_error "no target" 'give exactly one of'
expect_error "two targets" 'give exactly one of' -p 1 -- true
expect_error "unknown event" "unknown event 'bogus'" -e bogus -- true
expect_error "-F 0" '-F must be above 0' -F 0 -- true
expect_error "stack size" 'multiple of 8' --stack-size 7 -- true
expect_error "-F and -c" 'excludes' -F 99 -c 1000 -- true
# (a flag of the other mode is said, not ignored)
expect_error "user mode, --kernel-copy-every" 'in-kernel walk, not --unwind user' --kernel-copy-every 2 -- true
expect_error "user mode, --no-kernel-park" 'in-kernel walk, not --unwind user' --no-kernel-park -- true
if ! "$ehelf" record --unwind kernel -q -o bad.folded --stack-size 4096 -- true > /dev/null 2> bad.err &&
  [ "$(wc -l < bad.err)" -eq 1 ] && grep -q 'only with --kernel-copy-every' bad.err; then
  ok "kernel mode, --stack-size: $(cat bad.err)"
else
  bad "kernel mode, --stack-size: $(cat bad.err)"
fi
expect_error "bad pid" "'12x' is not a process id" -p 12x
expect_error "no process" 'no process' -p 999999999
expect_error "no thread" 'no thread 999999999' -t 999999999
expect_error "missing command" 'cannot run ./does-not-exist: No such file' -- ./does-not-exist
expect_error "bad format" 'unknown format|not in' -f bogus -- true
# An output whose extension no format has is refused before anything runs (it was written as
# folded text); -f says the format of any name; extensions in any case.
for name in prof.json x.html x.svgz noextension; do
  if "$ehelf" record --unwind user -q -o "$name" -- touch "ran-$name" > /dev/null 2> bad.err; then
    bad "-o $name: exit 0"
  elif [ "$(wc -l < bad.err)" -eq 1 ] && grep -q -- "-o $name: no format has this extension" bad.err &&
    [ ! -e "ran-$name" ] && [ ! -e "$name" ]; then
    ok "-o $name: $(cat bad.err)"
  else
    bad "-o $name: $(cat bad.err), ran: $(ls ran-* 2> /dev/null)"
  fi
done
"$ehelf" record --unwind user -q -f folded -o prof.json -- "$target" split 40 2> fjson.err
fj=$(count prof.json ';main;path_a;spin( |;)')
[ "$fj" -gt 0 ] && ok "-f folded -o prof.json: $fj samples in path_a, folded" || bad "-f folded -o prof.json: $(cat fjson.err)"
"$ehelf" record --unwind user -q -o SPLIT.SVG -- "$target" split 40 2> upper.err &&
  python3 -c "import sys, xml.etree.ElementTree as E; r = E.parse('SPLIT.SVG').getroot(); sys.exit(r.tag != '{http://www.w3.org/2000/svg}svg')" &&
  ok "-o SPLIT.SVG: an SVG" || bad "-o SPLIT.SVG: $(cat upper.err; head -c 200 SPLIT.SVG)"
# A command's own option given without --: the error says where it goes.
if "$ehelf" record --unwind user -o g.svg ls -l > /dev/null 2> bad.err; then
  bad "a command without --: exit 0"
elif [ "$(wc -l < bad.err)" -eq 1 ] && grep -q "unknown option '-l' .*after --" bad.err && [ ! -e g.svg ]; then
  ok "a command without --: $(cat bad.err)"
else
  bad "a command without --: $(cat bad.err)"
fi

# An output that cannot be written is refused before anything runs.
if "$ehelf" record --unwind user -q -o "$work/no/such/dir/x.svg" -- touch "$work/ran" 2> bad.err; then
  bad "unwritable output: exit 0"
elif [ "$(wc -l < bad.err)" -eq 1 ] && grep -q "$work/no/such/dir/x.svg: cannot write it" bad.err &&
  [ ! -e "$work/ran" ]; then
  ok "unwritable output: $(cat bad.err), the command not run"
else
  bad "unwritable output: $(cat bad.err)"
fi

# As an unprivileged user: per perf_event_paranoid, user frames with a note (2), everything
# (1 or below), or one line naming the sysctl (3 and above).
level=$(cat /proc/sys/kernel/perf_event_paranoid)
if [ "$(id -u)" -eq 0 ] && command -v setpriv > /dev/null; then
  chmod 755 "$work"
  mkdir "$work/nobody" && chown 65534:65534 "$work/nobody"
  setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=/nonexistent \
    "$ehelf" record --unwind user -q -o "$work/nobody/x.folded" -- "$target" split 150 2> nobody.err
  st=$?
  nb=$(count "$work/nobody/x.folded" ';path_[ab];spin( |;)' 2> /dev/null)
  if [ "$level" -ge 3 ]; then
    [ "$st" -ne 0 ] && [ "$(wc -l < nobody.err)" -eq 1 ] && grep -q perf_event_paranoid nobody.err &&
      ok "unprivileged at level $level: $(cat nobody.err)" || bad "unprivileged at $level: $(cat nobody.err)"
  elif [ "$level" -eq 2 ]; then
    [ "$st" -eq 0 ] && [ "$nb" -gt 20 ] && grep -q 'kernel frames are not sampled' nobody.err &&
      ! grep -q 'asm_\|entry_SYSCALL' "$work/nobody/x.folded" &&
      ok "unprivileged at level 2: $nb user-only samples, said once: $(cat nobody.err)" ||
      bad "unprivileged at level 2: $st, $nb samples: $(cat nobody.err)"
  else
    [ "$st" -eq 0 ] && [ "$nb" -gt 20 ] && ok "unprivileged at level $level: $nb samples" ||
      bad "unprivileged at level $level: $(cat nobody.err)"
  fi
else
  echo "SKIP unprivileged run: not root or no setpriv"
fi
"$ehelf" record --unwind user -q -o status.folded -- sh -c 'exit 3' 2> /dev/null
[ $? -eq 3 ] && ok "the command's exit status is ehelf record's" || bad "exit status not passed on"
exit $fail

#!/usr/bin/env bash
# ehelf record on real processes: the 70/30 split of a fixture (and perf's own DWARF unwinding of
# the same program as the oracle for the split), threads, fork+exec, a signal handler, a running
# process attached with -p, C++ frames through exceptions; the output formats (folded, svg,
# pprof decoded with python3-protobuf against profile.proto's field numbers, script); bad flags.
source "$(dirname "$0")/common.sh" "$@"
fixtures="$(cd "$build" && pwd)/tests/fixtures"
# Debian's python3 has python3-protobuf (scripts/setup.sh); another python3 first on PATH may not.
py=/usr/bin/python3
[ -x "$py" ] || py=python3
target="$fixtures/record_target"
cd "$work" || exit 1

# Where perf_event_open is not permitted, the command says so in one line naming the sysctl.
if ! "$ehelf" record -q -o probe.folded -- true 2> probe.err; then
  if grep -q perf_event_paranoid probe.err; then
    echo "SKIP: perf_event_open is not permitted here: $(cat probe.err)"
    exit 0
  fi
  bad "record of true: $(cat probe.err)"
  exit 1
fi

# count FILE PATTERN: samples of the folded stacks matching PATTERN (an extended regex)
count() { grep -E "$2" "$1" | awk '{ n += $NF } END { print n + 0 }'; }
total() { awk '{ n += $NF } END { print n + 0 }' "$1"; }

# ---- the split, and the summary ----
"$ehelf" record -o split.folded -- "$target" split 400 > split.out 2> split.err ||
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
"$ehelf" record -q --tid-roots -o threads.folded -- "$target" threads 300 2> threads.err ||
  bad "record threads: $(cat threads.err)"
ta=$(count threads.folded ';start_thread;.*thread_a;thread_a_work;spin( |;)')
tb=$(count threads.folded ';start_thread;.*thread_b;thread_b_work;spin( |;)')
roots=$(grep -E 'thread_[ab]_work' threads.folded | cut -d';' -f1 | sort -u | wc -l)
[ "$ta" -gt 50 ] && [ "$tb" -gt 50 ] && [ "$roots" -eq 2 ] &&
  ok "threads: thread_a $ta, thread_b $tb samples, from clone through start_thread, 2 thread roots" ||
  bad "threads: a $ta, b $tb, roots $roots: $(head -5 threads.folded)"

# ---- fork + exec ----
"$ehelf" record -q --pid-roots -o fork.folded -- "$target" fork 200 2> fork.err ||
  bad "record fork: $(cat fork.err)"
pc=$(count fork.folded ';main;child_work;spin( |;)')
pp=$(count fork.folded ';main;parent_work;spin( |;)')
cpid=$(grep ';child_work;' fork.folded | cut -d';' -f1 | sort -u)
ppid=$(grep ';parent_work;' fork.folded | cut -d';' -f1 | sort -u)
[ "$pc" -gt 50 ] && [ "$pp" -gt 50 ] && [ -n "$cpid" ] && [ "$cpid" != "$ppid" ] &&
  ok "fork+exec: parent_work $pp in $ppid, the exec'd child's child_work $pc in $cpid" ||
  bad "fork: child $pc ($cpid), parent $pp ($ppid): $(cat fork.folded | head)"

# ---- a signal handler: walks cross the signal frame down to main ----
"$ehelf" record -q -o signal.folded -- "$target" signal 300 2> signal.err ||
  bad "record signal: $(cat signal.err)"
hs=$(count signal.folded ';main;main_work;spin;.*on_prof;handler_work( |;)')
ha=$(count signal.folded ';on_prof;handler_work( |;)')
[ "$hs" -gt 10 ] && [ "$hs" -ge $((ha * 9 / 10)) ] &&
  ok "signal: $hs of $ha handler samples walk through the signal frame to main_work and _start" ||
  bad "signal: $hs of $ha through the signal frame: $(grep handler_work signal.folded | head -3)"

# ---- a return address held in a register: the first frame's rule reads rcx ----
"$ehelf" record -q -o ra.folded -- "$fixtures/ra_register" 300 2> ra.err || bad "record ra: $(cat ra.err)"
rt=$(count ra.folded ';_start;__libc_start_main[^;]*;__libc_start_call_main;main;call_it;ra_in_rcx ')
ri=$(count ra.folded ';ra_in_rcx ')
[ "$rt" -gt 10 ] && [ "$rt" -eq "$ri" ] &&
  ok "return address in rcx: $rt of $ri samples in ra_in_rcx walk through call_it to _start" ||
  bad "return address in rcx: $rt of $ri: $(grep ra_in_rcx ra.folded | head -3)"

# ---- -p: a running process, left running ----
"$target" wait > wait.out &
wpid=$!
for _ in $(seq 50); do grep -q ready wait.out 2> /dev/null && break; sleep 0.1; done
"$ehelf" record -p "$wpid" -d 1.5 -o attach.folded 2> attach.err || bad "record -p: $(cat attach.err)"
at=$(count attach.folded ';main;attached_work;spin( |;)')
kill -0 "$wpid" 2> /dev/null && alive=yes || alive=no
[ "$at" -gt 50 ] && [ "$alive" = yes ] && grep -q '1 thread' attach.err &&
  ok "-p: $at samples in attached_work through main, from /proc/PID/maps; the process still runs" ||
  bad "-p: $at samples, alive $alive: $(cat attach.err) $(head -3 attach.folded)"
kill "$wpid"
wait "$wpid" 2> /dev/null

# ---- SIGINT ends the recording: the profile is written, the command is ended ----
timeout --preserve-status -s INT 1.5 "$ehelf" record -o int.folded -- "$target" wait > int.out 2> int.err
st=$?
ti=$(count int.folded ';main;attached_work;spin( |;)')
left=$(pgrep -f "$target wait" | wc -l)
# timeout signals its whole process group, the command too (as Ctrl-C does): it ends by SIGINT
# (130); a command that outlives the recording would get SIGTERM (143).
{ [ "$st" -eq 130 ] || [ "$st" -eq 143 ]; } && [ "$ti" -gt 50 ] && [ "$left" -eq 0 ] &&
  grep -q 'profile written to int.folded' int.err &&
  ok "SIGINT: $ti samples written, the command ended (its status $st passed on)" ||
  bad "SIGINT: $ti samples, exit $st, $left left running: $(cat int.err)"

# ---- C++: demangled names, frames through exceptions ----
"$ehelf" record -q -o cxx.folded -- "$fixtures/record_cxx" 30000 2> cxx.err ||
  bad "record cxx: $(cat cxx.err)"
deep=$(count cxx.folded ';main;shapes::Worker::run;shapes::Worker::deep;shapes::Worker::deep;')
add=$(count cxx.folded 'shapes::Worker::deep;shapes::Accumulator<double>::add ')
unw=$(count cxx.folded 'shapes::Worker::deep;(__cxa_throw|_Unwind_RaiseException)')
[ "$deep" -gt 20 ] && [ "$add" -gt 5 ] && [ "$unw" -gt 5 ] &&
  ok "C++: $deep samples in nested Worker::deep, $add in Accumulator<double>::add, $unw in the throw path" ||
  bad "C++: deep $deep, add $add, throw $unw: $(sort -k2 -n -r cxx.folded | head -5)"

# ---- JIT code named from /tmp/perf-PID.map ----
"$ehelf" record -q -o jit.folded -- "$fixtures/record_jit" 600 > jit.pid 2> jit.err ||
  bad "record jit: $(cat jit.err)"
jit=$(count jit.folded ';jitted_loop( |;)')
jall=$(total jit.folded)
rm -f "/tmp/perf-$(cat jit.pid).map"
[ "$jit" -gt $((jall / 2)) ] &&
  ok "JIT: $jit of $jall samples named jitted_loop from /tmp/perf-PID.map" ||
  bad "JIT: $jit of $jall: $(head -3 jit.folded)"

# ---- -a: the whole system, the fixture among the others ----
"$target" wait > wait2.out &
wpid=$!
"$ehelf" record -a -d 1 -o all.folded 2> all.err || bad "record -a: $(cat all.err)"
kill "$wpid"
wait "$wpid" 2> /dev/null
sys=$(count all.folded '^record_target;_start;.*;main;attached_work;spin( |;)')
[ "$sys" -gt 50 ] && ok "-a: $sys samples of the fixture's attached_work among the system's" ||
  bad "-a: $sys: $(head -3 all.folded)"

# ---- formats ----
"$ehelf" record -q -o split.svg -- "$target" split 100 2> svg.err || bad "record svg: $(cat svg.err)"
python3 - split.svg << 'PY' && ok "svg: well-formed, path_a and path_b frames, the script" || bad "svg"
import sys, xml.etree.ElementTree as E
root = E.parse(sys.argv[1]).getroot()
ns = '{http://www.w3.org/2000/svg}'
titles = [t.text for t in root.iter(ns + 'title')] # the frames' paths are titled by name
assert 'path_a' in titles and 'path_b' in titles, titles[:10]
assert root.find(ns + 'script') is not None
PY

"$ehelf" record -q -o prof.pb.gz -F 1999 -- "$target" split 200 2> pprof.err ||
  bad "record pprof: $(cat pprof.err)"
"$ehelf" record -q -f folded -o prof.folded -F 1999 -- "$target" split 200 2>> pprof.err
"$py" - prof.pb.gz << 'PY' && ok "pprof: decoded against profile.proto's field numbers" || bad "pprof"
import gzip, sys
from google.protobuf import descriptor_pb2, descriptor_pool
try:
    from google.protobuf.message_factory import GetMessageClass
except ImportError:
    from google.protobuf import message_factory
    GetMessageClass = lambda d: message_factory.MessageFactory(d.file.pool).GetPrototype(d)
F = descriptor_pb2.FieldDescriptorProto
fdp = descriptor_pb2.FileDescriptorProto(name='profile.proto', package='perftools.profiles',
                                         syntax='proto3')
def message(name, *fields):
    m = fdp.message_type.add(name=name)
    for fname, number, ftype, repeated, tname in fields:
        f = m.field.add(name=fname, number=number, type=ftype,
                        label=F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL)
        if tname: f.type_name = '.perftools.profiles.' + tname
I64, U64, STR, MSG, BOOL = F.TYPE_INT64, F.TYPE_UINT64, F.TYPE_STRING, F.TYPE_MESSAGE, F.TYPE_BOOL
# github.com/google/pprof proto/profile.proto
message('Profile', ('sample_type', 1, MSG, 1, 'ValueType'), ('sample', 2, MSG, 1, 'Sample'),
        ('mapping', 3, MSG, 1, 'Mapping'), ('location', 4, MSG, 1, 'Location'),
        ('function', 5, MSG, 1, 'Function'), ('string_table', 6, STR, 1, None),
        ('time_nanos', 9, I64, 0, None), ('duration_nanos', 10, I64, 0, None),
        ('period_type', 11, MSG, 0, 'ValueType'), ('period', 12, I64, 0, None))
message('ValueType', ('type', 1, I64, 0, None), ('unit', 2, I64, 0, None))
message('Sample', ('location_id', 1, U64, 1, None), ('value', 2, I64, 1, None),
        ('label', 3, MSG, 1, 'Label'))
message('Label', ('key', 1, I64, 0, None), ('str', 2, I64, 0, None), ('num', 3, I64, 0, None))
message('Mapping', ('id', 1, U64, 0, None), ('memory_start', 2, U64, 0, None),
        ('memory_limit', 3, U64, 0, None), ('filename', 5, I64, 0, None),
        ('has_functions', 7, BOOL, 0, None))
message('Location', ('id', 1, U64, 0, None), ('mapping_id', 2, U64, 0, None),
        ('address', 3, U64, 0, None), ('line', 4, MSG, 1, 'Line'))
message('Line', ('function_id', 1, U64, 0, None), ('line', 2, I64, 0, None))
message('Function', ('id', 1, U64, 0, None), ('name', 2, I64, 0, None),
        ('system_name', 3, I64, 0, None), ('filename', 4, I64, 0, None))
pool = descriptor_pool.DescriptorPool()
pool.Add(fdp)
Profile = GetMessageClass(pool.FindMessageTypeByName('perftools.profiles.Profile'))
p = Profile()
p.ParseFromString(gzip.open(sys.argv[1]).read())
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

"$ehelf" record -q -f script -o split.txt -- "$target" split 100 2> script.err ||
  bad "record script: $(cat script.err)"
heads=$(grep -cE '^record_target +[0-9]+/[0-9]+ +[0-9]+\.[0-9]+: *$' split.txt)
grep -qE '^\s+[0-9a-f]+ spin \(.*/record_target\)$' split.txt && [ "$heads" -gt 50 ] &&
  ok "script: $heads samples in perf script's layout" || bad "script: $heads: $(head -5 split.txt)"

# ---- other events and a fixed period ----
"$ehelf" record -q -e task-clock -o task.folded -- "$target" split 100 2> task.err ||
  bad "record -e task-clock: $(cat task.err)"
"$ehelf" record -q -c 2000000 -o period.folded -- "$target" split 100 2> period.err ||
  bad "record -c: $(cat period.err)"
tk=$(count task.folded ';path_a;spin( |;)')
pd=$(count period.folded ';path_a;spin( |;)')
# -c 2000000 ns of cpu-clock: one sample every 2 ms of CPU, half the default rate.
[ "$tk" -gt 20 ] && [ "$pd" -gt 10 ] && [ "$pd" -lt "$tk" ] &&
  ok "-e task-clock: $tk samples in path_a; -c 2000000: $pd" || bad "task-clock $tk, -c $pd"

# ---- bad input: one line, non-zero exit, nothing left running ----
expect_error() { # expect_error WHAT PATTERN ARGS...
  local what=$1 pattern=$2
  shift 2
  if "$ehelf" record -q -o bad.folded "$@" > bad.out 2> bad.err; then
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
expect_error "bad pid" "'12x' is not a process id" -p 12x
expect_error "no process" 'no process' -p 999999999
expect_error "missing command" 'cannot run ./does-not-exist: No such file' -- ./does-not-exist
expect_error "bad format" 'unknown format|not in' -f bogus -- true
# An output that cannot be written is refused before anything runs.
if "$ehelf" record -q -o "$work/no/such/dir/x.svg" -- touch "$work/ran" 2> bad.err; then
  bad "unwritable output: exit 0"
elif [ "$(wc -l < bad.err)" -eq 1 ] && grep -q "cannot write $work/no/such/dir/x.svg" bad.err &&
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
    "$ehelf" record -q -o "$work/nobody/x.folded" -- "$target" split 50 2> nobody.err
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
"$ehelf" record -q -o status.folded -- sh -c 'exit 3' 2> /dev/null
[ $? -eq 3 ] && ok "the command's exit status is ehelf record's" || bad "exit status not passed on"
exit $fail

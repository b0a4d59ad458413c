#!/usr/bin/env bash
# The mappings of `ehelf record`'s pprof profiles are the process's own: the fixture print_maps
# (spinning in itself and in libc's qsort) copies its /proc/self/maps at its end; every mapping
# of a file in the profile must be one of its executable lines there (start, limit, file offset,
# path) with the build id `readelf -n` reports for the file, and every location in a file must
# point at the mapping holding its address. The fixture and libc must be among the mappings.
source "$(dirname "$0")/common.sh" "$@"
target="$(cd "$build" && pwd)/tests/fixtures/print_maps"
# Debian's python3 has python3-protobuf (scripts/setup.sh); another python3 first on PATH may not.
py=/usr/bin/python3
[ -x "$py" ] || py=python3
cd "$work" || exit 1
"$py" -c 'import google.protobuf' 2> /dev/null || { echo "SKIP: no python3-protobuf"; exit 77; }

if ! "$ehelf" record -q -F 1999 -o prof.pb.gz -- "$target" maps.txt 1000 2> record.err; then
  if grep -q perf_event_paranoid record.err; then
    echo "SKIP: perf_event_open is not permitted here: $(cat record.err)"
    exit 77
  fi
  bad "record: $(cat record.err)"
  exit 1
fi
# The build ids of the files mapped executable, by path (the oracle: readelf -n).
awk '$2 ~ /x/ && $6 ~ /^\// { print $6 }' maps.txt | sort -u | while read -r path; do
  printf '%s %s\n' "$path" "$(build_id "$path")"
done > build_ids.txt

SCRIPTS="$scripts_dir" "$py" - prof.pb.gz maps.txt build_ids.txt "$target" << 'PY' || bad "pprof mappings"
import os, sys
sys.path.insert(0, os.environ['SCRIPTS'])
import pprof_profile
profile_path, maps_path, ids_path, target = sys.argv[1:]
p = pprof_profile.load(profile_path)
s = p.string_table
maps = set()
for line in open(maps_path):
    f = line.split()
    if len(f) >= 6 and 'x' in f[1]:
        start, end = (int(x, 16) for x in f[0].split('-'))
        maps.add((start, end, int(f[2], 16), f[5]))
build_ids = dict(l.split() if len(l.split()) == 2 else (l.strip(), '') for l in open(ids_path))
mappings = {m.id: m for m in p.mapping}
in_files = 0
for m in p.mapping:
    name = s[m.filename]
    if not name.startswith('/'):
        continue  # the kernel, [vdso]: not files
    in_files += 1
    key = (m.memory_start, m.memory_limit, m.file_offset, name)
    assert key in maps, f'mapping {[hex(k) if isinstance(k, int) else k for k in key]} is not in /proc/PID/maps'
    assert s[m.build_id] == build_ids[name] and len(build_ids[name]) == 40, \
        f'{name}: build id {s[m.build_id]!r}, readelf -n says {build_ids[name]!r}'
    assert m.has_functions
names = {s[m.filename] for m in p.mapping}
assert target in names and any(n.endswith('/libc.so.6') for n in names), names
located = 0
for loc in p.location:
    if not loc.mapping_id:
        continue
    m = mappings[loc.mapping_id]
    assert m.memory_start <= loc.address < m.memory_limit, (hex(loc.address), s[m.filename])
    located += s[m.filename].startswith('/')
assert located > 3, located
print(f'ok   pprof: {in_files} mappings of files as in /proc/PID/maps, with readelf\'s build ids; '
      f'{located} locations in them')
PY

# The kernel's mapping: [_stext, _etext) of /proc/kallsyms, its file offset its start (as perf
# describes the kernel's map), the build id `perf buildid-list -k` reports for the running
# kernel; the kernel frames within it point at it. dd's copying runs mostly in the kernel.
if [ "$(awk '$3 == "_stext" {print $1}' /proc/kallsyms)" = 0000000000000000 ]; then
  echo "SKIP the kernel's mapping: kernel addresses are hidden here (kptr_restrict)"
elif "$ehelf" record -q -F 999 -o kernel.pb.gz -- dd if=/dev/zero of=/dev/null bs=64k count=200000 \
  2> kernel.err; then
  stext=$(awk '$3 == "_stext" {print $1}' /proc/kallsyms)
  etext=$(awk '$3 == "_etext" {print $1}' /proc/kallsyms)
  kid=$(perf buildid-list -k 2> /dev/null || true)
  SCRIPTS="$scripts_dir" "$py" - kernel.pb.gz "$stext" "$etext" "$kid" << 'PY' || bad "the kernel's pprof mapping"
import os, sys
sys.path.insert(0, os.environ['SCRIPTS'])
import pprof_profile
path, stext, etext, kid = sys.argv[1], int(sys.argv[2], 16), int(sys.argv[3], 16), sys.argv[4]
p = pprof_profile.load(path)
s = p.string_table
kernel = [m for m in p.mapping if s[m.filename] == '[kernel.kallsyms]' and m.memory_start == stext]
assert len(kernel) == 1, [(s[m.filename], hex(m.memory_start), hex(m.memory_limit)) for m in p.mapping]
k = kernel[0]
assert (k.memory_limit, k.file_offset) == (etext, stext), (hex(k.memory_limit), hex(k.file_offset))
if kid:
    assert s[k.build_id] == kid, (s[k.build_id], kid)
inside = [l for l in p.location if l.mapping_id == k.id]
assert inside and all(stext <= l.address < etext for l in inside), len(inside)
print(f'ok   pprof: the kernel\'s mapping [{stext:#x}, {etext:#x}), build id '
      f'{s[k.build_id] or "(perf not here to compare)"}, {len(inside)} locations in it')
PY
else
  bad "record dd: $(cat kernel.err)"
fi
exit $fail

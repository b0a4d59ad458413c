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
exit $fail

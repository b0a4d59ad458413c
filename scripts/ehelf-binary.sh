# Sourced by the campaign scripts: sets $ehelf to the first built ehelf binary of this checkout
# (build/, then build-*/), or empty; a script's --ehelf PATH overrides it afterwards.
ehelf=""
for b in "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"/build{,-*}/bin/ehelf; do
  [ -x "$b" ] && { ehelf=$b; break; }
done

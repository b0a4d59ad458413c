# The paper's kind of validator (gdb + Python), its bare loop only: gdb steps one instruction
# and reads pc and rsp, from main, up to GDB_STEPS (default 10000) steps. Prints steps/s.
# Usage: gdb -q -batch -x bench/check/gdb_step_rate.py PROGRAM
import os
import time

import gdb
gdb.execute("set pagination off")
gdb.execute("break main")
gdb.execute("run", to_string=True)
start = time.time()
n = 0
try:
    while n < int(os.environ.get("GDB_STEPS", "10000")):
        gdb.execute("stepi", to_string=True)
        pc = int(gdb.parse_and_eval("$pc"))
        sp = int(gdb.parse_and_eval("$sp"))
        n += 1
except gdb.error:
    pass
print("gdb+python: %d steps, %.0f steps/s" % (n, n / (time.time() - start)))

// check::run_check: `ehelf check`. Runs a program under ptrace one instruction at a time and,
// before each instruction, compares the unwind-table row of its pc with where the code really
// keeps the return address and the callee-saved registers (the paper's Algorithm 1).
//
// A shadow stack per thread holds, for each call seen, the slot the return address was pushed
// to, the callee-saved registers' values at entry, and the slots where the code stored those
// values since (x86 layer: push, mov to an rsp/rbp slot). Per instruction, in the innermost
// frame: CFA == slot + 8 and the return address at CFA-8; each callee-saved register the row
// saves at CFA+N was stored at CFA+N; a register the row leaves alone and the code has saved
// and changed is reported too.
#pragma once

#include <cstdint>
#include <string>
#include <sys/types.h>
#include <vector>

#include "support/result.hpp"

namespace ehelf::check {

struct CheckOptions {
  std::vector<std::string> argv; // the program and its arguments
  enum class Start : uint8_t {
    main,   // from the executable's `main`
    symbol, // from the executable's symbol `from_symbol`
    entry,  // from the first instruction (the dynamic loader's entry point)
  } start = Start::main;
  std::string from_symbol;
  std::vector<std::string> only; // modules to check (path or file name); empty: all
  uint64_t max_steps = 0;        // stop (and kill the program) after this many; 0: no limit
  // Step every instruction. Otherwise straight-line runs whose registers the x86 layer can
  // follow go to a breakpoint at once and are checked from their starting state: the same
  // checks and reports, fewer stops.
  bool single_step = false;
  // Keep the program's address-space randomisation (by default it runs without, as under gdb,
  // so that two runs execute the same instructions).
  bool randomize = false;
  // Follow the children the program forks (each a process of its own, checked from the
  // parent's frames at the fork). Otherwise they run unchecked and untraced.
  bool follow_fork = false;
  // Write the checked path to this file (trace.hpp), for --replay against other tables.
  std::string record;
};

// One inconsistency between a row and the execution, reported once per (module, address,
// column).
struct Inconsistency {
  std::string module;      // the module's file ("[vdso]")
  uint64_t address = 0;    // in the module's own addresses (SVMA), as readelf prints them
  std::string function;    // "name+0x1f", or "" when no symbol holds it
  std::string instruction; // AT&T syntax
  std::string row;         // the row in readelf -wF spelling: "CFA=rsp+16 rbx=c-16 ra=c-8"
  std::string column;      // "CFA", "ra", "rbx", "rbp", "r12"...
  std::string expected;    // what the execution says, in the row's spelling
  std::string table;       // what the row says
  pid_t tid = 0;           // the thread that ran it first
};

struct CheckSummary {
  uint64_t steps = 0;              // instructions executed under single-step
  uint64_t checked = 0;            // instructions whose row was compared
  uint64_t distinct_addresses = 0; // distinct pcs checked
  uint64_t functions = 0;          // distinct FDEs checked
  uint64_t modules = 0;            // distinct modules checked
  uint64_t threads = 0;            // threads followed
  uint64_t calls = 0;              // frames pushed on shadow stacks
  uint64_t resyncs = 0;            // shadow stacks resynchronised from rsp (longjmp, exceptions)
  uint64_t signals = 0;            // signal handlers entered
  uint64_t no_row = 0;             // instructions of checked frames that no row covers
  uint64_t jump_rows = 0;          // instructions whose row describes a jump's target (not checked)
  uint64_t blocks = 0;             // straight-line runs executed to a breakpoint
  uint64_t blocks_among_threads = 0; // of which in a process that had other threads
  uint64_t block_mismatches = 0;     // runs that ended with registers other than the simulated ones
  uint64_t unchecked_signal_steps = 0; // steps in handlers on an alternate stack (not checked)
  uint64_t undetermined = 0; // replays: instructions a rule of the tables could not be judged at
                             // (it needs a register or memory word the trace does not hold)
  uint64_t processes = 1;    // processes checked (the program, and with --follow-fork its children)
  uint64_t execs = 0;        // processes left to run unchecked at an exec
  double seconds = 0;
  bool step_limit = false; // stopped at max_steps
  int interrupted = 0;     // the SIGINT, SIGTERM or SIGHUP that stopped the check (program killed)
  int exit_status = -1;    // the program's wait status (-1: killed by the checker or detached)
  bool exec_detached = false; // the program called exec: left to run unchecked from there
};

struct CheckResult {
  std::vector<Inconsistency> inconsistencies;
  std::vector<std::string> uncovered; // "module: function" run in a checked frame without rows
  CheckSummary summary;
};

// Runs the check. An error is a usage or tracing problem (the program cannot be run, has no
// such symbol, ptrace refused); inconsistencies are results.
Result<CheckResult> run_check(const CheckOptions& options);

} // namespace ehelf::check

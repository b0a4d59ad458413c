// C++ exception cases run with libgcc_s and with libehelf-eh (tests/scripts/test_eh.sh): the
// output of both runs must be the same. Each case prints what it saw.
#include <cstdio>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>
#include <unwind.h>
#include <vector>

static std::vector<std::string> g_log;
static void say(const std::string& s) {
  std::printf("%s\n", s.c_str());
}

struct Noisy {
  std::string name;
  explicit Noisy(std::string n) : name(std::move(n)) {}
  ~Noisy() { say("  ~" + name); }
};

__attribute__((noinline)) void thrower(int depth, int value) {
  Noisy n("frame" + std::to_string(depth));
  if (depth == 0) throw std::runtime_error("value " + std::to_string(value));
  thrower(depth - 1, value);
}

static void nested_try() {
  say("nested_try");
  try {
    try {
      thrower(3, 1);
    } catch (const std::logic_error&) {
      say("  wrong handler");
    }
  } catch (const std::runtime_error& e) {
    say(std::string("  outer caught ") + e.what());
  }
  try {
    try {
      thrower(2, 2);
    } catch (const std::runtime_error& e) {
      say(std::string("  inner caught ") + e.what());
      throw std::logic_error("from inner handler");
    }
  } catch (const std::logic_error& e) {
    say(std::string("  outer caught ") + e.what());
  }
}

static void rethrow() {
  say("rethrow");
  try {
    try {
      thrower(2, 3);
    } catch (...) {
      say("  caught, rethrowing");
      throw;
    }
  } catch (const std::exception& e) {
    say(std::string("  caught again ") + e.what());
  }
}

static void catch_all() {
  say("catch_all");
  try {
    throw 42;
  } catch (...) {
    say("  caught int by ...");
  }
  try {
    throw "a string";
  } catch (const char* s) {
    say(std::string("  caught ") + s);
  }
}

struct ThrowsInDestructor {
  ~ThrowsInDestructor() {
    try {
      thrower(2, 99);
    } catch (const std::exception& e) {
      say(std::string("  destructor caught ") + e.what());
    }
  }
};

__attribute__((noinline)) void unwind_through_catching_destructor() {
  ThrowsInDestructor t;
  Noisy n("outer");
  thrower(1, 4);
}

static void destructor_catches() {
  say("destructor_catches");
  try {
    unwind_through_catching_destructor();
  } catch (const std::exception& e) {
    say(std::string("  caught ") + e.what() +
        " uncaught_exceptions=" + std::to_string(std::uncaught_exceptions()));
  }
}

static void exception_ptr_threads() {
  say("exception_ptr_threads");
  std::exception_ptr p;
  std::thread t([&p] {
    try {
      thrower(3, 5);
    } catch (...) {
      p = std::current_exception();
    }
  });
  t.join();
  for (int i = 0; i < 2; ++i) {
    std::thread u([p, i] {
      try {
        std::rethrow_exception(p);
      } catch (const std::runtime_error& e) {
        say(std::string("  thread ") + std::to_string(i) + " caught " + e.what());
      }
    });
    u.join();
  }
  try {
    std::rethrow_exception(p);
  } catch (const std::runtime_error& e) {
    say(std::string("  main caught ") + e.what());
  }
}

static void print_nested(const std::exception& e, int level) {
  say("  " + std::string(level * 2, ' ') + e.what());
  try {
    std::rethrow_if_nested(e);
  } catch (const std::exception& inner) {
    print_nested(inner, level + 1);
  }
}

static void nested_exception() {
  say("nested_exception");
  try {
    try {
      thrower(1, 6);
    } catch (...) {
      std::throw_with_nested(std::logic_error("wrapper"));
    }
  } catch (const std::exception& e) {
    print_nested(e, 0);
  }
}

static void many_throws() {
  say("many_throws");
  long sum = 0;
  for (int i = 0; i < 2000; ++i) {
    try {
      thrower(i % 7, i);
    } catch (const std::runtime_error& e) {
      sum += static_cast<long>(std::strlen(e.what()));
    }
  }
  say("  sum " + std::to_string(sum));
}

static void threads_throwing() {
  say("threads_throwing");
  std::vector<std::thread> threads;
  std::vector<long> caught(4);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t, &caught] {
      for (int i = 0; i < 500; ++i) {
        try {
          if (i % 2) throw std::out_of_range("x");
          throw t;
        } catch (const std::out_of_range&) {
          ++caught[t];
        } catch (int v) {
          caught[t] += v;
        }
      }
    });
  for (auto& th : threads)
    th.join();
  for (int t = 0; t < 4; ++t)
    say("  thread " + std::to_string(t) + " " + std::to_string(caught[t]));
}

// A foreign exception (not C++'s class) raised with _Unwind_RaiseException: catch (...) takes
// it, destructors run on the way, and leaving the handler deletes it (_Unwind_DeleteException
// calls its cleanup).
static void foreign_cleanup(_Unwind_Reason_Code reason, _Unwind_Exception*) {
  say(std::string("  foreign exception deleted, reason ") + std::to_string(reason));
}

__attribute__((noinline)) void raise_foreign(int depth) {
  Noisy n("foreign frame" + std::to_string(depth));
  if (depth == 0) {
    static _Unwind_Exception exc;
    exc.exception_class = 0x4f54484552000000; // "OTHER"
    exc.exception_cleanup = foreign_cleanup;
    _Unwind_Reason_Code r = _Unwind_RaiseException(&exc);
    say("  raise returned " + std::to_string(r));
    return;
  }
  raise_foreign(depth - 1);
}

static void foreign_exception() {
  say("foreign_exception");
  try {
    raise_foreign(2);
  } catch (...) {
    say("  caught by ...");
  }
}

// Deep stacks: throws through 300 frames, more than the frames a raise keeps from its search
// phase for its cleanup phase (libehelf-eh's trail: 256), some with a destructor (every
// `every`-th frame), some whose destructor throws and catches an exception of its own while the
// outer one unwinds (a nested raise on the same thread between the outer one's landings). The
// destructors' order is summed up rather than printed.
static std::vector<int> g_destroyed;
struct Counted {
  int depth;
  bool nested;
  ~Counted() {
    g_destroyed.push_back(depth);
    if (nested) {
      try {
        thrower(2 + depth % 5, depth);
      } catch (const std::runtime_error&) {
        g_destroyed.push_back(-depth);
      }
    }
  }
};
__attribute__((noinline)) void deep(int depth, int every, int nested_every) {
  if (depth == 0) throw std::out_of_range("bottom");
  if (every && depth % every == 0) {
    Counted c{depth, nested_every && depth % nested_every == 0};
    deep(depth - 1, every, nested_every);
  } else {
    deep(depth - 1, every, nested_every);
    g_log.push_back(""); // not a tail call
  }
}
// Frames with a personality (a destructor) between frames without one (no cleanup, no handler:
// no LSDA), in runs of `bare` frames: a raise's cleanup phase passes over the frames without a
// personality, and more than the trail's 256 frames with one.
static volatile int g_bare_sink;
__attribute__((noinline)) void mixed(int depth, int bare_run);
__attribute__((noinline)) void bare(int depth, int left, int bare_run) {
  if (left == 0)
    mixed(depth, bare_run);
  else
    bare(depth, left - 1, bare_run);
  g_bare_sink = left; // not a tail call
}
__attribute__((noinline)) void mixed(int depth, int bare_run) {
  if (depth == 0) throw std::out_of_range("mixed bottom");
  Counted c{depth, depth % 50 == 0};
  bare(depth - 1, depth % bare_run, bare_run);
}

// What a deep throw destroyed, and in which order, in one line.
template <class Throw> static std::string unwound(Throw&& throw_it) {
  g_destroyed.clear();
  std::string what;
  try {
    throw_it();
  } catch (const std::out_of_range& e) {
    what = e.what();
  }
  long sum = 0;
  for (size_t i = 0; i < g_destroyed.size(); ++i)
    sum += long(i + 1) * g_destroyed[i];
  return "caught " + what + ", " + std::to_string(g_destroyed.size()) +
         " destructors and nested catches, order sum " + std::to_string(sum);
}

static void deep_stacks() {
  say("deep_stacks");
  for (int run : {1, 3})
    say("  mixed, runs of up to " + std::to_string(run) +
        " frames without a personality: " + unwound([run] { mixed(300, run); }));
  const int shapes[][3] = {{300, 0, 0}, {300, 1, 0},   {300, 7, 0},
                           {300, 3, 9}, {260, 250, 0}, {40, 1, 4}};
  for (const auto& shape : shapes)
    say("  depth " + std::to_string(shape[0]) + ", a destructor every " + std::to_string(shape[1]) +
        ": " + unwound([&shape] { deep(shape[0], shape[1], shape[2]); }));
}

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  (void)argc;
  (void)argv;
  nested_try();
  rethrow();
  catch_all();
  destructor_catches();
  exception_ptr_threads();
  nested_exception();
  foreign_exception();
  many_throws();
  threads_throwing();
  deep_stacks();
  say("done");
  return 0;
}

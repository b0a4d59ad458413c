/* Steps through an eh_elf: one call every 16 bytes of its pc range, from registers pointing into
 * a fake stack whose words are all readable. Run under
 *   valgrind --tool=callgrind --toggle-collect=ehelf_unwind_local   (or _remote)
 * for the instructions of a step, lookup and body: bench/run_eh_elf_step.sh compares two
 * compilers of the same library that way (deterministic, unlike timings on a shared machine).
 *
 * Usage: step_count EH_ELF.so [remote] */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ehelf/eh_elf.h"

static uint64_t stack[4096];

static int deref(uint64_t addr, uint64_t* value, void* arg) {
  (void)arg;
  if (addr < (uint64_t)stack || addr + 8 > (uint64_t)(stack + 4096)) return 1;
  memcpy(value, (const void*)addr, 8);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: step_count EH_ELF.so [remote]\n");
    return 2;
  }
  void* h = dlopen(argv[1], RTLD_NOW);
  if (!h) {
    fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  const struct ehelf_info* info = dlsym(h, EHELF_INFO_SYMBOL);
  int (*local)(uint64_t, ehelf_context_t*) = dlsym(h, EHELF_UNWIND_LOCAL_SYMBOL);
  int (*remote)(uint64_t, ehelf_context_t*, ehelf_deref_fn, void*) =
      dlsym(h, EHELF_UNWIND_REMOTE_SYMBOL);
  if (!info || !local || !remote) {
    fprintf(stderr, "%s: not an eh_elf\n", argv[1]);
    return 1;
  }
  const int use_remote = argc > 2;
  for (int i = 0; i < 4096; ++i)
    stack[i] = (uint64_t)&stack[i] * 2654435761u;
  uint64_t steps = 0, ok = 0;
  for (uint64_t pc = info->pc_low; pc < info->pc_high; pc += 16, ++steps) {
    ehelf_context_t ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.stack_lo = (uint64_t)stack;
    ctx.stack_hi = (uint64_t)(stack + 4096);
    for (int r = 0; r < EHELF_NREGS; ++r)
      ctx.regs[r] = (uint64_t)&stack[2048 + 8 * r];
    ctx.flags = (1u << EHELF_NREGS) - 1;
    ok += (use_remote ? remote(pc, &ctx, deref, 0) : local(pc, &ctx)) == EHELF_OK;
  }
  printf("{\"steps\": %llu, \"ok\": %llu}\n", (unsigned long long)steps, (unsigned long long)ok);
  return 0;
}

/* describe(): an address as MODULE+OFFSET for the test programs of tests/capi, the same whichever
 * unwinding library a program is linked with (the two builds load different libraries, so
 * absolute addresses differ): the program itself is "main", the unwinding library "unwinder".
 * Include after <libunwind.h>, with _GNU_SOURCE defined (dladdr). */
#pragma once

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static void describe(unw_word_t addr, char* out, size_t size) {
  Dl_info info;
  Dl_info self;
  if (addr == 0 || !dladdr((void*)addr, &info) || !info.dli_fname) {
    snprintf(out, size, "?");
    return;
  }
  const char* base = strrchr(info.dli_fname, '/');
  base = base ? base + 1 : info.dli_fname;
  if (dladdr((void*)&describe, &self) && self.dli_fbase == info.dli_fbase) base = "main";
  else if (strstr(base, "unwind")) base = "unwinder";
  snprintf(out, size, "%s+%#lx", base, (unsigned long)(addr - (unw_word_t)info.dli_fbase));
}

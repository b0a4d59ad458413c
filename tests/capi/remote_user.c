/* Remote unwinding through libunwind's API: fork a child that stops itself (SIGSTOP under
 * PTRACE_TRACEME) a few calls deep, one of them through qsort, then walk it with
 * unw_create_addr_space + unw_init_remote. Built unchanged against the real libunwind
 * (-lunwind-ptrace -lunwind-generic) and against ehelf's (pkg-config ehelf-unwind).
 *
 *   remote_user upt     accessors: libunwind-ptrace's _UPT_accessors
 *   remote_user custom  access_mem (PTRACE_PEEKDATA) and access_reg (PTRACE_GETREGS) written
 *                       here; the other accessors from _UPT_accessors
 *   remote_user bare    only access_mem and access_reg (ehelf finds the traced process itself;
 *                       libunwind needs find_proc_info, so run this against ehelf only)
 *
 * Output lines, comparable between builds (addresses relative to their module, the program is
 * "main", stack pointers relative to the first frame's):
 *   REMOTE #N ip=MODULE+OFF sp=+DELTA name=SYMBOL+OFF start=MODULE+OFF sig=0|1
 */
#define _GNU_SOURCE
#include <libunwind-ptrace.h>
#include <libunwind.h>

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- the child ---- */

static volatile int sink;

__attribute__((noinline)) static void child_stop(void) {
  raise(SIGSTOP);
  sink++;
}

static int compare(const void* a, const void* b) {
  static int done;
  if (!done) {
    done = 1;
    child_stop();
  }
  return *(const int*)a - *(const int*)b;
}

__attribute__((noinline)) static void child_level2(void) {
  int v[4] = {4, 2, 3, 1};
  qsort(v, 4, sizeof v[0], compare);
  sink += v[0];
}

__attribute__((noinline)) static void child_level1(void) {
  child_level2();
  sink++;
}

/* ---- the parent's accessors ---- */

static pid_t g_child;

static int my_access_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t* value, int write,
                         void* arg) {
  (void)as;
  (void)arg;
  if (write) return -UNW_EINVAL;
  errno = 0;
  long word = ptrace(PTRACE_PEEKDATA, g_child, (void*)addr, NULL);
  if (errno) return -UNW_EINVAL;
  *value = (unw_word_t)word;
  return 0;
}

static int my_access_reg(unw_addr_space_t as, unw_regnum_t reg, unw_word_t* value, int write,
                         void* arg) {
  (void)as;
  (void)arg;
  if (write) return -UNW_EINVAL;
  struct user_regs_struct r;
  if (ptrace(PTRACE_GETREGS, g_child, NULL, &r) != 0) return -UNW_EBADREG;
  switch (reg) {
  case UNW_X86_64_RAX: *value = r.rax; break;
  case UNW_X86_64_RDX: *value = r.rdx; break;
  case UNW_X86_64_RCX: *value = r.rcx; break;
  case UNW_X86_64_RBX: *value = r.rbx; break;
  case UNW_X86_64_RSI: *value = r.rsi; break;
  case UNW_X86_64_RDI: *value = r.rdi; break;
  case UNW_X86_64_RBP: *value = r.rbp; break;
  case UNW_X86_64_RSP: *value = r.rsp; break;
  case UNW_X86_64_R8: *value = r.r8; break;
  case UNW_X86_64_R9: *value = r.r9; break;
  case UNW_X86_64_R10: *value = r.r10; break;
  case UNW_X86_64_R11: *value = r.r11; break;
  case UNW_X86_64_R12: *value = r.r12; break;
  case UNW_X86_64_R13: *value = r.r13; break;
  case UNW_X86_64_R14: *value = r.r14; break;
  case UNW_X86_64_R15: *value = r.r15; break;
  case UNW_X86_64_RIP: *value = r.rip; break;
  default: return -UNW_EBADREG;
  }
  return 0;
}

/* ---- describing child addresses: MODULE+OFFSET from /proc/PID/maps ---- */

struct mapping {
  unsigned long lo, hi, base;
  char name[256];
};
static struct mapping g_maps[512];
static int g_nmaps;
static char g_exe[PATH_MAX];

static void read_maps(pid_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
  ssize_t n = readlink(path, g_exe, sizeof g_exe - 1);
  g_exe[n > 0 ? n : 0] = '\0';
  snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
  FILE* f = fopen(path, "r");
  if (!f) return;
  char line[1024];
  while (g_nmaps < 512 && fgets(line, sizeof line, f)) {
    struct mapping* m = &g_maps[g_nmaps];
    int at = 0;
    if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", &m->lo, &m->hi, &at) < 2 || !at) continue;
    char* name = line + at;
    name[strcspn(name, "\n")] = '\0';
    if (!*name) continue;
    snprintf(m->name, sizeof m->name, "%s", name);
    m->base = m->lo;
    for (int i = 0; i < g_nmaps; ++i) /* a module's base: its lowest mapping */
      if (!strcmp(g_maps[i].name, m->name) && g_maps[i].base < m->base) m->base = g_maps[i].base;
    ++g_nmaps;
  }
  fclose(f);
}

static void describe(unw_word_t addr, char* out, size_t size) {
  for (int i = 0; i < g_nmaps; ++i) {
    const struct mapping* m = &g_maps[i];
    if (addr < m->lo || addr >= m->hi) continue;
    const char* base = strrchr(m->name, '/');
    base = base ? base + 1 : m->name;
    if (!strcmp(m->name, g_exe)) base = "main";
    unsigned long module_base = m->base;
    for (int j = 0; j < g_nmaps; ++j)
      if (!strcmp(g_maps[j].name, m->name) && g_maps[j].lo < module_base) module_base = g_maps[j].lo;
    snprintf(out, size, "%s+%#lx", base, (unsigned long)(addr - module_base));
    return;
  }
  snprintf(out, size, "?");
}

static int walk(pid_t pid, const char* mode) {
  unw_accessors_t accessors = _UPT_accessors;
  if (!strcmp(mode, "custom") || !strcmp(mode, "bare")) {
    accessors.access_mem = my_access_mem;
    accessors.access_reg = my_access_reg;
  }
  if (!strcmp(mode, "bare")) {
    accessors.find_proc_info = NULL;
    accessors.put_unwind_info = NULL;
    accessors.get_dyn_info_list_addr = NULL;
    accessors.access_fpreg = NULL;
    accessors.resume = NULL;
    accessors.get_proc_name = NULL;
  }
  unw_addr_space_t as = unw_create_addr_space(&accessors, 0);
  if (!as) {
    printf("REMOTE create_addr_space failed\n");
    return 1;
  }
  void* upt = strcmp(mode, "bare") ? _UPT_create(pid) : NULL;
  unw_cursor_t cursor;
  int r = unw_init_remote(&cursor, as, upt);
  if (r != 0) {
    printf("REMOTE init_remote failed: %s\n", unw_strerror(r));
    return 1;
  }
  unw_word_t sp0 = 0;
  for (int i = 0; i < 64; ++i) {
    unw_word_t ip = 0, sp = 0, off = 0;
    unw_get_reg(&cursor, UNW_REG_IP, &ip);
    unw_get_reg(&cursor, UNW_REG_SP, &sp);
    if (i == 0) sp0 = sp;
    char name[256];
    if (unw_get_proc_name(&cursor, name, sizeof name, &off) != 0) {
      strcpy(name, "?");
      off = 0;
    }
    unw_proc_info_t pi;
    char where[300], start[300];
    describe(ip, where, sizeof where);
    if (unw_get_proc_info(&cursor, &pi) == 0) describe(pi.start_ip, start, sizeof start);
    else strcpy(start, "?");
    printf("REMOTE #%d ip=%s sp=+%#lx name=%s+%#lx start=%s sig=%d\n", i, where,
           (unsigned long)(sp - sp0), name, (unsigned long)off, start,
           unw_is_signal_frame(&cursor) > 0);
    r = unw_step(&cursor);
    if (r < 0) printf("REMOTE step error: %s\n", unw_strerror(r));
    if (r <= 0) break;
  }
  if (upt) _UPT_destroy(upt);
  unw_destroy_addr_space(as);
  return 0;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "upt";
  setvbuf(stdout, NULL, _IOLBF, 0);
  pid_t pid = fork();
  if (pid < 0) return 2;
  if (pid == 0) {
    if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0) _exit(3);
    child_level1();
    _exit(0);
  }
  g_child = pid;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status)) {
    printf("REMOTE child did not stop\n");
    return 2;
  }
  read_maps(pid);
  int rc = walk(pid, mode);
  kill(pid, SIGKILL);
  ptrace(PTRACE_CONT, pid, NULL, NULL);
  waitpid(pid, &status, 0);
  return rc;
}

/* Installed as <ehelf/libunwind/libunwind-ptrace.h>: with -I${includedir}/ehelf/libunwind
 * (pkg-config ehelf-unwind), `#include <libunwind-ptrace.h>` finds ehelf's _UPT_ helpers. */
#include "../libunwind-ptrace.h"

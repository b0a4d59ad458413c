/* Installed as <ehelf/libunwind/libunwind.h>: with -I${includedir}/ehelf/libunwind (pkg-config
 * ehelf-unwind), `#include <libunwind.h>` finds ehelf's libunwind API. */
#include "../libunwind.h"

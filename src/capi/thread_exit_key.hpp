// The thread-exit hook of a thread's own pages (its caches, its walk stack): a pthread key whose
// destructor unmaps them, usable only when setting its value never allocates.
#pragma once

#include <pthread.h>

namespace ehelf::capi {

struct ThreadExitKey {
  pthread_key_t key{};
  // The key exists and pthread_setspecific stores it without allocating: glibc keeps a thread's
  // values of keys below 32 (PTHREAD_KEY_2NDLEVEL_SIZE) in the thread descriptor, and callocs a
  // block on a thread's first use of a higher one. Otherwise (a program that made 32 keys before
  // us) the pages outlive the thread.
  bool usable = false;

  // Once, outside signal handlers (while the first LocalSpace is built, under its lock).
  void create(void (*on_exit)(void*)) {
    if (created_) return;
    created_ = true;
    usable = ::pthread_key_create(&key, on_exit) == 0 && key < 32;
  }
  // The calling thread's pages, handed to `on_exit` when it ends.
  void set(void* pages) const {
    if (usable) ::pthread_setspecific(key, pages);
  }

private:
  bool created_ = false;
};

} // namespace ehelf::capi

/*
 * elfshare.h - one load of each executable's symbols, shared by every
 * module that reads it.
 *
 * Three modules read the same executable of a targeted process: the
 * symbolizer (its file cache, symbolize.h), the CPU profiler's leaf tables
 * (frameless.h: the pclntab's pcsp) and the Go heap profiler (gobin.h:
 * function table, runtime variables). Each used to copy out its own
 * elfsym (symbols, pclntab, go.func.*: megabytes for a large Go program);
 * now the first to need one loads it and publishes it here, and the others
 * take a reference to the same object. The raw file is still opened by
 * whoever needs its bytes (elffile.h: gobin's .symtab and code, frameless's
 * code and .eh_frame); the symbolizer needs none and, when the file is
 * published already, does not open it at all.
 *
 * Identity: the file as stat() sees it (device, inode, size, mtime), the
 * key the existing caches use plus what their revalidation compares: a
 * file rewritten in place is another entry. The registry keeps no
 * reference of its own: an entry lives while some module holds it
 * (elfsym_free() drops a reference; the last one frees it and removes the
 * entry).
 *
 * An elfsym is not modified after its load: several threads may read one
 * at once (the symbolizer's loop thread, gotrack's worker, the OOM
 * capture). The registry is guarded by one mutex; loading happens outside
 * it (a second thread loading the same file meanwhile keeps the first
 * published copy and frees its own).
 */
#ifndef PUSHPROF_ELFSHARE_H
#define PUSHPROF_ELFSHARE_H

#include <stdbool.h>
#include <sys/stat.h>

#include "elffile.h"
#include "elfsym.h"
#include "err.h"

/* A new reference (drop it with elfsym_free()) to the symbols of file id
 * when some module holds them now; NULL otherwise. */
struct elfsym *elfshare_find(const struct pp_file_id *id);

/*
 * The symbols of the parsed file f, whose identity is id: the published
 * ones when there are, else loaded from f (elfsym_new()) and
 * published. 0 with *out a reference (elfsym_free() drops it), or
 * elfsym_new()'s errors (nothing published).
 */
int elfshare_load(const struct elffile *f, const struct pp_file_id *id, struct elfsym **out,
		  struct pp_err *err);

/* elfsym_free()'s half for a published elfsym: drops one reference, and
 * removes the entry with the last. True when that was the last (the caller
 * frees the memory). */
bool elfshare_release(struct elfsym *e);

#endif

/*
 * maprec.h - executable mappings as the kernel reports them when they are
 * made (PERF_RECORD_MMAP2), so a process that exits between two reads of
 * its /proc/PID/maps still has every library it ran code from.
 *
 * Why: the agent reads a new target's maps when it learns of it (its exec)
 * and again on a timer (20 ms, 100 ms, ...) for what ld.so maps after the
 * exec. A process that lives a few hundred ms on a loaded host can map its
 * libraries after the last read it got and exit before the next: its libc
 * frames had no mapping. The kernel writes one record per PROT_EXEC mmap
 * into the ring of the perf event on the CPU that made it, synchronously,
 * before the process can run on: nothing depends on when the agent runs.
 *
 * The rings belong to the sampler's own cpu-clock events (one per CPU,
 * cpu.c), opened with mmap2 and a timestamp in CLOCK_MONOTONIC: no extra
 * event, no wake-up (the agent drains them when it reads processes anyway:
 * process events, re-reads, windows; nobody polls them). A ring is MAPREC_PAGES data pages (32 KiB, ~200
 * records); what overflows between two drains is counted as lost and the
 * /proc reads cover it, as they did before.
 *
 * Not thread-safe: one thread drains (the agent's loop).
 */
#ifndef PUSHPROF_MAPREC_H
#define PUSHPROF_MAPREC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "procinfo.h"

struct perf_event_attr;

#define MAPREC_PAGES 8 /* data pages per ring (a power of two) */

struct maprec_ring;

/* Ask attr's event for mmap2 records stamped with the CLOCK_MONOTONIC time
 * (sample_id_all: pid, tid, time). The sampling itself is unchanged (the
 * BPF program handles overflows; no sample records are written). */
void maprec_attr(struct perf_event_attr *attr);

/* Map the ring of perf event fd (opened with maprec_attr()). 0 with *out
 * set, or a negative errno (-EPERM: over perf_event_mlock_kb). The ring
 * holds its own reference to the event: unmap it before or after closing
 * fd, either works. */
int maprec_map(int fd, struct maprec_ring **out);
/* NULL-safe. */
void maprec_unmap(struct maprec_ring *r);

/* One executable file mapping: m->path points into the record (valid during
 * the callback only); time_ns is when the mmap happened (CLOCK_MONOTONIC). */
typedef void (*maprec_fn)(pid_t pid, uint64_t time_ns, const struct proc_map *m, void *arg);

/*
 * Hand every file-backed executable mapping recorded since the last drain
 * to fn (anonymous and special ones are skipped) and free their room. At
 * most max records (bounded work per call; the rest waits). Returns the
 * number handed over; *lost grows by the records the kernel could not
 * write (ring full).
 */
int maprec_drain(struct maprec_ring *r, size_t max, maprec_fn fn, void *arg, uint64_t *lost);

/*
 * One record (rec, len bytes, as read from the ring) as a mapping: 1 with
 * *pid, *time_ns and *m filled (m->path points into rec, NUL-terminated
 * within len), 0 for a record of another kind or a mapping that is not an
 * executable file, -EINVAL for a malformed one. For the drain and tests.
 */
int maprec_parse(const void *rec, size_t len, pid_t *pid, uint64_t *time_ns, struct proc_map *m);

#endif

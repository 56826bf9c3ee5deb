/*
 * givemem.h - handing freed memory back to the system, one policy for
 * every thread that frees bursts (the loop after a window, gotrack's
 * worker after a heap snapshot).
 *
 * glibc keeps what free() returns as free chunks in the arena; trimming
 * (malloc_trim) hands their pages back, and the next allocation that reuses
 * them faults them in again. On a VM a fault costs microseconds and a trim
 * shoots down the TLBs of every CPU the process runs on, so trimming after
 * every small job costs more than it saves: 50 idle Go programs' periodic
 * heap snapshots spent half their CPU re-faulting the same few hundred KiB.
 * Trim after a burst, or when a run of jobs is over.
 */
#ifndef PUSHPROF_GIVEMEM_H
#define PUSHPROF_GIVEMEM_H

#include <stddef.h>

/*
 * malloc_trim(0) when the process's free heap bytes (mallinfo2, all
 * arenas) grew by more than 4 MiB since the caller's last call; *free_at
 * holds the caller's baseline between calls (start at 0; one per caller).
 * A burst (the first window loading every process's symbols, a 100,000-
 * bucket snapshot) leaves that much; steady work reuses its own free
 * memory. Thread-safe (glibc locks the arenas). 1 when it trimmed, else 0.
 */
int pp_give_back_memory(size_t *free_at);
/* malloc_trim(0) now, and *free_at the new baseline: at the end of a run
 * of jobs (gotrack's worker when its queue is empty). */
void pp_trim_memory(size_t *free_at);
/*
 * glibc's own give-back, set once at start (main), before any thread. By
 * default it serves blocks of 128 KiB and up with mmap and trims an
 * arena whose free top passes 128 KiB at every free(); both thresholds
 * rise only after such a block was freed (up to 32 MiB and 64 MiB). A
 * process whose jobs stay small never gets there: each trim is an
 * madvise or brk that shoots down the TLBs of every CPU, and the next job
 * faults the same pages in again. A heap snapshot of an idle Go program
 * (a few hundred KiB of read windows and gzip state) spent most of its
 * time so: 0.8 ms, 0.24-0.38 ms with the thresholds fixed where glibc's
 * own would end (mmap from 32 MiB, as pp_grow_big maps its own from
 * 1 MiB) but free() trimming only past 2 MiB of free top. The two calls
 * above give the rest back after a burst.
 */
void pp_malloc_policy(void);

#endif

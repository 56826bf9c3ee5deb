/*
 * remotemem.c - process_vm_readv (or a gobin_mem seam), exact reads with
 * messages, and the window cache of struct rmem. See remotemem.h.
 */
#include "remotemem.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "gobin.h"

ssize_t rmem_read_some(const struct gobin_mem *mem, pid_t pid, uint64_t addr, void *buf, size_t len)
{
	if (mem) {
		ssize_t n = mem->read(mem->ctx, addr, buf, len);
		/* a reader that claims more than asked for is broken: no bytes */
		return n > (ssize_t)len ? -EIO : n;
	}
	struct iovec l = { .iov_base = buf, .iov_len = len };
	struct iovec r = { .iov_base = (void *)(uintptr_t)addr, .iov_len = len };
	ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0);
	return n < 0 ? -errno : n;
}

/* The message for a failed exact read; returns code. */
static int say(struct pp_err *err, int code, pid_t pid, uint64_t addr, size_t len)
{
	int e = -code;
	if (e == EFAULT)
		return pp_errf(err, code, "pid %d: short read at 0x%" PRIx64, (int)pid, addr);
	if (e == ESRCH)
		return pp_errf(err, code, "pid %d: the process exited", (int)pid);
	if (e == EPERM || e == EACCES)
		return pp_errf(err, code, "pid %d: not allowed to read its memory (%s)", (int)pid,
			       strerror(e));
	return pp_errf(err, code, "pid %d: read 0x%" PRIx64 "+%zu: %s", (int)pid, addr, len,
		       strerror(e));
}

int rmem_read_exact(const struct gobin_mem *mem, pid_t pid, uint64_t addr, void *buf, size_t len,
		    struct pp_err *err)
{
	ssize_t n = rmem_read_some(mem, pid, addr, buf, len);
	if (n == (ssize_t)len)
		return 0;
	return say(err, n >= 0 ? -EFAULT : (int)n, pid, addr, len);
}

void rmem_init(struct rmem *r, const struct gobin_mem *mem, pid_t pid, bool cached)
{
	memset(r, 0, sizeof(*r));
	r->mem = mem;
	r->pid = pid;
	r->cached = cached;
}

void rmem_free(struct rmem *r)
{
	for (unsigned i = 0; i < RMEM_NWINDOWS; i++) {
		free(r->w[i].buf);
		r->w[i].buf = NULL;
		r->w[i].len = 0;
	}
}

static ssize_t counted(struct rmem *r, uint64_t addr, void *buf, size_t len)
{
	r->calls++;
	r->bytes += len;
	return rmem_read_some(r->mem, r->pid, addr, buf, len);
}

/* A miss: fill a window around [addr, addr+len), or read exactly that;
 * *at is then where addr's bytes are in it. */
static int fill(struct rmem *r, uint64_t addr, size_t len, const uint8_t **at)
{
	struct rmem_window *w = &r->w[r->next];
	r->next = (r->next + 1) % RMEM_NWINDOWS;
	if (!w->buf && !(w->buf = malloc(RMEM_WINDOW)))
		return -ENOMEM;
	/* The window ends RMEM_AHEAD past the request: a bucket is read
	 * header first, and the rest of one that straddles the end of the
	 * window above would otherwise cost a whole window more (one in three
	 * reads of a 100,000-bucket walk did). */
	uint64_t want = addr + len, ahead = want + RMEM_AHEAD;
	if (ahead < want)
		ahead = want;
	/* A walk down one chunk grows its windows; a jump elsewhere (an idle
	 * program's few buckets lie in as many chunks) starts small again. */
	bool onward = r->win && want + RMEM_WINDOW > r->last_start && want <= r->last_start + 4096;
	uint64_t win = onward ? r->win : RMEM_WINDOW_FIRST;
	r->win = win < RMEM_WINDOW ? win * 2 : RMEM_WINDOW;
	uint64_t end =
		ahead > UINT64_MAX - 4095 ? UINT64_MAX & ~4095ULL : (ahead + 4095) & ~4095ULL;
	uint64_t start = end >= win ? end - win : 0;
	if (start > addr) { /* no more than a window: the exact read below then */
		start = addr & ~4095ULL;
		end = start + RMEM_WINDOW < start ? UINT64_MAX & ~4095ULL : start + RMEM_WINDOW;
	}
	/* A list that runs upwards (not the runtime's way, but the target's
	 * choice) would miss on every object with a window that ends at the
	 * request: read the window that starts there instead, once two misses
	 * in a row went up. One alone is the runtime's list jumping to an
	 * older persistentalloc chunk at a higher address, entered at its top
	 * (its newest bucket): the window below is the one it will walk, the
	 * one above mostly not the list's (it used to be read, and the walk
	 * of 100,000 buckets read 79 MB for 35 MB of buckets). */
	bool up = addr > r->last_miss && r->last_miss;
	if (up && !r->ups) {
		/* The chunk below, walked downwards until now, is done: the
		 * windows of the one entered here need not reach into it (the
		 * bottom window of each 256 KiB chunk used to read 128 KiB of
		 * the chunk below, already walked). */
		r->floor = r->run_top & ~4095ULL;
		r->run_top = 0;
	}
	r->ups = up ? r->ups + 1 : 0;
	if (r->ups >= 2) {
		start = addr & ~4095ULL;
		end = start + win < start ? UINT64_MAX & ~4095ULL : start + win;
		if (end < want) /* a request longer than this window */
			end = start + RMEM_WINDOW < start ? UINT64_MAX & ~4095ULL
							  : start + RMEM_WINDOW;
	} else if (start < r->floor && r->floor <= addr) {
		start = r->floor;
	}
	r->last_miss = addr;
	if (want > r->run_top)
		r->run_top = want;
	w->len = 0;
	ssize_t n = counted(r, start, w->buf, end - start);
	if (n < 0 || (uint64_t)n < addr + len - start) {
		if (n == -ESRCH)
			return -ESRCH;
		/* The window reached into unmapped memory: read exactly. */
		start = addr;
		n = counted(r, start, w->buf, len);
		if (n < 0)
			return (int)n;
		if ((size_t)n < len)
			return -EFAULT;
	}
	w->start = start;
	w->len = (size_t)n;
	r->last_start = start;
	*at = w->buf + (addr - start);
	return 0;
}

/* The message for rc of a read through r (0 stays 0). */
static int said(struct rmem *r, int rc, uint64_t addr, size_t len, struct pp_err *err)
{
	if (rc == -ENOMEM)
		return pp_errf(err, rc, "out of memory reading pid %d", (int)r->pid);
	return rc ? say(err, rc, r->pid, addr, len) : 0;
}

/* Cached: where [addr, addr+len) is in a window, filling one on a miss. */
static int cached_at(struct rmem *r, uint64_t addr, size_t len, const uint8_t **at)
{
	for (unsigned i = 0; i < RMEM_NWINDOWS; i++) {
		const struct rmem_window *w = &r->w[i];
		if (w->len && addr >= w->start && addr + len <= w->start + w->len) {
			*at = w->buf + (addr - w->start);
			return 0;
		}
	}
	return fill(r, addr, len, at);
}

static int out_of_range(struct rmem *r, uint64_t addr, size_t len, struct pp_err *err)
{
	return pp_errf(err, -EINVAL, "pid %d: read 0x%" PRIx64 "+%zu: out of range", (int)r->pid,
		       addr, len);
}

int rmem_read(struct rmem *r, uint64_t addr, void *out, size_t len, struct pp_err *err)
{
	int rc;
	if (addr + len < addr || (r->cached && len > RMEM_WINDOW))
		return out_of_range(r, addr, len, err);
	if (!r->cached) {
		ssize_t n = counted(r, addr, out, len);
		rc = n == (ssize_t)len ? 0 : n >= 0 ? -EFAULT : (int)n;
	} else {
		const uint8_t *at;
		if (!(rc = cached_at(r, addr, len, &at)))
			memcpy(out, at, len);
	}
	return said(r, rc, addr, len, err);
}

int rmem_peek(struct rmem *r, uint64_t addr, size_t len, const uint8_t **at, struct pp_err *err)
{
	*at = NULL;
	if (!r->cached || addr + len < addr || len > RMEM_WINDOW)
		return out_of_range(r, addr, len, err);
	int rc = cached_at(r, addr, len, at);
	if (rc)
		*at = NULL;
	return said(r, rc, addr, len, err);
}

/*
 * maprec.c - PERF_RECORD_MMAP2 rings of the sampler's perf events (see
 * maprec.h). The record layouts are linux/perf_event.h's ("struct {...}"
 * comments under PERF_RECORD_MMAP2 and PERF_RECORD_LOST), with the
 * sample_id trailer that sample_id_all adds for PERF_SAMPLE_TID|TIME.
 */
#include "maprec.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

struct maprec_ring {
	struct perf_event_mmap_page *meta;
	size_t maplen;
	unsigned char *data;
	uint64_t size; /* of data: a power of two */
};

/* The fixed part of an MMAP2 record after its header (perf_event.h). */
struct mmap2_body {
	uint32_t pid, tid;
	uint64_t addr, len, pgoff;
	uint32_t maj, min;
	uint64_t ino, ino_generation;
	uint32_t prot, flags;
	/* char filename[]; then the sample_id trailer */
};

/* sample_id_all's trailer for PERF_SAMPLE_TID | PERF_SAMPLE_TIME */
struct id_trailer {
	uint32_t pid, tid;
	uint64_t time;
};

#define PP_PROT_EXEC 0x4
#define PP_MAP_SHARED 0x1

void maprec_attr(struct perf_event_attr *attr)
{
	attr->mmap = 1; /* executable mappings only (mmap_data stays 0) */
	attr->mmap2 = 1;
	attr->sample_id_all = 1;
	attr->sample_type |= PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
	attr->use_clockid = 1;
	attr->clockid = CLOCK_MONOTONIC; /* the agent's clock (pp_mono_ns) */
	/* nobody polls the ring: no wake-ups before it is full */
	attr->watermark = 1;
	attr->wakeup_watermark = MAPREC_PAGES * 4096u;
}

int maprec_map(int fd, struct maprec_ring **out)
{
	*out = NULL;
	long page = sysconf(_SC_PAGESIZE);
	if (page <= 0)
		return -EINVAL;
	struct maprec_ring *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->maplen = (size_t)page * (1 + MAPREC_PAGES);
	void *p = mmap(NULL, r->maplen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		int e = -errno;
		free(r);
		return e;
	}
	r->meta = p;
	/* data_offset/data_size since Linux 4.1; page 1 on before */
	uint64_t off = r->meta->data_offset ? r->meta->data_offset : (uint64_t)page;
	r->size = r->meta->data_size ? r->meta->data_size : (uint64_t)page * MAPREC_PAGES;
	r->data = (unsigned char *)p + off;
	*out = r;
	return 0;
}

void maprec_unmap(struct maprec_ring *r)
{
	if (!r)
		return;
	munmap(r->meta, r->maplen);
	free(r);
}

int maprec_parse(const void *rec, size_t len, pid_t *pid, uint64_t *time_ns, struct proc_map *m)
{
	struct perf_event_header h;
	const unsigned char *b = rec;
	if (len < sizeof(h))
		return -EINVAL;
	memcpy(&h, b, sizeof(h));
	if (h.size != len)
		return -EINVAL;
	if (h.type != PERF_RECORD_MMAP2)
		return 0;
	size_t fixed = sizeof(h) + sizeof(struct mmap2_body);
	if (len < fixed + 1 + sizeof(struct id_trailer))
		return -EINVAL;
	struct mmap2_body body;
	struct id_trailer id;
	memcpy(&body, b + sizeof(h), sizeof(body));
	memcpy(&id, b + len - sizeof(id), sizeof(id));
	const char *name = (const char *)b + fixed;
	size_t room = len - fixed - sizeof(id);
	if (!memchr(name, '\0', room))
		return -EINVAL;
	/* a build-id record has no device and inode (not asked for); anonymous
	 * and special mappings ("//anon", "[vdso]") are not files */
	if ((h.misc & PERF_RECORD_MISC_MMAP_BUILD_ID) || !(body.prot & PP_PROT_EXEC) ||
	    name[0] != '/' || !body.ino || body.len == 0 || body.addr + body.len < body.addr)
		return 0;
	memset(m, 0, sizeof(*m));
	m->start = body.addr;
	m->end = body.addr + body.len;
	m->offset = body.pgoff;
	m->inode = body.ino;
	m->dev_major = body.maj;
	m->dev_minor = body.min;
	memcpy(m->perms, "r-xp", 5);
	if (!(body.prot & 0x1))
		m->perms[0] = '-';
	if (body.prot & 0x2)
		m->perms[1] = 'w';
	if (body.flags & PP_MAP_SHARED)
		m->perms[3] = 's';
	m->path = (char *)name;
	*pid = (pid_t)body.pid;
	*time_ns = id.time;
	return 1;
}

int maprec_drain(struct maprec_ring *r, size_t max, maprec_fn fn, void *arg, uint64_t *lost)
{
	/* an MMAP2 record is at most ~4.2 KiB (its name is at most PATH_MAX) */
	_Alignas(8) unsigned char buf[8192];
	uint64_t head = __atomic_load_n(&r->meta->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = r->meta->data_tail;
	int n = 0;
	size_t seen = 0;
	while (tail < head && seen < max) {
		struct perf_event_header h;
		uint64_t at = tail & (r->size - 1);
		/* headers are 8-byte aligned and never split at the ring's end */
		memcpy(&h, r->data + at, sizeof(h));
		if (h.size < sizeof(h) || h.size > head - tail)
			break; /* cannot be: the kernel writes whole records */
		const unsigned char *rec = r->data + at;
		if (at + h.size > r->size) { /* wraps: copy it whole */
			if (h.size > sizeof(buf)) {
				tail += h.size;
				continue;
			}
			size_t first = (size_t)(r->size - at);
			memcpy(buf, r->data + at, first);
			memcpy(buf + first, r->data, h.size - first);
			rec = buf;
		}
		seen++;
		if (h.type == PERF_RECORD_LOST && h.size >= sizeof(h) + 16) {
			uint64_t nlost;
			memcpy(&nlost, rec + sizeof(h) + 8, sizeof(nlost));
			*lost += nlost;
		} else if (h.type == PERF_RECORD_MMAP2) {
			pid_t pid;
			uint64_t t;
			struct proc_map m;
			if (maprec_parse(rec, h.size, &pid, &t, &m) == 1) {
				fn(pid, t, &m, arg);
				n++;
			}
		}
		tail += h.size;
	}
	__atomic_store_n(&r->meta->data_tail, tail, __ATOMIC_RELEASE);
	return n;
}

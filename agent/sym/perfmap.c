/*
 * perfmap.c - /tmp/perf-PID.map reader (see perfmap.h).
 */
#include "perfmap.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "procinfo.h"
#include "grow.h"

/* Entries before the last one with start <= addr that may still hold addr
 * (code re-JITted over a larger earlier range): looked at, no further. */
#define PERFMAP_BACK 16

void perfmap_init(struct perfmap *pm)
{
	memset(pm, 0, sizeof(*pm));
}

void perfmap_free(struct perfmap *pm)
{
	free(pm->v);
	free(pm->names);
	perfmap_init(pm);
}

static int cmp_sym(const void *a, const void *b)
{
	const struct perfmap_sym *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->seq > y->seq ? -1 : x->seq < y->seq; /* newest first */
}

/* One line, NUL-terminated, newline removed. Malformed lines are skipped. */
static int add_line(struct perfmap *pm, char *line)
{
	char *p = line, *end;
	pm->seq++;
	uint64_t start = strtoull(p, &end, 16);
	if (end == p || *end != ' ')
		return 0;
	p = end + 1;
	uint64_t size = strtoull(p, &end, 16);
	if (end == p || *end != ' ' || size == 0 || start + size < start)
		return 0;
	p = end + 1;
	size_t l = strlen(p);
	while (l && (p[l - 1] == '\r' || p[l - 1] == ' '))
		p[--l] = '\0';
	if (!l || pm->n >= PERFMAP_MAX_ENTRIES)
		return 0;
	for (size_t i = 0; i < l; i++) /* names end up in logs and UIs */
		if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f)
			p[i] = '?';
	if (pp_grow(&pm->v, &pm->cap, pm->n + 1, sizeof(*pm->v), 1024) ||
	    pp_grow(&pm->names, &pm->names_cap, pm->names_len + l + 1, 1, 16384))
		return -ENOMEM;
	memcpy(pm->names + pm->names_len, p, l + 1);
	pm->v[pm->n++] = (struct perfmap_sym){
		.start = start,
		.size = size,
		.seq = pm->seq,
		.name = (uint32_t)pm->names_len,
	};
	pm->names_len += l + 1;
	return 1;
}

/* Parse complete lines from pm->parsed up to limit; returns entries added
 * or -ENOMEM. A line over PERFMAP_MAX_LINE is skipped. */
static long parse_from(struct perfmap *pm, int fd, uint64_t limit)
{
	enum { BUF = 65536 + PERFMAP_MAX_LINE };
	char *buf = malloc(BUF);
	uint64_t off = pm->parsed;
	size_t have = 0;
	bool skip = false; /* inside an overlong line */
	long added = 0;

	if (!buf)
		return -ENOMEM;
	while (off + have < limit) {
		size_t want = BUF - have;
		if (want > limit - off - have)
			want = (size_t)(limit - off - have);
		ssize_t r = pread(fd, buf + have, want, (off_t)(off + have));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		have += (size_t)r;
		char *p = buf, *e = buf + have, *nl;
		while ((nl = memchr(p, '\n', (size_t)(e - p)))) {
			*nl = '\0';
			if (!skip && nl - p <= PERFMAP_MAX_LINE) {
				int a = add_line(pm, p);
				if (a < 0) {
					free(buf);
					return a;
				}
				added += a;
			}
			skip = false;
			p = nl + 1;
		}
		size_t used = (size_t)(p - buf);
		off += used;
		have -= used;
		memmove(buf, p, have);
		if (have >= PERFMAP_MAX_LINE) {
			off += have;
			have = 0;
			skip = true;
		}
	}
	free(buf);
	pm->parsed = off;
	return added;
}

int perfmap_refresh(struct perfmap *pm, pid_t pid)
{
	pid_t nspid;
	char path[64];
	struct stat st;
	int rc = proc_nspid(pid, &nspid);
	if (rc < 0)
		return rc;
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)nspid);
	int fd = proc_root_open(pid, path, PERFMAP_MAX_FILE, &st);
	if (fd < 0) {
		perfmap_free(pm);
		return fd;
	}
	struct pp_file_id id = pp_file_id_of(&st);
	if (pp_file_id_same(&id, &pm->file)) {
		close(fd);
		return 0;
	}
	if (id.dev != pm->file.dev || id.ino != pm->file.ino || (uint64_t)id.size < pm->parsed)
		perfmap_free(pm); /* replaced or rewritten: from the start */
	pm->file = id;
	long added = parse_from(pm, fd, (uint64_t)st.st_size);
	close(fd);
	if (added < 0) {
		perfmap_free(pm);
		return (int)added;
	}
	if (!added)
		return 0;
	qsort(pm->v, pm->n, sizeof(*pm->v), cmp_sym);
	/* the same start again: only the newest line counts */
	size_t k = 0;
	for (size_t i = 0; i < pm->n; i++)
		if (!k || pm->v[i].start != pm->v[k - 1].start)
			pm->v[k++] = pm->v[i];
	pm->n = k;
	pm->bytes = pm->cap * sizeof(*pm->v) + pm->names_cap;
	return 1;
}

const char *perfmap_lookup(const struct perfmap *pm, uint64_t addr)
{
	size_t lo = 0, hi = pm->n;
	while (lo < hi) { /* first entry with start > addr */
		size_t mid = lo + (hi - lo) / 2;
		if (pm->v[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	const struct perfmap_sym *best = NULL;
	for (size_t i = lo, k = 0; i > 0 && k < PERFMAP_BACK; i--, k++) {
		const struct perfmap_sym *s = &pm->v[i - 1];
		if (addr - s->start < s->size && (!best || s->seq > best->seq))
			best = s;
	}
	return best ? pm->names + best->name : NULL;
}

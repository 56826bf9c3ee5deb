#include "spool.h"
#include "fileutil.h"
#include "log.h"
#include "ppclock.h"
#include "grow.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#define SPOOL_MAGIC "PPSPOOL1"
#define SPOOL_MAX_RAW (512u << 20)   /* a batch never decodes to more than this */
#define SPOOL_MAX_FILE SPOOL_MAX_RAW /* nor is a file (compressed) larger */
#define SPOOL_MAX_ITEMS 1000000u
#define SPOOL_MAX_LABELS 4096u

struct spool {
	pthread_mutex_t mu; /* the agent's loop writes OOM captures while the sender reads */
	char *dir;
	uint64_t max_bytes;
	uint64_t last_seq;
	struct spool_stats st;
};

/* ---- batches ---- */

int spool_batch_add(struct spool_batch *b, const struct pp_labels *labels, const uint8_t *p,
		    size_t len)
{
	if (pp_grow(&b->v, &b->cap, b->n + 1, sizeof(*b->v), 8))
		return -ENOMEM;
	struct spool_item *it = &b->v[b->n];
	memset(it, 0, sizeof(*it));
	it->profile = malloc(len ? len : 1);
	if (!it->profile || pp_labels_copy(&it->labels, labels)) {
		free(it->profile);
		pp_labels_free(&it->labels);
		return -ENOMEM;
	}
	memcpy(it->profile, p, len);
	it->len = len;
	b->n++;
	return 0;
}

int spool_batch_move(struct spool_batch *dst, struct spool_batch *src)
{
	if (pp_grow(&dst->v, &dst->cap, dst->n + src->n, sizeof(*dst->v), 8))
		return -ENOMEM;
	if (src->n)
		memcpy(dst->v + dst->n, src->v, src->n * sizeof(*src->v));
	dst->n += src->n;
	free(src->v);
	memset(src, 0, sizeof(*src));
	return 0;
}

void spool_batch_drop_head(struct spool_batch *b, size_t k)
{
	if (k > b->n)
		k = b->n;
	for (size_t i = 0; i < k; i++) {
		pp_labels_free(&b->v[i].labels);
		free(b->v[i].profile);
	}
	memmove(b->v, b->v + k, (b->n - k) * sizeof(*b->v));
	b->n -= k;
}

void spool_batch_free(struct spool_batch *b)
{
	for (size_t i = 0; i < b->n; i++) {
		pp_labels_free(&b->v[i].labels);
		free(b->v[i].profile);
	}
	free(b->v);
	memset(b, 0, sizeof(*b));
}

/* ---- encoding: magic, then one zstd frame of
 *   u32 n; n x { u32 nlabels; nlabels x {u32 len, name, u32 len, value}; u32 len, profile } */

static void put32(struct pp_buf *w, uint32_t v)
{
	pp_buf_add(w, &v, 4);
}

static void putstr(struct pp_buf *w, const void *s, size_t len)
{
	put32(w, (uint32_t)len);
	pp_buf_add(w, s, len);
}

int spool_encode(const struct spool_batch *b, uint8_t **out, size_t *len, struct pp_err *err)
{
	struct pp_buf w = { 0 };

	put32(&w, (uint32_t)b->n);
	for (size_t i = 0; i < b->n; i++) {
		const struct spool_item *it = &b->v[i];
		put32(&w, (uint32_t)it->labels.n);
		for (size_t j = 0; j < it->labels.n; j++) {
			putstr(&w, it->labels.v[j].name, strlen(it->labels.v[j].name));
			putstr(&w, it->labels.v[j].value, strlen(it->labels.v[j].value));
		}
		putstr(&w, it->profile, it->len);
	}
	if (w.oom) {
		free(w.p);
		return pp_errf(err, -ENOMEM, "spool: out of memory encoding a batch");
	}
	size_t bound = ZSTD_compressBound(w.n) + sizeof(SPOOL_MAGIC) - 1;
	uint8_t *z = malloc(bound);
	if (!z) {
		free(w.p);
		return pp_errf(err, -ENOMEM, "spool: out of memory encoding a batch");
	}
	memcpy(z, SPOOL_MAGIC, sizeof(SPOOL_MAGIC) - 1);
	size_t zn = ZSTD_compress(z + sizeof(SPOOL_MAGIC) - 1, bound - (sizeof(SPOOL_MAGIC) - 1),
				  w.p, w.n, 3);
	free(w.p);
	if (ZSTD_isError(zn)) {
		free(z);
		return pp_errf(err, -EIO, "spool: zstd: %s", ZSTD_getErrorName(zn));
	}
	*out = z;
	*len = zn + sizeof(SPOOL_MAGIC) - 1;
	return 0;
}

struct rbuf {
	const uint8_t *p;
	size_t n, off;
};

static int get32(struct rbuf *r, uint32_t *v)
{
	if (r->n - r->off < 4)
		return -1;
	memcpy(v, r->p + r->off, 4);
	r->off += 4;
	return 0;
}

static int getstr(struct rbuf *r, char **s)
{
	uint32_t len;

	if (get32(r, &len) || r->n - r->off < len)
		return -1;
	*s = strndup((const char *)r->p + r->off, len);
	r->off += len;
	return *s ? 0 : -1;
}

int spool_decode(const uint8_t *buf, size_t len, struct spool_batch *out, struct pp_err *err)
{
	const size_t ml = sizeof(SPOOL_MAGIC) - 1;
	memset(out, 0, sizeof(*out));

	if (len < ml || memcmp(buf, SPOOL_MAGIC, ml) != 0)
		return pp_errf(err, -EINVAL, "not a spool file (bad magic)");
	unsigned long long raw = ZSTD_getFrameContentSize(buf + ml, len - ml);
	if (raw == ZSTD_CONTENTSIZE_ERROR || raw == ZSTD_CONTENTSIZE_UNKNOWN || raw > SPOOL_MAX_RAW)
		return pp_errf(err, -EINVAL, "spool file: bad or oversized zstd frame");
	uint8_t *d = malloc(raw ? raw : 1);
	if (!d)
		return pp_errf(err, -ENOMEM, "spool file: out of memory");
	size_t dn = ZSTD_decompress(d, raw, buf + ml, len - ml);
	if (ZSTD_isError(dn) || dn != raw) {
		free(d);
		return pp_errf(err, -EINVAL, "spool file: zstd: %s",
			       ZSTD_isError(dn) ? ZSTD_getErrorName(dn) : "short frame");
	}
	struct rbuf r = { d, dn, 0 };
	uint32_t n;
	int rc = -EINVAL;
	if (get32(&r, &n) || n > SPOOL_MAX_ITEMS)
		goto bad;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t nl;
		struct pp_labels labels = { 0 };
		if (get32(&r, &nl) || nl > SPOOL_MAX_LABELS)
			goto bad;
		for (uint32_t j = 0; j < nl; j++) {
			char *name = NULL, *value = NULL;
			if (getstr(&r, &name) || getstr(&r, &value) ||
			    pp_labels_set(&labels, name, value)) {
				free(name);
				free(value);
				pp_labels_free(&labels);
				goto bad;
			}
			free(name);
			free(value);
		}
		uint32_t plen;
		if (get32(&r, &plen) || r.n - r.off < plen ||
		    spool_batch_add(out, &labels, r.p + r.off, plen)) {
			pp_labels_free(&labels);
			goto bad;
		}
		r.off += plen;
		pp_labels_free(&labels);
	}
	if (r.off != r.n)
		goto bad;
	free(d);
	return 0;
bad:
	free(d);
	spool_batch_free(out);
	return pp_errf(err, rc, "spool file: truncated or malformed batch");
}

/* ---- the directory ---- */

struct entry {
	char name[64];
	uint64_t size;
};

static int is_spool_name(const char *n)
{
	size_t l = strlen(n);
	return l > 6 && l < 60 && strcmp(n + l - 6, ".spool") == 0 && n[0] != '.';
}

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(((const struct entry *)a)->name, ((const struct entry *)b)->name);
}

/* Sorted list of spool files (names are zero-padded numbers: lexical = age). */
static int list(struct spool *s, struct entry **out, size_t *n)
{
	DIR *d = opendir(s->dir);
	size_t cap = 0;

	*out = NULL;
	*n = 0;
	if (!d)
		return -errno;
	for (struct dirent *e; (e = readdir(d));) {
		if (!is_spool_name(e->d_name))
			continue;
		struct stat st;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
			continue;
		if (pp_grow(out, &cap, *n + 1, sizeof(**out), 32)) {
			closedir(d);
			free(*out);
			*out = NULL;
			return -ENOMEM;
		}
		size_t nl = strnlen(e->d_name, sizeof((*out)[*n].name) - 1);
		memcpy((*out)[*n].name, e->d_name, nl); /* is_spool_name bounded it */
		(*out)[*n].name[nl] = '\0';
		(*out)[*n].size = (uint64_t)st.st_size;
		(*n)++;
	}
	closedir(d);
	if (*n)
		qsort(*out, *n, sizeof(**out), cmp_entry);
	return 0;
}

static void refresh_stats(struct spool *s)
{
	struct entry *e;
	size_t n;

	s->st.files = s->st.bytes = 0;
	if (list(s, &e, &n))
		return;
	s->st.files = n;
	for (size_t i = 0; i < n; i++)
		s->st.bytes += e[i].size;
	free(e);
}

int spool_new(const struct spool_opts *o, struct spool **out, struct pp_err *err)
{
	struct spool *s = calloc(1, sizeof(*s));

	*out = NULL;
	if (!s || !(s->dir = strdup(o->dir))) {
		free(s);
		return pp_errf(err, -ENOMEM, "spool: out of memory");
	}
	s->max_bytes = o->max_bytes;
	pthread_mutex_init(&s->mu, NULL);
	bool fixed = false;
	unsigned mode = 0;
	int r = pp_private_dir(o->dir, "spool", &fixed, &mode, err);
	if (r) {
		spool_free(s);
		return r;
	}
	if (fixed)
		pp_log(PP_WARN, "spool directory was accessible to other users; made it 0700",
		       "path=%s mode_was=%04o", pp_q(o->dir), mode);
	refresh_stats(s);
	*out = s;
	return 0;
}

void spool_free(struct spool *s)
{
	if (!s)
		return;
	pthread_mutex_destroy(&s->mu);
	free(s->dir);
	free(s);
}

static uint64_t next_seq(struct spool *s)
{
	uint64_t seq = (uint64_t)pp_clock_ns(CLOCK_REALTIME);
	if (seq <= s->last_seq)
		seq = s->last_seq + 1;
	s->last_seq = seq;
	return seq;
}

/* Drop the oldest files until `incoming` more bytes fit. */
static void make_room(struct spool *s, uint64_t incoming)
{
	struct entry *e;
	size_t n;
	uint64_t total = 0;

	if (list(s, &e, &n))
		return;
	for (size_t i = 0; i < n; i++)
		total += e[i].size;
	for (size_t i = 0; i < n && total + incoming > s->max_bytes; i++) {
		char path[4200];
		struct spool_batch b;
		snprintf(path, sizeof(path), "%s/%s", s->dir, e[i].name);
		/* count the profiles lost with it, for the metrics */
		FILE *f = fopen(path, "rb");
		if (f) {
			uint8_t *buf = malloc(e[i].size ? e[i].size : 1);
			if (buf && fread(buf, 1, e[i].size, f) == e[i].size &&
			    spool_decode(buf, e[i].size, &b, NULL) == 0) {
				s->st.dropped_profiles += b.n;
				spool_batch_free(&b);
			}
			free(buf);
			fclose(f);
		}
		if (unlink(path) == 0) {
			total -= e[i].size;
			s->st.dropped_files++;
		}
	}
	free(e);
}

static int write_locked(struct spool *s, const struct spool_batch *b, struct pp_err *err)
{
	uint8_t *buf;
	size_t len;
	char tmp[4200], dst[4200];
	int rc = spool_encode(b, &buf, &len, err);

	if (rc)
		return rc;
	if (len > s->max_bytes) {
		free(buf);
		s->st.dropped_profiles += b->n;
		return pp_errf(err, -EFBIG, "spool: a batch of %zu bytes exceeds spool.max_bytes",
			       len);
	}
	make_room(s, len);
	uint64_t seq = next_seq(s);
	snprintf(tmp, sizeof(tmp), "%s/.%020" PRIu64 ".tmp", s->dir, seq);
	snprintf(dst, sizeof(dst), "%s/%020" PRIu64 ".spool", s->dir, seq);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = pp_errf(err, -errno, "spool: create %s: %s", tmp, strerror(errno));
		free(buf);
		return rc;
	}
	size_t off = 0;
	while (off < len) {
		ssize_t w = write(fd, buf + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			rc = pp_errf(err, -errno, "spool: write %s: %s", tmp, strerror(errno));
			goto fail;
		}
		off += (size_t)w;
	}
	if (fsync(fd)) {
		rc = pp_errf(err, -errno, "spool: fsync %s: %s", tmp, strerror(errno));
		goto fail;
	}
	close(fd);
	fd = -1;
	if (rename(tmp, dst)) {
		rc = pp_errf(err, -errno, "spool: rename to %s: %s", dst, strerror(errno));
		goto fail;
	}
	/* make the rename itself durable */
	int dfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	free(buf);
	s->st.written++;
	refresh_stats(s);
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	free(buf);
	return rc;
}

static int peek_locked(struct spool *s, const char *after, char *name, size_t name_len,
		       struct spool_batch *out, struct pp_err *err)
{
	struct entry *e;
	size_t n;
	int rc = list(s, &e, &n);

	if (rc)
		return pp_errf(err, rc, "spool: list %s: %s", s->dir, strerror(-rc));
	for (size_t i = 0; i < n; i++) {
		char path[4200];
		if (after && after[0] && strcmp(e[i].name, after) <= 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", s->dir, e[i].name);
		struct pp_err derr = { 0 };
		/* A file that cannot be read, is larger than any batch the agent
		 * writes, or does not fit in memory is moved aside like a corrupt
		 * one: left in place it would block every later batch. */
		if (e[i].size > SPOOL_MAX_FILE) {
			pp_errf(&derr, -EFBIG, "%" PRIu64 " bytes, larger than any spool file",
				e[i].size);
		} else {
			int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
			uint8_t *buf = fd >= 0 ? malloc(e[i].size ? e[i].size : 1) : NULL;
			size_t got = 0;
			while (buf && got < e[i].size) {
				ssize_t r = read(fd, buf + got, e[i].size - got);
				if (r < 0 && errno == EINTR)
					continue;
				if (r <= 0)
					break;
				got += (size_t)r;
			}
			if (fd < 0)
				pp_errf(&derr, -errno, "cannot open: %s", strerror(errno));
			else if (!buf)
				pp_errf(&derr, -ENOMEM, "out of memory for %" PRIu64 " bytes",
					e[i].size);
			else if (got == e[i].size && spool_decode(buf, got, out, &derr) == 0) {
				free(buf);
				close(fd);
				snprintf(name, name_len, "%s", e[i].name);
				free(e);
				return 1;
			} else if (got != e[i].size && !derr.code)
				pp_errf(&derr, -EIO, "short read (%zu of %" PRIu64 " bytes)", got,
					e[i].size);
			free(buf);
			if (fd >= 0)
				close(fd);
		}
		/* never let one bad file block the rest */
		char bad[4300];
		snprintf(bad, sizeof(bad), "%s.corrupt", path);
		rename(path, bad);
		s->st.corrupt++;
		pp_errf(err, -EINVAL, "spool: moved aside corrupt file %s: %s", bad, derr.msg);
	}
	free(e);
	refresh_stats(s);
	return 0;
}

static int remove_locked(struct spool *s, const char *name)
{
	char path[4200];

	if (!is_spool_name(name) || strchr(name, '/'))
		return -EINVAL;
	snprintf(path, sizeof(path), "%s/%s", s->dir, name);
	int rc = unlink(path) ? -errno : 0;
	refresh_stats(s);
	return rc;
}

int spool_write(struct spool *s, const struct spool_batch *b, struct pp_err *err)
{
	pthread_mutex_lock(&s->mu);
	int rc = write_locked(s, b, err);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

int spool_peek(struct spool *s, const char *after, char *name, size_t name_len,
	       struct spool_batch *out, struct pp_err *err)
{
	pthread_mutex_lock(&s->mu);
	int rc = peek_locked(s, after, name, name_len, out, err);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

int spool_remove(struct spool *s, const char *name)
{
	pthread_mutex_lock(&s->mu);
	int rc = remove_locked(s, name);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

const struct spool_stats *spool_stats(const struct spool *s)
{
	return &s->st;
}

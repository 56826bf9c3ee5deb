/*
 * debuginfo.c - one worker thread, a bounded FIFO of (build id, path) and
 * an open-addressing table of build id -> state. See debuginfo.h.
 *
 * Decisions worth knowing:
 * - The worker has its own uploader (channel): uploaders are single-caller.
 * - The build id comes from the symbolizer (it read it from the mapped file);
 *   ids that are not 2..128 lower-case hex digits are ignored. The file sent
 *   is checked to carry that build id (a separate debug file that does not
 *   is ignored; a mapped file that no longer does is not sent).
 * - At most remote_store.debuginfo_max_bytes_per_hour are sent per hour; a
 *   file that would exceed it fails (retried later).
 * - The file is hashed, then streamed by pread() of 8 MiB chunks; a file
 *   whose size changes in between fails the upload (retried later).
 * - A SIGNED_URL instruction is not supported (no HTTP client for it): it
 *   counts as a failure and is retried later.
 */
#include "debuginfo.h"
#include "procinfo.h"

#define DEBUGINFO_MAX_FILE (4ull << 30) /* larger files are not uploaded */

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "bytes.h"
#include "elffile.h"
#include "grow.h"
#include "log.h"
#include "metrics.h"
#include "proto/debuginfo.pb-c.h"
#include "upload.h"
#include "ppclock.h"

#include <grpc/status.h>

#define SVC "/parca.debuginfo.v1alpha1.DebuginfoService/"
#define CHUNK (8u << 20)
#define MAX_FILE 1000000000ll
#define ID_MAX 128

enum state { ST_EMPTY = 0, ST_QUEUED, ST_UPLOADED, ST_REFUSED, ST_FAILED };

struct slot {
	char id[ID_MAX + 1];
	enum state st;
	uint64_t retry_at;
};

struct job {
	char id[ID_MAX + 1];
	char *path;
};

struct debuginfo {
	struct uploader *u;
	uint64_t timeout_ns, retry_ns;
	/* upload budget (worker thread only): bytes sent since hour_t0 */
	uint64_t max_bytes_per_hour, hour_t0, hour_bytes;
	char *debug_dir;
	pthread_t th;
	bool started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;
	struct job *q;
	unsigned qlen, qhead, qn;
	struct slot *tab;
	unsigned tabsz, used, max_ids;
	struct debuginfo_stats st;
	/* a store without the DebuginfoService (UNIMPLEMENTED): nothing is
	 * hashed, queued or asked until then (under lock) */
	uint64_t paused_until;
};

static bool valid_id(const char *id)
{
	size_t n = strnlen(id, ID_MAX + 1);

	if (n < 2 || n > ID_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
			return false;
	return true;
}

static uint64_t id_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

/* Slot for id (existing or the empty one to fill); NULL when full. Locked. */
static struct slot *find(struct debuginfo *d, const char *id)
{
	for (unsigned i = 0, k = id_hash(id) & (d->tabsz - 1); i < d->tabsz;
	     i++, k = (k + 1) & (d->tabsz - 1)) {
		struct slot *s = &d->tab[k];
		if (s->st == ST_EMPTY || !strcmp(s->id, id))
			return s;
	}
	return NULL;
}

static bool stopping(void *arg)
{
	struct debuginfo *d = arg;

	pthread_mutex_lock(&d->lock);
	bool s = d->stop;
	pthread_mutex_unlock(&d->lock);
	return s;
}

/* ---- one upload ------------------------------------------------------- */

struct one_msg {
	uint8_t *buf;
	size_t len;
	bool sent;
};

static int next_one(void *arg, const uint8_t **msg, size_t *len)
{
	struct one_msg *m = arg;

	if (m->sent)
		return 0;
	m->sent = true;
	*msg = m->buf;
	*len = m->len;
	return 1;
}

/* Unary call: pack msg, send, return the response bytes. */
static int unary(struct debuginfo *d, const char *method, const ProtobufCMessage *msg,
		 uint8_t **resp, size_t *rlen, int *status, struct pp_err *err)
{
	struct one_msg m = { .len = protobuf_c_message_get_packed_size(msg) };

	m.buf = malloc(m.len ? m.len : 1);
	if (!m.buf)
		return pp_errf(err, -ENOMEM, "out of memory");
	protobuf_c_message_pack(msg, m.buf);
	int rc = uploader_call(d->u, method, next_one, &m, d->timeout_ns, resp, rlen, status, err);
	free(m.buf);
	return rc;
}

static int hash_file(int fd, off_t size, char hex[65], struct pp_err *err)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	uint8_t *buf = malloc(1 << 20), md[32];
	unsigned mdlen = 0;
	int rc = 0;
	off_t off = 0;

	if (!ctx || !buf || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
		rc = pp_errf(err, -ENOMEM, "sha256 unavailable");
		goto out;
	}
	while (off < size) {
		ssize_t r = pread(fd, buf, 1 << 20, off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			rc = pp_errf(err, r < 0 ? -errno : -EIO, "reading the file to hash it: %s",
				     r < 0 ? strerror(errno) : "short file");
			goto out;
		}
		EVP_DigestUpdate(ctx, buf, (size_t)r);
		off += r;
	}
	EVP_DigestFinal_ex(ctx, md, &mdlen);
	pp_hex(hex, 65, md, 32);
out:
	EVP_MD_CTX_free(ctx);
	free(buf);
	return rc;
}

struct stream {
	struct debuginfo *d;
	int fd;
	off_t size, off;
	const char *id, *upload_id;
	bool info_sent;
	uint8_t *chunk, *buf;
	size_t bufcap;
};

static int next_chunk(void *arg, const uint8_t **msg, size_t *len)
{
	struct stream *s = arg;
	Parca__Debuginfo__V1alpha1__UploadRequest req =
		PARCA__DEBUGINFO__V1ALPHA1__UPLOAD_REQUEST__INIT;
	Parca__Debuginfo__V1alpha1__UploadInfo info = PARCA__DEBUGINFO__V1ALPHA1__UPLOAD_INFO__INIT;

	if (stopping(s->d))
		return -ECANCELED;
	if (!s->info_sent) {
		info.build_id = (char *)s->id;
		info.upload_id = (char *)s->upload_id;
		info.type = PARCA__DEBUGINFO__V1ALPHA1__DEBUGINFO_TYPE__DEBUGINFO_TYPE_EXECUTABLE;
		req.data_case = PARCA__DEBUGINFO__V1ALPHA1__UPLOAD_REQUEST__DATA_INFO;
		req.info = &info;
		s->info_sent = true;
	} else {
		if (s->off >= s->size)
			return 0;
		size_t want =
			(uint64_t)(s->size - s->off) < CHUNK ? (size_t)(s->size - s->off) : CHUNK;
		size_t got = 0;
		while (got < want) {
			ssize_t r = pread(s->fd, s->chunk + got, want - got, s->off + got);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				return r < 0 ? -errno : -EIO;
			got += r;
		}
		s->off += got;
		req.data_case = PARCA__DEBUGINFO__V1ALPHA1__UPLOAD_REQUEST__DATA_CHUNK_DATA;
		req.chunk_data.data = s->chunk;
		req.chunk_data.len = got;
	}
	size_t need = parca__debuginfo__v1alpha1__upload_request__get_packed_size(&req);
	if (pp_grow(&s->buf, &s->bufcap, need, 1, need))
		return -ENOMEM;
	*len = parca__debuginfo__v1alpha1__upload_request__pack(&req, s->buf);
	*msg = s->buf;
	return 1;
}

/* 0 when the ELF file on fd has GNU build id `id`; -ESTALE otherwise.
 * Headers and notes only: no symbol table is read for this. */
static int check_build_id(int fd, const char *id, const char *file, struct pp_err *err)
{
	struct elffile *f = NULL;
	struct pp_err lerr = { 0 };
	int rc = elffile_new(&(struct elffile_opts){ .from = ELFFILE_FROM_FD, .fd = fd }, &f, &lerr);

	if (rc < 0)
		return pp_errf(err, -ESTALE, "%s is not a readable ELF file: %s", file, lerr.msg);
	rc = strcmp(f->gnu_build_id, id)
		     ? pp_errf(err, -ESTALE, "%s has build id %s, not %s", file,
			       f->gnu_build_id[0] ? f->gnu_build_id : "(none)", id)
		     : 0;
	elffile_free(f);
	return rc;
}

/* 1 uploaded, 0 the server said no, negative failure (err set). */
static int upload(struct debuginfo *d, const char *id, const char *mapped, char *file,
		  size_t filesz, off_t *sent, struct pp_err *err)
{
	const int exe = PARCA__DEBUGINFO__V1ALPHA1__DEBUGINFO_TYPE__DEBUGINFO_TYPE_EXECUTABLE;
	const int gnu = PARCA__DEBUGINFO__V1ALPHA1__BUILD_IDTYPE__BUILD_ID_TYPE_GNU;
	struct stream s = { .d = d, .fd = -1, .id = id };
	uint8_t *resp = NULL;
	size_t rlen = 0;
	char hash[65] = "";
	struct stat st;
	int rc;

	/* a separate debug file (same build id) carries more than the binary;
	 * what is sent must carry the build id it is sent for (a file found
	 * under that name, or a mapped file changed since, may not) */
	snprintf(file, filesz, "%s/%.2s/%s.debug", d->debug_dir, id, id + 2);
	s.fd = open(file, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
	if (s.fd >= 0 && (rc = check_build_id(s.fd, id, file, err)) < 0) {
		pp_log(PP_WARN, "debuginfo: ignoring a separate debug file", "error=%s",
		       pp_q(err->msg));
		pp_err_clear(err);
		close(s.fd);
		s.fd = -1;
	}
	if (s.fd < 0) {
		/* the process's file (map_files link): opened like the symbolizer
		 * opens it, never in a way that can block */
		snprintf(file, filesz, "%s", mapped);
		s.fd = proc_open_link(file, DEBUGINFO_MAX_FILE, &st);
		if (s.fd < 0)
			return pp_errf(err, s.fd, "cannot open %s: %s", mapped,
				       s.fd == -EINVAL
					       ? "not a regular file on a trusted filesystem"
					       : strerror(-s.fd));
		if ((rc = check_build_id(s.fd, id, file, err)) < 0)
			goto out;
	}
	if (fstat(s.fd, &st) || !S_ISREG(st.st_mode) || st.st_size <= 0) {
		rc = pp_errf(err, -EINVAL, "%s is not a non-empty regular file", file);
		goto out;
	}
	if (st.st_size > MAX_FILE) {
		rc = pp_errf(err, -EFBIG, "%s is %lld bytes, above the 1e9 a server accepts", file,
			     (long long)st.st_size);
		goto out;
	}
	s.size = st.st_size;
	uint64_t now = pp_mono_ns();
	if (!d->hour_t0 || now - d->hour_t0 >= 3600000000000ull) {
		d->hour_t0 = now;
		d->hour_bytes = 0;
	}
	if (d->hour_bytes + (uint64_t)s.size > d->max_bytes_per_hour) {
		rc = pp_errf(
			err, -EAGAIN,
			"%s (%lld bytes) would exceed "
			"remote_store.debuginfo_max_bytes_per_hour (%llu, %llu sent this hour); "
			"retried later",
			file, (long long)s.size, (unsigned long long)d->max_bytes_per_hour,
			(unsigned long long)d->hour_bytes);
		goto out;
	}
	if ((rc = hash_file(s.fd, s.size, hash, err)))
		goto out;

	Parca__Debuginfo__V1alpha1__ShouldInitiateUploadRequest sreq =
		PARCA__DEBUGINFO__V1ALPHA1__SHOULD_INITIATE_UPLOAD_REQUEST__INIT;
	sreq.build_id = (char *)id;
	sreq.hash = hash;
	sreq.type = exe;
	sreq.build_id_type = gnu;
	int status = GRPC_STATUS_OK;
	if ((rc = unary(d, SVC "ShouldInitiateUpload", &sreq.base, &resp, &rlen, &status, err))) {
		if (status == GRPC_STATUS_UNIMPLEMENTED)
			rc = -EOPNOTSUPP; /* no such service there: see the worker */
		goto out;
	}
	Parca__Debuginfo__V1alpha1__ShouldInitiateUploadResponse *sres =
		parca__debuginfo__v1alpha1__should_initiate_upload_response__unpack(NULL, rlen,
										    resp);
	free(resp);
	resp = NULL;
	if (!sres) {
		rc = pp_errf(err, -EPROTO, "ShouldInitiateUpload: unparsable response");
		goto out;
	}
	bool go = sres->should_initiate_upload;
	if (!go)
		pp_log(PP_DEBUG, "debuginfo not wanted by the server", "build_id=%s reason=%s", id,
		       pp_q(sres->reason ? sres->reason : ""));
	parca__debuginfo__v1alpha1__should_initiate_upload_response__free_unpacked(sres, NULL);
	if (!go) {
		rc = 0;
		goto out;
	}

	Parca__Debuginfo__V1alpha1__InitiateUploadRequest ireq =
		PARCA__DEBUGINFO__V1ALPHA1__INITIATE_UPLOAD_REQUEST__INIT;
	ireq.build_id = (char *)id;
	ireq.size = s.size;
	ireq.hash = hash;
	ireq.type = exe;
	ireq.build_id_type = gnu;
	if ((rc = unary(d, SVC "InitiateUpload", &ireq.base, &resp, &rlen, NULL, err)))
		goto out;
	Parca__Debuginfo__V1alpha1__InitiateUploadResponse *ires =
		parca__debuginfo__v1alpha1__initiate_upload_response__unpack(NULL, rlen, resp);
	free(resp);
	resp = NULL;
	if (!ires || !ires->upload_instructions) {
		if (ires)
			parca__debuginfo__v1alpha1__initiate_upload_response__free_unpacked(ires,
											    NULL);
		rc = pp_errf(err, -EPROTO, "InitiateUpload: response without instructions");
		goto out;
	}
	const Parca__Debuginfo__V1alpha1__UploadInstructions *ui = ires->upload_instructions;
	if (ui->upload_strategy !=
	    PARCA__DEBUGINFO__V1ALPHA1__UPLOAD_INSTRUCTIONS__UPLOAD_STRATEGY__UPLOAD_STRATEGY_GRPC) {
		rc = pp_errf(err, -ENOTSUP,
			     "InitiateUpload: upload strategy %d not supported "
			     "(only GRPC)",
			     (int)ui->upload_strategy);
		parca__debuginfo__v1alpha1__initiate_upload_response__free_unpacked(ires, NULL);
		goto out;
	}
	char *upload_id = strdup(ui->upload_id ? ui->upload_id : "");
	parca__debuginfo__v1alpha1__initiate_upload_response__free_unpacked(ires, NULL);
	if (!upload_id) {
		rc = pp_errf(err, -ENOMEM, "out of memory");
		goto out;
	}
	s.upload_id = upload_id;
	s.chunk = malloc(s.size < CHUNK ? (size_t)s.size : CHUNK);
	if (!s.chunk) {
		free(upload_id);
		rc = pp_errf(err, -ENOMEM, "out of memory");
		goto out;
	}
	/* the stream may take a while for big files: 1 s per MiB on top */
	uint64_t stream_timeout = d->timeout_ns + (uint64_t)(s.size >> 20) * 1000000000ull;
	rc = uploader_call(d->u, SVC "Upload", next_chunk, &s, stream_timeout, &resp, &rlen, NULL,
			   err);
	free(resp);
	resp = NULL;
	if (!rc && s.off != s.size)
		rc = pp_errf(err, -EIO, "Upload: file changed while sent");
	if (!rc) {
		Parca__Debuginfo__V1alpha1__MarkUploadFinishedRequest mreq =
			PARCA__DEBUGINFO__V1ALPHA1__MARK_UPLOAD_FINISHED_REQUEST__INIT;
		mreq.build_id = (char *)id;
		mreq.upload_id = upload_id;
		mreq.type = exe;
		rc = unary(d, SVC "MarkUploadFinished", &mreq.base, &resp, &rlen, NULL, err);
		free(resp);
	}
	free(upload_id);
	if (!rc) {
		*sent = s.size;
		rc = 1;
	}
out:
	free(s.chunk);
	free(s.buf);
	if (s.fd >= 0)
		close(s.fd);
	return rc;
}

/* ---- the worker ------------------------------------------------------- */

static void *worker(void *arg)
{
	struct debuginfo *d = arg;

	pthread_mutex_lock(&d->lock);
	for (;;) {
		while (!d->stop && !d->qn)
			pthread_cond_wait(&d->cond, &d->lock);
		if (d->stop)
			break;
		struct job j = d->q[d->qhead];
		d->qhead = (d->qhead + 1) % d->qlen;
		d->qn--;
		if (pp_mono_ns() < d->paused_until) {
			/* queued before the store said it has no such service */
			struct slot *s = find(d, j.id);
			if (s && s->st != ST_EMPTY) {
				s->st = ST_FAILED;
				s->retry_at = d->paused_until;
			}
			free(j.path);
			continue;
		}
		pthread_mutex_unlock(&d->lock);

		struct pp_err err = { 0 };
		char file[512];
		off_t sent = 0;
		uint64_t t0 = pp_mono_ns();
		int rc = upload(d, j.id, j.path, file, sizeof(file), &sent, &err);
		const char *res = rc > 0 ? "uploaded" : rc == 0 ? "refused" : "failed";
		if (rc == -EOPNOTSUPP) {
			/* a store that pushes work but has no DebuginfoService
			 * (a plain WriteRaw receiver): one warning, then no file
			 * is hashed and no RPC made for retry_ns, instead of both
			 * for every new build id */
			pthread_mutex_lock(&d->lock);
			d->paused_until = pp_mono_ns() + d->retry_ns;
			pthread_mutex_unlock(&d->lock);
			pp_log(PP_WARN, "debuginfo uploads paused: the store has no debuginfo service",
			       "retry_in_s=%llu error=%s",
			       (unsigned long long)(d->retry_ns / 1000000000ull), pp_q(err.msg));
		} else if (rc < 0)
			pp_log(PP_WARN, "debuginfo upload failed", "build_id=%s path=%s error=%s",
			       j.id, pp_q(j.path), pp_q(err.msg));
		else
			pp_log(rc ? PP_INFO : PP_DEBUG, "debuginfo",
			       "build_id=%s result=%s file=%s "
			       "bytes=%lld duration_ms=%llu",
			       j.id, res, pp_q(file), (long long)sent,
			       (unsigned long long)((pp_mono_ns() - t0) / 1000000));
		char lbl[32];
		snprintf(lbl, sizeof(lbl), "result=\"%s\"", res);
		metric_inc("pushprof_debuginfo_uploads_total",
			   "Debuginfo upload attempts by result.", lbl, 1);
		free(j.path);

		pthread_mutex_lock(&d->lock);
		struct slot *s = find(d, j.id);
		if (s && s->st != ST_EMPTY) {
			s->st = rc > 0 ? ST_UPLOADED : rc == 0 ? ST_REFUSED : ST_FAILED;
			s->retry_at = pp_mono_ns() + d->retry_ns;
		}
		if (rc > 0) {
			d->st.uploaded++;
			d->st.bytes += (uint64_t)sent;
			d->hour_bytes += (uint64_t)sent;
		} else if (rc == 0) {
			d->st.refused++;
		} else {
			d->st.failed++;
		}
	}
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

int debuginfo_new(const struct debuginfo_opts *o, struct debuginfo **out, struct pp_err *err)
{
	const struct remote_store_config *rs = o->rs;
	struct debuginfo *d = calloc(1, sizeof(*d));
	int r;

	*out = NULL;
	if (!d)
		return pp_errf(err, -ENOMEM, "out of memory");
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->cond, NULL);
	d->timeout_ns = rs->timeout_ns ? rs->timeout_ns : 10000000000ull;
	d->retry_ns = o->retry_ns ? o->retry_ns : 300000000000ull;
	d->max_bytes_per_hour =
		rs->debuginfo_max_bytes_per_hour ? rs->debuginfo_max_bytes_per_hour : 1ull << 30;
	d->qlen = o->queue_len ? o->queue_len : 64;
	d->max_ids = o->max_ids ? o->max_ids : 4096;
	for (d->tabsz = 16; d->tabsz < 2 * d->max_ids; d->tabsz *= 2)
		;
	d->debug_dir = strdup(o->debug_dir ? o->debug_dir : "/usr/lib/debug/.build-id");
	d->q = calloc(d->qlen, sizeof(*d->q));
	d->tab = calloc(d->tabsz, sizeof(*d->tab));
	if (!d->debug_dir || !d->q || !d->tab) {
		r = pp_errf(err, -ENOMEM, "out of memory");
		goto fail;
	}
	r = uploader_new(&(struct uploader_opts){ .rs = rs }, &d->u, err);
	if (r)
		goto fail;
	uploader_set_interrupt(d->u, stopping, d);
	int e = pthread_create(&d->th, NULL, worker, d);
	if (e) {
		r = pp_errf(err, -e, "cannot start the debuginfo thread: %s", strerror(e));
		goto fail;
	}
	pthread_setname_np(d->th, "pushprof-debug"); /* for top -H */
	d->started = true;
	*out = d;
	return 0;
fail:
	debuginfo_free(d);
	return r;
}

void debuginfo_free(struct debuginfo *d)
{
	if (!d)
		return;
	if (d->started) {
		pthread_mutex_lock(&d->lock);
		d->stop = true;
		pthread_cond_broadcast(&d->cond);
		pthread_mutex_unlock(&d->lock);
		pthread_join(d->th, NULL);
	}
	for (unsigned i = 0; d->q && i < d->qn; i++)
		free(d->q[(d->qhead + i) % d->qlen].path);
	uploader_free(d->u);
	pthread_mutex_destroy(&d->lock);
	pthread_cond_destroy(&d->cond);
	free(d->q);
	free(d->tab);
	free(d->debug_dir);
	free(d);
}

void debuginfo_enqueue(struct debuginfo *d, const char *build_id, const char *path)
{
	if (!d || !build_id || !path || !valid_id(build_id))
		return;
	pthread_mutex_lock(&d->lock);
	struct slot *s = find(d, build_id);
	if (s && s->st != ST_EMPTY && (s->st != ST_FAILED || pp_mono_ns() < s->retry_at))
		goto out; /* known: queued, done, refused, or failed recently */
	if (pp_mono_ns() < d->paused_until)
		goto out; /* asked again when the pause is over */
	if (d->qn >= d->qlen || (s && s->st == ST_EMPTY && d->used >= d->max_ids) || !s) {
		d->st.dropped++;
		goto out;
	}
	char *p = strdup(path);
	if (!p)
		goto out;
	if (s->st == ST_EMPTY) {
		snprintf(s->id, sizeof(s->id), "%s", build_id);
		d->used++;
	}
	s->st = ST_QUEUED;
	struct job *j = &d->q[(d->qhead + d->qn) % d->qlen];
	snprintf(j->id, sizeof(j->id), "%s", build_id);
	j->path = p;
	d->qn++;
	d->st.enqueued++;
	pthread_cond_signal(&d->cond);
out:
	pthread_mutex_unlock(&d->lock);
}

void debuginfo_stats(struct debuginfo *d, struct debuginfo_stats *st)
{
	pthread_mutex_lock(&d->lock);
	*st = d->st;
	pthread_mutex_unlock(&d->lock);
}

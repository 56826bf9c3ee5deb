/*
 * procev.c - process events from BPF (see procev.h, bpf/procev.bpf.c).
 */
#include "procev.h"

#include <bpf/libbpf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bpf/procev_abi.h"
#include "bpf/procev.skel.h"

struct procev {
	struct procev_bpf *skel;
	struct ring_buffer *rb;
	uint64_t lost_seen;
	procev_fn fn;
	void *arg;
	int n;
};

static int on_rec(void *ctx, void *data, size_t size)
{
	struct procev *p = ctx;
	struct procev_rec r;

	if (size < sizeof(r))
		return 0;
	memcpy(&r, data, sizeof(r));
	if (r.tgid == 0 || r.tgid > 0x3fffffff ||
	    (r.type != PROCEV_FORK && r.type != PROCEV_EXEC && r.type != PROCEV_COMM &&
	     r.type != PROCEV_EXIT))
		return 0;
	p->fn((enum procev_kind)r.type, (pid_t)r.tgid, p->arg);
	if (r.type != PROCEV_EXIT)
		p->n++;
	return 0;
}

int procev_new(struct procev **out, struct pp_err *err)
{
	struct procev *p = calloc(1, sizeof(*p));
	int rc;

	*out = NULL;
	if (!p)
		return pp_errf(err, -ENOMEM, "out of memory");
	p->skel = procev_bpf__open_and_load();
	if (!p->skel) {
		rc = pp_errf(err, -errno, "loading process-event programs: %s", strerror(errno));
		goto fail;
	}
	if (procev_bpf__attach(p->skel)) {
		rc = pp_errf(err, -errno, "attaching process-event programs: %s", strerror(errno));
		goto fail;
	}
	p->rb = ring_buffer__new(bpf_map__fd(p->skel->maps.events), on_rec, p, NULL);
	if (!p->rb) {
		rc = pp_errf(err, -errno, "process-event ring: %s", strerror(errno));
		goto fail;
	}
	__atomic_store_n(&p->skel->bss->wake_armed, 1, __ATOMIC_RELEASE);
	*out = p;
	return 0;
fail:
	procev_free(p);
	return rc;
}

void procev_free(struct procev *p)
{
	if (!p)
		return;
	ring_buffer__free(p->rb);
	procev_bpf__destroy(p->skel);
	free(p);
}

int procev_drain(struct procev *p, procev_fn fn, void *arg)
{
	uint64_t lost = __atomic_load_n(&p->skel->bss->lost, __ATOMIC_RELAXED);

	p->fn = fn;
	p->arg = arg;
	p->n = 0;
	/* armed before the ring is read: a record that lands after the read
	 * wakes the next poll; one that lands during the read takes the
	 * wake-up and may be read now (procev_armed() tells the caller) */
	__atomic_store_n(&p->skel->bss->wake_armed, 1, __ATOMIC_SEQ_CST);
	ring_buffer__consume(p->rb);
	if (lost != p->lost_seen) {
		p->lost_seen = lost;
		return -ENOBUFS;
	}
	return p->n;
}

int procev_fd(const struct procev *p)
{
	return ring_buffer__epoll_fd(p->rb);
}

bool procev_armed(const struct procev *p)
{
	return __atomic_load_n(&p->skel->bss->wake_armed, __ATOMIC_SEQ_CST) != 0;
}

/*
 * containers.c - the CRI client and its cache of containers and pods (see
 * containers.h); the cgroup side is cgroup.c.
 */
#include "containers.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <grpc/status.h>

#include "grpcc.h"
#include "proto/runtime.pb-c.h"
#include "ppclock.h"

#define CRI_MAX_MESSAGE (64 * 1024 * 1024)
#define META_VALUE_MAX 256

/* ---- CRI client ------------------------------------------------------------------ */

const char *const cri_default_sockets[] = {
	"/run/containerd/containerd.sock",
	"/var/run/containerd/containerd.sock",
	"/run/crio/crio.sock",
	"/var/run/crio/crio.sock",
	"/run/k3s/containerd/containerd.sock",
	"/var/snap/microk8s/common/run/containerd.sock",
	"/run/cri-dockerd.sock",
	"/var/run/cri-dockerd.sock",
	NULL,
};

const char *cri_socket_detect(void)
{
	struct stat st;

	for (size_t i = 0; cri_default_sockets[i]; i++)
		if (stat(cri_default_sockets[i], &st) == 0 && S_ISSOCK(st.st_mode))
			return cri_default_sockets[i];
	return NULL;
}

struct cri_pod {
	char *id, *name, *ns, *uid;
	struct pp_labels labels, annotations;
};

struct cri_ctr {
	char *id, *sandbox_id, *name;
	/* the image as the pod spec names it ("" unknown); image_id: the id to
	 * look up with ListImages while image is "" */
	char *image, *image_id;
};

struct containers {
	pthread_mutex_t mu;
	bool enabled;
	char socket[256];
	struct grpcc_channel *ch; /* calls under mu: one at a time */
	uint64_t ttl_ns, timeout_ns;
	uint64_t last_attempt_ns; /* 0 = never */
	bool version_known;
	/* ids that were unknown right after a refresh: no refresh for them until the TTL */
	char miss[32][CONTAINER_ID_MAX + 1];
	unsigned nmiss;
	struct cri_ctr *ctrs;
	size_t nctrs;
	struct cri_pod *pods;
	size_t npods;
	struct containers_stats st;
};

static int cri_call(struct containers *c, const char *method, const ProtobufCMessage *req,
		    uint8_t **resp, size_t *resp_len, struct pp_err *err)
{
	size_t n = protobuf_c_message_get_packed_size(req);
	uint8_t *buf = malloc(n ? n : 1);
	struct grpcc_result r;

	*resp = NULL;
	*resp_len = 0;
	if (!buf)
		return pp_errf(err, -ENOMEM, "out of memory");
	protobuf_c_message_pack(req, buf);
	struct grpcc_call call = {
		.method = method,
		.msg = buf,
		.len = n,
		.timeout_ns = c->timeout_ns,
		.want_resp = true,
	};
	int rc = grpcc_call(c->ch, &call, &r, err);
	free(buf);
	if (rc)
		return rc;
	if (r.status != GRPC_STATUS_OK)
		return pp_errf(err, r.status == GRPC_STATUS_DEADLINE_EXCEEDED ? -ETIMEDOUT : -EIO,
			       "%s on %s: gRPC status %d: %.200s", method, c->socket, r.status,
			       r.details);
	*resp = r.resp;
	*resp_len = r.resp_len;
	return 0;
}

/* One CRI call and its response unpacked with desc into *resp (the caller
 * frees it with protobuf_c_message_free_unpacked()). 0, or the call's error
 * or -EPROTO for a response that does not unpack, with err set. */
static int cri_rpc(struct containers *c, const char *method, const ProtobufCMessage *req,
		   const ProtobufCMessageDescriptor *desc, void **resp, struct pp_err *err)
{
	uint8_t *buf;
	size_t len;
	int rc = cri_call(c, method, req, &buf, &len, err);

	*resp = NULL;
	if (rc)
		return rc;
	*resp = protobuf_c_message_unpack(desc, NULL, len, buf);
	free(buf);
	if (!*resp)
		return pp_errf(err, -EPROTO, "%s: malformed response", strrchr(method, '/') + 1);
	return 0;
}

static void free_lists(struct cri_ctr *ctrs, size_t nctrs, struct cri_pod *pods, size_t npods)
{
	for (size_t i = 0; i < nctrs; i++) {
		free(ctrs[i].id);
		free(ctrs[i].sandbox_id);
		free(ctrs[i].name);
		free(ctrs[i].image);
		free(ctrs[i].image_id);
	}
	free(ctrs);
	for (size_t i = 0; i < npods; i++) {
		free(pods[i].id);
		free(pods[i].name);
		free(pods[i].ns);
		free(pods[i].uid);
		pp_labels_free(&pods[i].labels);
		pp_labels_free(&pods[i].annotations);
	}
	free(pods);
}

static int cmp_ctr(const void *a, const void *b)
{
	return strcmp(((const struct cri_ctr *)a)->id, ((const struct cri_ctr *)b)->id);
}

static int cmp_pod(const void *a, const void *b)
{
	return strcmp(((const struct cri_pod *)a)->id, ((const struct cri_pod *)b)->id);
}

/* Kubernetes' own keys are not user pod labels. */
static bool internal_key(const char *k)
{
	return !strncmp(k, "io.kubernetes.", 14) || !strncmp(k, "io.cri-containerd.", 18) ||
	       !strcmp(k, "kubectl.kubernetes.io/last-applied-configuration");
}

static char *dup_or_empty(const char *s)
{
	return strdup(s ? s : "");
}

static int fetch_version(struct containers *c, struct pp_err *err)
{
	Runtime__V1__VersionRequest req = RUNTIME__V1__VERSION_REQUEST__INIT;
	Runtime__V1__VersionResponse *vr;
	void *m;
	int rc;

	req.version = "v1";
	rc = cri_rpc(c, "/runtime.v1.RuntimeService/Version", &req.base,
		     &runtime__v1__version_response__descriptor, &m, err);
	if (rc)
		return rc;
	vr = m;
	snprintf(c->st.runtime_name, sizeof(c->st.runtime_name), "%s", vr->runtime_name);
	snprintf(c->st.runtime_version, sizeof(c->st.runtime_version), "%s", vr->runtime_version);
	runtime__v1__version_response__free_unpacked(vr, NULL);
	c->version_known = true;
	return 0;
}

static const struct cri_ctr *find_ctr(const struct containers *c, const char *id)
{
	struct cri_ctr key = { .id = (char *)id };
	return c->nctrs ? bsearch(&key, c->ctrs, c->nctrs, sizeof(key), cmp_ctr) : NULL;
}

/* An image id ("sha256:<64 hex>" or 64 hex) rather than a name users wrote. */
static bool image_is_id(const char *s)
{
	if (!strncmp(s, "sha256:", 7))
		s += 7;
	return strlen(s) == 64 && strspn(s, "0123456789abcdefABCDEF") == 64;
}

/*
 * The image a container's pod spec names, as __meta_kubernetes_pod_container_image
 * has it: ImageSpec.user_specified_image (kubelet 1.28+, if the runtime
 * keeps it), else ImageSpec.image unless it is an id (kubelet passes the
 * resolved image id there; CRI-O and tools pass the name). NULL: only an
 * id is known, resolved by resolve_images().
 */
static const char *listed_image(const Runtime__V1__Container *x)
{
	const Runtime__V1__ImageSpec *im = x->image;
	if (im && im->user_specified_image && im->user_specified_image[0])
		return im->user_specified_image;
	if (im && im->image && im->image[0] && !image_is_id(im->image))
		return im->image;
	return NULL;
}

/*
 * Name the containers listed by image id only: one ListImages call, the
 * image's first repo tag (what the runtime's ContainerStatus and so the
 * pod's status.containerStatuses[].image show), else its first digest.
 * A failure leaves those images unnamed; it is counted, the refresh stands.
 */
static void resolve_images(struct containers *c, struct cri_ctr *ctrs, size_t n)
{
	Runtime__V1__ListImagesRequest req = RUNTIME__V1__LIST_IMAGES_REQUEST__INIT;
	Runtime__V1__ListImagesResponse *r;
	struct pp_err err = { 0 };
	void *m;

	if (cri_rpc(c, "/runtime.v1.ImageService/ListImages", &req.base,
		    &runtime__v1__list_images_response__descriptor, &m, &err)) {
		c->st.errors++;
		snprintf(c->st.last_error, sizeof(c->st.last_error), "%.255s", err.msg);
		return;
	}
	r = m;
	for (size_t i = 0; i < n; i++) {
		if (ctrs[i].image[0] || !ctrs[i].image_id[0])
			continue;
		for (size_t k = 0; k < r->n_images; k++) {
			const Runtime__V1__Image *im = r->images[k];
			if (!im->id || strcmp(im->id, ctrs[i].image_id))
				continue;
			const char *name = im->n_repo_tags	? im->repo_tags[0]
					   : im->n_repo_digests ? im->repo_digests[0]
								: NULL;
			char *v = name ? strdup(name) : NULL;
			if (v) {
				free(ctrs[i].image);
				ctrs[i].image = v;
			}
			break;
		}
	}
	runtime__v1__list_images_response__free_unpacked(r, NULL);
}

/* Called with mu held. */
static int refresh_locked(struct containers *c, struct pp_err *uerr)
{
	struct pp_err local = { 0 };
	struct pp_err *err = uerr ? uerr : &local;
	Runtime__V1__ListPodSandboxRequest preq = RUNTIME__V1__LIST_POD_SANDBOX_REQUEST__INIT;
	Runtime__V1__ListContainersRequest creq = RUNTIME__V1__LIST_CONTAINERS_REQUEST__INIT;
	Runtime__V1__ListPodSandboxResponse *pr = NULL;
	Runtime__V1__ListContainersResponse *cr = NULL;
	struct cri_pod *pods = NULL;
	struct cri_ctr *ctrs = NULL;
	size_t npods = 0, nctrs = 0, unnamed = 0;
	void *m;
	int rc;

	c->last_attempt_ns = pp_mono_ns();
	if (!c->version_known) {
		rc = fetch_version(c, err);
		if (rc)
			goto fail;
	}
	rc = cri_rpc(c, "/runtime.v1.RuntimeService/ListPodSandbox", &preq.base,
		     &runtime__v1__list_pod_sandbox_response__descriptor, &m, err);
	if (rc)
		goto fail;
	pr = m;
	rc = cri_rpc(c, "/runtime.v1.RuntimeService/ListContainers", &creq.base,
		     &runtime__v1__list_containers_response__descriptor, &m, err);
	if (rc)
		goto fail;
	cr = m;

	pods = calloc(pr->n_items ? pr->n_items : 1, sizeof(*pods));
	ctrs = calloc(cr->n_containers ? cr->n_containers : 1, sizeof(*ctrs));
	if (!pods || !ctrs)
		goto oom;
	for (size_t i = 0; i < pr->n_items; i++) {
		const Runtime__V1__PodSandbox *s = pr->items[i];
		const Runtime__V1__PodSandboxMetadata *md = s->metadata;
		struct cri_pod *p = &pods[npods++];
		p->id = dup_or_empty(s->id);
		p->name = dup_or_empty(md ? md->name : NULL);
		p->ns = dup_or_empty(md ? md->namespace_ : NULL);
		p->uid = dup_or_empty(md ? md->uid : NULL);
		if (!p->id || !p->name || !p->ns || !p->uid)
			goto oom;
		for (size_t k = 0; k < s->n_labels; k++)
			if (s->labels[k]->key && s->labels[k]->value &&
			    !internal_key(s->labels[k]->key) &&
			    pp_labels_set(&p->labels, s->labels[k]->key, s->labels[k]->value))
				goto oom;
		for (size_t k = 0; k < s->n_annotations; k++)
			if (s->annotations[k]->key && s->annotations[k]->value &&
			    !internal_key(s->annotations[k]->key) &&
			    strlen(s->annotations[k]->value) <= META_VALUE_MAX &&
			    pp_labels_set(&p->annotations, s->annotations[k]->key,
					  s->annotations[k]->value))
				goto oom;
	}
	for (size_t i = 0; i < cr->n_containers; i++) {
		const Runtime__V1__Container *x = cr->containers[i];
		struct cri_ctr *t = &ctrs[nctrs++];
		t->id = dup_or_empty(x->id);
		t->sandbox_id = dup_or_empty(x->pod_sandbox_id);
		t->name = dup_or_empty(x->metadata ? x->metadata->name : NULL);
		const char *img = listed_image(x);
		const struct cri_ctr *old = img ? NULL : find_ctr(c, t->id);
		if (!img && old && old->image[0])
			img = old->image; /* resolved at an earlier refresh */
		t->image = dup_or_empty(img);
		t->image_id = dup_or_empty(img ? NULL
					   : x->image && x->image->image && x->image->image[0]
						   ? x->image->image
						   : x->image_ref);
		if (!t->id || !t->sandbox_id || !t->name || !t->image || !t->image_id)
			goto oom;
		unnamed += !img && t->image_id[0];
	}
	if (unnamed)
		resolve_images(c, ctrs, nctrs);
	c->nmiss = 0;
	qsort(pods, npods, sizeof(*pods), cmp_pod);
	qsort(ctrs, nctrs, sizeof(*ctrs), cmp_ctr);
	free_lists(c->ctrs, c->nctrs, c->pods, c->npods);
	c->ctrs = ctrs;
	c->nctrs = nctrs;
	c->pods = pods;
	c->npods = npods;
	c->st.refreshes++;
	c->st.connected = true;
	c->st.containers = nctrs;
	c->st.pods = npods;
	runtime__v1__list_pod_sandbox_response__free_unpacked(pr, NULL);
	runtime__v1__list_containers_response__free_unpacked(cr, NULL);
	return 0;
oom:
	rc = pp_errf(err, -ENOMEM, "out of memory");
fail:
	free_lists(ctrs, nctrs, pods, npods);
	if (pr)
		runtime__v1__list_pod_sandbox_response__free_unpacked(pr, NULL);
	if (cr)
		runtime__v1__list_containers_response__free_unpacked(cr, NULL);
	c->st.errors++;
	c->st.connected = false;
	snprintf(c->st.last_error, sizeof(c->st.last_error), "%.255s", err->msg);
	return rc;
}

int containers_new(const struct containers_opts *o, struct containers **out, struct pp_err *err)
{
	static const struct containers_opts defaults = { 0 };
	struct containers *c = calloc(1, sizeof(*c));
	const char *socket;
	char target[300];

	*out = NULL;
	if (!o)
		o = &defaults;
	if (!c)
		return pp_errf(err, -ENOMEM, "out of memory");
	pthread_mutex_init(&c->mu, NULL);
	c->ttl_ns = o->ttl_ns ? o->ttl_ns : 10ull * 1000000000ull;
	c->timeout_ns = o->timeout_ns ? o->timeout_ns : 2ull * 1000000000ull;
	socket = o->socket;
	if (!socket || !*socket)
		socket = cri_socket_detect();
	if (socket && !strncmp(socket, "unix://", 7))
		socket += 7;
	if (!socket || !*socket || !strcmp(socket, "none")) {
		*out = c; /* cgroup-only */
		return 0;
	}
	if (strlen(socket) >= sizeof(c->socket)) {
		containers_free(c);
		return pp_errf(err, -ENAMETOOLONG, "CRI socket path too long: %.64s...", socket);
	}
	strcpy(c->socket, socket);
	strcpy(c->st.socket, socket);
	snprintf(target, sizeof(target), "unix://%s", socket);

	struct grpcc_channel_opts co = { .target = target, .max_receive_bytes = CRI_MAX_MESSAGE };
	int rc = grpcc_channel_new(&co, &c->ch, err);
	if (rc) {
		containers_free(c);
		return rc;
	}
	c->enabled = true;
	*out = c;
	return 0;
}

void containers_free(struct containers *c)
{
	if (!c)
		return;
	free_lists(c->ctrs, c->nctrs, c->pods, c->npods);
	grpcc_channel_free(c->ch);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

int containers_refresh(struct containers *c, struct pp_err *err)
{
	int rc;

	if (!c->enabled)
		return pp_errf(err, -ENOTCONN, "no CRI socket configured or found");
	pthread_mutex_lock(&c->mu);
	rc = refresh_locked(c, err);
	pthread_mutex_unlock(&c->mu);
	return rc;
}

void containers_get_stats(struct containers *c, struct containers_stats *st)
{
	pthread_mutex_lock(&c->mu);
	*st = c->st;
	pthread_mutex_unlock(&c->mu);
}

static const struct cri_pod *find_pod(const struct containers *c, const char *id)
{
	struct cri_pod key = { .id = (char *)id };
	return c->npods ? bsearch(&key, c->pods, c->npods, sizeof(key), cmp_pod) : NULL;
}

static const struct cri_pod *find_pod_by_uid(const struct containers *c, const char *uid)
{
	const struct cri_pod *best = NULL;
	for (size_t i = 0; i < c->npods; i++)
		if (!strcmp(c->pods[i].uid, uid))
			best = &c->pods[i];
	return best;
}

static int add_prefixed(struct pp_labels *out, const char *prefix, const struct pp_labels *src)
{
	char name[512];

	for (size_t i = 0; i < src->n; i++) {
		snprintf(name, sizeof(name), "%s%s", prefix, src->v[i].name);
		meta_label_sanitize(name);
		if (pp_labels_set(out, name, src->v[i].value))
			return -ENOMEM;
	}
	return 0;
}

int containers_meta_labels_ci(struct containers *c, const struct cgroup_info *ci,
			      struct pp_labels *out)
{
	int rc = cgroup_info_meta_labels(ci, out);

	if (rc || !c || !c->enabled || (!ci->container_id[0] && !ci->pod_uid[0]))
		return rc;

	pthread_mutex_lock(&c->mu);
	const char *id = ci->container_id;
	uint64_t now = pp_mono_ns();
	bool stale = !c->last_attempt_ns || now - c->last_attempt_ns >= c->ttl_ns;
	const struct cri_ctr *t = id[0] ? find_ctr(c, id) : NULL;
	/* a sandbox's own (pause) process carries the sandbox id */
	const struct cri_pod *p = id[0] && !t ? find_pod(c, id) : NULL;
	if (!stale && id[0] && !t && !p && c->st.connected &&
	    now - c->last_attempt_ns >= 1000000000ull) {
		/* unknown id: maybe started since the last list; once per id per TTL */
		bool missed = false;
		for (unsigned i = 0; i < c->nmiss && i < 32 && !missed; i++)
			missed = !strcmp(c->miss[i], id);
		stale = !missed;
	}
	if (stale) {
		struct pp_err e = { 0 };
		refresh_locked(c, &e); /* failure: counted, cgroup labels still go out */
		t = id[0] ? find_ctr(c, id) : NULL;
		p = id[0] && !t ? find_pod(c, id) : NULL;
		if (id[0] && !t && !p && c->st.connected)
			strcpy(c->miss[c->nmiss++ % 32], id);
	}
	if (id[0]) {
		c->st.lookups++;
		if (t || p)
			c->st.hits++;
	}
	if (t)
		p = find_pod(c, t->sandbox_id);
	if (!p && ci->pod_uid[0])
		p = find_pod_by_uid(c, ci->pod_uid);
	if (t && t->name[0])
		rc |= pp_labels_set(out, "__meta_kubernetes_pod_container_name", t->name);
	if (t && t->image[0])
		rc |= pp_labels_set(out, "__meta_kubernetes_pod_container_image", t->image);
	if (t && !ci->runtime[0] && c->st.runtime_name[0]) {
		/* cgroupfs paths hold a bare id: the runtime that listed it says who runs it */
		char v[CONTAINER_ID_MAX + 80];
		snprintf(v, sizeof(v), "%s://%s", c->st.runtime_name, ci->container_id);
		rc |= pp_labels_set(out, "__meta_kubernetes_pod_container_id", v);
		rc |= pp_labels_set(out, "__meta_container_runtime", c->st.runtime_name);
	}
	if (p) {
		if (p->ns[0])
			rc |= pp_labels_set(out, "__meta_kubernetes_namespace", p->ns);
		if (p->name[0])
			rc |= pp_labels_set(out, "__meta_kubernetes_pod_name", p->name);
		if (p->uid[0])
			rc |= pp_labels_set(out, "__meta_kubernetes_pod_uid", p->uid);
		rc |= add_prefixed(out, "__meta_kubernetes_pod_label_", &p->labels);
		rc |= add_prefixed(out, "__meta_kubernetes_pod_annotation_", &p->annotations);
	}
	pthread_mutex_unlock(&c->mu);
	return rc ? -ENOMEM : 0;
}

int containers_meta_labels(struct containers *c, pid_t pid, struct pp_labels *out)
{
	struct cgroup_info ci;
	int rc = cgroup_info_for_pid(pid, &ci);

	if (rc)
		return rc;
	return containers_meta_labels_ci(c, &ci, out);
}

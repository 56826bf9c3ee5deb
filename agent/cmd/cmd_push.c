/*
 * cmd_push.c - `pushprof push`: send existing pprof files to a
 * Parca-compatible server in one WriteRaw call (one series per file, the
 * same labels on each), like parca-push.
 *
 * Everything that can be checked locally is checked before any network
 * call: flags, labels (__name__ required, Prometheus names) and every file
 * (must parse as pprof and pass Parca's rules). Exit 0 when delivered, 1
 * when delivery failed, 2 for bad usage, settings or input.
 *
 * Labels: remote_store settings and external_labels come from --config
 * (defaults without it); flags override the file; -l overrides
 * external_labels. The bearer token is only ever read from a file or env
 * PUSHPROF_BEARER_TOKEN, never from argv.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "config.h"
#include "fileutil.h"
#include "labels.h"
#include "pprof.h"
#include "ppclock.h"
#include "upload.h"

#define PUSH_MAX_FILE_BYTES (64u << 20)

/*
 * A command must end. Each call is bounded (3 x --timeout per request,
 * upload.c), but gRPC's own waits are not ours to bound: draining a
 * cancelled call, closing the channel, grpc_shutdown(). Once a push ran
 * past a 60 s limit with no line printed. The watchdog ends the process
 * with exit 1 and says which stage did not return, once the stage's
 * deadline (moved by the main thread) has passed.
 */
#define PUSH_GRACE_NS 15000000000ull /* connect, TLS, close and shutdown */

static _Atomic uint64_t wd_deadline; /* CLOCK_MONOTONIC ns; 0: not armed */
static const char *_Atomic wd_stage = "starting";
static uint64_t wd_start;

static void wd_set(const char *stage, uint64_t budget_ns)
{
	atomic_store(&wd_stage, stage);
	atomic_store(&wd_deadline, pp_mono_ns() + budget_ns);
}

static void *watchdog(void *arg)
{
	(void)arg;
	for (;;) {
		uint64_t d = atomic_load(&wd_deadline), now = pp_mono_ns();
		if (d && now >= d) {
			fprintf(stderr,
				"pushprof push: gave up %.0f s after the start: %s did not "
				"return in time (a gRPC wait that never ended)\n",
				(double)(now - wd_start) / 1e9, atomic_load(&wd_stage));
			fflush(stderr);
			_exit(EXIT_FAIL);
		}
		usleep(200000);
	}
	return NULL;
}

static void wd_start_thread(void)
{
	pthread_t t;
	pthread_attr_t a;

	wd_start = pp_mono_ns();
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&a, 64 << 10);
	if (pthread_create(&t, &a, watchdog, NULL))
		fprintf(stderr, "pushprof push: no watchdog thread (%s)\n", strerror(errno));
	pthread_attr_destroy(&a);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: pushprof push [options] -l __name__=NAME [-l KEY=VALUE ...] FILE...\n"
		"\n"
		"Send pprof files (plain or gzip) to a Parca-compatible server with one\n"
		"WriteRaw call: one series per file, all with the given labels. Every file is\n"
		"validated (Parca's rules) before anything is sent.\n"
		"\n"
		"options:\n"
		"  -l, --label KEY=VALUE        series label (repeatable); __name__ is required\n"
		"      --config FILE            take remote_store and external_labels from FILE\n"
		"      --remote-store HOST:PORT server address (overrides the config)\n"
		"      --insecure               plaintext (no TLS)\n"
		"      --insecure-skip-verify   TLS without verifying the server certificate\n"
		"      --ca-file FILE           PEM CA bundle (default: system roots)\n"
		"      --cert-file FILE         client certificate (mTLS), with --key-file\n"
		"      --key-file FILE          client private key\n"
		"      --server-name NAME       TLS server name to verify instead of HOST\n"
		"      --bearer-token-file FILE send 'authorization: Bearer <token>' (token read\n"
		"                               from FILE; env PUSHPROF_BEARER_TOKEN otherwise)\n"
		"      --header KEY=VALUE       extra gRPC metadata (repeatable)\n"
		"      --timeout DURATION       per-call deadline, e.g. 10s (default 10s)\n"
		"      --max-request-bytes SIZE split into requests of at most SIZE (default "
		"4MiB)\n"
		"  -h, --help                   this help\n"
		"\n"
		"exit status: 0 delivered, 1 delivery failed, 2 bad usage, settings or file.\n");
}

static int set_str(char **dst, const char *v)
{
	char *d = strdup(v);

	if (!d)
		return -ENOMEM;
	free(*dst);
	*dst = d;
	return 0;
}

static int split_kv(const char *arg, char **k, const char **v)
{
	const char *eq = strchr(arg, '=');

	if (!eq || eq == arg)
		return -EINVAL;
	*k = strndup(arg, eq - arg);
	*v = eq + 1;
	return *k ? 0 : -ENOMEM;
}

enum {
	OPT_CONFIG = 256,
	OPT_REMOTE,
	OPT_INSECURE,
	OPT_SKIP_VERIFY,
	OPT_CA,
	OPT_CERT,
	OPT_KEY,
	OPT_SERVER_NAME,
	OPT_TOKEN_FILE,
	OPT_HEADER,
	OPT_TIMEOUT,
	OPT_MAX_REQ,
};

int cmd_push(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "label", required_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },
		{ "config", required_argument, NULL, OPT_CONFIG },
		{ "remote-store", required_argument, NULL, OPT_REMOTE },
		{ "insecure", no_argument, NULL, OPT_INSECURE },
		{ "insecure-skip-verify", no_argument, NULL, OPT_SKIP_VERIFY },
		{ "ca-file", required_argument, NULL, OPT_CA },
		{ "cert-file", required_argument, NULL, OPT_CERT },
		{ "key-file", required_argument, NULL, OPT_KEY },
		{ "server-name", required_argument, NULL, OPT_SERVER_NAME },
		{ "bearer-token-file", required_argument, NULL, OPT_TOKEN_FILE },
		{ "header", required_argument, NULL, OPT_HEADER },
		{ "timeout", required_argument, NULL, OPT_TIMEOUT },
		{ "max-request-bytes", required_argument, NULL, OPT_MAX_REQ },
		{ NULL, 0, NULL, 0 },
	};
	const char *config_path = NULL, *remote = NULL, *ca = NULL, *cert = NULL, *key = NULL;
	const char *server_name = NULL, *token_file = NULL;
	bool insecure = false, skip_verify = false;
	uint64_t timeout_ns = 0, max_req = 0;
	struct pp_labels labels = { 0 }, headers = { 0 };
	struct config cfg = { 0 };
	struct pp_err err = { 0 };
	struct upload_series *series = NULL;
	uint8_t **bufs = NULL;
	struct uploader *up = NULL;
	int rc = EXIT_USAGE, c, nfiles = 0;
	bool have_cfg = false;

	/* getopt_long accepts unambiguous prefixes: "--bearer-token=SECRET"
	 * would become a token *file* name and end up in an error message.
	 * Only exact option names are allowed. */
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {
		if (strncmp(argv[i], "--", 2))
			continue;
		size_t nl = strcspn(argv[i] + 2, "=");
		bool known = false;
		for (const struct option *o = opts; o->name && !known; o++)
			known = strlen(o->name) == nl && !strncmp(o->name, argv[i] + 2, nl);
		if (!known) {
			fprintf(stderr, "pushprof push: unknown option \"--%.*s\"\n", (int)nl,
				argv[i] + 2);
			usage(stderr);
			goto out;
		}
		/* skip the value of an option given as "--opt VALUE" */
		bool takes_value = false;
		for (const struct option *o = opts; o->name; o++)
			if (o->has_arg == required_argument && strlen(o->name) == nl &&
			    !strncmp(o->name, argv[i] + 2, nl))
				takes_value = true;
		if (takes_value && !argv[i][2 + nl])
			i++;
	}
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":l:h", opts, NULL)) != -1) {
		char *k = NULL;
		const char *v;
		switch (c) {
		case 'h':
			usage(stdout);
			rc = EXIT_OK;
			goto out;
		case 'l':
		case OPT_HEADER:
			if (split_kv(optarg, &k, &v)) {
				fprintf(stderr, "pushprof push: %s wants KEY=VALUE, got \"%s\"\n",
					c == 'l' ? "-l" : "--header", optarg);
				goto out;
			}
			if (c == 'l' && !pp_label_name_valid(k)) {
				fprintf(stderr,
					"pushprof push: invalid label name \"%s\" (want "
					"[a-zA-Z_][a-zA-Z0-9_]*)\n",
					k);
				free(k);
				goto out;
			}
			if (c == 'l' && pp_labels_get(&labels, k)) {
				fprintf(stderr, "pushprof push: label \"%s\" given twice\n", k);
				free(k);
				goto out;
			}
			if (pp_labels_set(c == 'l' ? &labels : &headers, k, v)) {
				free(k);
				fprintf(stderr, "pushprof push: out of memory\n");
				rc = EXIT_FAIL;
				goto out;
			}
			free(k);
			break;
		case OPT_CONFIG:
			config_path = optarg;
			break;
		case OPT_REMOTE:
			remote = optarg;
			break;
		case OPT_INSECURE:
			insecure = true;
			break;
		case OPT_SKIP_VERIFY:
			skip_verify = true;
			break;
		case OPT_CA:
			ca = optarg;
			break;
		case OPT_CERT:
			cert = optarg;
			break;
		case OPT_KEY:
			key = optarg;
			break;
		case OPT_SERVER_NAME:
			server_name = optarg;
			break;
		case OPT_TOKEN_FILE:
			token_file = optarg;
			break;
		case OPT_TIMEOUT:
			if (parse_duration(optarg, &timeout_ns) || !timeout_ns) {
				fprintf(stderr, "pushprof push: --timeout: bad duration \"%s\"\n",
					optarg);
				goto out;
			}
			break;
		case OPT_MAX_REQ:
			if (parse_size(optarg, &max_req) || !max_req) {
				fprintf(stderr,
					"pushprof push: --max-request-bytes: bad size \"%s\"\n",
					optarg);
				goto out;
			}
			break;
		case ':': {
			const char *on = "?";
			for (const struct option *o = opts; o->name; o++)
				if (o->val == optopt)
					on = o->name;
			fprintf(stderr, "pushprof push: option --%s needs a value\n", on);
			goto out;
		}
		default:
			if (optopt)
				fprintf(stderr, "pushprof push: unknown option \"-%c\"\n", optopt);
			else
				fprintf(stderr, "pushprof push: unknown option\n");
			usage(stderr);
			goto out;
		}
	}
	nfiles = argc - optind;
	if (nfiles <= 0) {
		fprintf(stderr, "pushprof push: no files given\n");
		usage(stderr);
		goto out;
	}

	if (config_path ? config_load(config_path, &cfg, &err) : config_defaults(&cfg, &err)) {
		fprintf(stderr, "pushprof push: %s\n", err.msg);
		goto out;
	}
	have_cfg = true;
	struct remote_store_config *rs = &cfg.remote_store;
	if ((remote && set_str(&rs->address, remote)) || (ca && set_str(&rs->ca_file, ca)) ||
	    (cert && set_str(&rs->cert_file, cert)) || (key && set_str(&rs->key_file, key)) ||
	    (server_name && set_str(&rs->server_name, server_name)) ||
	    (token_file && set_str(&rs->bearer_token_file, token_file)) ||
	    pp_labels_copy(&rs->headers, &headers)) {
		fprintf(stderr, "pushprof push: out of memory\n");
		rc = EXIT_FAIL;
		goto out;
	}
	if (insecure)
		rs->insecure = true;
	if (skip_verify)
		rs->insecure_skip_verify = true;
	if (timeout_ns)
		rs->timeout_ns = timeout_ns;
	if (max_req)
		rs->max_request_bytes = max_req;
	if (!*rs->address) {
		fprintf(stderr, "pushprof push: no server: give --remote-store HOST:PORT or "
				"remote_store.address in --config\n");
		goto out;
	}
	if (rs->insecure && (*rs->ca_file || *rs->cert_file || rs->insecure_skip_verify)) {
		fprintf(stderr, "pushprof push: --insecure (plaintext) cannot be combined with "
				"TLS settings (CA, client certificate, --insecure-skip-verify)\n");
		goto out;
	}
	if (!!*rs->cert_file != !!*rs->key_file) {
		fprintf(stderr, "pushprof push: --cert-file and --key-file go together\n");
		goto out;
	}

	/* Series labels: the config's external_labels, then -l on top. */
	struct pp_labels all = { 0 };
	if (pp_labels_copy(&all, &cfg.external_labels) || pp_labels_copy(&all, &labels)) {
		pp_labels_free(&all);
		fprintf(stderr, "pushprof push: out of memory\n");
		rc = EXIT_FAIL;
		goto out;
	}
	pp_labels_free(&labels);
	labels = all;
	const char *name = pp_labels_get(&labels, "__name__");
	if (!name || !*name) {
		fprintf(stderr, "pushprof push: a __name__ label is required (e.g. "
				"-l __name__=parca_agent or -l __name__=memory)\n");
		goto out;
	}

	series = calloc(nfiles, sizeof(*series));
	bufs = calloc(nfiles, sizeof(*bufs));
	if (!series || !bufs) {
		fprintf(stderr, "pushprof push: out of memory\n");
		rc = EXIT_FAIL;
		goto out;
	}
	for (int i = 0; i < nfiles; i++) {
		const char *path = argv[optind + i];
		uint8_t *buf;
		size_t len = 0;
		char *text;
		if (pp_read_small_file(path, PUSH_MAX_FILE_BYTES, &text, &len, NULL, "profile",
				       &err)) {
			fprintf(stderr, "pushprof push: %s\n", err.msg);
			goto out;
		}
		buf = (uint8_t *)text;
		bufs[i] = buf;
		if (pprof_validate(buf, len, &err)) {
			fprintf(stderr, "pushprof push: %s: not a valid pprof profile: %s\n", path,
				err.msg);
			goto out;
		}
		if (!pprof_is_gzip(buf, len)) {
			uint8_t *gz;
			size_t gzlen;
			if (pprof_gzip(buf, len, &gz, &gzlen, &err)) {
				fprintf(stderr, "pushprof push: %s: %s\n", path, err.msg);
				rc = EXIT_FAIL;
				goto out;
			}
			free(buf);
			bufs[i] = buf = gz;
			len = gzlen;
		}
		series[i] = (struct upload_series){ &labels, buf, len };
	}

	/* every request may take its 3 attempts */
	wd_start_thread();
	wd_set("the delivery", (uint64_t)nfiles * 3 * rs->timeout_ns + PUSH_GRACE_NS);
	if (uploader_new(&(struct uploader_opts){ .rs = rs }, &up, &err)) {
		fprintf(stderr, "pushprof push: %s\n", err.msg);
		goto out;
	}
	size_t sent = 0;
	uint64_t t0 = pp_mono_ns();
	int wrc = uploader_write(up, series, nfiles, &sent, &err);
	double ms = (double)(pp_mono_ns() - t0) / 1e6;
	const struct upload_stats *st = uploader_stats(up);
	if (wrc) {
		fprintf(stderr,
			"pushprof push: delivery failed after %.0f ms (%zu of %d profiles "
			"delivered): %s\n",
			ms, sent, nfiles, err.msg);
		rc = EXIT_FAIL;
		goto out;
	}
	printf("pushed %d profile%s to %s in %.1f ms (%llu request%s, %llu bytes, %llu "
	       "retr%s)\n",
	       nfiles, nfiles == 1 ? "" : "s", rs->address, ms, (unsigned long long)st->requests_ok,
	       st->requests_ok == 1 ? "" : "s", (unsigned long long)st->bytes_sent,
	       (unsigned long long)st->retries, st->retries == 1 ? "y" : "ies");
	rc = EXIT_OK;
out:
	if (up)
		wd_set("closing the connection", PUSH_GRACE_NS);
	uploader_free(up);
	if (bufs)
		for (int i = 0; i < nfiles; i++)
			free(bufs[i]);
	free(bufs);
	free(series);
	pp_labels_free(&labels);
	pp_labels_free(&headers);
	if (have_cfg)
		config_free(&cfg);
	return rc;
}

/*
 * cmd_run.c - `pushprof run [--config FILE] [--duration D] [flags]`: load the
 * config (or the built-in defaults), apply the flags over it, and run the
 * agent loop until a signal (or D has passed).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "commands.h"
#include "config.h"
#include "cpu.h" /* CPU_HZ_MIN, CPU_HZ_MAX */
#include "log.h"

/* a macro's value as a string literal, for help texts */
#define PP_STR(x) #x
#define PP_XSTR(x) PP_STR(x)

/*
 * Every flag of `run`, for parsing and for the usage text alike: run's own
 * (--config, --duration) and those that override one config key, named as
 * Parca Agent names them so that its command lines mostly carry over.
 */
enum flag_kind { FLAG_CONFIG, FLAG_DURATION, FLAG_KEY, FLAG_REFUSED };
static const struct {
	const char *flag;
	enum flag_kind kind;
	const char *key;     /* FLAG_KEY: the config key it sets */
	const char *arg;     /* the value's name in the usage text */
	bool plain;	     /* YAML plain scalar (a bool) rather than a string */
	bool optional_value; /* may be given bare: --remote-store-insecure */
	const char *help;    /* continuation lines indented by 6 */
} flags[] = {
	{ "--config", FLAG_CONFIG, NULL, "FILE", false, false,
	  "config file (default " PUSHPROF_DEFAULT_CONFIG "; if that does not exist\n"
	  "      and --config is not given, the built-in defaults: config/pushprof.yaml\n"
	  "      as shipped)" },
	{ "--config-path", FLAG_CONFIG, NULL, "FILE", false, false,
	  "Parca Agent's name for --config" },
	{ "--duration", FLAG_DURATION, NULL, "D", false, false,
	  "stop after D (e.g. 30s); SIGINT/SIGTERM stop too, after building and\n"
	  "      flushing the current window" },
	{ "--node", FLAG_KEY, "node", "VALUE", false, false,
	  "node name label (default $NODE_NAME, else the hostname)" },
	{ "--remote-store-address", FLAG_KEY, "remote_store.address", "VALUE", false, false,
	  "the store: host:port (gRPC), or a URL for Pyroscope over HTTP" },
	{ "--remote-store-insecure", FLAG_KEY, "remote_store.insecure", "BOOL", true, true,
	  "plaintext HTTP/2, no TLS (--remote-store-insecure=false undoes it)" },
	{ "--remote-store-insecure-skip-verify", FLAG_KEY, "remote_store.insecure_skip_verify",
	  "BOOL", true, true, "TLS without verifying the server: testing only" },
	{ "--remote-store-bearer-token-file", FLAG_KEY, "remote_store.bearer_token_file", "VALUE",
	  false, false, "file holding the bearer token (re-read when it changes)" },
	{ "--remote-store-bearer-token", FLAG_REFUSED, NULL, "TOKEN", false, false,
	  "refused: a token in argv is readable by every user of the host\n"
	  "      (/proc/PID/cmdline); use --remote-store-bearer-token-file or\n"
	  "      the environment variable PUSHPROF_BEARER_TOKEN" },
	{ "--local-store", FLAG_KEY, "local_store.directory", "VALUE", false, false,
	  "also write every profile into this directory (\"\" turns it off)" },
	{ "--local-store-directory", FLAG_KEY, "local_store.directory", "VALUE", false, false,
	  "Parca Agent's name for --local-store" },
	{ "--profiling-duration", FLAG_KEY, "cpu.interval", "D", false, false,
	  "length of one CPU profile window, e.g. 10s" },
	{ "--profiling-cpu-sampling-frequency", FLAG_KEY, "cpu.frequency_hz", "N", true, false,
	  "samples per second per CPU (" PP_XSTR(CPU_HZ_MIN) ".." PP_XSTR(CPU_HZ_MAX) ")" },
	{ "--http-address", FLAG_KEY, "http_address", "VALUE", false, false,
	  "host:port of /metrics, /healthz, /readyz (\"\" turns it off)" },
	{ "--log-level", FLAG_KEY, "log.level", "VALUE", false, false,
	  "debug, info, warn or error" },
};
#define NFLAGS (sizeof(flags) / sizeof(flags[0]))

static void usage(FILE *f)
{
	fprintf(f, "usage: pushprof run [--config FILE] [--duration D] [FLAG VALUE ...]\n"
		   "\n"
		   "Run the profiling agent: sample on-CPU stacks with eBPF and push one\n"
		   "profile per process per cpu.interval.\n"
		   "\n"
		   "The config must name somewhere to put the profiles: remote_store.address,\n"
		   "local_store.directory, or both (the built-in defaults write them to a\n"
		   "local directory); neither is a config error.\n"
		   "\n");
	for (int keys = 0; keys < 2; keys++) {
		if (keys)
			fprintf(f, "\nFlags over the config file (same checks as the key in the "
				   "file;\n"
				   "also --flag=value):\n");
		for (size_t i = 0; i < NFLAGS; i++) {
			if ((flags[i].kind == FLAG_KEY) != keys)
				continue;
			bool bare = flags[i].optional_value;
			fprintf(f, "  %s%s%s%s\n      %s", flags[i].flag, bare ? "[=" : " ",
				flags[i].arg, bare ? "]" : "", flags[i].help);
			if (keys)
				fprintf(f, " (%s)", flags[i].key);
			fputc('\n', f);
		}
	}
	fprintf(f, "\n"
		   "exit status: 0 stopped cleanly, 1 runtime failure, 2 bad flags or config\n");
}

int cmd_run(int argc, char **argv)
{
	const char *path = NULL;
	struct agent_opts o = { 0 };
	struct pp_err err = { 0 };
	struct config c;
	struct config_override ov[NFLAGS];
	size_t nov = 0;

	agent_block_signals(NULL); /* for the process's whole life: see agent.h */
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *eq = strchr(a, '=');
		size_t alen = eq ? (size_t)(eq - a) : strlen(a);
		const char *v = eq ? eq + 1 : NULL;
		size_t f;

		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return EXIT_OK;
		}
		for (f = 0; f < NFLAGS; f++)
			if (strlen(flags[f].flag) == alen && !strncmp(a, flags[f].flag, alen))
				break;
		if (f == NFLAGS) {
			fprintf(stderr, "pushprof: run: unknown argument '%s'\n\n", a);
			usage(stderr);
			return EXIT_USAGE;
		}
		if (!v && flags[f].optional_value &&
		    (i + 1 >= argc || !strncmp(argv[i + 1], "--", 2)))
			v = "true";
		if (!v) {
			if (i + 1 >= argc) {
				fprintf(stderr, "pushprof: run: %.*s needs a value\n\n", (int)alen,
					a);
				usage(stderr);
				return EXIT_USAGE;
			}
			v = argv[++i];
		}
		switch (flags[f].kind) {
		case FLAG_REFUSED:
			fprintf(stderr,
				"pushprof: run: %s is not accepted: a token in argv is "
				"readable by every user of the host (/proc/PID/cmdline); use "
				"--remote-store-bearer-token-file FILE or the environment variable "
				"PUSHPROF_BEARER_TOKEN\n",
				flags[f].flag);
			return EXIT_USAGE;
		case FLAG_CONFIG:
			path = v;
			break;
		case FLAG_DURATION:
			if (parse_duration(v, &o.duration_ns) < 0 || o.duration_ns == 0) {
				fprintf(stderr,
					"pushprof: run: invalid --duration '%s' (e.g. 30s, 2m)\n",
					v);
				return EXIT_USAGE;
			}
			break;
		case FLAG_KEY: {
			size_t k;
			for (k = 0; k < nov; k++) /* the last one given wins */
				if (ov[k].key == flags[f].key)
					break;
			ov[k] = (struct config_override){ .key = flags[f].key,
							  .value = v,
							  .plain = flags[f].plain,
							  .flag = flags[f].flag };
			if (k == nov)
				nov++;
			break;
		}
		}
	}
	/* the same load at start and at every SIGHUP reload */
	o.load = (struct config_load_opts){
		.ov = ov, .nov = nov, .need_destination = true, .check_files = true
	};
	/* no --config and nothing at the default path: the built-in defaults */
	if (!path && access(PUSHPROF_DEFAULT_CONFIG, F_OK) != 0 && errno == ENOENT)
		o.builtin = true;
	else if (!path)
		path = PUSHPROF_DEFAULT_CONFIG;

	if (config_load_ov(o.builtin ? NULL : path, &o.load, &c, &err) < 0) {
		fprintf(stderr, "pushprof: %s\n", err.msg[0] ? err.msg : "invalid config");
		return EXIT_USAGE;
	}
	pp_log_setup(c.log_level, c.log_format);
	if (o.builtin)
		pp_log(PP_INFO, "no config file: running on the built-in defaults",
		       "default_path=%s flags=%zu", PUSHPROF_DEFAULT_CONFIG, nov);
	int r;
	while ((r = agent_run(&c, &o, &err)) == 1) { /* SIGHUP with a valid config */
		config_free(&c);
		c = *o.reload;
		free(o.reload);
		o.reload = NULL;
		pp_log_setup(c.log_level, c.log_format);
	}
	config_free(&c);
	if (r < 0) {
		pp_log(PP_ERROR, "agent failed", "error=%s", pp_q(err.msg));
		return r == -EINVAL ? EXIT_USAGE : EXIT_FAIL;
	}
	return EXIT_OK;
}

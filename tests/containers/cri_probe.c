/*
 * Test driver for agent/containers + agent/relabel: a line protocol on
 * stdin/stdout so a Python test can interleave lookups with changes it makes
 * to a real containerd.
 *
 *   cri_probe SOCKET|auto|none [RELABEL_YAML] [TTL_MS]
 *   > path P     -> the same for a cgroup path (no process needed)
 *   > pid N      -> "labels N rc=R", "name=value" lines (sorted), then, when a
 *                   relabel file was given, "relabel keep|drop" and the result,
 *                   then "end"
 *   > stats      -> "stats key=value ..."
 *   > refresh    -> "refresh rc=R msg"
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "containers.h"
#include "config.h"
#include "relabel.h"

static void print_labels(struct pp_labels *l)
{
	pp_labels_sort(l);
	for (size_t i = 0; i < l->n; i++)
		printf("%s=%s\n", l->v[i].name, l->v[i].value);
}

int main(int argc, char **argv)
{
	struct pp_err err = { 0 };
	struct relabel *rl = NULL;
	char line[256];

	if (argc < 2) {
		fprintf(stderr, "usage: cri_probe SOCKET|auto|none [RELABEL_YAML] [TTL_MS]\n");
		return 2;
	}
	if (argc > 2 && argv[2][0]) {
		/* a list of rules, read as a config's relabel_configs */
		FILE *f = fopen(argv[2], "r");
		static char buf[65536] = "relabel_configs:\n";
		size_t hl = strlen(buf);
		size_t n = f ? fread(buf + hl, 1, sizeof(buf) - hl - 1, f) : 0;
		struct config cfg = { 0 };
		if (f)
			fclose(f);
		if (!f || config_parse(buf, hl + n, argv[2], &cfg, &err)) {
			fprintf(stderr, "relabel: %s\n", f ? err.msg : "cannot open");
			return 2;
		}
		rl = cfg.relabel;
		if (!rl)
			relabel_new(&rl, NULL);	/* NULL (out of memory) applies no rules */
		cfg.relabel = NULL;
		config_free(&cfg);
	}
	uint64_t ttl = argc > 3 ? strtoull(argv[3], NULL, 10) * 1000000ull : 0;
	const char *sock = !strcmp(argv[1], "auto") ? NULL : argv[1];
	struct containers_opts co = { .socket = sock, .ttl_ns = ttl };
	struct containers *c;
	if (containers_new(&co, &c, &err)) {
		fprintf(stderr, "containers_new: %s\n", err.msg);
		return 2;
	}
	while (fgets(line, sizeof(line), stdin)) {
		if (!strncmp(line, "pid ", 4) || !strncmp(line, "path ", 5)) {
			int pid = line[1] == 'i' ? atoi(line + 4) : 0;
			struct pp_labels l = { 0 };
			struct cgroup_info ci;
			int rc;
			if (pid) {
				rc = containers_meta_labels(c, pid, &l);
			} else {
				line[strcspn(line, "\n")] = '\0';
				cgroup_info_from_path(line + 5, &ci);
				rc = containers_meta_labels_ci(c, &ci, &l);
			}
			printf("labels %d rc=%d\n", pid, rc);
			print_labels(&l);
			if (rl) {
				int k = relabel_apply(rl, &l);
				printf("relabel %s\n", k == 1 ? "keep" : k == 0 ? "drop" : "error");
				if (k == 1)
					print_labels(&l);
			}
			printf("end\n");
			pp_labels_free(&l);
		} else if (!strncmp(line, "stats", 5)) {
			struct containers_stats st;
			containers_get_stats(c, &st);
			printf("stats refreshes=%llu errors=%llu lookups=%llu hits=%llu containers=%zu "
			       "pods=%zu connected=%d runtime=%s version=%s socket=%s\n",
			       (unsigned long long)st.refreshes, (unsigned long long)st.errors,
			       (unsigned long long)st.lookups, (unsigned long long)st.hits,
			       st.containers, st.pods, st.connected,
			       st.runtime_name[0] ? st.runtime_name : "-",
			       st.runtime_version[0] ? st.runtime_version : "-",
			       st.socket[0] ? st.socket : "-");
			if (st.last_error[0])
				printf("last_error %s\n", st.last_error);
		} else if (!strncmp(line, "refresh", 7)) {
			struct pp_err e = { 0 };
			int rc = containers_refresh(c, &e);
			printf("refresh rc=%d %s\n", rc, e.msg);
		}
		fflush(stdout);
	}
	containers_free(c);
	relabel_free(rl);
	return 0;
}

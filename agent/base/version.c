/*
 * version.c - `pushprof version` and pushprof_build_info. Library versions
 * are asked of the libraries at run time: the ones the binary is linked
 * against on this host, which is what a bug report needs.
 */
#include "version.h"

#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>

#include <bpf/libbpf.h>
#include <protobuf-c/protobuf-c.h>
#include <yaml.h>
#include <zstd.h>

#include "buildinfo.h"
#include "grpcc.h"
#include "metrics.h"

const char *version_string(void)
{
	return PUSHPROF_VERSION;
}

const char *version_commit(void)
{
	/* vcs_tag's fallback is empty when git gave nothing */
	return PUSHPROF_COMMIT[0] ? PUSHPROF_COMMIT : "unknown";
}

const char *version_build_date(void)
{
	return PUSHPROF_BUILD_DATE;
}

static void kernel_release(char *buf, size_t n)
{
	struct utsname u;

	if (uname(&u) == 0)
		snprintf(buf, n, "%s %s", u.release, u.machine);
	else
		snprintf(buf, n, "unknown");
}

void version_print(FILE *out)
{
	char kern[2 * sizeof(((struct utsname *)0)->release) + 2], grpc[512];

	kernel_release(kern, sizeof(kern));
	fprintf(out, "pushprof %s\n", version_string());
	fprintf(out, "commit: %s\n", version_commit());
	fprintf(out, "build date: %s\n", version_build_date());
	fprintf(out, "libbpf: %s\n", libbpf_version_string());
	/* opens libgrpc (version is the one command that asks for it) */
	fprintf(out, "grpc core: %s\n", grpcc_version(true, grpc, sizeof(grpc)));
	fprintf(out, "libyaml: %s\n", yaml_get_version_string());
	fprintf(out, "zstd: %s\n", ZSTD_versionString());
	fprintf(out, "protobuf-c: %s\n", protobuf_c_version());
	fprintf(out, "kernel: %s\n", kern);
}

void version_metric(void)
{
	char labels[1024], grpc[512];

	/* the values are build facts and library versions: no quotes,
	 * backslashes or newlines to escape. libgrpc's version when a channel
	 * has opened it (the agent's remote stores and CRI client are made
	 * before this), "not loaded" for an agent that needs no gRPC. */
	snprintf(labels, sizeof(labels),
		 "version=\"%s\",commit=\"%s\",build_date=\"%s\",libbpf=\"%s\",grpc_core=\"%s\"",
		 version_string(), version_commit(), version_build_date(), libbpf_version_string(),
		 grpcc_version(false, grpc, sizeof(grpc)));
	metric_set(metric_get("pushprof_build_info",
			      "Always 1; the labels say which build runs and with which libraries.",
			      METRIC_GAUGE, labels),
		   1);
}

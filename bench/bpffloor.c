/*
 * bpffloor - the floor under any perf_event BPF sampler on this machine:
 * an empty program (r0 = 0; exit) attached to a cpu-clock event on every
 * CPU at the given frequency, for the given time. Prints what
 * kernel.bpf_stats_enabled measured for it, so the benchmark can put
 * pushprof's own per-sample figure next to the cost of merely running a
 * BPF program from the sampling interrupt (the stats' clock reads, program
 * entry, cold caches and TLBs on a busy CPU).
 *
 *   bpffloor FREQ_HZ SECONDS
 *   -> run_cnt=N run_time_ns=T ns_per_run=X cpus=C
 */
#include <errno.h>
#include <linux/bpf.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static long sys_bpf(int cmd, union bpf_attr *a)
{
	return syscall(__NR_bpf, cmd, a, sizeof(*a));
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: bpffloor FREQ_HZ SECONDS\n");
		return 2;
	}
	int freq = atoi(argv[1]), secs = atoi(argv[2]);
	if (freq <= 0 || secs <= 0) {
		fprintf(stderr, "bpffloor: FREQ_HZ and SECONDS must be positive\n");
		return 2;
	}
	struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	char license[] = "GPL";
	union bpf_attr a;

	memset(&a, 0, sizeof(a));
	a.enable_stats.type = BPF_STATS_RUN_TIME;
	int stats_fd = (int)sys_bpf(BPF_ENABLE_STATS, &a);	/* on while we hold it */

	memset(&a, 0, sizeof(a));
	a.prog_type = BPF_PROG_TYPE_PERF_EVENT;
	a.insns = (unsigned long)insns;
	a.insn_cnt = 2;
	a.license = (unsigned long)license;
	memcpy(a.prog_name, "pp_bpffloor", 12);
	int prog = (int)sys_bpf(BPF_PROG_LOAD, &a);
	if (prog < 0) {
		fprintf(stderr, "bpffloor: load: %s\n", strerror(errno));
		return 1;
	}

	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int *fds = calloc((size_t)ncpu, sizeof(*fds));
	int attached = 0;
	for (long cpu = 0; fds && cpu < ncpu; cpu++) {
		struct perf_event_attr pa = {
			.type = PERF_TYPE_SOFTWARE,
			.config = PERF_COUNT_SW_CPU_CLOCK,
			.size = sizeof(pa),
			.sample_freq = (unsigned long)freq,
			.freq = 1,
		};
		fds[cpu] = (int)syscall(__NR_perf_event_open, &pa, -1, (int)cpu, -1,
					PERF_FLAG_FD_CLOEXEC);
		if (fds[cpu] < 0)
			continue;	/* offline CPU */
		if (ioctl(fds[cpu], PERF_EVENT_IOC_SET_BPF, prog) == 0 &&
		    ioctl(fds[cpu], PERF_EVENT_IOC_ENABLE, 0) == 0)
			attached++;
	}
	if (!attached) {
		fprintf(stderr, "bpffloor: could not attach to any CPU: %s\n", strerror(errno));
		return 1;
	}
	sleep((unsigned)secs);
	for (long cpu = 0; cpu < ncpu; cpu++)
		if (fds[cpu] >= 0)
			close(fds[cpu]);

	struct bpf_prog_info info;
	memset(&info, 0, sizeof(info));
	memset(&a, 0, sizeof(a));
	a.info.bpf_fd = (unsigned)prog;
	a.info.info_len = sizeof(info);
	a.info.info = (unsigned long)&info;
	if (sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &a) < 0) {
		fprintf(stderr, "bpffloor: prog info: %s\n", strerror(errno));
		return 1;
	}
	printf("run_cnt=%llu run_time_ns=%llu ns_per_run=%.0f cpus=%d\n",
	       (unsigned long long)info.run_cnt, (unsigned long long)info.run_time_ns,
	       info.run_cnt ? (double)info.run_time_ns / (double)info.run_cnt : 0.0, attached);
	free(fds);
	if (stats_fd >= 0)
		close(stats_fd);
	close(prog);
	return 0;
}

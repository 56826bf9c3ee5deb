/*
 * test_maprec.c - the kernel's mmap records (agent/cpu/maprec.h) give a
 * process that exited the library it mapped after its maps were read.
 *
 * A child maps a page of a copy of libz (a file no process maps yet)
 * executable and unmaps it, the symbolizer reads
 * its maps (sym_prepare), then the child maps libz's text (as ld.so or
 * dlopen() would) and exits at once; it is reaped before anything else is
 * read. The records drained from the real sampler's rings must then give the
 * dead child that mapping - its address, file offset and path - and not
 * the one unmapped before the read; the record's time lies between the read
 * and the reaping (CLOCK_MONOTONIC, as the agent's). The first time, the copy
 * is known to no one: the dead child's mapping has no symbols, and the copy
 * is not remembered as unloadable (mapped by this process, it resolves right
 * after); the second child, with the copy cached, resolves to zlibVersion.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "check.h"
#include "cpu.h"
#include "ppclock.h"
#include "procinfo.h"
#include "symbolize.h"

struct seen {
	struct symbolizer *sym;
	pid_t child;
	int records, added;
	uint64_t time_added, time_other; /* of the record added, of the other */
};

static void on_rec(pid_t pid, uint64_t t, const struct proc_map *m, void *arg)
{
	struct seen *s = arg;
	(void)m;
	if (pid != s->child)
		return;
	s->records++;
	if (sym_add_mapping(s->sym, pid, t, m) == 1) {
		s->added++;
		s->time_added = t;
	} else {
		s->time_other = t;
	}
}

/* One child as described above; *addr gets where it mapped libz's text. */
static pid_t run_child(struct symbolizer *sym, const char *path, const struct proc_map *text,
		       int extra, uint64_t *addr, uint64_t *t_read, uint64_t *t_reaped)
{
	int c2p[2], p2c[2];
	if (pipe(c2p) || pipe(p2c))
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		void *m0 = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
		munmap(m0, 4096);
		char c = 'a';
		if (write(c2p[1], &c, 1) != 1 || read(p2c[0], &c, 1) != 1)
			_exit(1);
		void *m1 = mmap(NULL, text->end - text->start, PROT_READ | PROT_EXEC, MAP_PRIVATE,
				fd, (off_t)text->offset);
		for (int i = 0; i < extra; i++) /* one page each, apart */
			mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
		uint64_t a = (uint64_t)(uintptr_t)m1;
		if (write(c2p[1], &a, sizeof(a)) != sizeof(a))
			_exit(1);
		_exit(0);
	}
	char c;
	if (read(c2p[0], &c, 1) != 1)
		return -1;
	*t_read = pp_mono_ns();
	sym_prepare(sym, pid, NULL);
	c = 'b';
	if (write(p2c[1], &c, 1) != 1 || read(c2p[0], addr, sizeof(*addr)) != sizeof(*addr))
		return -1;
	waitpid(pid, NULL, 0);
	*t_reaped = pp_mono_ns();
	close(c2p[0]);
	close(c2p[1]);
	close(p2c[0]);
	close(p2c[1]);
	return pid;
}

int main(void)
{
	struct pp_err err = { 0 };
	struct cpu_sampler *cpu;
	struct cpu_sampler_opts o = { .frequency_hz = 19, .max_depth = 32, .filter = true,
				      .interval_ns = 1000000000ull };
	if (cpu_sampler_new(&o, &cpu, &err) < 0) {
		printf("sampler: %s\n", err.msg);
		return 1;
	}
	uint64_t rec0, lost0, errors;
	cpu_sampler_maprec_stats(cpu, &rec0, &lost0, &errors);
	CHECK(errors == 0, "every CPU's ring is mapped (%llu not)", (unsigned long long)errors);
	struct symbolizer *sym;
	if (sym_new(&(struct sym_opts){ 0 }, &sym, &err) < 0) {
		printf("symbolizer: %s\n", err.msg);
		return 1;
	}
	/* libz's text in this process: what the children map */
	struct proc_maps self;
	if (proc_maps_read(getpid(), &self, &err) < 0)
		return 1;
	uint64_t zfn = (uint64_t)(uintptr_t)&zlibVersion;
	const struct proc_map *zt = proc_maps_find(&self, zfn);
	if (!zt || !strstr(zt->path, "libz.so")) {
		printf("FAIL: zlibVersion is not in a libz mapping\n");
		return 1;
	}
	printf("libz text: %s offset 0x%llx, %llu bytes\n", zt->path,
	       (unsigned long long)zt->offset, (unsigned long long)(zt->end - zt->start));
	/* the copy: same text, its own inode */
	char copy[] = "/tmp/pp-maprec-XXXXXX";
	int cfd = mkstemp(copy), zfd = open(zt->path, O_RDONLY | O_CLOEXEC);
	char buf[65536];
	ssize_t got;
	while (cfd >= 0 && zfd >= 0 && (got = read(zfd, buf, sizeof(buf))) > 0)
		if (write(cfd, buf, (size_t)got) != got)
			return 1;
	if (cfd < 0 || zfd < 0)
		return 1;
	close(zfd);
	cpu_sampler_drain_maps(cpu, on_rec, &(struct seen){ .sym = sym, .child = -2 });

	struct sym_batch b;
	sym_batch_init(&b);
	for (int round = 0; round < 2; round++) {
		uint64_t addr = 0, t_read = 0, t_reaped = 0;
		struct seen s = { .sym = sym };
		s.child = run_child(sym, copy, zt, 0, &addr, &t_read, &t_reaped);
		CHECK(s.child > 0 && addr, "round %d: the child ran", round);
		struct sym_stats st0, st1;
		sym_get_stats(sym, &st0);
		cpu_sampler_drain_maps(cpu, on_rec, &s);
		sym_get_stats(sym, &st1);
		printf("round %d: child %d mapped the copy at 0x%llx; %d records of it, %d added\n", round,
		       (int)s.child, (unsigned long long)addr, s.records, s.added);
		CHECK(s.records == 2 && s.added == 1,
		      "round %d: both mmaps recorded, only the one after the read added (%d, %d)",
		      round, s.records, s.added);
		CHECK(st1.maps_recorded == st0.maps_recorded + 1, "round %d: counted", round);
		/* the rings are per CPU: the two records may come in either order */
		CHECK(s.time_added > t_read && s.time_added < t_reaped && s.time_other < t_read,
		      "round %d: the added one's time is between the read and the reaping, the "
		      "other's before the read", round);
		uint64_t q = addr + (zfn - zt->start);
		int r = sym_resolve_user(sym, s.child, 0, &q, 1, &b, &err);
		const struct sym_mapping *m = r == 0 && b.n == 1 && b.r[0].mapping >= 0 ?
						      &b.mappings[b.r[0].mapping] :
						      NULL;
		CHECK(m && !strcmp(m->path, copy) && m->offset == zt->offset && m->start == addr,
		      "round %d: the dead child's address has the copy's mapping (%s)", round,
		      m ? m->path : "none");
		const char *fn = m && b.r[0].nframes ? b.r[0].frames[0].func : "";
		printf("round %d: the mapping's load error: \"%s\"\n", round, m ? m->error : "-");
		if (round == 0) {
			CHECK(!b.r[0].nframes, "round 0: the copy not loaded from a dead process (%s)",
			      fn);
			void *mine = mmap(NULL, zt->end - zt->start, PROT_READ | PROT_EXEC,
					  MAP_PRIVATE, cfd, (off_t)zt->offset);
			uint64_t qs = (uint64_t)(uintptr_t)mine + (zfn - zt->start);
			r = sym_resolve_user(sym, getpid(), 0, &qs, 1, &b, &err);
			CHECK(r == 0 && b.r[0].nframes && !strcmp(b.r[0].frames[0].func, "zlibVersion"),
			      "the copy was not remembered as unloadable: mapped here, it resolves (%s)",
			      r == 0 && b.r[0].nframes ? b.r[0].frames[0].func : "none");
		} else {
			CHECK(!strcmp(fn, "zlibVersion"), "round 1: named with libz cached (%s)", fn);
		}
	}
	/* a process mapping code in a loop: 64 added between two reads, no more */
	{
		uint64_t addr = 0, t_read = 0, t_reaped = 0;
		struct seen s = { .sym = sym };
		s.child = run_child(sym, copy, zt, 100, &addr, &t_read, &t_reaped);
		cpu_sampler_drain_maps(cpu, on_rec, &s);
		printf("a child mapping 101 times after its read: %d records, %d added\n",
		       s.records, s.added);
		CHECK(s.records == 102 && s.added == 64,
		      "bounded: 64 of 101 recorded mappings added (%d of %d)", s.added,
		      s.records - 1);
	}
	/* A process never read (whole-host mode reads none ahead): its records
	 * are kept; gone, it resolves with them. It maps in batches, each
	 * drained before the next (a ring holds ~200 records; a batch of 125
	 * leaves room for the host's other processes), 4,250 in all: more than
	 * the 4,096 kept, so its first mapping is gone from them and its last
	 * is there. */
	{
		int c2p[2], p2c[2];
		if (pipe(c2p) || pipe(p2c))
			return 1;
		enum { BATCHES = 34, PER = 125 };
		pid_t pid = fork();
		if (pid == 0) {
			int fd = open(copy, O_RDONLY | O_CLOEXEC);
			uint64_t first = 0, last = 0;
			for (int bi = 0; bi < BATCHES; bi++) {
				for (int i = 0; i < PER; i++) {
					void *m = mmap(NULL, 4096, PROT_READ | PROT_EXEC,
						       MAP_PRIVATE, fd, 0);
					last = (uint64_t)(uintptr_t)m;
					if (!first)
						first = last;
				}
				char c = 'x';
				if (write(c2p[1], &c, 1) != 1 || read(p2c[0], &c, 1) != 1)
					_exit(1);
			}
			uint64_t a[2] = { first, last };
			if (write(c2p[1], a, sizeof(a)) != sizeof(a))
				_exit(1);
			_exit(0);
		}
		struct seen s = { .sym = sym, .child = pid };
		uint64_t lost_before, lost_after, r0;
		cpu_sampler_maprec_stats(cpu, &r0, &lost_before, &errors);
		for (int bi = 0; bi < BATCHES; bi++) {
			char c;
			if (read(c2p[0], &c, 1) != 1)
				return 1;
			cpu_sampler_drain_maps(cpu, on_rec, &s);
			c = 'y';
			if (write(p2c[1], &c, 1) != 1)
				return 1;
		}
		uint64_t a[2];
		if (read(c2p[0], a, sizeof(a)) != sizeof(a))
			return 1;
		waitpid(pid, NULL, 0);
		cpu_sampler_drain_maps(cpu, on_rec, &s);
		cpu_sampler_maprec_stats(cpu, &r0, &lost_after, &errors);
		struct sym_stats st0, st1;
		sym_get_stats(sym, &st0);
		int r = sym_resolve_user(sym, pid, 0, a, 2, &b, &err);
		sym_get_stats(sym, &st1);
		printf("a child never read mapped %d times: %d records (%llu lost), "
		       "resolved from them: first %s, last %s\n",
		       BATCHES * PER, s.records, (unsigned long long)(lost_after - lost_before),
		       r == 0 && b.r[0].mapping >= 0 ? "mapped" : "not mapped",
		       r == 0 && b.r[1].mapping >= 0 ? b.mappings[b.r[1].mapping].path : "not mapped");
		CHECK(s.records == BATCHES * PER && s.added == 0 && lost_after == lost_before,
		      "never read: every record drained and kept, none added (%d, %d)", s.records,
		      s.added);
		CHECK(r == 0 && b.r[1].mapping >= 0 &&
			      !strcmp(b.mappings[b.r[1].mapping].path, copy),
		      "gone, never read: its last mapping from its records");
		CHECK(r == 0 && b.r[0].mapping < 0,
		      "bounded: its first mapping is no longer kept (4,096 records)");
		CHECK(st1.maps_from_records == st0.maps_from_records + 1, "counted");
		close(c2p[0]);
		close(c2p[1]);
		close(p2c[0]);
		close(p2c[1]);
	}
	uint64_t rec1, lost1;
	cpu_sampler_maprec_stats(cpu, &rec1, &lost1, &errors);
	printf("records handed over %llu, lost %llu\n", (unsigned long long)(rec1 - rec0),
	       (unsigned long long)(lost1 - lost0));
	sym_batch_free(&b);
	unlink(copy);
	close(cfd);
	proc_maps_free(&self);
	sym_free(sym);
	cpu_sampler_free(cpu);
	return check_done();
}

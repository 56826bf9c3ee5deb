/*
 * agent_window.c - a CPU window's metrics and log line (agent_window.h):
 * kept apart from the run loop, which only gathers the figures.
 */
#include "agent_window.h"


#include "log.h"
#include "metrics.h"

void agent_window_report(const struct window_report *r)
{
	const uint64_t *s = r->win->stats;
	static const struct {
		int stat;
		const char *cause;
	} lost[] = {
		{ CPU_STAT_LOST_COUNTS_FULL, "cause=\"counts_map_full\"" },
		{ CPU_STAT_STACK_ERR, "cause=\"stack_error\"" },
		{ CPU_STAT_STACKS_FULL, "cause=\"stacks_map_full\"" },
		{ CPU_STAT_COLLISION, "cause=\"hash_collision\"" },
		{ CPU_STAT_TRUNCATED, "cause=\"truncated\"" },
	};
	metric_inc("pushprof_cpu_windows_total", "CPU windows built.", NULL, 1);
	metric_inc("pushprof_cpu_samples_total", "On-CPU samples drained from BPF.", NULL,
		   (double)r->win->samples);
	metric_inc("pushprof_cpu_samples_filtered_total",
		   "Samples of untargeted processes, dropped in the kernel.", NULL,
		   (double)s[CPU_STAT_FILTERED]);
	for (size_t i = 0; i < sizeof(lost) / sizeof(lost[0]); i++)
		metric_inc("pushprof_cpu_lost_total",
			   "Samples (counts_map_full) or stacks (others) lost or cut, by cause.",
			   lost[i].cause, (double)s[lost[i].stat]);
	metric_inc("pushprof_cpu_lost_total",
		   "Samples (counts_map_full) or stacks (others) lost or cut, by cause.",
		   "cause=\"junk_frame\"", (double)r->ps->junk_cut);
	metric_inc("pushprof_cpu_lost_total",
		   "Samples (counts_map_full) or stacks (others) lost or cut, by cause.",
		   "cause=\"stack_evicted\"", (double)r->win->lost_evicted);
	metric_inc("pushprof_cpu_profiles_total", "Per-process CPU profiles handed over.", NULL,
		   (double)r->ps->profiles);
	metric_inc("pushprof_cpu_profile_bytes_total", "Bytes of CPU profiles handed over.", NULL,
		   (double)r->ps->bytes);
	metric_set(metric_get("pushprof_cpu_targets", "Processes currently targeted.", METRIC_GAUGE,
			      NULL),
		   (double)r->matched);
	uint32_t cap_counts, cap_stacks;
	cpu_sampler_capacity(r->cpu, &cap_counts, &cap_stacks);
	metric_set(metric_get("pushprof_bpf_map_entries",
			      "Entries used in the last window, by map.", METRIC_GAUGE,
			      "map=\"cpu_counts\""),
		   (double)r->win->nrecs);
	metric_set(metric_get("pushprof_bpf_map_entries",
			      "Entries used in the last window, by map.", METRIC_GAUGE,
			      "map=\"cpu_stacks\""),
		   (double)r->win->stacks_stored);
	metric_set(metric_get("pushprof_bpf_map_capacity", "Entries each BPF map holds, by map.",
			      METRIC_GAUGE, "map=\"cpu_counts\""),
		   (double)cap_counts);
	metric_set(metric_get("pushprof_bpf_map_capacity", "Entries each BPF map holds, by map.",
			      METRIC_GAUGE, "map=\"cpu_stacks\""),
		   (double)cap_stacks);
	if (r->fl) {
		size_t fp, fb, fw;
		frameless_counts(r->fl, &fp, &fb, &fw);
		metric_set(metric_get("pushprof_cpu_frameless_processes",
				      "Processes whose frameless Go leaves or C/C++ prologues, "
				      "epilogues and frameless leaves BPF corrects.",
				      METRIC_GAUGE, NULL),
			   (double)fp);
		metric_set(
			metric_get(
				"pushprof_cpu_frameless_pool_words",
				"Bitmap and window words of the leaf tables in BPF (pool: 524288).",
				METRIC_GAUGE, NULL),
			(double)fw);
	}
	uint64_t mr_records, mr_lost, mr_errors;
	cpu_sampler_maprec_stats(r->cpu, &mr_records, &mr_lost, &mr_errors);
	metric_set(metric_get("pushprof_cpu_mapping_records_total",
			      "Executable mappings the kernel recorded processes making "
			      "(the symbolizer adds those of profiled processes it read before).",
			      METRIC_COUNTER, NULL),
		   (double)mr_records);
	metric_set(metric_get("pushprof_cpu_mapping_records_lost_total",
			      "Mapping records lost to a full ring (those processes' later "
			      "libraries come from /proc reads alone).",
			      METRIC_COUNTER, NULL),
		   (double)mr_lost);
	metric_set(metric_get("pushprof_cpu_sampled_cpus", "CPUs with a perf event attached.",
			      METRIC_GAUGE, NULL),
		   (double)cpu_sampler_ncpus(r->cpu));
	/* user frames the BPF walk stored, per sample (before symbolization
	 * drops or adds any): what bench/bpf_ab.py sets the walk's cost against */
	uint64_t user_frames = 0;
	for (size_t i = 0; i < r->win->nrecs; i++) {
		uint32_t len = 0;
		if (cpu_window_stack(r->win, r->win->recs[i].key.user_stack, &len))
			user_frames += (uint64_t)len * r->win->recs[i].count;
	}
	pp_log(PP_INFO, "cpu window",
	       "window=%llu samples=%llu user_frames=%llu processes=%zu bytes=%llu "
	       "lost_map_full=%llu "
	       "lost_stack_err=%llu lost_stacks_full=%llu lost_collision=%llu "
	       "lost_stack_evicted=%llu "
	       "truncated=%llu stacks=%zu stacks_new=%llu stacks_read=%zu stacks_from_copy=%zu "
	       "stacks_evicted=%zu stacks_stored=%zu "
	       "truncated_junk=%llu filtered=%llu frameless_leaf=%llu go_edge=%llu "
	       "frameless_mid=%llu "
	       "frameless_fault=%llu g0_switch=%llu g0_fail=%llu fl_search=%llu "
	       "targets=%zu/%zu "
	       "locations=%llu named=%llu cpus=%u duration_ms=%lld agent_cpu_ms=%.1f "
	       "loop_cpu_ms=%.1f events_cpu_ms=%.1f maps_read=%llu maps_kept=%llu "
	       "maps_recorded=%llu maps_from_records=%llu map_records_lost=%llu%s%s",
	       (unsigned long long)r->window, (unsigned long long)r->win->samples,
	       (unsigned long long)user_frames, r->ps->profiles, (unsigned long long)r->ps->bytes,
	       (unsigned long long)s[CPU_STAT_LOST_COUNTS_FULL],
	       (unsigned long long)s[CPU_STAT_STACK_ERR],
	       (unsigned long long)s[CPU_STAT_STACKS_FULL],
	       (unsigned long long)s[CPU_STAT_COLLISION], (unsigned long long)r->win->lost_evicted,
	       (unsigned long long)s[CPU_STAT_TRUNCATED], r->win->nstacks,
	       (unsigned long long)s[CPU_STAT_STACK_NEW], r->win->stacks_read,
	       r->win->stacks_from_copy, r->win->stacks_evicted, r->win->stacks_stored,
	       (unsigned long long)r->ps->junk_cut, (unsigned long long)s[CPU_STAT_FILTERED],
	       (unsigned long long)s[CPU_STAT_FL_LEAF], (unsigned long long)s[CPU_STAT_GO_EDGE],
	       (unsigned long long)s[CPU_STAT_FL_MID], (unsigned long long)s[CPU_STAT_FL_FAULT],
	       (unsigned long long)s[CPU_STAT_G0_SWITCH], (unsigned long long)s[CPU_STAT_G0_FAIL],
	       (unsigned long long)s[CPU_STAT_FL_SEARCH],
	       r->matched, r->procs, (unsigned long long)r->ps->frames,
	       (unsigned long long)r->ps->frames_named, cpu_sampler_ncpus(r->cpu),
	       (long long)(r->dur_ns / 1000000), r->cpu_ms, r->loop_cpu_ms,
	       r->events_cpu_ms,
	       (unsigned long long)r->sst->maps_reads, (unsigned long long)r->sst->maps_kept,
	       (unsigned long long)r->sst->maps_recorded,
	       (unsigned long long)r->sst->maps_from_records, (unsigned long long)mr_lost,
	       r->flush_error ? " flush_error=" : "", r->flush_error ? pp_q(r->flush_error) : "");
}

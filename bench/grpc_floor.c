/* grpc_floor: what libgrpc costs a process that pushes now and then, with
 * nothing else running: the floor under the agent's gRPC threads
 * (bench/grpc_floor.py runs it).
 *
 *   grpc_floor                     grpc_init() only, until killed
 *   grpc_floor TARGET              and one insecure channel to TARGET (unused)
 *   grpc_floor TARGET warm|cold PERIOD SECONDS
 *       one empty WriteRaw to TARGET every PERIOD seconds for SECONDS, then
 *       prints the process's CPU (all threads, getrusage) per minute and per
 *       call. warm: one grpc_init() and one channel for the whole run, as the
 *       agent keeps them; cold: grpc_init(), a channel, the call, then the
 *       channel destroyed and grpc_shutdown() (its threads joined) each time,
 *       so that nothing of libgrpc runs between pushes.
 */
#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static double mono_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double cpu_s(void) /* user + sys of every thread, joined ones too */
{
	struct rusage r;
	getrusage(RUSAGE_SELF, &r);
	return (double)(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
	       (double)(r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
}

/* One unary WriteRaw with an empty request (a valid, empty
 * WriteRawRequest); its status, -1 when the batch failed. */
static int write_raw(grpc_channel *ch, grpc_completion_queue *cq)
{
	grpc_slice method =
		grpc_slice_from_static_string("/parca.profilestore.v1alpha1.ProfileStoreService/WriteRaw");
	gpr_timespec deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
					     gpr_time_from_seconds(5, GPR_TIMESPAN));
	grpc_call *c = grpc_channel_create_call(ch, NULL, 0, cq, method, NULL, deadline, NULL);
	grpc_metadata_array im, tm;
	grpc_byte_buffer *resp = NULL;
	grpc_status_code st = GRPC_STATUS_UNKNOWN;
	grpc_slice details = grpc_empty_slice(), empty = grpc_empty_slice();
	grpc_byte_buffer *req = grpc_raw_byte_buffer_create(&empty, 1);
	grpc_op ops[6];

	grpc_metadata_array_init(&im);
	grpc_metadata_array_init(&tm);
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = req;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = &im;
	ops[4].op = GRPC_OP_RECV_MESSAGE;
	ops[4].data.recv_message.recv_message = &resp;
	ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[5].data.recv_status_on_client.trailing_metadata = &tm;
	ops[5].data.recv_status_on_client.status = &st;
	ops[5].data.recv_status_on_client.status_details = &details;
	int ok = grpc_call_start_batch(c, ops, 6, c, NULL) == GRPC_CALL_OK &&
		 grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).success;
	grpc_call_unref(c);
	grpc_byte_buffer_destroy(req);
	if (resp)
		grpc_byte_buffer_destroy(resp);
	grpc_slice_unref(details);
	grpc_metadata_array_destroy(&im);
	grpc_metadata_array_destroy(&tm);
	return ok ? (int)st : -1;
}

static grpc_channel *open_channel(const char *target)
{
	grpc_channel_credentials *c = grpc_insecure_credentials_create();
	grpc_channel *ch = grpc_channel_create(target, c, NULL);
	grpc_channel_credentials_release(c);
	return ch;
}

/* Everything open_channel() and grpc_init() started, stopped: the channel,
 * the completion queue drained to its shutdown event, then grpc_shutdown()
 * (which joins libgrpc's threads, so a cold push pays their restart). */
static void close_channel(grpc_channel **ch, grpc_completion_queue **cq)
{
	grpc_channel_destroy(*ch);
	*ch = NULL;
	grpc_completion_queue_shutdown(*cq);
	while (grpc_completion_queue_next(*cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
	       GRPC_QUEUE_SHUTDOWN)
		;
	grpc_completion_queue_destroy(*cq);
	*cq = NULL;
	grpc_shutdown();
}

static int push_loop(const char *target, int cold, double period, double seconds)
{
	grpc_channel *ch = NULL;
	grpc_completion_queue *cq = NULL;
	double t0 = 0, c0 = 0;
	int n = 0, bad = 0;

	for (;;) {
		if (!ch) {
			grpc_init();
			ch = open_channel(target);
			cq = grpc_completion_queue_create_for_next(NULL);
		}
		if (n == 1) { /* from the second call: the first connects either way */
			c0 = cpu_s();
			t0 = mono_s();
		}
		if (write_raw(ch, cq) != GRPC_STATUS_OK)
			bad++;
		n++;
		if (cold)
			close_channel(&ch, &cq);
		if (n > 1 && mono_s() - t0 >= seconds)
			break;
		usleep((useconds_t)(period * 1e6));
	}
	double wall = mono_s() - t0, cpu = cpu_s() - c0;
	printf("%s calls=%d failed=%d cpu_ms_per_min=%.2f cpu_ms_per_call=%.3f\n",
	       cold ? "cold" : "warm", n - 1, bad, cpu * 1e3 * 60 / wall, cpu * 1e3 / (n - 1));
	if (ch)
		close_channel(&ch, &cq);
	return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 5 && (!strcmp(argv[2], "warm") || !strcmp(argv[2], "cold")))
		return push_loop(argv[1], !strcmp(argv[2], "cold"), atof(argv[3]), atof(argv[4]));
	if (argc > 2) {
		fprintf(stderr, "usage: grpc_floor [TARGET [warm|cold PERIOD SECONDS]]\n");
		return 2;
	}
	grpc_init();
	grpc_channel *ch = argc > 1 ? open_channel(argv[1]) : NULL;
	printf("ready\n");
	fflush(stdout);
	pause(); /* until killed */
	if (ch)
		grpc_channel_destroy(ch);
	grpc_shutdown();
	return 0;
}

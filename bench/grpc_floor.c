/* grpc_floor: what libgrpc's own threads cost a process that has it
 * initialized, with nothing else running: the floor under the agent's gRPC
 * threads (bench/grpc_floor.py runs it and reads their schedstat).
 *
 *   grpc_floor             grpc_init() only
 *   grpc_floor TARGET      and one insecure channel to TARGET (unused)
 */
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	grpc_init();
	grpc_channel *ch = NULL;
	if (argc > 1) {
		grpc_channel_credentials *c = grpc_insecure_credentials_create();
		ch = grpc_channel_create(argv[1], c, NULL);
		grpc_channel_credentials_release(c);
	}
	printf("ready\n");
	fflush(stdout);
	pause(); /* until killed */
	if (ch)
		grpc_channel_destroy(ch);
	grpc_shutdown();
	return 0;
}

/* cleak: a non-Go victim: prints "ready", waits for a line, then leaks
 * with malloc + memset until the kernel OOM-kills it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(void)
{
	char line[16];

	printf("ready\n");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	for (;;) {
		char *p = malloc(1 << 20);

		if (!p)
			return 1;
		memset(p, 1, 1 << 20);
		usleep(200);
	}
}

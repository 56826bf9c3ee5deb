#include "givemem.h"

#include <malloc.h>

#include "log.h"

#define GIVE_BACK_FREE_BYTES ((size_t)4 << 20)
#define MMAP_THRESHOLD_BYTES (32 << 20)
#define TRIM_THRESHOLD_BYTES (2 << 20)

int pp_give_back_memory(size_t *free_at)
{
	struct mallinfo2 mi = mallinfo2();

	/* trimming does not change fordblks (the pages stay free chunks), so
	 * the figure after a trim is the baseline for the next one */
	if (mi.fordblks < *free_at)
		*free_at = mi.fordblks;
	if (mi.fordblks - *free_at <= GIVE_BACK_FREE_BYTES)
		return 0;
	malloc_trim(0);
	pp_log(PP_DEBUG, "gave free memory back", "free_kib=%zu grew_kib=%zu", mi.fordblks >> 10,
	       (mi.fordblks - *free_at) >> 10);
	*free_at = mi.fordblks;
	return 1;
}

void pp_trim_memory(size_t *free_at)
{
	malloc_trim(0);
	*free_at = mallinfo2().fordblks;
}

void pp_malloc_policy(void)
{
	/* mallopt refuses a value out of its range (another libc's limits):
	 * that threshold stays glibc's own */
	int ok = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES);

	ok &= mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES);
	if (!ok)
		pp_log(PP_DEBUG, "malloc thresholds not set", "using=%s", "glibc defaults");
}

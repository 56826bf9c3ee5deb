/* lsan_tls_exit: the ASan suite's own settings survive a process that exits
 * with threads whose dynamic TLS block starts 16 bytes past a page boundary.
 *
 * GCC 12's sanitizer runtime takes such a block for a pre-2.25 glibc block
 * with a header, reads the allocator's chunk header as its bounds, and
 * LeakSanitizer's tracer dies scanning them at exit ("Tracer caught signal
 * 11", exit 1). In the agent, grpc's and libbpf's TLS land there by chance: one
 * run in many failed in CI. scripts/test.sh sets intercept_tls_get_addr=0;
 * this test fails if that setting is lost (without it, this exits 1 always).
 *
 * The module (argv[1]) has a 48-byte TLS block: under ASan every such block is
 * a chunk at page+16. A pointer held only in that TLS must not be reported as
 * a leak either (blocks ld.so allocates stay roots for the scan).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void *(*hold)(void);
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int started, at_page16;

static void *run(void *arg) {
  (void)arg;
  unsigned long tls = (unsigned long)hold();
  pthread_mutex_lock(&mu);
  started++;
  at_page16 += tls % 4096 == 16;
  pthread_cond_signal(&cv);
  pthread_mutex_unlock(&mu);
  pause();  /* alive at exit: the leak check scans this thread */
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s MODULE\n", argv[0]);
    return 2;
  }
  void *h = dlopen(argv[1], RTLD_NOW);
  if (!h) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 2;
  }
  hold = (void *(*)(void))dlsym(h, "lsan_tls_hold");
  if (!hold) {
    fprintf(stderr, "dlsym: %s\n", dlerror());
    return 2;
  }
  enum { N = 16 };
  for (int i = 0; i < N; i++) {
    pthread_t t;
    if (pthread_create(&t, NULL, run, NULL) != 0) {
      perror("pthread_create");
      return 2;
    }
  }
  pthread_mutex_lock(&mu);
  while (started < N) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  printf("%d of %d threads' TLS blocks start at page+16\n", at_page16, N);
  if (at_page16 == 0) {
    fprintf(stderr, "no TLS block at page+16: the test no longer sets up the case\n");
    return 1;
  }
  exit(0);  /* the leak check runs here */
}

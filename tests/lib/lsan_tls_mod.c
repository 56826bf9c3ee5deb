/* lsan_tls_exit's module: a 48-byte dynamic TLS block holding a heap pointer */
#include <stdlib.h>

__thread void *lsan_tls_held[6];

void *lsan_tls_hold(void);
void *lsan_tls_hold(void) {
  lsan_tls_held[0] = malloc(100);
  return lsan_tls_held;
}

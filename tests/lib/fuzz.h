/*
 * fuzz.h - the entry points libFuzzer calls, declared once for every fuzz
 * target (tests/<area>/fuzz_*.c), so that -Wmissing-prototypes holds there too.
 */
#ifndef PUSHPROF_TESTS_FUZZ_H
#define PUSHPROF_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#endif

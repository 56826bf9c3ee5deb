/*
 * bytes.h - small byte-level helpers every parser shares (hex for ids,
 * Go/protobuf unsigned varints). Pure functions, no allocation, safe on
 * hostile input: every read is bounded by the length given.
 */
#ifndef PUSHPROF_BYTES_H
#define PUSHPROF_BYTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Lowercase hex of b[0..n) into out (always NUL-terminated when outsz > 0).
 * Writes whole bytes only: when out is too small the hex stops at the last
 * byte that fits. Returns the number of bytes rendered.
 */
size_t pp_hex(char *out, size_t outsz, const uint8_t *b, size_t n);

/*
 * The unsigned varint (LEB128: 7 bits a byte, low first, high bit =
 * more) at b[*pos], at most 10 bytes; *pos moves past it. False, *pos
 * somewhere inside, when it runs past len or past 64 bits.
 */
bool pp_uvarint(const uint8_t *b, size_t len, size_t *pos, uint64_t *v);

#endif

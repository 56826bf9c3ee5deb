/*
 * md5.h - MD5 (RFC 1321) of a byte string. Not for security: relabel's
 * hashmod must compute what Prometheus computes (the digest's last 8
 * bytes, big-endian, modulo the modulus), and Prometheus uses MD5.
 * Pure function, thread-safe; no allocation.
 */
#ifndef PUSHPROF_MD5_H
#define PUSHPROF_MD5_H

#include <stddef.h>
#include <stdint.h>

/* The 16-byte digest of data (len bytes) into out. */
void pp_md5(const void *data, size_t len, uint8_t out[16]);

#endif

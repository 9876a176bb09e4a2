// SHA-256 of two streams over the same bytes at once, with the x86 SHA extensions.
//
// An upload's bytes are hashed twice: into the whole object's SHA-256 (the blob id) and into
// the SHA-256 of the block they belong to (the block id). One SHA-NI stream is bound by the
// latency of sha256rnds2; interleaving the rounds of two independent streams lets the CPU
// overlap them, so both hashes cost about 0.65x of hashing the bytes twice (native-bench/).
//
// A hash state lives in a caller-owned Uint8Array of STATE_BYTES (see struct state), so the
// JavaScript side keeps, copies and drops states without native handles. Exports:
//   available            the CPU has SHA-NI, SSSE3 and SSE4.1 (else nothing else may be called)
//   stateBytes           the size of a state
//   init(state)          a fresh SHA-256 state
//   update(a, b, data)   hashes data into state a and, unless b is null, into state b
//   hex(state)           the digest of the bytes so far, as 64 hex digits (the state is kept)

#include <cpuid.h>
#include <immintrin.h>
#include <node_api.h>
#include <stdint.h>
#include <string.h>

#include "typed-bytes.h"

struct state {
  uint32_t h[8];
  uint64_t length;    // bytes hashed so far
  uint32_t buffered;  // bytes of buf not yet compressed (< 64)
  uint32_t pad;
  uint8_t buf[64];
};

#define STATE_BYTES ((uint32_t)sizeof(struct state))

static const uint32_t H0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                               0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

static const uint32_t K256[64] __attribute__((aligned(16))) = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#define SHA_TARGET __attribute__((target("sha,sse4.1,ssse3")))

#define KV(g) _mm_load_si128((const __m128i *)&K256[4 * (g)])
#define BSWAP_MASK _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL)

// h[0..7] (a..h) <-> the ABEF / CDGH register pair sha256rnds2 works on.
#define LOAD_STATE(st, S0, S1)                                   \
  do {                                                           \
    __m128i t_ = _mm_loadu_si128((const __m128i *)&(st)[0]);     \
    S1 = _mm_loadu_si128((const __m128i *)&(st)[4]);             \
    t_ = _mm_shuffle_epi32(t_, 0xB1);                            \
    S1 = _mm_shuffle_epi32(S1, 0x1B);                            \
    S0 = _mm_alignr_epi8(t_, S1, 8);                             \
    S1 = _mm_blend_epi16(S1, t_, 0xF0);                          \
  } while (0)
#define STORE_STATE(st, S0, S1)                                  \
  do {                                                           \
    __m128i t_ = _mm_shuffle_epi32(S0, 0x1B);                    \
    S1 = _mm_shuffle_epi32(S1, 0xB1);                            \
    S0 = _mm_blend_epi16(t_, S1, 0xF0);                          \
    S1 = _mm_alignr_epi8(S1, t_, 8);                             \
    _mm_storeu_si128((__m128i *)&(st)[0], S0);                   \
    _mm_storeu_si128((__m128i *)&(st)[4], S1);                   \
  } while (0)

// Four rounds with message words W and constants of group g.
#define R4(S0, S1, W, g)                                         \
  do {                                                           \
    __m128i m_ = _mm_add_epi32(W, KV(g));                        \
    S1 = _mm_sha256rnds2_epu32(S1, S0, m_);                      \
    m_ = _mm_shuffle_epi32(m_, 0x0E);                            \
    S0 = _mm_sha256rnds2_epu32(S0, S1, m_);                      \
  } while (0)
// The next four message words into Wa, from the previous sixteen (Wa, Wb, Wc, Wd).
#define SCHED(Wa, Wb, Wc, Wd)                                    \
  do {                                                           \
    Wa = _mm_sha256msg1_epu32(Wa, Wb);                           \
    Wa = _mm_add_epi32(Wa, _mm_alignr_epi8(Wd, Wc, 4));          \
    Wa = _mm_sha256msg2_epu32(Wa, Wd);                           \
  } while (0)
#define LOADW(W, p, i) W = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)((p) + 16 * (i))), BSWAP_MASK)

SHA_TARGET static void compress1(uint32_t h[8], const uint8_t *p, size_t blocks) {
  __m128i S0, S1, W[4];
  LOAD_STATE(h, S0, S1);
  for (; blocks; blocks--, p += 64) {
    __m128i A0 = S0, A1 = S1;
    for (int i = 0; i < 4; i++) LOADW(W[i], p, i);
    for (int g = 0; g < 16; g++) {
      if (g >= 4) SCHED(W[g & 3], W[(g + 1) & 3], W[(g + 2) & 3], W[(g + 3) & 3]);
      R4(S0, S1, W[g & 3], g);
    }
    S0 = _mm_add_epi32(S0, A0);
    S1 = _mm_add_epi32(S1, A1);
  }
  STORE_STATE(h, S0, S1);
}

// Two streams, each four-round group of the first followed by the same group of the second
// (interleaving per group measured faster than per instruction: fewer register spills).
#define GROUP2(g)                                                                   \
  do {                                                                              \
    if ((g) >= 4) {                                                                 \
      SCHED(W[(g) & 3], W[((g) + 1) & 3], W[((g) + 2) & 3], W[((g) + 3) & 3]);      \
      SCHED(V[(g) & 3], V[((g) + 1) & 3], V[((g) + 2) & 3], V[((g) + 3) & 3]);      \
    }                                                                               \
    R4(S0, S1, W[(g) & 3], g);                                                      \
    R4(T0, T1, V[(g) & 3], g);                                                      \
  } while (0)

SHA_TARGET static void compress2(uint32_t ha[8], const uint8_t *pa, uint32_t hb[8], const uint8_t *pb, size_t blocks) {
  __m128i S0, S1, T0, T1, W[4], V[4];
  LOAD_STATE(ha, S0, S1);
  LOAD_STATE(hb, T0, T1);
  for (; blocks; blocks--, pa += 64, pb += 64) {
    __m128i A0 = S0, A1 = S1, B0 = T0, B1 = T1;
    for (int i = 0; i < 4; i++) {
      LOADW(W[i], pa, i);
      LOADW(V[i], pb, i);
    }
    GROUP2(0); GROUP2(1); GROUP2(2); GROUP2(3); GROUP2(4); GROUP2(5); GROUP2(6); GROUP2(7);
    GROUP2(8); GROUP2(9); GROUP2(10); GROUP2(11); GROUP2(12); GROUP2(13); GROUP2(14); GROUP2(15);
    S0 = _mm_add_epi32(S0, A0);
    S1 = _mm_add_epi32(S1, A1);
    T0 = _mm_add_epi32(T0, B0);
    T1 = _mm_add_epi32(T1, B1);
  }
  STORE_STATE(ha, S0, S1);
  STORE_STATE(hb, T0, T1);
}

/** Tops up a partly filled buffer from p; returns the bytes taken. Compresses it once full. */
static size_t fill(struct state *s, const uint8_t *p, size_t n) {
  if (s->buffered == 0) return 0;
  size_t take = 64 - s->buffered;
  if (take > n) take = n;
  memcpy(s->buf + s->buffered, p, take);
  s->buffered += (uint32_t)take;
  if (s->buffered == 64) {
    compress1(s->h, s->buf, 1);
    s->buffered = 0;
  }
  return take;
}

/** Bytes that start on a block boundary of the stream (its buffer is empty or takes them all). */
static void rest(struct state *s, const uint8_t *p, size_t n) {
  if (s->buffered) {
    memcpy(s->buf + s->buffered, p, n);  // fill() left bytes only if they fit
    s->buffered += (uint32_t)n;
    return;
  }
  compress1(s->h, p, n / 64);
  memcpy(s->buf, p + (n & ~(size_t)63), n & 63);
  s->buffered = (uint32_t)(n & 63);
}

static void update(struct state *a, struct state *b, const uint8_t *p, size_t n) {
  size_t ta = fill(a, p, n);
  if (!b) {
    rest(a, p + ta, n - ta);
  } else {
    size_t tb = fill(b, p, n);
    size_t na = a->buffered ? 0 : (n - ta) / 64, nb = b->buffered ? 0 : (n - tb) / 64;
    size_t both = na < nb ? na : nb;
    compress2(a->h, p + ta, b->h, p + tb, both);
    rest(a, p + ta + 64 * both, n - ta - 64 * both);
    rest(b, p + tb + 64 * both, n - tb - 64 * both);
    b->length += n;
  }
  a->length += n;
}

static void digest_hex(const struct state *s, char out[64]) {
  struct state t = *s;
  uint8_t block[128] = {0};
  memcpy(block, t.buf, t.buffered);
  block[t.buffered] = 0x80;
  size_t blocks = t.buffered + 9 <= 64 ? 1 : 2;
  uint64_t bits = t.length * 8;
  for (int i = 0; i < 8; i++) block[blocks * 64 - 1 - i] = (uint8_t)(bits >> (8 * i));
  compress1(t.h, block, blocks);
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < 8; j++) out[8 * i + j] = digits[(t.h[i] >> (28 - 4 * j)) & 15];
}

static int cpu_has_sha(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
  if (!(c & bit_SSSE3) || !(c & bit_SSE4_1)) return 0;
  if (__get_cpuid_max(0, 0) < 7) return 0;
  __cpuid_count(7, 0, a, b, c, d);
  return (b & bit_SHA) != 0;
}

// ---- Node-API glue

static struct state *state_of(napi_env env, napi_value v) {
  uint8_t *data;
  size_t length;
  if (!bytes_of(env, v, &data, &length, "expected a Uint8Array")) return NULL;
  if (length != STATE_BYTES || ((uintptr_t)data & 7)) {
    napi_throw_range_error(env, NULL, "expected a SHA-256 state (stateBytes, 8-byte aligned)");
    return NULL;
  }
  return (struct state *)data;
}

/** The call's `n` arguments into argv; 0 (with a TypeError naming `usage`) when their count differs. */
static int args(napi_env env, napi_callback_info info, size_t n, napi_value *argv, const char *usage) {
  size_t argc = n;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc == n) return 1;
  napi_throw_type_error(env, NULL, usage);
  return 0;
}

/** The state a one-argument function was called with; NULL with a JavaScript exception pending. */
static struct state *state_arg(napi_env env, napi_callback_info info, const char *usage) {
  napi_value argv[1];
  return args(env, info, 1, argv, usage) ? state_of(env, argv[0]) : NULL;
}

static napi_value js_init(napi_env env, napi_callback_info info) {
  struct state *s = state_arg(env, info, "init(state)");
  if (!s) return NULL;
  memset(s, 0, sizeof *s);
  memcpy(s->h, H0, sizeof H0);
  return NULL;
}

static napi_value js_update(napi_env env, napi_callback_info info) {
  napi_value argv[3];
  if (!args(env, info, 3, argv, "update(a, b, data)")) return NULL;
  struct state *a = state_of(env, argv[0]);
  if (!a) return NULL;
  struct state *b = NULL;
  napi_valuetype t;
  napi_typeof(env, argv[1], &t);
  if (t != napi_null && t != napi_undefined) {
    b = state_of(env, argv[1]);
    if (!b) return NULL;
    if (a == b) {
      napi_throw_range_error(env, NULL, "update: a and b must be different states");
      return NULL;
    }
  }
  uint8_t *data;
  size_t length;
  if (!bytes_of(env, argv[2], &data, &length, "expected a Uint8Array")) return NULL;
  update(a, b, data, length);
  return NULL;
}

static napi_value js_hex(napi_env env, napi_callback_info info) {
  struct state *s = state_arg(env, info, "hex(state)");
  if (!s) return NULL;
  char out[64];
  digest_hex(s, out);
  napi_value result;
  napi_create_string_latin1(env, out, 64, &result);
  return result;
}

NAPI_MODULE_INIT() {
  napi_value v;
  napi_get_boolean(env, cpu_has_sha(), &v);
  napi_set_named_property(env, exports, "available", v);
  napi_create_uint32(env, STATE_BYTES, &v);
  napi_set_named_property(env, exports, "stateBytes", v);
  napi_create_function(env, "init", NAPI_AUTO_LENGTH, js_init, NULL, &v);
  napi_set_named_property(env, exports, "init", v);
  napi_create_function(env, "update", NAPI_AUTO_LENGTH, js_update, NULL, &v);
  napi_set_named_property(env, exports, "update", v);
  napi_create_function(env, "hex", NAPI_AUTO_LENGTH, js_hex, NULL, &v);
  napi_set_named_property(env, exports, "hex", v);
  return exports;
}

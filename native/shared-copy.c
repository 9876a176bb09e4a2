// memcpy for copies into or out of shared memory.
//
// V8 copies a TypedArray into or out of a SharedArrayBuffer (TypedArray.prototype.set) with
// relaxed atomic word moves, since another thread may touch the bytes meanwhile. In the upload
// path every body byte is copied from uWebSockets' receive buffer into a shared segment; with
// memcpy instead, the main thread's CPU per GiB of a resumable upload fell from 0.79 to 0.61 s
// on tmpfs (docs/performance.md, session 7). No other thread writes a segment while an upload fills it
// or reads a range the ingest copies out. Portable C: no CPU feature is needed. Exports:
//   copy(target, at, source)   copies all of source into target from byte `at` (Uint8Arrays)

#include <node_api.h>
#include <stdint.h>
#include <string.h>

#include "typed-bytes.h"

static napi_value js_copy(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc != 3) {
    napi_throw_type_error(env, NULL, "copy(target, at, source): three arguments");
    return NULL;
  }
  uint8_t *target, *source;
  size_t target_length, source_length;
  double at;
  const char *usage = "copy(target, at, source): expected Uint8Arrays";
  if (!bytes_of(env, argv[0], &target, &target_length, usage) || !bytes_of(env, argv[2], &source, &source_length, usage)) return NULL;
  if (napi_get_value_double(env, argv[1], &at) != napi_ok || !(at >= 0) || at != (double)(size_t)at) {
    napi_throw_type_error(env, NULL, "copy(target, at, source): at must be a whole number >= 0");
    return NULL;
  }
  if ((size_t)at > target_length || source_length > target_length - (size_t)at) {
    napi_throw_range_error(env, NULL, "copy(target, at, source): source does not fit in target from at");
    return NULL;
  }
  // memmove: target and source may be views of the same buffer.
  memmove(target + (size_t)at, source, source_length);
  return NULL;
}

NAPI_MODULE_INIT() {
  napi_value v;
  napi_create_function(env, "copy", NAPI_AUTO_LENGTH, js_copy, NULL, &v);
  napi_set_named_property(env, exports, "copy", v);
  return exports;
}

// The bytes of a Uint8Array argument, for the addons in native/.
#ifndef SVC_TYPED_BYTES_H
#define SVC_TYPED_BYTES_H

#include <node_api.h>
#include <stddef.h>
#include <stdint.h>

/** The data and length of `v`; 0, with a TypeError saying `message` pending, when it is not a Uint8Array. */
static inline int bytes_of(napi_env env, napi_value v, uint8_t **data, size_t *length, const char *message) {
  napi_typedarray_type type;
  size_t count, offset;
  void *base;
  napi_value buffer;
  if (napi_get_typedarray_info(env, v, &type, &count, &base, &buffer, &offset) != napi_ok || type != napi_uint8_array) {
    napi_throw_type_error(env, NULL, message);
    return 0;
  }
  *data = base;
  *length = count;
  return 1;
}

#endif

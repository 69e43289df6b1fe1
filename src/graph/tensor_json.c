/* tensor_json.c - tensors as JSON (docs/format.md §4): "values" in logical order, "data" as base64
 * of the physical bytes, or "blob" as a slice of the frame's binary payload; scalar printing and
 * the float16/bfloat16 conversions.
 *
 * Invariants and choices:
 * - Sizes are checked against the limits before anything is allocated: the byte size of the spec
 *   first, then the value count, base64 length or blob range, and only then the tensor buffer.
 * - Integers travel as JSON numbers while |v| <= 2^53, as docs/format.md §4 says; int64 values
 *   beyond that are written and must be given as decimal strings (a number beyond 2^53 is refused).
 * - Floats print with the fewest significant digits that read back to the same bits (through
 *   strtod, as cJSON reads, and for float32 also through strtof), laid out as Python's repr
 *   does (plain for exponents -4..15, else 1.5e+20); nan/inf are the strings "nan", "inf",
 *   "-inf". Numbers go into the tree as cJSON raw nodes so the text is exactly those digits.
 * - A JSON number arrives as the nearest double (cJSON); float32/float16/bfloat16 round once
 *   from that double, to nearest even. A decimal that is not itself a tie between two narrower
 *   values but lies within half a double ulp of one rounds as the tie does (such inputs carry
 *   far more digits than the narrow type holds).
 * - Raw bytes are little-endian (the host must be, see below). Printing assumes the C locale. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json_num.h"
#include "base/json_util.h"
#include "graph/tensor_json_internal.h"
#include "layout/tensor_internal.h"
#include "viewlower/layout.h"
#include "viewlower/tensor_json.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "tensor bytes are copied as they lie in memory; a big-endian host needs byte swapping here"
#endif

#define SAFE_INT_MAX INT64_C(9007199254740992) /* 2^53 */
#define NUM_TEXT_MAX 48

static const char *const body_keys[] = {"values", "data", "blob", NULL};
static const char *const blob_keys[] = {"offset", "nbytes", NULL};

/* ---------------------------------------------------------------- encoding names */

static const struct {
  const char *name;
  vl_encoding enc;
} encoding_table[] = {
    {"values", VL_ENCODING_VALUES}, {"base64", VL_ENCODING_BASE64}, {"blob", VL_ENCODING_BLOB}};

bool vl_encoding_from_name(const char *name, vl_encoding *out) {
  for (size_t i = 0; name != NULL && i < sizeof encoding_table / sizeof encoding_table[0]; i++) {
    if (strcmp(name, encoding_table[i].name) == 0) {
      *out = encoding_table[i].enc;
      return true;
    }
  }
  return false;
}

/* ---------------------------------------------------------------- integers in memory */

static const struct {
  int64_t min, max;
} int_range[VL_DTYPE_COUNT] = {
    [VL_DTYPE_UINT8] = {0, UINT8_MAX},
    [VL_DTYPE_INT8] = {INT8_MIN, INT8_MAX},
    [VL_DTYPE_INT16] = {INT16_MIN, INT16_MAX},
    [VL_DTYPE_INT32] = {INT32_MIN, INT32_MAX},
};

/* Integers in range for their dtype (checked by the readers) and floats, through the dtype
 * module's element stores. */
static void store_int(vl_dtype dt, int64_t x, void *dst) {
  vl_dtype_store(dt, dst, vl_scalar_int(x));
}

static int64_t load_int(vl_dtype dt, const void *src) {
  return vl_dtype_load(dt, src).i;
}

/* ---------------------------------------------------------------- reading numbers from JSON */

static bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

static const char *skip_digits(const char *p) {
  while (is_digit(*p)) p++;
  return p;
}

/* The text of a cJSON raw node (made by our own printer) holding exactly one JSON number. */
static bool raw_number(const char *s, double *out) {
  const char *p = s + (*s == '-');
  if (*p == '0') {
    p++;
  } else if (is_digit(*p)) {
    p = skip_digits(p);
  } else {
    return false;
  }
  if (*p == '.') {
    if (!is_digit(p[1])) return false;
    p = skip_digits(p + 1);
  }
  if (*p == 'e' || *p == 'E') {
    p += (p[1] == '+' || p[1] == '-') ? 2 : 1;
    if (!is_digit(*p)) return false;
    p = skip_digits(p);
  }
  if (*p != '\0') return false;
  *out = strtod(s, NULL);
  return true;
}

/* A JSON number as a double: a parsed number node, or a raw node from vl_scalar_to_json. */
static bool number_value(const cJSON *v, double *out) {
  if (cJSON_IsNumber(v)) {
    *out = v->valuedouble;
    return true;
  }
  return cJSON_IsRaw(v) && v->valuestring != NULL && raw_number(v->valuestring, out);
}

/* Strict decimal: -?(0|[1-9][0-9]*), within int64. */
static bool parse_decimal_int64(const char *s, int64_t *out) {
  bool neg = *s == '-';
  const char *p = s + neg;
  uint64_t limit = neg ? (uint64_t)INT64_MAX + 1u : (uint64_t)INT64_MAX;
  uint64_t acc = 0;
  if (!is_digit(*p) || (p[0] == '0' && p[1] != '\0')) return false;
  for (; *p != '\0'; p++) {
    if (!is_digit(*p)) return false;
    uint64_t d = (uint64_t)(*p - '0');
    if (acc > (limit - d) / 10u) return false;
    acc = acc * 10u + d;
  }
  if (!neg) {
    *out = (int64_t)acc;
  } else {
    *out = acc == (uint64_t)INT64_MAX + 1u ? INT64_MIN : -(int64_t)acc;
  }
  return true;
}

/* A 64-bit integer: a whole JSON number within +-2^53, or a decimal string. */
typedef enum { I64_OK, I64_NOT_INTEGER, I64_FRACTIONAL, I64_INEXACT, I64_BAD_STRING } i64_result;

static i64_result json_int64(const cJSON *v, int64_t *out) {
  double d;
  if (cJSON_IsString(v)) return parse_decimal_int64(v->valuestring, out) ? I64_OK : I64_BAD_STRING;
  if (!number_value(v, &d)) return I64_NOT_INTEGER;
  if (!isfinite(d) || floor(d) != d) return I64_FRACTIONAL;
  if (fabs(d) > (double)SAFE_INT_MAX) return I64_INEXACT;
  /* A number read from text keeps its token (valuestring): 9007199254740993 reads as the
   * double 2^53, so the bound is checked on the digits, or the value would change silently. */
  const char *tok = cJSON_IsNumber(v) ? v->valuestring : NULL;
  int64_t exact = 0;
  if (tok != NULL && strpbrk(tok, ".eE") == NULL &&
      (!parse_decimal_int64(tok, &exact) || exact > SAFE_INT_MAX || exact < -SAFE_INT_MAX)) {
    return I64_INEXACT;
  }
  *out = (int64_t)d;
  return I64_OK;
}

/* ---------------------------------------------------------------- element readers */

typedef struct elem_ctx {
  vl_dtype dtype;
  size_t index; /* logical index, for the error path /values/<index> */
  vl_error *err;
} elem_ctx;

static vl_status elem_fail(const elem_ctx *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static vl_status elem_fail(const elem_ctx *c, const char *fmt, ...) {
  char msg[VL_ERROR_MESSAGE_MAX];
  char path[VL_ERROR_PATH_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  vl__path_join_index(path, "/values", c->index);
  return vl_error_set(c->err, VL_ERR_INVALID_TENSOR, path, "%s", msg);
}

static vl_status read_int64(const elem_ctx *c, const cJSON *v, void *dst) {
  int64_t x = 0;
  switch (json_int64(v, &x)) {
  case I64_OK: store_int(c->dtype, x, dst); return VL_OK;
  case I64_FRACTIONAL: return elem_fail(c, "int64 value must be a whole number");
  case I64_INEXACT:
    return elem_fail(c, "int64 value beyond +-2^53 must be a decimal string to be exact");
  case I64_BAD_STRING:
    return elem_fail(c, "int64 string must be a decimal integer within the int64 range");
  default: return elem_fail(c, "int64 value must be a JSON number or a decimal string");
  }
}

static vl_status read_int(const elem_ctx *c, const cJSON *v, void *dst) {
  const char *name = vl_dtype_name(c->dtype);
  int64_t lo = int_range[c->dtype].min, hi = int_range[c->dtype].max;
  double d;
  if (!number_value(v, &d)) return elem_fail(c, "%s value must be a JSON number", name);
  if (!isfinite(d) || floor(d) != d) return elem_fail(c, "%s value must be a whole number", name);
  if (d < (double)lo || d > (double)hi) {
    return elem_fail(c, "%s value %.17g is outside [%" PRId64 ", %" PRId64 "]", name, d, lo, hi);
  }
  store_int(c->dtype, (int64_t)d, dst);
  return VL_OK;
}

static void store_float(vl_dtype dt, double d, void *dst) {
  vl_dtype_store(dt, dst, vl_scalar_float(d));
}

static const struct {
  const char *text;
  double value;
} float_words[] = {{"nan", NAN}, {"inf", INFINITY}, {"-inf", -INFINITY}};

static vl_status read_float(const elem_ctx *c, const cJSON *v, void *dst) {
  const char *name = vl_dtype_name(c->dtype);
  double d;
  if (number_value(v, &d)) {
    store_float(c->dtype, d, dst);
    return VL_OK;
  }
  for (size_t i = 0; cJSON_IsString(v) && i < sizeof float_words / sizeof float_words[0]; i++) {
    if (strcmp(v->valuestring, float_words[i].text) == 0) {
      store_float(c->dtype, float_words[i].value, dst);
      return VL_OK;
    }
  }
  if (cJSON_IsString(v)) {
    return elem_fail(c, "%s string must be \"nan\", \"inf\" or \"-inf\"", name);
  }
  return elem_fail(c, "%s value must be a JSON number or \"nan\", \"inf\", \"-inf\"", name);
}

static vl_status read_bool(const elem_ctx *c, const cJSON *v, void *dst) {
  if (!cJSON_IsBool(v)) return elem_fail(c, "bool value must be true or false");
  *(uint8_t *)dst = cJSON_IsTrue(v) ? 1 : 0;
  return VL_OK;
}

typedef vl_status (*elem_read_fn)(const elem_ctx *c, const cJSON *v, void *dst);

static const elem_read_fn elem_readers[VL_DTYPE_COUNT] = {
    [VL_DTYPE_UINT8] = read_int,      [VL_DTYPE_INT8] = read_int,
    [VL_DTYPE_INT16] = read_int,      [VL_DTYPE_INT32] = read_int,
    [VL_DTYPE_INT64] = read_int64,    [VL_DTYPE_FLOAT16] = read_float,
    [VL_DTYPE_BFLOAT16] = read_float, [VL_DTYPE_FLOAT32] = read_float,
    [VL_DTYPE_FLOAT64] = read_float,  [VL_DTYPE_BOOL] = read_bool,
};

/* ---------------------------------------------------------------- scalar printing */

static bool same_bits(const void *a, const void *b, size_t n) {
  return memcmp(a, b, n) == 0;
}

static bool f16_reads_back(const char *text, const void *elem) {
  uint16_t h = vl_f16_from_double(strtod(text, NULL));
  return same_bits(&h, elem, sizeof h);
}

static bool bf16_reads_back(const char *text, const void *elem) {
  uint16_t h = vl_bf16_from_double(strtod(text, NULL));
  return same_bits(&h, elem, sizeof h);
}

/* Both readers: a correctly rounding strtof, and our own path (strtod, then the C cast). */
static bool f32_reads_back(const char *text, const void *elem) {
  float a = strtof(text, NULL);
  float b = (float)strtod(text, NULL);
  return same_bits(&a, elem, sizeof a) && same_bits(&b, elem, sizeof b);
}

static bool f64_reads_back(const char *text, const void *elem) {
  double d = strtod(text, NULL);
  return same_bits(&d, elem, sizeof d);
}

/* A float as the shortest decimal that reads back to elem, or "nan"/"inf"/"-inf". */
static cJSON *float_node(double v, int max_digits, vl__reads_back_fn reads_back,
                         const void *elem) {
  char text[VL__NUM_TEXT_MAX];
  if (isnan(v)) return cJSON_CreateString("nan");
  if (isinf(v)) return cJSON_CreateString(v < 0 ? "-inf" : "inf");
  vl__num_format_shortest(v, max_digits, reads_back, elem, text);
  return cJSON_CreateRaw(text);
}

static cJSON *int64_node(int64_t v) {
  char text[NUM_TEXT_MAX];
  snprintf(text, sizeof text, "%" PRId64, v);
  if (v > SAFE_INT_MAX || v < -SAFE_INT_MAX) return cJSON_CreateString(text);
  return cJSON_CreateRaw(text);
}

static cJSON *print_int(vl_dtype dt, const void *elem) {
  return int64_node(load_int(dt, elem));
}

static cJSON *print_f16(vl_dtype dt, const void *elem) {
  uint16_t h;
  (void)dt;
  memcpy(&h, elem, sizeof h);
  return float_node(vl_f16_to_double(h), 17, f16_reads_back, elem);
}

static cJSON *print_bf16(vl_dtype dt, const void *elem) {
  uint16_t h;
  (void)dt;
  memcpy(&h, elem, sizeof h);
  return float_node(vl_bf16_to_double(h), 17, bf16_reads_back, elem);
}

static cJSON *print_f32(vl_dtype dt, const void *elem) {
  float f;
  (void)dt;
  memcpy(&f, elem, sizeof f);
  return float_node((double)f, 9, f32_reads_back, elem);
}

static cJSON *print_f64(vl_dtype dt, const void *elem) {
  double d;
  (void)dt;
  memcpy(&d, elem, sizeof d);
  return float_node(d, 17, f64_reads_back, elem);
}

static cJSON *print_bool(vl_dtype dt, const void *elem) {
  (void)dt;
  return cJSON_CreateBool(*(const uint8_t *)elem != 0);
}

typedef cJSON *(*elem_print_fn)(vl_dtype dt, const void *elem);

static const elem_print_fn elem_printers[VL_DTYPE_COUNT] = {
    [VL_DTYPE_UINT8] = print_int,     [VL_DTYPE_INT8] = print_int,
    [VL_DTYPE_INT16] = print_int,     [VL_DTYPE_INT32] = print_int,
    [VL_DTYPE_INT64] = print_int,     [VL_DTYPE_FLOAT16] = print_f16,
    [VL_DTYPE_BFLOAT16] = print_bf16, [VL_DTYPE_FLOAT32] = print_f32,
    [VL_DTYPE_FLOAT64] = print_f64,   [VL_DTYPE_BOOL] = print_bool,
};

cJSON *vl_scalar_to_json(vl_dtype dt, const void *elem) {
  if ((unsigned)dt >= VL_DTYPE_COUNT) return NULL;
  return elem_printers[dt](dt, elem);
}

/* ---------------------------------------------------------------- logical-order walk */

/* Advances a row-major index over shape by one, keeping *off = sum idx[d] * strides[d] (the
 * physical element offset) without a division per element. */
static void odometer_step(const vl_spec *s, const int64_t *strides, int64_t *idx, int64_t *off) {
  for (int d = (int)s->rank - 1; d >= 0; d--) {
    *off += strides[d];
    if (++idx[d] < s->shape[d]) return;
    *off -= strides[d] * s->shape[d];
    idx[d] = 0;
  }
}

/* ---------------------------------------------------------------- base64 */

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int b64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

/* Decoded size of padded base64 text of len characters; false when len is not a multiple of 4. */
static bool b64_decoded_size(const char *s, size_t len, size_t *out) {
  if (len % 4 != 0) return false;
  size_t pad = 0;
  if (len > 0 && s[len - 1] == '=') pad = s[len - 2] == '=' ? 2 : 1;
  *out = len / 4 * 3 - pad;
  return true;
}

/* Strict decoding of text whose size b64_decoded_size accepted: standard alphabet, '=' only
 * as final padding, zero padding bits. Returns the offset of the first offending character,
 * or len on success. */
static size_t b64_decode(const char *s, size_t len, uint8_t *dst) {
  for (size_t i = 0; i < len; i += 4) {
    bool last = i + 4 == len;
    int v[4];
    for (size_t k = 0; k < 4; k++) {
      bool pad_ok = last && (k == 3 || (k == 2 && s[i + 3] == '='));
      v[k] = (pad_ok && s[i + k] == '=') ? 0 : b64_value(s[i + k]);
      if (v[k] < 0) return i + k;
    }
    uint32_t q = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
    size_t n = (last && s[i + 2] == '=') ? 1 : (last && s[i + 3] == '=') ? 2 : 3;
    if ((n == 1 && (q & 0xffffu) != 0) || (n == 2 && (q & 0xffu) != 0)) {
      return i + n; /* the character carrying non-zero padding bits */
    }
    for (size_t k = 0; k < n; k++) *dst++ = (uint8_t)(q >> (16 - 8 * k));
  }
  return len;
}

uint64_t vl__base64_len(uint64_t n) {
  return n / 3 * 4 + (n % 3 != 0 ? 4 : 0); /* padded to whole quads */
}

/* Standard alphabet with padding; NULL when out of memory. Caller frees. */
static char *b64_encode(const uint8_t *p, size_t n) {
  if (n / 3 >= (SIZE_MAX - 8) / 4) return NULL;
  size_t len = (size_t)vl__base64_len(n);
  char *out = malloc(len + 1);
  if (out == NULL) return NULL;
  char *o = out;
  for (size_t i = 0; i < n; i += 3) {
    size_t rem = n - i;
    uint32_t q = (uint32_t)p[i] << 16;
    if (rem > 1) q |= (uint32_t)p[i + 1] << 8;
    if (rem > 2) q |= p[i + 2];
    *o++ = b64_alphabet[q >> 18];
    *o++ = b64_alphabet[(q >> 12) & 63u];
    *o++ = rem > 1 ? b64_alphabet[(q >> 6) & 63u] : '=';
    *o++ = rem > 2 ? b64_alphabet[q & 63u] : '=';
  }
  *o = '\0';
  return out;
}

/* ---------------------------------------------------------------- parsing a tensor */

typedef enum { BODY_VALUES, BODY_DATA, BODY_BLOB } body_kind;

/* What is known about a tensor object before its buffer is allocated. */
typedef struct tensor_head {
  vl_spec spec;
  int64_t numel;
  int64_t nbytes;
  body_kind kind;
  const cJSON *body;
  size_t data_len;     /* BODY_DATA: characters of the base64 text */
  int64_t blob_offset; /* BODY_BLOB */
} tensor_head;

/* Finds the one body key among obj's members. */
static vl_status find_body(const cJSON *obj, tensor_head *h, vl_error *err) {
  h->body = NULL;
  for (const cJSON *c = obj->child; c != NULL; c = c->next) {
    for (int k = 0; body_keys[k] != NULL; k++) {
      if (strcmp(c->string, body_keys[k]) != 0) continue;
      if (h->body != NULL) {
        char path[VL_ERROR_PATH_MAX];
        vl__path_join(path, "", c->string);
        return vl_error_set(err, VL_ERR_INVALID_TENSOR, path,
                            "a tensor has exactly one of values, data or blob");
      }
      h->body = c;
      h->kind = (body_kind)k;
    }
  }
  if (h->body == NULL) {
    return vl_error_set(err, VL_ERR_INVALID_TENSOR, "",
                        "a tensor needs one of values, data or blob");
  }
  return VL_OK;
}

/* Spec, byte size against the limit, and which body the tensor has. */
static vl_status parse_head(const cJSON *obj, const vl_limits *lim, tensor_head *h, vl_error *err) {
  vl_status st = vl_spec_from_json(obj, body_keys, &h->spec, err);
  if (st != VL_OK) return st;
  if (!vl_spec_numel(&h->spec, &h->numel) || !vl_spec_nbytes(&h->spec, &h->nbytes)) {
    return vl_error_set(err, VL_ERR_INVALID_TENSOR, "/shape", "byte size overflows 63 bits");
  }
  if (h->nbytes > lim->max_tensor_bytes) {
    return vl_error_set(err, VL_ERR_TOO_LARGE, "/shape",
                        "tensor of %" PRId64 " bytes exceeds the limit of %" PRId64 " bytes",
                        h->nbytes, lim->max_tensor_bytes);
  }
  return find_body(obj, h, err);
}

static vl_status check_values(const tensor_head *h, vl_error *err) {
  if (!cJSON_IsArray(h->body)) {
    return vl_error_set(err, VL_ERR_INVALID_TENSOR, "/values", "must be an array");
  }
  size_t count = 0;
  for (const cJSON *c = h->body->child; c != NULL; c = c->next) count++;
  if ((uint64_t)count != (uint64_t)h->numel) {
    return vl_error_set(err, VL_ERR_INVALID_TENSOR, "/values",
                        "expected %" PRId64 " values (numel of the shape), got %zu", h->numel,
                        count);
  }
  return VL_OK;
}

static vl_status check_data(tensor_head *h, vl_error *err) {
  if (!cJSON_IsString(h->body)) {
    return vl_error_set(err, VL_ERR_INVALID_TENSOR, "/data", "must be a base64 string");
  }
  size_t size;
  h->data_len = strlen(h->body->valuestring);
  if (!b64_decoded_size(h->body->valuestring, h->data_len, &size)) {
    return vl_error_set(err, VL_ERR_INVALID_TENSOR, "/data",
                        "base64 length %zu is not a multiple of 4", h->data_len);
  }
  if ((uint64_t)size != (uint64_t)h->nbytes) {
    return vl_error_set(err, VL_ERR_INVALID_TENSOR, "/data",
                        "decodes to %zu bytes but the tensor has %" PRId64 " bytes", size,
                        h->nbytes);
  }
  return VL_OK;
}

/* Reads blob/<key> as a non-negative 64-bit integer. */
static vl_status blob_field(const cJSON *blob, const char *key, int64_t *out, vl_error *err) {
  char path[VL_ERROR_PATH_MAX];
  vl__path_join(path, "/blob", key);
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(blob, key);
  if (v == NULL) return vl_error_set(err, VL_ERR_INVALID_TENSOR, path, "is required");
  if (json_int64(v, out) != I64_OK || *out < 0) {
    return vl_error_set(err, VL_ERR_INVALID_TENSOR, path,
                        "must be a non-negative whole number (a decimal string beyond 2^53)");
  }
  return VL_OK;
}

static vl_status check_blob(tensor_head *h, size_t payload_len, vl_error *err) {
  int64_t nbytes = 0, end;
  if (!cJSON_IsObject(h->body)) {
    return vl_error_set(err, VL_ERR_INVALID_TENSOR, "/blob",
                        "must be an object {\"offset\": N, \"nbytes\": M}");
  }
  vl_status st = vl__json_check_keys(h->body, blob_keys, NULL, "/blob", VL_ERR_INVALID_TENSOR, err);
  if (st == VL_OK) st = blob_field(h->body, "offset", &h->blob_offset, err);
  if (st == VL_OK) st = blob_field(h->body, "nbytes", &nbytes, err);
  if (st != VL_OK) return st;
  if (nbytes != h->nbytes) {
    return vl_error_set(err, VL_ERR_INVALID_TENSOR, "/blob/nbytes",
                        "is %" PRId64 " but the tensor has %" PRId64 " bytes", nbytes, h->nbytes);
  }
  if (__builtin_add_overflow(h->blob_offset, nbytes, &end)) {
    return vl_error_set(err, VL_ERR_INVALID_TENSOR, "/blob/offset",
                        "offset + nbytes overflows 63 bits");
  }
  if ((uint64_t)end > (uint64_t)payload_len) {
    return vl_error_set(err, VL_ERR_INVALID_TENSOR, "/blob/offset",
                        "bytes [%" PRId64 ", %" PRId64 ") lie outside the payload of %zu bytes",
                        h->blob_offset, end, payload_len);
  }
  return VL_OK;
}

/* Body checks that need no tensor buffer: counts, lengths, ranges. */
static vl_status check_body(tensor_head *h, size_t payload_len, vl_error *err) {
  switch (h->kind) {
  case BODY_VALUES: return check_values(h, err);
  case BODY_DATA: return check_data(h, err);
  default: return check_blob(h, payload_len, err);
  }
}

static vl_status fill_values(const tensor_head *h, vl_tensor *t, vl_error *err) {
  int64_t strides[VL_MAX_RANK], idx[VL_MAX_RANK] = {0}, off = 0;
  size_t esize = vl_dtype_size(h->spec.dtype);
  elem_ctx ctx = {h->spec.dtype, 0, err};
  elem_read_fn read = elem_readers[h->spec.dtype];
  vl_layout_strides(&h->spec, strides);
  for (const cJSON *v = h->body->child; v != NULL; v = v->next, ctx.index++) {
    vl_status st = read(&ctx, v, (uint8_t *)t->data + (size_t)off * esize);
    if (st != VL_OK) return st;
    odometer_step(&h->spec, strides, idx, &off);
  }
  return VL_OK;
}

/* Raw bytes of a bool tensor must be 0 or 1. */
static vl_status check_bool_bytes(const vl_tensor *t, const char *path, vl_error *err) {
  const uint8_t *p = t->data;
  if (t->spec.dtype != VL_DTYPE_BOOL) return VL_OK;
  for (int64_t i = 0; i < t->nbytes; i++) {
    if (p[i] > 1) {
      return vl_error_set(err, VL_ERR_INVALID_TENSOR, path,
                          "bool byte %" PRId64 " is %u; bool bytes must be 0 or 1", i, p[i]);
    }
  }
  return VL_OK;
}

static vl_status fill_data(const tensor_head *h, vl_tensor *t, vl_error *err) {
  size_t bad = b64_decode(h->body->valuestring, h->data_len, t->data);
  if (bad != h->data_len) {
    return vl_error_set(err, VL_ERR_INVALID_TENSOR, "/data",
                        "invalid base64 at character %zu (standard alphabet, '=' padding, "
                        "zero padding bits)",
                        bad);
  }
  return check_bool_bytes(t, "/data", err);
}

static vl_status fill_blob(const tensor_head *h, vl_tensor *t, const uint8_t *payload,
                           vl_error *err) {
  if (h->nbytes > 0) memcpy(t->data, payload + h->blob_offset, (size_t)h->nbytes);
  return check_bool_bytes(t, "/blob", err);
}

static vl_status fill_body(const tensor_head *h, vl_tensor *t, const uint8_t *payload,
                           vl_error *err) {
  switch (h->kind) {
  case BODY_VALUES: return fill_values(h, t, err);
  case BODY_DATA: return fill_data(h, t, err);
  default: return fill_blob(h, t, payload, err);
  }
}

/* Parses after parse_head: body checks, allocation, fill. */
static vl_status tensor_build(tensor_head *h, const uint8_t *payload, size_t payload_len,
                              const vl_limits *lim, vl_tensor **out, vl_error *err) {
  vl_tensor *t = NULL;
  vl_status st = check_body(h, payload_len, err);
  /* every body kind writes every byte (or the tensor is freed): no clearing first */
  if (st == VL_OK) st = vl__tensor_new_for_overwrite(&h->spec, lim, &t, err);
  if (st == VL_OK) st = fill_body(h, t, payload, err);
  if (st != VL_OK) {
    vl_tensor_free(t);
    return st;
  }
  *out = t;
  return VL_OK;
}

vl_status vl_tensor_from_json(const cJSON *obj, const uint8_t *payload, size_t payload_len,
                              const vl_limits *lim, vl_tensor **out, vl_error *err) {
  vl_limits defaults;
  tensor_head h;
  lim = vl__limits_or_default(lim, &defaults);
  if (payload == NULL) payload_len = 0;
  vl_status st = parse_head(obj, lim, &h, err);
  if (st != VL_OK) return st;
  return tensor_build(&h, payload, payload_len, lim, out, err);
}

/* A blob's bytes are borrowed when they are aligned for every element type (8 bytes). */
static bool blob_borrowable(const tensor_head *h, const uint8_t *payload) {
  return h->kind == BODY_BLOB && h->nbytes > 0 && (uintptr_t)(payload + h->blob_offset) % 8u == 0;
}

/* *view: the blob's bytes in payload, read in place (read only: see the header). */
static void blob_view(const tensor_head *h, const uint8_t *payload, vl_tensor *view) {
  memset(view, 0, sizeof *view);
  view->spec = h->spec;
  view->nbytes = h->nbytes;
  view->data = (void *)(uintptr_t)(payload + h->blob_offset);
}

/* The tensor obj's head and body checked against the payload (none when payload is NULL): what
 * both the lending probe and the borrowing read take first. */
static vl_status read_head(const cJSON *obj, const uint8_t *payload, size_t *payload_len,
                           const vl_limits *lim, tensor_head *h, vl_error *err) {
  if (payload == NULL) *payload_len = 0;
  vl_status st = parse_head(obj, lim, h, err);
  return st == VL_OK ? check_body(h, *payload_len, err) : st;
}

vl_status vl__tensor_from_json_lendable(const cJSON *obj, const uint8_t *payload,
                                        size_t payload_len, const vl_limits *lim, vl_tensor *view,
                                        vl_error *err) {
  vl_limits defaults;
  tensor_head h;
  lim = vl__limits_or_default(lim, &defaults);
  vl_status st = read_head(obj, payload, &payload_len, lim, &h, err);
  if (st != VL_OK) return st;
  if (!blob_borrowable(&h, payload) || h.spec.dtype == VL_DTYPE_BOOL) {
    /* a copy, or a check of every byte (check_bool_bytes): work that follows the payload */
    return vl_error_set(err, VL_ERR_INVALID_TENSOR, "",
                        "not a blob that can be lent without reading its bytes");
  }
  blob_view(&h, payload, view);
  return VL_OK;
}

vl_status vl_tensor_from_json_borrow(const cJSON *obj, const uint8_t *payload, size_t payload_len,
                                     const vl_limits *lim, vl_tensor *view, vl_tensor **owned,
                                     vl_error *err) {
  vl_limits defaults;
  tensor_head h;
  *owned = NULL;
  lim = vl__limits_or_default(lim, &defaults);
  vl_status st = read_head(obj, payload, &payload_len, lim, &h, err);
  if (st != VL_OK) return st;
  if (!blob_borrowable(&h, payload)) return tensor_build(&h, payload, payload_len, lim, owned, err);
  blob_view(&h, payload, view);
  return check_bool_bytes(view, "/blob", err);
}

cJSON *vl_tensor_to_json_take(vl_tensor *t, vl_encoding enc, vl_buf *payload) {
  if (enc != VL_ENCODING_BLOB || payload == NULL || payload->data != NULL || t->nbytes <= 0) {
    return vl_tensor_to_json(t, enc, payload);
  }
  cJSON *obj = vl_spec_to_json(&t->spec), *blob = cJSON_CreateObject();
  cJSON *off = int64_node(0), *n = int64_node(t->nbytes);
  bool ok = obj != NULL && blob != NULL && off != NULL && n != NULL &&
            cJSON_AddItemToObject(blob, "offset", off);
  if (ok) off = NULL; /* owned by blob now */
  ok = ok && cJSON_AddItemToObject(blob, "nbytes", n);
  if (ok) n = NULL;
  ok = ok && cJSON_AddItemToObject(obj, "blob", blob);
  if (!ok) {
    cJSON_Delete(off);
    cJSON_Delete(n);
    cJSON_Delete(blob);
    cJSON_Delete(obj);
    return NULL;
  }
  payload->data = t->data; /* the tensor's storage becomes the payload: no copy */
  payload->len = (size_t)t->nbytes;
  payload->cap = (size_t)t->nbytes;
  t->data = NULL;
  t->nbytes = 0;
  return obj;
}

/* ---------------------------------------------------------------- printing a tensor */

static cJSON *values_to_json(const vl_tensor *t) {
  int64_t strides[VL_MAX_RANK], idx[VL_MAX_RANK] = {0}, off = 0, numel;
  size_t esize = vl_dtype_size(t->spec.dtype);
  cJSON *arr = cJSON_CreateArray();
  if (arr == NULL || !vl_spec_numel(&t->spec, &numel)) goto fail;
  vl_layout_strides(&t->spec, strides);
  for (int64_t k = 0; k < numel; k++) {
    cJSON *v = vl_scalar_to_json(t->spec.dtype, (const uint8_t *)t->data + (size_t)off * esize);
    if (v == NULL || !cJSON_AddItemToArray(arr, v)) {
      cJSON_Delete(v);
      goto fail;
    }
    odometer_step(&t->spec, strides, idx, &off);
  }
  return arr;
fail:
  cJSON_Delete(arr);
  return NULL;
}

static cJSON *data_to_json(const vl_tensor *t) {
  char *text = b64_encode(t->data, (size_t)t->nbytes);
  cJSON *s = text != NULL ? cJSON_CreateString(text) : NULL;
  free(text);
  return s;
}

/* Appends the bytes at an 8-byte aligned offset of payload and returns {"offset","nbytes"}. */
static cJSON *blob_to_json(const vl_tensor *t, vl_buf *payload) {
  static const uint8_t zeros[8] = {0};
  if (payload == NULL) return NULL;
  size_t pad = (8u - payload->len % 8u) % 8u;
  if (vl_buf_append(payload, zeros, pad) != VL_OK) return NULL;
  size_t offset = payload->len;
  if (vl_buf_append(payload, t->data, (size_t)t->nbytes) != VL_OK) return NULL;
  cJSON *obj = cJSON_CreateObject();
  cJSON *off = int64_node((int64_t)offset), *n = int64_node(t->nbytes);
  if (obj == NULL || off == NULL || n == NULL || !cJSON_AddItemToObject(obj, "offset", off)) {
    goto fail;
  }
  off = NULL; /* owned by obj now */
  if (!cJSON_AddItemToObject(obj, "nbytes", n)) goto fail;
  return obj;
fail:
  cJSON_Delete(off);
  cJSON_Delete(n);
  cJSON_Delete(obj);
  return NULL;
}

cJSON *vl_tensor_to_json(const vl_tensor *t, vl_encoding enc, vl_buf *payload) {
  size_t saved_len = payload != NULL ? payload->len : 0;
  const char *key = enc == VL_ENCODING_BASE64 ? "data"
                    : enc == VL_ENCODING_BLOB ? "blob"
                                              : "values";
  cJSON *obj = vl_spec_to_json(&t->spec);
  cJSON *body = NULL;
  if (obj != NULL) {
    body = enc == VL_ENCODING_BASE64 ? data_to_json(t)
           : enc == VL_ENCODING_BLOB ? blob_to_json(t, payload)
                                     : values_to_json(t);
  }
  if (body == NULL || !cJSON_AddItemToObject(obj, key, body)) {
    cJSON_Delete(body);
    cJSON_Delete(obj);
    if (payload != NULL) payload->len = saved_len; /* leave the payload as it was */
    return NULL;
  }
  return obj;
}

/* ---------------------------------------------------------------- tensor maps */

typedef struct name_entry {
  const char *name;
  size_t index;
} name_entry;

static int name_entry_cmp(const void *a, const void *b) {
  const name_entry *x = a, *y = b;
  int c = strcmp(x->name, y->name);
  if (c != 0) return c;
  return x->index < y->index ? -1 : x->index > y->index;
}

/* Finds the earliest member (in document order) whose name repeats an earlier one, by sorting:
 * maps can be large, so no quadratic scan. *dup is SIZE_MAX when names are unique. */
static vl_status find_duplicate(const cJSON *obj, size_t count, size_t *dup) {
  name_entry *e = calloc(count > 0 ? count : 1, sizeof *e);
  if (e == NULL) return VL_ERR_NOMEM;
  size_t i = 0;
  for (const cJSON *c = obj->child; c != NULL; c = c->next, i++) e[i] = (name_entry){c->string, i};
  qsort(e, count, sizeof *e, name_entry_cmp);
  *dup = SIZE_MAX;
  for (i = 1; i < count; i++) {
    if (strcmp(e[i - 1].name, e[i].name) == 0 && e[i].index < *dup) *dup = e[i].index;
  }
  free(e);
  return VL_OK;
}

static vl_status map_check_names(const cJSON *obj, size_t count, vl_error *err) {
  size_t dup;
  if (find_duplicate(obj, count, &dup) != VL_OK) {
    return vl_error_set(err, VL_ERR_NOMEM, "", "out of memory");
  }
  if (dup == SIZE_MAX) return VL_OK;
  const cJSON *c = obj->child;
  for (size_t i = 0; i < dup; i++) c = c->next;
  char path[VL_ERROR_PATH_MAX];
  vl__path_join(path, "", c->string);
  return vl_error_set(err, VL_ERR_INVALID_TENSOR, path, "duplicate name \"%.64s\"", c->string);
}

/* Parses member c into slot m->count, charging its bytes to *budget (max_total_bytes). */
static vl_status map_add(vl_tensor_map *m, const cJSON *c, const uint8_t *payload, size_t plen,
                         const vl_limits *lim, int64_t *budget, vl_error *err) {
  tensor_head h;
  size_t len = strlen(c->string);
  if (len > lim->max_name_len) {
    return vl_error_set(err, VL_ERR_TOO_LARGE, "", "name of %zu bytes exceeds the limit of %u", len,
                        lim->max_name_len);
  }
  if (!vl__utf8_valid(c->string, len)) {
    return vl_error_set(err, VL_ERR_INVALID_TENSOR, "", "name is not valid UTF-8");
  }
  vl_status st = parse_head(c, lim, &h, err);
  if (st != VL_OK) return st;
  if (h.nbytes > *budget) {
    return vl_error_set(err, VL_ERR_TOO_LARGE, "/shape",
                        "tensors exceed the total limit of %" PRId64 " bytes",
                        lim->max_total_bytes);
  }
  *budget -= h.nbytes;
  m->names[m->count] = strdup(c->string);
  if (m->names[m->count] == NULL) return vl_error_set(err, VL_ERR_NOMEM, "", "out of memory");
  st = tensor_build(&h, payload, plen, lim, &m->tensors[m->count], err);
  if (st != VL_OK) {
    free(m->names[m->count]);
    m->names[m->count] = NULL;
    return st;
  }
  m->count++;
  return VL_OK;
}

static vl_tensor_map *map_alloc(size_t count) {
  vl_tensor_map *m = calloc(1, sizeof *m);
  if (m == NULL) return NULL;
  m->names = calloc(count > 0 ? count : 1, sizeof *m->names);
  m->tensors = calloc(count > 0 ? count : 1, sizeof *m->tensors);
  if (m->names == NULL || m->tensors == NULL) {
    vl_tensor_map_free(m);
    return NULL;
  }
  return m;
}

vl_status vl_tensor_map_from_json(const cJSON *obj, const uint8_t *payload, size_t payload_len,
                                  const vl_limits *lim, vl_tensor_map **out, vl_error *err) {
  vl_limits defaults;
  lim = vl__limits_or_default(lim, &defaults);
  if (payload == NULL) payload_len = 0;
  if (!cJSON_IsObject(obj)) {
    return vl_error_set(err, VL_ERR_INVALID_TENSOR, "",
                        "must be an object mapping names to tensors");
  }
  size_t count = 0;
  for (const cJSON *c = obj->child; c != NULL; c = c->next) count++;
  vl_status st = map_check_names(obj, count, err);
  if (st != VL_OK) return st;
  vl_tensor_map *m = map_alloc(count);
  if (m == NULL) return vl_error_set(err, VL_ERR_NOMEM, "", "out of memory");
  int64_t budget = lim->max_total_bytes;
  for (const cJSON *c = obj->child; c != NULL && st == VL_OK; c = c->next) {
    st = map_add(m, c, payload, payload_len, lim, &budget, err);
    if (st != VL_OK) {
      char prefix[VL_ERROR_PATH_MAX] = "";
      vl_pointer_append(prefix, sizeof prefix, c->string);
      vl_error_prefix(err, prefix);
    }
  }
  if (st != VL_OK) {
    vl_tensor_map_free(m);
    return st;
  }
  *out = m;
  return VL_OK;
}

vl_status vl_tensor_encoding_check(const vl_tensor *t, vl_encoding enc, const vl_limits *lim,
                                   vl_error *err) {
  int64_t numel = 0;
  vl_spec_numel(&t->spec, &numel);
  if (enc != VL_ENCODING_VALUES || lim == NULL || numel <= lim->max_json_values) return VL_OK;
  return vl_error_set(err, VL_ERR_TOO_LARGE, "/encoding",
                      "an output of %lld elements is too large for \"values\" (limit %lld): ask "
                      "for base64 or blob",
                      (long long)numel, (long long)lim->max_json_values);
}

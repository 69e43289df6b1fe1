/* test_copy.c - the copy engine and the view_copy kernel: worked examples, layouts, edge cases,
 * every error, and a seeded randomized comparison against a per-element reference copy.
 *
 * The engine's tests run with the kernels of one dispatch level: the machine's own, or the one
 * named by the environment variable VL_COPY_LEVEL (portable, sse2, ssse3, avx2, avx512; read
 * here and passed to the vl_copy_*_at entry points, the core reads no environment). ctest runs
 * the program once per level; a level this CPU cannot run exits 77 (skipped), and so does the
 * CPU's own level, which the plain run covers (unless VL_COPY_LEVEL_RUN_NATIVE is set). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <immintrin.h> /* _mm_sfence after the streamed kernels */
#endif

#include <cmocka.h>

#include "budget.h" /* random case counts sized for the build */

#include "exec/copy_kernels.h" /* the AVX-512 tables, called directly */
#include "viewlower/copy.h"
#include "viewlower/layout.h"
#include "viewlower/tensor.h"

/* The level every engine call in this file uses (set once in main). */
static vl_copy_level test_level;

/* ---- helpers ------------------------------------------------------------------------------ */

static vl_spec make_spec(vl_dtype dt, uint8_t rank, const int64_t *shape, const uint8_t *order) {
  vl_spec s;
  vl_spec_init(&s, dt, rank, shape);
  if (order != NULL) memcpy(s.dim_order, order, rank);
  return s;
}

static vl_tensor *new_tensor(const vl_spec *s) {
  vl_tensor *t = NULL;
  vl_error err;
  assert_int_equal(vl_tensor_new(s, NULL, &t, &err), VL_OK);
  return t;
}

/* Physical offset (elements) of logical index k. */
static int64_t offset_of(const vl_spec *s, const int64_t *strides, int64_t k) {
  int64_t off = 0;
  for (int d = s->rank - 1; d >= 0; d--) {
    off += (k % s->shape[d]) * strides[d];
    k /= s->shape[d];
  }
  return off;
}

/* Writes float32 value k at logical index k of t. */
static void fill_logical_f32(vl_tensor *t) {
  int64_t n, st[VL_MAX_RANK];
  assert_true(vl_spec_numel(&t->spec, &n));
  vl_layout_strides(&t->spec, st);
  for (int64_t k = 0; k < n; k++) ((float *)t->data)[offset_of(&t->spec, st, k)] = (float)k;
}

static void assert_logical_f32_is_iota(const vl_tensor *t) {
  int64_t n, st[VL_MAX_RANK];
  assert_true(vl_spec_numel(&t->spec, &n));
  vl_layout_strides(&t->spec, st);
  for (int64_t k = 0; k < n; k++)
    assert_true(((const float *)t->data)[offset_of(&t->spec, st, k)] == (float)k);
}

/* The reference: element k of dst = element k of src, by div/mod per element. */
static void reference_logical(const vl_spec *ds, void *dst, const vl_spec *ss, const void *src) {
  int64_t n, dst_st[VL_MAX_RANK], src_st[VL_MAX_RANK];
  size_t es = vl_dtype_size(ds->dtype);
  assert_true(vl_spec_numel(ds, &n));
  vl_layout_strides(ds, dst_st);
  vl_layout_strides(ss, src_st);
  for (int64_t k = 0; k < n; k++)
    memcpy((char *)dst + (size_t)offset_of(ds, dst_st, k) * es,
           (const char *)src + (size_t)offset_of(ss, src_st, k) * es, es);
}

/* xorshift64*: the property test's only source of randomness. */
static uint64_t rnd(uint64_t *state) {
  uint64_t x = *state;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *state = x;
  return x * 2685821657736338717ull;
}

static int64_t rnd_below(uint64_t *state, int64_t n) {
  return (int64_t)(rnd(state) % (uint64_t)n);
}

static void rnd_permutation(uint64_t *state, uint8_t *order, uint8_t rank) {
  vl_dim_order_default(order, rank);
  for (int i = rank - 1; i > 0; i--) {
    int j = (int)rnd_below(state, i + 1);
    uint8_t t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
}

static void fill_random_bytes(uint64_t *state, void *p, int64_t n) {
  for (int64_t i = 0; i < n; i++) ((uint8_t *)p)[i] = (uint8_t)rnd(state);
}

static const vl_dtype sized_dtypes_all[] = {VL_DTYPE_UINT8, VL_DTYPE_BFLOAT16, VL_DTYPE_INT32,
                                            VL_DTYPE_FLOAT64};

/* ---- worked examples ------------------------------------------------------------------------ */

static const float cl_buffer[12] = {0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11};

static void channels_last_buffer_flattens_to_logical_order(void **state) {
  (void)state;
  const int64_t shape[] = {1, 2, 2, 3}, size[] = {1, 2, -1};
  const uint8_t cl[] = {0, 2, 3, 1};
  vl_spec s = make_spec(VL_DTYPE_FLOAT32, 4, shape, cl);
  vl_tensor *x = new_tensor(&s), *out = NULL;
  vl_error err;
  memcpy(x->data, cl_buffer, sizeof cl_buffer);
  assert_int_equal(vl_view_copy(x, size, 3, NULL, NULL, &out, &err), VL_OK);
  assert_int_equal(out->spec.rank, 3);
  assert_int_equal(out->spec.shape[2], 6);
  for (int k = 0; k < 12; k++) assert_true(((float *)out->data)[k] == (float)k);
  vl_tensor_free(out);
  vl_tensor_free(x);
}

static void reading_the_buffer_as_an_alias_gives_buffer_order(void **state) {
  (void)state;
  /* What memory.view would do wrongly: reinterpret the channels-last storage as contiguous. */
  const int64_t shape[] = {1, 2, 6};
  vl_spec alias = make_spec(VL_DTYPE_FLOAT32, 3, shape, NULL);
  vl_spec flat = make_spec(VL_DTYPE_FLOAT32, 1, (const int64_t[]){12}, NULL);
  float logical[12];
  vl_error err;
  assert_int_equal(vl_copy_logical(&flat, logical, &alias, cl_buffer, &err), VL_OK);
  for (int k = 0; k < 12; k++) assert_true(logical[k] == cl_buffer[k]);
  assert_true(logical[1] == 6.0f); /* not 1: the alias reorders elements */
}

static void view_copy_into_channels_last_out_keeps_logical_order(void **state) {
  (void)state;
  const int64_t shape[] = {1, 2, 6}, size[] = {1, 2, 2, 3};
  const uint8_t cl[] = {0, 2, 3, 1};
  vl_spec s = make_spec(VL_DTYPE_FLOAT32, 3, shape, NULL);
  vl_tensor *x = new_tensor(&s), *out = NULL;
  vl_error err;
  fill_logical_f32(x);
  assert_int_equal(vl_view_copy(x, size, 4, cl, NULL, &out, &err), VL_OK);
  assert_memory_equal(out->data, cl_buffer, sizeof cl_buffer);
  vl_tensor_free(out);
  vl_tensor_free(x);
}

static void five_d_channels_last_flattens_to_logical_order(void **state) {
  (void)state;
  const int64_t shape[] = {2, 3, 4, 5, 6}, size[] = {2, 3, -1};
  const uint8_t cl[] = {0, 2, 3, 4, 1};
  vl_spec s = make_spec(VL_DTYPE_FLOAT32, 5, shape, cl);
  vl_tensor *x = new_tensor(&s), *out = NULL;
  vl_error err;
  fill_logical_f32(x);
  assert_int_equal(vl_view_copy(x, size, 3, NULL, NULL, &out, &err), VL_OK);
  assert_int_equal(out->spec.shape[2], 120);
  assert_logical_f32_is_iota(out);
  vl_tensor_free(out);
  vl_tensor_free(x);
}

static void one_channel_channels_last_is_a_plain_copy(void **state) {
  (void)state;
  const int64_t shape[] = {2, 1, 3, 4}, size[] = {2, 12};
  const uint8_t cl[] = {0, 2, 3, 1};
  vl_spec s = make_spec(VL_DTYPE_FLOAT32, 4, shape, cl);
  vl_tensor *x = new_tensor(&s), *out = NULL;
  vl_error err;
  assert_true(vl_layout_is_contiguous(&s));
  fill_logical_f32(x);
  for (int k = 0; k < 24; k++) assert_true(((float *)x->data)[k] == (float)k);
  assert_int_equal(vl_view_copy(x, size, 2, NULL, NULL, &out, &err), VL_OK);
  assert_memory_equal(out->data, x->data, 24 * sizeof(float));
  vl_tensor_free(out);
  vl_tensor_free(x);
}

static void zero_element_tensors_copy_nothing(void **state) {
  (void)state;
  const int64_t shape[] = {2, 0, 3}, size[] = {6, 0};
  const uint8_t order[] = {2, 0, 1};
  vl_spec s = make_spec(VL_DTYPE_INT32, 3, shape, order);
  vl_tensor *x = new_tensor(&s), *out = NULL;
  vl_error err;
  assert_int_equal(vl_view_copy(x, size, 2, NULL, NULL, &out, &err), VL_OK);
  assert_int_equal(out->nbytes, 0);
  assert_int_equal(out->spec.shape[0], 6);
  vl_tensor_free(out);
  vl_tensor_free(x);
}

static void strided_copy_of_an_empty_shape_leaves_dst_untouched(void **state) {
  (void)state;
  const int64_t shape[] = {3, 0, 2}, strides[] = {2, 2, 1};
  uint8_t dst[4] = {9, 9, 9, 9}, src[4] = {1, 2, 3, 4};
  vl_copy_strided(1, 3, shape, dst, strides, src, strides);
  for (int i = 0; i < 4; i++) assert_int_equal(dst[i], 9);
}

static void rank_zero_tensor_copies_its_one_element(void **state) {
  (void)state;
  const int64_t size[] = {1, 1};
  vl_spec s = make_spec(VL_DTYPE_INT64, 0, NULL, NULL);
  vl_tensor *x = new_tensor(&s), *out = NULL;
  vl_error err;
  *(int64_t *)x->data = -77;
  assert_int_equal(vl_view_copy(x, size, 2, NULL, NULL, &out, &err), VL_OK);
  assert_int_equal(*(int64_t *)out->data, -77);
  vl_tensor_free(out);
  out = NULL;
  assert_int_equal(vl_view_copy(x, NULL, 0, NULL, NULL, &out, &err), VL_OK);
  assert_int_equal(out->spec.rank, 0);
  assert_int_equal(*(int64_t *)out->data, -77);
  vl_tensor_free(out);
  vl_tensor_free(x);
}

static void every_dtype_flattens_channels_last_bit_exactly(void **state) {
  (void)state;
  const int64_t shape[] = {2, 3, 4, 5}, size[] = {2, 3, 20};
  const uint8_t cl[] = {0, 2, 3, 1};
  uint64_t rs = 42;
  for (int dt = 0; dt < VL_DTYPE_COUNT; dt++) {
    vl_spec s = make_spec((vl_dtype)dt, 4, shape, cl);
    vl_tensor *x = new_tensor(&s), *out = NULL;
    vl_error err;
    fill_random_bytes(&rs, x->data, x->nbytes);
    assert_int_equal(vl_view_copy(x, size, 3, NULL, NULL, &out, &err), VL_OK);
    assert_int_equal(out->spec.dtype, dt);
    void *want = calloc(1, (size_t)x->nbytes);
    assert_non_null(want);
    reference_logical(&out->spec, want, &x->spec, x->data);
    assert_memory_equal(out->data, want, (size_t)x->nbytes);
    free(want);
    vl_tensor_free(out);
    vl_tensor_free(x);
  }
}

/* C and H*W both span several transpose tiles, with ragged edges, in both directions. */
static void large_layout_changes_cross_tiles_for_every_element_size(void **state) {
  (void)state;
  const int64_t shape[] = {2, 37, 19, 23};
  const uint8_t cl[] = {0, 2, 3, 1};
  uint64_t rs = 99;
  for (size_t i = 0; i < 4; i++) {
    vl_spec a = make_spec(sized_dtypes_all[i], 4, shape, cl), b = a;
    vl_dim_order_default(b.dim_order, 4);
    vl_tensor *x = new_tensor(&a), *y = new_tensor(&b), *want = new_tensor(&b);
    vl_error err;
    fill_random_bytes(&rs, x->data, x->nbytes);
    assert_int_equal(vl_copy_logical_at(test_level, &y->spec, y->data, &x->spec, x->data, &err),
                     VL_OK);
    reference_logical(&want->spec, want->data, &x->spec, x->data);
    assert_memory_equal(y->data, want->data, (size_t)y->nbytes);
    assert_int_equal(vl_copy_logical_at(test_level, &x->spec, x->data, &y->spec, y->data, &err),
                     VL_OK);
    reference_logical(&x->spec, want->data, &y->spec, y->data);
    assert_memory_equal(x->data, want->data, (size_t)x->nbytes);
    vl_tensor_free(x);
    vl_tensor_free(y);
    vl_tensor_free(want);
  }
}

static void reference_strided(size_t es, uint8_t rank, const int64_t *shape, char *d,
                              const int64_t *dst, const char *s, const int64_t *src, int64_t n);

/* Channels-last to contiguous copies of 2 MiB and more write whole destination lines with
 * non-temporal stores. Here the destination starts one element past a line boundary and rows
 * are a whole number of lines apart, so each row has a partial head line, whole lines and a
 * one-element tail; C = 37 leaves a ragged last group of rows. Every element size. */
static void copies_larger_than_the_caches_stream_whole_lines_exactly(void **state) {
  (void)state;
  static const size_t sizes[] = {1, 2, 4, 8};
  uint64_t rs = 0x5EED0007u;
  for (size_t i = 0; i < 4; i++) {
    size_t es = sizes[i];
    const int64_t c = 37, hw = 64 * (int64_t)(((9u << 20) / (2 * 37 * es) + 63) / 64);
    const int64_t shape[] = {2, c, hw};
    const int64_t src_st[] = {c * hw, 1, c}, dst_st[] = {c * hw, hw, 1};
    size_t n = (size_t)(2 * c * hw) * es;
    char *src = malloc(n), *dst = aligned_alloc(64, n + 64), *want = malloc(n + 64);
    assert_true(src && dst && want);
    fill_random_bytes(&rs, src, (int64_t)n);
    memset(dst, 0x5a, n + 64);
    memset(want, 0x5a, n + 64);
    vl_copy_strided_at(test_level, es, 3, shape, dst + es, dst_st, src, src_st);
    reference_strided(es, 3, shape, want + es, dst_st, src, src_st, 2 * c * hw);
    if (memcmp(dst, want, n + 64) != 0) fail_msg("element size %zu: streamed copy differs", es);
    free(src);
    free(dst);
    free(want);
  }
}

/* Two to four channels (RGB images) take the split / merge kernels, both directions. */
static void narrow_channel_counts_deinterleave_and_interleave_exactly(void **state) {
  (void)state;
  const uint8_t cl[] = {0, 2, 3, 1};
  uint64_t rs = 17;
  for (int64_t c = 1; c <= 5; c++) {
    for (size_t i = 0; i < 4; i++) {
      const int64_t shape[] = {2, c, 9, 13};
      vl_spec a = make_spec(sized_dtypes_all[i], 4, shape, cl), b = a;
      vl_dim_order_default(b.dim_order, 4);
      vl_tensor *x = new_tensor(&a), *y = new_tensor(&b), *want = new_tensor(&b);
      vl_error err;
      fill_random_bytes(&rs, x->data, x->nbytes);
      assert_int_equal(vl_copy_logical_at(test_level, &y->spec, y->data, &x->spec, x->data, &err),
                       VL_OK);
      reference_logical(&want->spec, want->data, &x->spec, x->data);
      assert_memory_equal(y->data, want->data, (size_t)y->nbytes);
      assert_int_equal(vl_copy_logical_at(test_level, &x->spec, x->data, &y->spec, y->data, &err),
                       VL_OK);
      reference_logical(&x->spec, want->data, &y->spec, y->data);
      assert_memory_equal(x->data, want->data, (size_t)x->nbytes);
      vl_tensor_free(x);
      vl_tensor_free(y);
      vl_tensor_free(want);
    }
  }
}

static void contiguous_copy_is_bytewise_identical(void **state) {
  (void)state;
  const int64_t shape[] = {3, 5, 7}, size[] = {-1, 7};
  vl_spec s = make_spec(VL_DTYPE_FLOAT64, 3, shape, NULL);
  vl_tensor *x = new_tensor(&s), *out = NULL;
  vl_error err;
  uint64_t rs = 7;
  fill_random_bytes(&rs, x->data, x->nbytes);
  assert_int_equal(vl_view_copy(x, size, 2, NULL, NULL, &out, &err), VL_OK);
  assert_int_equal(out->spec.shape[0], 15);
  assert_memory_equal(out->data, x->data, (size_t)x->nbytes);
  vl_tensor_free(out);
  vl_tensor_free(x);
}

static void layouts_without_a_common_refinement_still_copy_in_logical_order(void **state) {
  (void)state;
  /* (2,3) and (3,2) share no refinement; neither side is contiguous. */
  const int64_t a[] = {2, 3}, b[] = {3, 2};
  const uint8_t rev[] = {1, 0};
  vl_spec sa = make_spec(VL_DTYPE_INT16, 2, a, rev), sb = make_spec(VL_DTYPE_INT16, 2, b, rev);
  int16_t src[6] = {0, 3, 1, 4, 2, 5}, dst[6] = {0}, want[6] = {0, 2, 4, 1, 3, 5};
  vl_error err;
  assert_int_equal(vl_copy_logical(&sb, dst, &sa, src, &err), VL_OK);
  assert_memory_equal(dst, want, sizeof want);
}

static void permute_moves_dims_like_pytorch(void **state) {
  (void)state;
  const int64_t shape[] = {2, 3, 4}, pshape[] = {4, 2, 3}, perm[] = {2, 0, 1};
  vl_spec s = make_spec(VL_DTYPE_FLOAT32, 3, shape, NULL);
  vl_spec d = make_spec(VL_DTYPE_FLOAT32, 3, pshape, NULL);
  float src[24], dst[24];
  vl_error err;
  for (int i = 0; i < 24; i++) src[i] = (float)i;
  assert_int_equal(vl_copy_permute(&d, dst, &s, src, perm, &err), VL_OK);
  /* dst[k][i][j] = src[i][j][k] */
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++)
      for (int k = 0; k < 4; k++) assert_true(dst[k * 6 + i * 3 + j] == src[i * 12 + j * 4 + k]);
}

/* ---- errors ----------------------------------------------------------------------------- */

static vl_status view_copy_status(const int64_t *shape, uint8_t rank, const int64_t *size,
                                  size_t size_rank, vl_error *err) {
  vl_spec s = make_spec(VL_DTYPE_FLOAT32, rank, shape, NULL);
  vl_tensor *x = new_tensor(&s), *out = NULL;
  vl_status st = vl_view_copy(x, size, size_rank, NULL, NULL, &out, err);
  assert_null(out);
  vl_tensor_free(x);
  return st;
}

static void assert_kernel_error(vl_status st, const vl_error *err, const char *needle) {
  assert_int_equal(st, VL_ERR_KERNEL);
  assert_int_equal(err->code, VL_ERR_KERNEL);
  if (strstr(err->message, needle) == NULL)
    fail_msg("message '%s' lacks '%s'", err->message, needle);
  assert_null(strchr(err->message, '\n'));
}

static void view_copy_rejects_two_inferred_sizes(void **state) {
  (void)state;
  const int64_t shape[] = {4, 6}, size[] = {-1, -1};
  vl_error err;
  assert_kernel_error(view_copy_status(shape, 2, size, 2, &err), &err, "-1");
}

static void view_copy_rejects_a_negative_size(void **state) {
  (void)state;
  const int64_t shape[] = {4, 6}, size[] = {-2, 12};
  vl_error err;
  assert_kernel_error(view_copy_status(shape, 2, size, 2, &err), &err, "negative");
}

static void view_copy_rejects_an_inferred_size_beside_a_zero(void **state) {
  (void)state;
  const int64_t shape[] = {0, 6}, size[] = {0, -1};
  vl_error err;
  assert_kernel_error(view_copy_status(shape, 2, size, 2, &err), &err, "view_copy");
}

static void view_copy_rejects_an_inferred_size_that_does_not_divide(void **state) {
  (void)state;
  const int64_t shape[] = {4, 6}, size[] = {5, -1};
  vl_error err;
  assert_kernel_error(view_copy_status(shape, 2, size, 2, &err), &err, "view_copy");
}

static void view_copy_rejects_a_different_element_count(void **state) {
  (void)state;
  const int64_t shape[] = {4, 6}, size[] = {5, 5};
  vl_error err;
  assert_kernel_error(view_copy_status(shape, 2, size, 2, &err), &err, "view_copy");
}

static void view_copy_rejects_rank_above_sixteen(void **state) {
  (void)state;
  const int64_t shape[] = {1}, size[17] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  vl_error err;
  assert_kernel_error(view_copy_status(shape, 1, size, 17, &err), &err, "17");
}

static void view_copy_rejects_an_out_of_another_dtype(void **state) {
  (void)state;
  const int64_t shape[] = {2, 3}, size[] = {6};
  vl_spec s = make_spec(VL_DTYPE_FLOAT32, 2, shape, NULL);
  vl_spec o = make_spec(VL_DTYPE_INT32, 1, size, NULL);
  vl_tensor *x = new_tensor(&s), *out = new_tensor(&o);
  vl_error err;
  assert_kernel_error(vl_view_copy_out(x, size, 1, out, &err), &err, "dtype");
  vl_tensor_free(out);
  vl_tensor_free(x);
}

static void view_copy_rejects_an_out_of_another_shape(void **state) {
  (void)state;
  const int64_t shape[] = {2, 3}, size[] = {6}, oshape[] = {3, 2};
  vl_spec s = make_spec(VL_DTYPE_FLOAT32, 2, shape, NULL);
  vl_spec o = make_spec(VL_DTYPE_FLOAT32, 2, oshape, NULL);
  vl_tensor *x = new_tensor(&s), *out = new_tensor(&o);
  vl_error err;
  assert_kernel_error(vl_view_copy_out(x, size, 1, out, &err), &err, "[3,2]");
  vl_tensor_free(out);
  vl_tensor_free(x);
}

static void view_copy_rejects_an_out_dim_order_that_is_no_permutation(void **state) {
  (void)state;
  const int64_t shape[] = {2, 3}, size[] = {3, 2};
  const uint8_t order[] = {1, 1};
  vl_spec s = make_spec(VL_DTYPE_FLOAT32, 2, shape, NULL);
  vl_tensor *x = new_tensor(&s), *out = NULL;
  vl_error err;
  assert_kernel_error(vl_view_copy(x, size, 2, order, NULL, &out, &err), &err, "permutation");
  assert_null(out);
  vl_tensor_free(x);
}

static void view_copy_over_the_tensor_limit_is_too_large(void **state) {
  (void)state;
  const int64_t shape[] = {4, 6}, size[] = {24};
  vl_spec s = make_spec(VL_DTYPE_FLOAT32, 2, shape, NULL);
  vl_tensor *x = new_tensor(&s), *out = NULL;
  vl_limits lim;
  vl_error err;
  vl_limits_default(&lim);
  lim.max_tensor_bytes = 64;
  assert_int_equal(vl_view_copy(x, size, 1, NULL, &lim, &out, &err), VL_ERR_TOO_LARGE);
  assert_null(out);
  vl_tensor_free(x);
}

static void logical_copy_rejects_mismatched_dtype_and_count(void **state) {
  (void)state;
  const int64_t a[] = {6}, b[] = {5};
  vl_spec sa = make_spec(VL_DTYPE_FLOAT32, 1, a, NULL), sb = make_spec(VL_DTYPE_INT32, 1, a, NULL);
  vl_spec sc = make_spec(VL_DTYPE_FLOAT32, 1, b, NULL);
  float x[6] = {0}, y[6] = {0};
  vl_error err;
  assert_kernel_error(vl_copy_logical(&sb, y, &sa, x, &err), &err, "dtypes differ");
  assert_kernel_error(vl_copy_logical(&sc, y, &sa, x, &err), &err, "counts differ");
}

static void permute_rejects_a_bad_permutation_or_shape(void **state) {
  (void)state;
  const int64_t shape[] = {2, 3}, dup[] = {0, 0}, swap[] = {1, 0};
  vl_spec s = make_spec(VL_DTYPE_FLOAT32, 2, shape, NULL);
  float x[6] = {0}, y[6] = {0};
  vl_error err;
  assert_kernel_error(vl_copy_permute(&s, y, &s, x, dup, &err), &err, "permutation");
  assert_string_equal(err.message, "dims [0,0] are not a permutation of 0..1");
  /* three lists, each its own: the input's shape, the dims, the output's shape */
  assert_kernel_error(vl_copy_permute(&s, y, &s, x, swap, &err), &err, "cannot give shape");
  assert_string_equal(err.message, "permute of [2,3] by [1,0] cannot give shape [2,3]");
}

/* ---- randomized property tests --------------------------------------------------------------- */

/* A random shape of rank 0..6 with mostly small sizes; now and then one long dim (to cross
 * transpose tiles) or a zero. */
static void rnd_shape(uint64_t *rs, uint8_t *rank, int64_t *shape) {
  *rank = (uint8_t)rnd_below(rs, 7);
  for (int d = 0; d < *rank; d++) {
    int64_t r = rnd_below(rs, 100);
    shape[d] = r < 2 ? 0 : r < 15 ? 1 : r < 90 ? 2 + rnd_below(rs, 5) : 17 + rnd_below(rs, 40);
  }
}

static const vl_dtype sized_dtypes[] = {VL_DTYPE_UINT8, VL_DTYPE_INT16, VL_DTYPE_FLOAT32,
                                        VL_DTYPE_INT64};

static void check_one_logical_case(uint64_t *rs, int iter) {
  vl_spec src, dst;
  uint8_t rank;
  int64_t shape[VL_MAX_RANK], numel;
  vl_dtype dt = sized_dtypes[rnd_below(rs, 4)];
  rnd_shape(rs, &rank, shape);
  src = make_spec(dt, rank, shape, NULL);
  rnd_permutation(rs, src.dim_order, rank);
  dst = src;
  rnd_permutation(rs, dst.dim_order, rank);
  if (!vl_spec_numel(&src, &numel) || numel > 4000000) return;
  size_t nb = (size_t)numel * vl_dtype_size(dt) + 1;
  char *s = malloc(nb), *d = malloc(nb), *want = malloc(nb);
  assert_true(s && d && want);
  fill_random_bytes(rs, s, (int64_t)nb);
  memset(d, 0xA5, nb);
  memset(want, 0xA5, nb);
  vl_error err;
  assert_int_equal(vl_copy_logical_at(test_level, &dst, d, &src, s, &err), VL_OK);
  reference_logical(&dst, want, &src, s);
  if (memcmp(d, want, nb) != 0) fail_msg("logical copy case %d differs from the reference", iter);
  free(s);
  free(d);
  free(want);
}

static void logical_copy_matches_reference_on_random_layouts(void **state) {
  (void)state;
  uint64_t rs = 0x5EED0001u;
  for (int i = 0, n = (int)vl_test_cases(3000); i < n; i++) check_one_logical_case(&rs, i);
}

/* A random factorisation of numel into rank 1..6 (for reshapes), or rank 0 when numel is 1. */
static uint8_t rnd_reshape(uint64_t *rs, int64_t numel, int64_t *shape) {
  uint8_t rank = 0;
  while (numel > 1 && rank < 5) {
    int64_t f = 2 + rnd_below(rs, 6);
    if (numel % f != 0) f = numel;
    shape[rank++] = f;
    numel /= f;
    if (rnd_below(rs, 4) == 0 && rank < 5) shape[rank++] = 1;
  }
  if (numel > 1 || (numel == 0)) shape[rank++] = numel;
  return rank;
}

static void check_one_reshape_case(uint64_t *rs, int iter) {
  vl_spec src, dst;
  uint8_t rank;
  int64_t shape[VL_MAX_RANK], numel;
  vl_dtype dt = sized_dtypes[rnd_below(rs, 4)];
  rnd_shape(rs, &rank, shape);
  src = make_spec(dt, rank, shape, NULL);
  rnd_permutation(rs, src.dim_order, rank);
  if (!vl_spec_numel(&src, &numel) || numel > 4000000) return;
  dst = make_spec(dt, rnd_reshape(rs, numel, shape), shape, NULL);
  rnd_permutation(rs, dst.dim_order, dst.rank);
  size_t nb = (size_t)numel * vl_dtype_size(dt) + 1;
  char *s = malloc(nb), *d = malloc(nb), *want = malloc(nb);
  assert_true(s && d && want);
  fill_random_bytes(rs, s, (int64_t)nb);
  memset(d, 0x5A, nb);
  memset(want, 0x5A, nb);
  vl_error err;
  assert_int_equal(vl_copy_logical_at(test_level, &dst, d, &src, s, &err), VL_OK);
  reference_logical(&dst, want, &src, s);
  if (memcmp(d, want, nb) != 0) fail_msg("reshape case %d differs from the reference", iter);
  free(s);
  free(d);
  free(want);
}

static void reshaping_copy_matches_reference_on_random_layouts(void **state) {
  (void)state;
  uint64_t rs = 0x5EED0002u;
  for (int i = 0, n = (int)vl_test_cases(3000); i < n; i++) check_one_reshape_case(&rs, i);
}

/* Random non-dense strides: a random dim order with random gaps, element sizes 1..16. */
static int64_t rnd_strides(uint64_t *rs, uint8_t rank, const int64_t *shape, int64_t *st) {
  uint8_t order[VL_MAX_RANK];
  int64_t acc = 1 + rnd_below(rs, 2);
  rnd_permutation(rs, order, rank);
  for (int i = rank - 1; i >= 0; i--) {
    st[order[i]] = acc;
    acc *= (shape[order[i]] > 0 ? shape[order[i]] : 1) + rnd_below(rs, 2);
  }
  return acc; /* elements spanned (upper bound) */
}

static void reference_strided(size_t es, uint8_t rank, const int64_t *shape, char *d,
                              const int64_t *dst, const char *s, const int64_t *src, int64_t n) {
  for (int64_t k = 0; k < n; k++) {
    int64_t rem = k, od = 0, os = 0;
    for (int i = rank - 1; i >= 0; i--) {
      od += (rem % shape[i]) * dst[i];
      os += (rem % shape[i]) * src[i];
      rem /= shape[i];
    }
    memcpy(d + (size_t)od * es, s + (size_t)os * es, es);
  }
}

static void check_one_strided_case(uint64_t *rs, int iter) {
  static const size_t sizes[] = {1, 2, 3, 4, 8, 16};
  uint8_t rank;
  int64_t shape[VL_MAX_RANK], ds[VL_MAX_RANK], ss[VL_MAX_RANK], numel = 1;
  size_t es = sizes[rnd_below(rs, 6)];
  rnd_shape(rs, &rank, shape);
  for (int i = 0; i < rank; i++) numel *= shape[i];
  if (numel > 1000000) return;
  size_t nd = (size_t)rnd_strides(rs, rank, shape, ds) * es;
  size_t ns = (size_t)rnd_strides(rs, rank, shape, ss) * es;
  char *s = malloc(ns), *d = malloc(nd), *want = malloc(nd);
  assert_true(s && d && want);
  fill_random_bytes(rs, s, (int64_t)ns);
  memset(d, 0x33, nd);
  memset(want, 0x33, nd);
  vl_copy_strided_at(test_level, es, rank, shape, d, ds, s, ss);
  reference_strided(es, rank, shape, want, ds, s, ss, numel);
  if (memcmp(d, want, nd) != 0) fail_msg("strided copy case %d differs from the reference", iter);
  free(s);
  free(d);
  free(want);
}

static void strided_copy_matches_reference_on_random_gapped_strides(void **state) {
  (void)state;
  uint64_t rs = 0x5EED0003u;
  for (int i = 0, n = (int)vl_test_cases(3000); i < n; i++) check_one_strided_case(&rs, i);
}

static void permute_matches_reference_on_random_layouts(void **state) {
  (void)state;
  uint64_t rs = 0x5EED0004u;
  for (int iter = 0, iters = (int)vl_test_cases(1000); iter < iters; iter++) {
    uint8_t rank, p8[VL_MAX_RANK];
    int64_t shape[VL_MAX_RANK], pshape[VL_MAX_RANK], perm[VL_MAX_RANK], numel;
    vl_dtype dt = sized_dtypes[rnd_below(&rs, 4)];
    rnd_shape(&rs, &rank, shape);
    rnd_permutation(&rs, p8, rank);
    for (int d = 0; d < rank; d++) perm[d] = p8[d], pshape[d] = shape[p8[d]];
    vl_spec src = make_spec(dt, rank, shape, NULL), dst = make_spec(dt, rank, pshape, NULL);
    rnd_permutation(&rs, src.dim_order, rank);
    rnd_permutation(&rs, dst.dim_order, rank);
    if (!vl_spec_numel(&src, &numel) || numel > 1000000) continue;
    size_t es = vl_dtype_size(dt), nb = (size_t)numel * es + 1;
    char *s = malloc(nb), *d = malloc(nb), *want = malloc(nb);
    assert_true(s && d && want);
    fill_random_bytes(&rs, s, (int64_t)nb);
    memset(d, 0, nb);
    memset(want, 0, nb);
    vl_error err;
    assert_int_equal(vl_copy_permute_at(test_level, &dst, d, &src, s, perm, &err), VL_OK);
    /* reference: permuted strides of src, iterated over dst's shape */
    int64_t sst[VL_MAX_RANK], pst[VL_MAX_RANK], dst_st[VL_MAX_RANK];
    vl_layout_strides(&src, sst);
    vl_layout_strides(&dst, dst_st);
    for (int d2 = 0; d2 < rank; d2++) pst[d2] = sst[perm[d2]];
    reference_strided(es, rank, pshape, want, dst_st, s, pst, numel);
    if (memcmp(d, want, nb) != 0) fail_msg("permute case %d differs from the reference", iter);
    free(s);
    free(d);
    free(want);
  }
}

/* Copies an outer x nx x ny plane of es-byte elements (shape[]) with the engine at the test's
 * level, from and to buffers that start 0..15 bytes past an allocation (drawn from rs, then
 * the source bytes), and compares the destination, every byte around the elements included
 * (pre-filled with fill), with the reference walk. */
static bool plane_matches_reference(uint64_t *rs, size_t es, const int64_t *shape,
                                    const int64_t *dst_st, const int64_t *src_st, int fill) {
  size_t dofs = (size_t)rnd_below(rs, 16), sofs = (size_t)rnd_below(rs, 16);
  size_t nd = (size_t)(shape[0] * dst_st[0]) * es + dofs,
         ns = (size_t)(shape[0] * src_st[0]) * es + sofs;
  char *s = malloc(ns), *d = malloc(nd), *want = malloc(nd);
  assert_true(s && d && want);
  fill_random_bytes(rs, s, (int64_t)ns);
  memset(d, fill, nd);
  memset(want, fill, nd);
  vl_copy_strided_at(test_level, es, 3, shape, d + dofs, dst_st, s + sofs, src_st);
  reference_strided(es, 3, shape, want + dofs, dst_st, s + sofs, src_st,
                    shape[0] * shape[1] * shape[2]);
  bool same = memcmp(d, want, nd) == 0;
  free(s);
  free(d);
  free(want);
  return same;
}

/* Random 2-D planes, destination-contiguous along y and source-contiguous along x, for every
 * element size with a transpose kernel: sizes cross the blocks of every level (16 x 16 bytes,
 * 8 x 8 and 16 x 16 words) with ragged edges; rows are padded and the buffers start at odd
 * offsets, so no kernel may rely on alignment. Some planes repeat over an outer dim. */
static void transposes_match_reference_for_every_element_size(void **state) {
  (void)state;
  static const size_t sizes[] = {1, 2, 4, 8};
  uint64_t rs = 0x5EED0005u;
  for (int iter = 0, iters = (int)vl_test_cases(2500); iter < iters; iter++) {
    size_t es = sizes[rnd_below(&rs, 4)];
    int64_t nx = 1 + rnd_below(&rs, iter % 10 == 0 ? 300 : 70);
    int64_t ny = 1 + rnd_below(&rs, iter % 10 == 1 ? 300 : 70);
    int64_t outer = 1 + rnd_below(&rs, 3);
    int64_t dpad = rnd_below(&rs, 3), spad = rnd_below(&rs, 3);
    const int64_t shape[] = {outer, nx, ny};
    const int64_t dst_st[] = {nx * (ny + dpad), ny + dpad, 1};
    const int64_t src_st[] = {ny * (nx + spad), 1, nx + spad};
    if (!plane_matches_reference(&rs, es, shape, dst_st, src_st, 0x6b))
      fail_msg("level %s: transpose %zu-byte %lldx%lldx%lld differs",
               vl_copy_level_name(test_level), es, (long long)outer, (long long)nx, (long long)ny);
  }
}

/* Bytes mapped from /dev/zero with an inaccessible page after them, the buffer ending right at
 * it: a kernel that reads or writes one byte past the buffer faults. */
typedef struct guarded {
  char *map, *p;
  size_t len;
} guarded;

static guarded guarded_new(size_t n) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE), body = (n + page - 1) / page * page;
  guarded g = {NULL, NULL, body + page};
  FILE *z = fopen("/dev/zero", "rb");
  assert_non_null(z);
  void *m = mmap(NULL, g.len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fileno(z), 0);
  fclose(z);
  assert_true(m != MAP_FAILED);
  g.map = m;
  assert_int_equal(mprotect(g.map + body, page, PROT_NONE), 0);
  g.p = g.map + body - n;
  return g;
}

static void guarded_free(guarded g) {
  munmap(g.map, g.len);
}

/* Every transpose block shape, at sizes on both sides of its edges: planes of 1..3 whole
 * stripes of the widest blocks (64 rows of bytes, 32 of 2-byte words) plus 0..20 rows, widths
 * around 8 and 16 elements with odd tails and around the edge blocks' 32 and 64 (AMD's
 * AVX-512 table), each buffer ending at an inaccessible page (the
 * AVX-512 blocks load rows with masked 64-byte windows that reach past the row, never past
 * what the mask enables). */
static void transposes_at_block_edges_stay_inside_their_buffers(void **state) {
  (void)state;
  static const size_t sizes[] = {1, 2, 4, 8};
  static const int64_t xs[] = {1, 7, 8, 9, 15, 16, 17, 23, 31, 33, 47, 64, 70, 95, 128, 131};
  static const int64_t ys[] = {1,   15,  16,  17,  31,  32,  33,  40,  47,  48,  63,
                               64,  65,  70,  79,  80,  95,  96,  97,  127, 128, 129,
                               143, 191, 192, 193, 196, 200, 207, 208, 212};
  uint64_t rs = 0x5EED0007u;
  for (size_t e = 0; e < 4; e++) {
    size_t es = sizes[e];
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
      for (size_t j = 0; j < sizeof ys / sizeof ys[0]; j++) {
        int64_t nx = xs[i], ny = ys[j], dpad = (int64_t)(i + j) % 3, spad = (int64_t)(i * j) % 5;
        const int64_t shape[] = {nx, ny}, dst_st[] = {ny + dpad, 1}, src_st[] = {1, nx + spad};
        /* the last row of each side ends its buffer (no padding after it) */
        size_t nd = (size_t)((nx - 1) * (ny + dpad) + ny) * es,
               ns = (size_t)((ny - 1) * (nx + spad) + nx) * es;
        guarded s = guarded_new(ns), d = guarded_new(nd);
        char *want = malloc(nd);
        assert_non_null(want);
        fill_random_bytes(&rs, s.p, (int64_t)ns);
        memset(d.p, 0x5a, nd);
        memset(want, 0x5a, nd);
        vl_copy_strided_at(test_level, es, 2, shape, d.p, dst_st, s.p, src_st);
        reference_strided(es, 2, shape, want, dst_st, s.p, src_st, nx * ny);
        if (memcmp(d.p, want, nd) != 0)
          fail_msg("level %s: transpose %zu-byte %lldx%lld differs", vl_copy_level_name(test_level),
                   es, (long long)nx, (long long)ny);
        free(want);
        guarded_free(s);
        guarded_free(d);
      }
    }
  }
}

/* Destination rows a multiple of 64 bytes apart, the destination starting at every element
 * offset within a line: the AVX-512 tiles then start their stripes at the first line boundary
 * and give the rows before it to the smaller blocks (fewer or more than those blocks hold). */
static void transposes_with_line_multiple_rows_match_at_every_offset(void **state) {
  (void)state;
  static const size_t sizes[] = {1, 2, 4, 8};
  static const int64_t ys[] = {64, 65, 100, 127, 128, 129, 150, 200};
  uint64_t rs = 0x5EED0008u;
  for (size_t e = 0; e < 4; e++) {
    size_t es = sizes[e];
    for (size_t j = 0; j < sizeof ys / sizeof ys[0]; j++) {
      for (size_t ofs = 0; ofs < 64; ofs += es) {
        int64_t nx = 17 + (int64_t)(ofs % 3) * 8, ny = ys[j];
        int64_t row = ((ny * (int64_t)es + 63) / 64 * 64) / (int64_t)es;
        const int64_t shape[] = {nx, ny}, dst_st[] = {row, 1}, src_st[] = {1, nx};
        size_t nd = (size_t)(nx * row) * es + 64, ns = (size_t)(nx * ny) * es;
        char *s = malloc(ns), *base = malloc(nd + 64), *want = malloc(nd + 64);
        assert_true(s && base && want);
        /* d: a 64-byte boundary plus ofs */
        char *d = base + (64 - (uintptr_t)base % 64) % 64 + ofs;
        size_t at = (size_t)(d - base);
        fill_random_bytes(&rs, s, (int64_t)ns);
        memset(base, 0x77, nd + 64);
        memset(want, 0x77, nd + 64);
        vl_copy_strided_at(test_level, es, 2, shape, d, dst_st, s, src_st);
        reference_strided(es, 2, shape, want + at, dst_st, s, src_st, nx * ny);
        if (memcmp(base, want, nd + 64) != 0)
          fail_msg("level %s: transpose %zu-byte %lldx%lld at line offset %zu differs",
                   vl_copy_level_name(test_level), es, (long long)nx, (long long)ny, ofs);
        free(s);
        free(base);
        free(want);
      }
    }
  }
}

/* Destination rows a multiple of 1, 2 or 4 KiB apart (4 KiB aliasing: such planes of narrow
 * tiles go through a staging buffer, STAGE_ROWS rows of STAGE_SPAN bytes at a time): rows
 * padded past their elements or not, plane sizes around the buffer's rows and span with ragged
 * edges (the last steps moved back), buffers at odd offsets, an outer dim, every element size.
 * Bytes past each row's elements stay as they were. */
static void transposes_with_aliasing_row_strides_match(void **state) {
  (void)state;
  static const size_t sizes[] = {1, 2, 4, 8};
  static const int64_t kib[] = {1, 2, 4, 8};
  uint64_t rs = 0x5EED0009u;
  for (int iter = 0, iters = (int)vl_test_cases(400); iter < iters; iter++) {
    size_t es = sizes[rnd_below(&rs, 4)];
    int64_t row = kib[rnd_below(&rs, 4)] * 1024 / (int64_t)es; /* elements */
    int64_t ny = iter % 2 == 0 ? row : 1 + rnd_below(&rs, row);
    int64_t nx = 1 + rnd_below(&rs, iter % 3 == 0 ? 200 : 80), outer = 1 + rnd_below(&rs, 2);
    int64_t spad = rnd_below(&rs, 3);
    const int64_t shape[] = {outer, nx, ny};
    const int64_t dst_st[] = {nx * row, row, 1}, src_st[] = {ny * (nx + spad), 1, nx + spad};
    if (!plane_matches_reference(&rs, es, shape, dst_st, src_st, 0x3c))
      fail_msg("level %s: transpose %zu-byte %lldx%lldx%lld, rows %lld bytes apart, differs",
               vl_copy_level_name(test_level), es, (long long)outer, (long long)nx, (long long)ny,
               (long long)(row * (int64_t)es));
  }
}

/* Images: 2..5 channels of every element size, deinterleaved (NHWC -> NCHW) and interleaved
 * (NCHW -> NHWC), pixel counts around every group size of the shuffle kernels (16 and 32 bytes
 * per channel and step) and their tails, planes padded, buffers at odd offsets. */
static void narrow_planes_match_reference_in_both_directions(void **state) {
  (void)state;
  static const size_t sizes[] = {1, 2, 4, 8};
  uint64_t rs = 0x5EED0006u;
  for (int iter = 0, iters = (int)vl_test_cases(3000); iter < iters; iter++) {
    size_t es = sizes[rnd_below(&rs, 4)];
    int64_t c = 2 + rnd_below(&rs, 4), n = rnd_below(&rs, iter % 8 == 0 ? 2000 : 200);
    int64_t outer = 1 + rnd_below(&rs, 2), pad = rnd_below(&rs, 40);
    bool split = rnd_below(&rs, 2) == 0;
    /* interleaved side: outer x n x c dense; planar side: outer x c x (n + pad) */
    const int64_t shape[] = {outer, c, n};
    const int64_t inter[] = {n * c, 1, c}, planar[] = {c * (n + pad), n + pad, 1};
    const int64_t *dst_st = split ? planar : inter, *src_st = split ? inter : planar;
    size_t dofs = (size_t)rnd_below(&rs, 16), sofs = (size_t)rnd_below(&rs, 16);
    size_t nd = (size_t)(outer * dst_st[0]) * es + dofs,
           ns = (size_t)(outer * src_st[0]) * es + sofs;
    char *s = malloc(ns + 1), *d = malloc(nd + 1), *want = malloc(nd + 1);
    assert_true(s && d && want);
    fill_random_bytes(&rs, s, (int64_t)ns + 1);
    memset(d, 0x3c, nd + 1);
    memset(want, 0x3c, nd + 1);
    vl_copy_strided_at(test_level, es, 3, shape, d + dofs, dst_st, s + sofs, src_st);
    reference_strided(es, 3, shape, want + dofs, dst_st, s + sofs, src_st, outer * c * n);
    if (memcmp(d, want, nd + 1) != 0)
      fail_msg("level %s: %s of %lld channels, %zu-byte, %lld pixels differs",
               vl_copy_level_name(test_level), split ? "deinterleave" : "interleave", (long long)c,
               es, (long long)n);
    free(s);
    free(d);
    free(want);
  }
}

/* The three AVX-512 tables (copy_avx512.c: masked windows for Intel cores, inserts and
 * streamed transposes for AMD ones, and Zen 4's, which takes the AVX2 level's float tile and
 * image kernels) called directly on any CPU that runs the level, so the tables the engine does
 * not pick on this CPU are checked too: every tile against the portable tile on random planes
 * with random strides and destination offsets (and the walks over whole planes, in random
 * tile shapes), every streamed transpose on the planes its contract allows (d on a line, dx a
 * multiple of 64, 8 destination rows, ny * size a multiple of 64), the 3-channel split and
 * merge (where the table has its own) against a byte loop.
 * Bytes outside each destination element stay as they were. */
static void the_avx512_tables_match_the_portable_kernels(void **state) {
  (void)state;
#if defined(__x86_64__)
  if (!vl_copy_level_supported(VL_COPY_AVX512)) {
    skip();
    return;
  }
  const vl__copy_kernels *tables[] = {&vl__copy_kernels_avx512, &vl__copy_kernels_avx512_amd,
                                      &vl__copy_kernels_avx512_zen4};
  enum { TABLES = sizeof tables / sizeof *tables };
  uint64_t rs = 0x5eed5eedull;
  enum { CAP = 1 << 20 };
  char *src = aligned_alloc(64, CAP), *got = aligned_alloc(64, CAP), *want = aligned_alloc(64, CAP);
  assert_non_null(src);
  assert_non_null(got);
  assert_non_null(want);
  fill_random_bytes(&rs, src, CAP);
  uint64_t cases = vl_test_cases(300);
  for (uint64_t c = 0; c < cases; c++) {
    const vl__copy_kernels *t = tables[c % TABLES];
    size_t row = (size_t)rnd_below(&rs, 4), e = (size_t)1 << row;
    bool stream = t->stream[row] != NULL && rnd_below(&rs, 3) == 0;
    int64_t nx = stream ? 8 : 1 + rnd_below(&rs, 200), ny = 1 + rnd_below(&rs, 200);
    ptrdiff_t off = (ptrdiff_t)(rnd_below(&rs, 64) / (int64_t)e) * (ptrdiff_t)e;
    if (stream) {
      ny = (1 + rnd_below(&rs, 4)) * (int64_t)(64 / e);
      off = 0;
    }
    ptrdiff_t dx = (ptrdiff_t)((ny + rnd_below(&rs, 40)) * (int64_t)e);
    if (stream) dx = (dx + 63) / 64 * 64;
    ptrdiff_t sy = (ptrdiff_t)((nx + rnd_below(&rs, 40)) * (int64_t)e);
    assert_true(off + nx * dx <= CAP && ny * sy <= CAP);
    memset(got, 0xA5, (size_t)(off + nx * dx));
    memset(want, 0xA5, (size_t)(off + nx * dx));
    vl__copy_tiles_portable[row](want + off, src, nx, ny, dx, sy);
    if (stream) {
      t->stream[row](got + off, src, nx, ny, dx, sy);
      _mm_sfence();
    } else if (t->plane[row] != NULL && rnd_below(&rs, 2) == 0) {
      /* tiles of any shape the engine may pass: 1 .. nx by 1 .. ny, often the usual widths */
      int64_t bx = rnd_below(&rs, 2) == 0 ? 16 << rnd_below(&rs, 3) : 1 + rnd_below(&rs, nx);
      int64_t by = 1 + rnd_below(&rs, ny);
      t->plane[row](got + off, src, nx, ny, dx, sy, bx < nx ? bx : nx, by);
    } else {
      t->tile[row](got + off, src, nx, ny, dx, sy);
    }
    assert_memory_equal(got, want, (size_t)(off + nx * dx));
  }
  for (uint64_t c = 0; c < cases; c++) {
    const vl__copy_kernels *t = tables[c % TABLES];
    int64_t n = 1 + rnd_below(&rs, 700);
    ptrdiff_t off = (ptrdiff_t)rnd_below(&rs, 64), stride = (ptrdiff_t)(n + rnd_below(&rs, 70));
    /* channel k of pixel i: at 3 i + k interleaved, at k * stride + i in planes */
    const int64_t shape[] = {3, n}, planes[] = {stride, 1}, pixels[] = {1, 3};
    memset(got, 0xA5, (size_t)(off + 3 * stride));
    memset(want, 0xA5, (size_t)(off + 3 * stride));
    reference_strided(1, 2, shape, want + off, planes, src, pixels, 3 * n);
    if (t->split[0][1] != NULL) { /* NULL: the lower level's, checked at that level */
      t->split[0][1](got + off, src, n, stride);
      assert_memory_equal(got, want, (size_t)(off + 3 * stride));
    }
    memset(got, 0xA5, (size_t)(off + 3 * n));
    memset(want, 0xA5, (size_t)(off + 3 * n));
    reference_strided(1, 2, shape, want + off, pixels, src, planes, 3 * n);
    if (t->merge[0][1] != NULL) {
      t->merge[0][1](got + off, src, n, stride);
      assert_memory_equal(got, want, (size_t)(off + 3 * n));
    }
  }
  free(src);
  free(got);
  free(want);
#else
  skip();
#endif
}

static void dispatch_levels_have_names_and_unrunnable_levels_fall_back(void **state) {
  (void)state;
  vl_copy_level l;
  for (int i = 0; i < VL_COPY_LEVEL_COUNT; i++) {
    assert_true(vl_copy_level_from_name(vl_copy_level_name((vl_copy_level)i), &l));
    assert_int_equal(l, i);
  }
  assert_string_equal(vl_copy_level_name(VL_COPY_AVX2), "avx2");
  assert_null(vl_copy_level_name(VL_COPY_LEVEL_COUNT));
  assert_false(vl_copy_level_from_name("AVX2", &l));
  assert_false(vl_copy_level_from_name(NULL, &l));
  assert_true(vl_copy_level_supported(VL_COPY_PORTABLE));
  assert_true(vl_copy_level_supported(vl_copy_level_native()));
  assert_false(vl_copy_level_supported(VL_COPY_LEVEL_COUNT));
#if defined(__x86_64__)
  assert_true(vl_copy_level_native() >= VL_COPY_SSE2);
#endif
  /* an out-of-range level runs the native kernels */
  const int64_t shape[] = {3, 17}, dst_st[] = {17, 1}, src_st[] = {1, 3};
  uint8_t src[51], dst[51], want[51];
  for (int i = 0; i < 51; i++) src[i] = (uint8_t)(i * 7 + 1);
  vl_copy_strided_at(VL_COPY_LEVEL_COUNT, 1, 2, shape, dst, dst_st, src, src_st);
  reference_strided(1, 2, shape, (char *)want, dst_st, (const char *)src, src_st, 51);
  assert_memory_equal(dst, want, sizeof want);
}

int main(void) {
  const char *forced = getenv("VL_COPY_LEVEL");
  test_level = vl_copy_level_native();
  if (forced != NULL && forced[0] != '\0') {
    if (!vl_copy_level_from_name(forced, &test_level)) {
      fprintf(stderr, "test_copy: VL_COPY_LEVEL=%s names no level\n", forced);
      return 2;
    }
    if (!vl_copy_level_supported(test_level)) {
      printf("test_copy: this CPU cannot run level %s: skipped\n", forced);
      return 77;
    }
    if (test_level == vl_copy_level_native() && getenv("VL_COPY_LEVEL_RUN_NATIVE") == NULL) {
      printf("test_copy: %s is this CPU's own level, which test_copy runs: skipped\n", forced);
      return 77;
    }
  }
  printf("test_copy: copy kernels of level %s\n", vl_copy_level_name(test_level));
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(channels_last_buffer_flattens_to_logical_order),
      cmocka_unit_test(reading_the_buffer_as_an_alias_gives_buffer_order),
      cmocka_unit_test(view_copy_into_channels_last_out_keeps_logical_order),
      cmocka_unit_test(five_d_channels_last_flattens_to_logical_order),
      cmocka_unit_test(one_channel_channels_last_is_a_plain_copy),
      cmocka_unit_test(zero_element_tensors_copy_nothing),
      cmocka_unit_test(strided_copy_of_an_empty_shape_leaves_dst_untouched),
      cmocka_unit_test(rank_zero_tensor_copies_its_one_element),
      cmocka_unit_test(every_dtype_flattens_channels_last_bit_exactly),
      cmocka_unit_test(large_layout_changes_cross_tiles_for_every_element_size),
      cmocka_unit_test(copies_larger_than_the_caches_stream_whole_lines_exactly),
      cmocka_unit_test(narrow_channel_counts_deinterleave_and_interleave_exactly),
      cmocka_unit_test(contiguous_copy_is_bytewise_identical),
      cmocka_unit_test(layouts_without_a_common_refinement_still_copy_in_logical_order),
      cmocka_unit_test(permute_moves_dims_like_pytorch),
      cmocka_unit_test(view_copy_rejects_two_inferred_sizes),
      cmocka_unit_test(view_copy_rejects_a_negative_size),
      cmocka_unit_test(view_copy_rejects_an_inferred_size_beside_a_zero),
      cmocka_unit_test(view_copy_rejects_an_inferred_size_that_does_not_divide),
      cmocka_unit_test(view_copy_rejects_a_different_element_count),
      cmocka_unit_test(view_copy_rejects_rank_above_sixteen),
      cmocka_unit_test(view_copy_rejects_an_out_of_another_dtype),
      cmocka_unit_test(view_copy_rejects_an_out_of_another_shape),
      cmocka_unit_test(view_copy_rejects_an_out_dim_order_that_is_no_permutation),
      cmocka_unit_test(view_copy_over_the_tensor_limit_is_too_large),
      cmocka_unit_test(logical_copy_rejects_mismatched_dtype_and_count),
      cmocka_unit_test(permute_rejects_a_bad_permutation_or_shape),
      cmocka_unit_test(logical_copy_matches_reference_on_random_layouts),
      cmocka_unit_test(reshaping_copy_matches_reference_on_random_layouts),
      cmocka_unit_test(strided_copy_matches_reference_on_random_gapped_strides),
      cmocka_unit_test(permute_matches_reference_on_random_layouts),
      cmocka_unit_test(transposes_match_reference_for_every_element_size),
      cmocka_unit_test(transposes_at_block_edges_stay_inside_their_buffers),
      cmocka_unit_test(transposes_with_line_multiple_rows_match_at_every_offset),
      cmocka_unit_test(transposes_with_aliasing_row_strides_match),
      cmocka_unit_test(narrow_planes_match_reference_in_both_directions),
      cmocka_unit_test(the_avx512_tables_match_the_portable_kernels),
      cmocka_unit_test(dispatch_levels_have_names_and_unrunnable_levels_fall_back),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

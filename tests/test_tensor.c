/* test_tensor.c - dtypes, strides from dim order, dim order from strides, contiguity, sizes. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "viewlower/layout.h"
#include "viewlower/tensor.h"
#include "base/lines.h"
#include "layout/tensor_internal.h"

static vl_spec spec(uint8_t rank, const int64_t *shape, const uint8_t *order) {
  vl_spec s;
  vl_spec_init(&s, VL_DTYPE_FLOAT32, rank, shape);
  if (order) memcpy(s.dim_order, order, rank);
  return s;
}

static void dtype_names_and_sizes_match_the_spec(void **state) {
  (void)state;
  static const char *names[] = {"uint8",   "int8",     "int16",   "int32",   "int64",
                                "float16", "bfloat16", "float32", "float64", "bool"};
  static const size_t sizes[] = {1, 1, 2, 4, 8, 2, 2, 4, 8, 1};
  for (int i = 0; i < VL_DTYPE_COUNT; i++) {
    vl_dtype dt;
    assert_true(vl_dtype_from_name(names[i], &dt));
    assert_int_equal(dt, i);
    assert_int_equal(vl_dtype_size(dt), sizes[i]);
    assert_string_equal(vl_dtype_name(dt), names[i]);
  }
  vl_dtype dt;
  assert_false(vl_dtype_from_name("float", &dt));
  assert_false(vl_dtype_from_name("", &dt));
}

static void channels_last_strides_of_2_3_4_5_are_60_1_15_3(void **state) {
  (void)state;
  int64_t shape[] = {2, 3, 4, 5}, st[VL_MAX_RANK];
  uint8_t cl[] = {0, 2, 3, 1};
  vl_spec s = spec(4, shape, cl);
  vl_layout_strides(&s, st);
  assert_int_equal(st[0], 60);
  assert_int_equal(st[1], 1);
  assert_int_equal(st[2], 15);
  assert_int_equal(st[3], 3);
}

static void zero_sizes_count_as_one_in_strides(void **state) {
  (void)state;
  int64_t shape[] = {2, 0, 4}, st[VL_MAX_RANK], numel = -1;
  vl_spec s = spec(3, shape, NULL);
  vl_layout_strides(&s, st);
  assert_int_equal(st[0], 4);
  assert_int_equal(st[1], 4);
  assert_int_equal(st[2], 1);
  assert_true(vl_spec_numel(&s, &numel));
  assert_int_equal(numel, 0);
  assert_true(vl_layout_is_contiguous(&s));
}

static void strides_9_1_3_1_of_8_1_3_3_are_channels_last(void **state) {
  (void)state;
  int64_t shape[] = {8, 1, 3, 3}, strides[] = {9, 1, 3, 1};
  uint8_t order[4];
  vl_error err;
  assert_int_equal(vl_layout_dim_order_from_strides(4, shape, strides, order, &err), VL_OK);
  uint8_t want[] = {0, 2, 3, 1};
  assert_memory_equal(order, want, 4);
}

static void default_strides_give_the_default_order(void **state) {
  (void)state;
  int64_t shape[] = {8, 1, 3, 3}, strides[] = {9, 9, 3, 1};
  uint8_t order[4], want[] = {0, 1, 2, 3};
  vl_error err;
  assert_int_equal(vl_layout_dim_order_from_strides(4, shape, strides, order, &err), VL_OK);
  assert_memory_equal(order, want, 4);
}

static void other_dense_strides_sort_by_descending_stride(void **state) {
  (void)state;
  int64_t shape[] = {2, 3, 4}, strides[] = {1, 8, 2}; /* dim1 outer, dim2, dim0 inner */
  uint8_t order[3], want[] = {1, 2, 0};
  vl_error err;
  assert_int_equal(vl_layout_dim_order_from_strides(3, shape, strides, order, &err), VL_OK);
  assert_memory_equal(order, want, 3);
}

static void strides_that_are_not_dense_are_rejected(void **state) {
  (void)state;
  int64_t shape[] = {2, 3}, strides[] = {4, 1}, overlap[] = {1, 1};
  uint8_t order[2];
  vl_error err;
  assert_int_equal(vl_layout_dim_order_from_strides(2, shape, strides, order, &err),
                   VL_ERR_INVALID_TENSOR);
  assert_string_equal(err.path, "/strides");
  assert_int_equal(vl_layout_dim_order_from_strides(2, shape, overlap, order, &err),
                   VL_ERR_INVALID_TENSOR);
}

static void channels_last_1_1_49_10_is_recognised(void **state) {
  (void)state;
  int64_t shape[] = {1, 1, 49, 10}, st[VL_MAX_RANK];
  uint8_t cl[4];
  assert_true(vl_dim_order_channels_last(cl, 4));
  vl_spec s = spec(4, shape, cl);
  assert_true(vl_layout_is_channels_last(&s));
  assert_false(vl_layout_is_default_order(&s));
  vl_layout_strides(&s, st);
  assert_int_equal(st[0], 490);
  assert_int_equal(st[1], 1);
  assert_int_equal(st[2], 10);
  assert_int_equal(st[3], 1);
  /* C = 1: channels-last is the same memory as contiguous. */
  assert_true(vl_layout_is_contiguous(&s));
}

static void channels_last_1_c_1_1_is_contiguous(void **state) {
  (void)state;
  int64_t shape[] = {1, 64, 1, 1};
  uint8_t cl[] = {0, 2, 3, 1};
  vl_spec s = spec(4, shape, cl);
  assert_true(vl_layout_is_contiguous(&s));
}

static void channels_last_2_3_4_5_is_not_contiguous(void **state) {
  (void)state;
  int64_t shape[] = {2, 3, 4, 5};
  uint8_t cl[] = {0, 2, 3, 1};
  vl_spec s = spec(4, shape, cl);
  assert_false(vl_layout_is_contiguous(&s));
  assert_true(vl_layout_is_channels_last(&s));
}

static void five_d_channels_last_is_0_2_3_4_1(void **state) {
  (void)state;
  uint8_t cl[5], want[] = {0, 2, 3, 4, 1};
  assert_true(vl_dim_order_channels_last(cl, 5));
  assert_memory_equal(cl, want, 5);
  assert_false(vl_dim_order_channels_last(cl, 3));
}

static void a_shape_whose_byte_size_overflows_is_rejected(void **state) {
  (void)state;
  int64_t shape[] = {(int64_t)1 << 31, (int64_t)1 << 31, 4};
  vl_spec s = spec(3, shape, NULL);
  int64_t nbytes;
  assert_false(vl_spec_nbytes(&s, &nbytes));
  vl_error err;
  assert_int_equal(vl_spec_check(&s, &err), VL_ERR_INVALID_TENSOR);
  assert_string_equal(err.path, "/shape");
}

static void a_dim_order_that_is_not_a_permutation_is_rejected(void **state) {
  (void)state;
  int64_t shape[] = {2, 3, 4, 5};
  uint8_t bad[] = {0, 1, 1, 3}, out_of_range[] = {0, 1, 2, 4};
  vl_error err;
  vl_spec s = spec(4, shape, bad);
  assert_int_equal(vl_spec_check(&s, &err), VL_ERR_INVALID_TENSOR);
  assert_string_equal(err.path, "/dim_order");
  assert_string_equal(err.message, "not a permutation of 0..3");
  s = spec(4, shape, out_of_range);
  assert_int_equal(vl_spec_check(&s, &err), VL_ERR_INVALID_TENSOR);
}

static void negative_sizes_are_rejected(void **state) {
  (void)state;
  int64_t shape[] = {2, -3};
  vl_spec s = spec(2, shape, NULL);
  vl_error err;
  assert_int_equal(vl_spec_check(&s, &err), VL_ERR_INVALID_TENSOR);
  assert_string_equal(err.path, "/shape/1");
}

static void sizes_beyond_2_53_are_rejected_even_when_empty(void **state) {
  (void)state;
  int64_t shape[] = {0, ((int64_t)1 << 53) + 1};
  vl_spec s = spec(2, shape, NULL);
  vl_error err;
  assert_int_equal(vl_spec_check(&s, &err), VL_ERR_INVALID_TENSOR);
  assert_string_equal(err.path, "/shape/1");
  shape[1] = (int64_t)1 << 53;
  s = spec(2, shape, NULL);
  assert_int_equal(vl_spec_check(&s, &err), VL_OK);
}

static void view_sizes_infer_one_minus_one(void **state) {
  (void)state;
  int64_t size[] = {1, 2, -1}, shape[3];
  vl_error err;
  assert_int_equal(vl_view_size_infer(12, size, 3, shape, &err), VL_OK);
  assert_int_equal(shape[2], 6);
}

static void view_size_errors_are_each_reported(void **state) {
  (void)state;
  int64_t shape[4];
  vl_error err;
  int64_t two[] = {-1, -1}, neg[] = {-2, 6}, zero[] = {0, -1}, nodiv[] = {5, -1},
          mismatch[] = {5, 2};
  assert_int_equal(vl_view_size_infer(12, two, 2, shape, &err), VL_ERR_KERNEL);
  assert_non_null(strstr(err.message, "only one size may be -1"));
  assert_int_equal(vl_view_size_infer(12, neg, 2, shape, &err), VL_ERR_KERNEL);
  assert_non_null(strstr(err.message, "negative"));
  assert_int_equal(vl_view_size_infer(0, zero, 2, shape, &err), VL_ERR_KERNEL);
  assert_non_null(strstr(err.message, "another size is 0"));
  assert_int_equal(vl_view_size_infer(12, nodiv, 2, shape, &err), VL_ERR_KERNEL);
  assert_non_null(strstr(err.message, "do not divide"));
  assert_int_equal(vl_view_size_infer(12, mismatch, 2, shape, &err), VL_ERR_KERNEL);
  assert_non_null(strstr(err.message, "10 elements but the input has 12"));
  int64_t huge[] = {((int64_t)1 << 53) + 1, 0};
  assert_int_equal(vl_view_size_infer(0, huge, 2, shape, &err), VL_ERR_KERNEL);
  assert_non_null(strstr(err.message, "exceeds 2^53"));
  int64_t big[17] = {0};
  assert_int_equal(vl_view_size_infer(0, big, 17, shape, &err), VL_ERR_KERNEL);
}

static void tensors_over_the_byte_limit_are_refused_before_allocating(void **state) {
  (void)state;
  vl_limits lim;
  vl_limits_default(&lim);
  lim.max_tensor_bytes = 1024;
  int64_t shape[] = {257};
  vl_spec s = spec(1, shape, NULL);
  vl_tensor *t = NULL;
  vl_error err;
  assert_int_equal(vl_tensor_new(&s, &lim, &t, &err), VL_ERR_TOO_LARGE);
  assert_null(t);
  shape[0] = 256;
  s = spec(1, shape, NULL);
  assert_int_equal(vl_tensor_new(&s, &lim, &t, &err), VL_OK);
  assert_int_equal(t->nbytes, 1024);
  vl_tensor_free(t);
}

/* Tensor storage is zero-filled at every size and starts on a 64-byte line (the copy kernels'
 * 64-byte stores; large storage from calloc started 16 bytes past a page), and 0 bytes still get
 * a block. Each size is asked twice, the first block dirtied and freed in between: a block
 * glibc hands back again must be cleared too. */
static void tensor_storage_is_zeroed_and_starts_on_a_line(void **state) {
  (void)state;
  const int64_t sizes[] = {0,         1,       63,          65,          4097,   150528,
                           (1 << 20) - 1, 1 << 20, (1 << 20) + 3, 3211264, 3211264 + 17};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    for (int again = 0; again < 2; again++) {
      int64_t shape[] = {sizes[i]};
      vl_spec s;
      vl_spec_init(&s, VL_DTYPE_UINT8, 1, shape);
      vl_tensor *t = NULL;
      vl_error err;
      assert_int_equal(vl_tensor_new(&s, NULL, &t, &err), VL_OK);
      assert_non_null(t->data);
      assert_int_equal(t->nbytes, sizes[i]);
      assert_int_equal((uintptr_t)t->data % 64, 0);
      const uint8_t *b = t->data;
      int64_t nonzero = 0;
      for (int64_t k = 0; k < sizes[i]; k++) nonzero += b[k] != 0;
      assert_int_equal(nonzero, 0);
      memset(t->data, 0xA5, (size_t)sizes[i]);
      vl_tensor_free(t);
    }
  }
}

/* The interpreter's buffers and a plan's arena (base/lines.h): zero-filled at every size, on
 * the alignment asked for (a line, a page), each size asked twice with the first block dirtied
 * and freed in between; an alignment that is no power of two or under a pointer's size, and a
 * size whose room overflows, get NULL. */
static void line_blocks_are_zeroed_and_aligned(void **state) {
  (void)state;
  const size_t sizes[] = {0, 1, 63, 65, 4097, 150528, (1 << 20) + 3, 3211264 + 17};
  const size_t aligns[] = {sizeof(void *), 64, 4096};
  for (size_t a = 0; a < sizeof aligns / sizeof *aligns; a++) {
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
      for (int again = 0; again < 2; again++) {
        uint8_t *b = vl__lines_calloc(sizes[i], aligns[a]);
        assert_non_null(b);
        assert_int_equal((uintptr_t)b % aligns[a], 0);
        size_t nonzero = 0;
        for (size_t k = 0; k < sizes[i]; k++) nonzero += b[k] != 0;
        assert_int_equal(nonzero, 0);
        memset(b, 0xA5, sizes[i]);
        vl__lines_free(b);
      }
    }
  }
  assert_null(vl__lines_calloc(64, 48));
  assert_null(vl__lines_calloc(64, sizeof(void *) / 2));
  assert_null(vl__lines_calloc(SIZE_MAX - 64, 64));
  vl__lines_free(NULL);
}

/* The dtype module's element stores: integers wrap to their width, floats truncate toward zero
 * (NaN as 0, saturating), bool is v != 0, half floats round to nearest even. */
static void element_stores_follow_the_dtype_rules(void **state) {
  (void)state;
  uint8_t u8 = 0;
  int32_t i32 = 0;
  int64_t i64 = 0;
  uint16_t h = 0;
  vl_dtype_store(VL_DTYPE_UINT8, &u8, vl_scalar_int(-1));
  assert_int_equal(u8, 255);
  vl_dtype_store(VL_DTYPE_INT32, &i32, vl_scalar_float(-3.7));
  assert_int_equal(i32, -3);
  vl_dtype_store(VL_DTYPE_INT32, &i32, vl_scalar_float(NAN));
  assert_int_equal(i32, 0);
  vl_dtype_store(VL_DTYPE_INT64, &i64, vl_scalar_float(1e300));
  assert_true(i64 == INT64_MAX);
  vl_dtype_store(VL_DTYPE_BOOL, &u8, vl_scalar_float(0.5));
  assert_int_equal(u8, 1);
  vl_dtype_store(VL_DTYPE_FLOAT16, &h, vl_scalar_float(1.0 + 1.0 / 2048)); /* a tie: to even */
  assert_int_equal(h, 0x3c00);
  vl_dtype_store(VL_DTYPE_BFLOAT16, &h, vl_scalar_int(3));
  assert_int_equal(h, 0x4040);
  assert_true(vl_dtype_load(VL_DTYPE_BFLOAT16, &h).is_float);
  assert_true(vl_dtype_load(VL_DTYPE_BFLOAT16, &h).f == 3.0);
  u8 = 200;
  assert_int_equal(vl_dtype_load(VL_DTYPE_INT8, &u8).i, -56);
  assert_int_equal(vl_dtype_load(VL_DTYPE_BOOL, &u8).i, 1);
}

/* The shapes in reasons and errors: every int64 exactly, truncated to n - 1 bytes like
 * snprintf (and always terminated). */
static void shape_texts_are_exact_and_truncate_like_snprintf(void **state) {
  (void)state;
  char buf[128];
  const int64_t shape[] = {1, -2, INT64_MAX, INT64_MIN, 0};
  assert_string_equal(vl__shape_text(buf, sizeof buf, 0, shape), "[]");
  assert_string_equal(vl__shape_text(buf, sizeof buf, 5, shape),
                      "[1,-2,9223372036854775807,-9223372036854775808,0]");
  char want[128];
  for (size_t n = 1; n <= 52; n++) {
    memset(buf, 'x', sizeof buf);
    snprintf(want, n, "[1,-2,9223372036854775807,-9223372036854775808,0]");
    assert_ptr_equal(vl__shape_text(buf, n, 5, shape), buf);
    assert_string_equal(buf, want);
    assert_int_equal(buf[n], 'x'); /* nothing past the n bytes */
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(dtype_names_and_sizes_match_the_spec),
      cmocka_unit_test(channels_last_strides_of_2_3_4_5_are_60_1_15_3),
      cmocka_unit_test(zero_sizes_count_as_one_in_strides),
      cmocka_unit_test(strides_9_1_3_1_of_8_1_3_3_are_channels_last),
      cmocka_unit_test(default_strides_give_the_default_order),
      cmocka_unit_test(other_dense_strides_sort_by_descending_stride),
      cmocka_unit_test(strides_that_are_not_dense_are_rejected),
      cmocka_unit_test(channels_last_1_1_49_10_is_recognised),
      cmocka_unit_test(channels_last_1_c_1_1_is_contiguous),
      cmocka_unit_test(channels_last_2_3_4_5_is_not_contiguous),
      cmocka_unit_test(five_d_channels_last_is_0_2_3_4_1),
      cmocka_unit_test(a_shape_whose_byte_size_overflows_is_rejected),
      cmocka_unit_test(a_dim_order_that_is_not_a_permutation_is_rejected),
      cmocka_unit_test(negative_sizes_are_rejected),
      cmocka_unit_test(sizes_beyond_2_53_are_rejected_even_when_empty),
      cmocka_unit_test(view_sizes_infer_one_minus_one),
      cmocka_unit_test(view_size_errors_are_each_reported),
      cmocka_unit_test(tensors_over_the_byte_limit_are_refused_before_allocating),
      cmocka_unit_test(tensor_storage_is_zeroed_and_starts_on_a_line),
      cmocka_unit_test(line_blocks_are_zeroed_and_aligned),
      cmocka_unit_test(element_stores_follow_the_dtype_rules),
      cmocka_unit_test(shape_texts_are_exact_and_truncate_like_snprintf),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

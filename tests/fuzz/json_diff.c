/* json_diff.c - the C side of the strict JSON readers' differential test (json_diff.py).
 *
 * Reads cases from stdin, each a 4-byte little-endian length and that many bytes, and reads
 * each with both strict readers of the core: the tree parser (vl__json_parse_one, which the
 * envelope, tensors and the worker use) and the streaming reader (vl__jr_*, which graph text
 * uses), then with the streaming reader's check alone (vl__jr_check_value, which the client
 * uses on a response's result: no tape, so its line is "OK" with no value). Writes one line per
 * case and reader: "OK <canonical value>" or "ERR <problem>", tree first. The canonical form is the one json_diff.py prints for Python's reading: numbers as
 * their token text after '#', strings as "..." with only '"', '\' and bytes below 0x20 escaped
 * (\u00XX), object members in order (duplicates kept), no whitespace. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json_read.h"
#include "base/json_util.h"

static void put_string(FILE *out, const char *s, size_t n) {
  fputc('"', out);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      fputc('\\', out);
      fputc(c, out);
    } else if (c < 0x20) {
      fprintf(out, "\\u%04x", c);
    } else {
      fputc(c, out);
    }
  }
  fputc('"', out);
}

static void put_tree(FILE *out, const cJSON *v) {
  if (cJSON_IsNull(v)) {
    fputs("null", out);
  } else if (cJSON_IsTrue(v)) {
    fputs("true", out);
  } else if (cJSON_IsFalse(v)) {
    fputs("false", out);
  } else if (cJSON_IsNumber(v)) {
    fprintf(out, "#%s", v->valuestring);
  } else if (cJSON_IsString(v)) {
    put_string(out, v->valuestring, strlen(v->valuestring));
  } else {
    bool obj = cJSON_IsObject(v);
    fputc(obj ? '{' : '[', out);
    for (const cJSON *c = v->child; c != NULL; c = c->next) {
      if (c != v->child) fputc(',', out);
      if (obj) {
        put_string(out, c->string, strlen(c->string));
        fputc(':', out);
      }
      put_tree(out, c);
    }
    fputc(obj ? '}' : ']', out);
  }
}

/* Entry i of the tape; returns the index after it. */
static uint32_t put_tape(FILE *out, const vl__jr *r, uint32_t i) {
  const vl__jt *e = &r->tape[i];
  switch ((vl__jt_type)e->type) {
  case VL__JT_NULL: fputs("null", out); return i + 1;
  case VL__JT_TRUE: fputs("true", out); return i + 1;
  case VL__JT_FALSE: fputs("false", out); return i + 1;
  case VL__JT_NUMBER:
    fprintf(out, "#%.*s", (int)e->len, vl__jt_bytes(r, i));
    return i + 1;
  case VL__JT_STRING: put_string(out, vl__jt_bytes(r, i), e->len); return i + 1;
  case VL__JT_ARRAY:
  case VL__JT_OBJECT: {
    bool obj = e->type == VL__JT_OBJECT;
    fputc(obj ? '{' : '[', out);
    uint32_t k = i + 1;
    for (uint32_t m = 0; m < e->len; m++) {
      if (m > 0) fputc(',', out);
      if (obj) {
        put_string(out, vl__jt_bytes(r, k), r->tape[k].len);
        fputc(':', out);
        k++;
      }
      k = put_tape(out, r, k);
    }
    fputc(obj ? '}' : ']', out);
    return k;
  }
  }
  return i + 1;
}

static const char *problem_name(vl__json_problem p) {
  switch (p) {
  case VL__JSON_OK: return "ok";
  case VL__JSON_NUL_ESCAPE: return "nul_escape";
  case VL__JSON_MALFORMED: return "malformed";
  case VL__JSON_CONTROL: return "control";
  case VL__JSON_TRAILING: return "trailing";
  case VL__JSON_NOMEM: return "nomem";
  }
  return "?";
}

int main(void) {
  FILE *out = stdout;
  uint8_t len4[4];
  while (fread(len4, 1, 4, stdin) == 4) {
    size_t n = (size_t)len4[0] | (size_t)len4[1] << 8 | (size_t)len4[2] << 16 |
               (size_t)len4[3] << 24;
    char *text = malloc(n + 1);
    if (text == NULL || fread(text, 1, n, stdin) != n) {
      fprintf(stderr, "json_diff: short case\n");
      return 2;
    }
    text[n] = '\0';
    cJSON *doc = NULL;
    size_t at = 0;
    vl__json_problem p = vl__json_parse_one(text, n, false, &doc, &at);
    if (p == VL__JSON_OK) {
      fputs("OK ", out);
      put_tree(out, doc);
      fputc('\n', out);
    } else {
      fprintf(out, "ERR %s %zu\n", problem_name(p), at);
    }
    cJSON_Delete(doc);
    vl__jr r;
    vl__jr_init(&r, text, n);
    uint32_t root = vl__jr_value(&r);
    if (root != VL__JT_NONE && vl__jr_end(&r, false)) {
      fputs("OK ", out);
      put_tape(out, &r, root);
      fputc('\n', out);
    } else {
      fprintf(out, "ERR %s %zu\n", problem_name(r.problem), r.at);
    }
    vl__jr_free(&r);
    vl__jr_init(&r, text, n);
    if (vl__jr_check_value(&r) && vl__jr_end(&r, false)) {
      fputs("OK\n", out);
    } else {
      fprintf(out, "ERR %s %zu\n", problem_name(r.problem), r.at);
    }
    vl__jr_free(&r);
    free(text);
  }
  return fflush(out) == 0 ? 0 : 2;
}

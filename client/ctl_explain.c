/* ctl_explain.c - `viewlowerctl explain`: a lower result as a table for people.
 *
 * Every field is checked before anything is printed: a result that lacks one (a daemon of
 * another version, a broken one) is reported by its JSON pointer, never dereferenced. Columns
 * are as wide as their longest entry, within the width given; a name too long for its column
 * is printed in full on its own line and the row goes on below it, aligned. Each decision's
 * message follows on its own lines, wrapped to the width. Nodes the lowering removed as dead
 * are listed by name (the input graph's nodes missing from the lowered one). */
#include "ctl_explain.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { REASONS_MAX = 256, MIN_WIDTH = 40, INDENT = 2, GAP = 2 };

typedef struct {
  const char *node, *base, *decision, *target, *message;
  char reasons[REASONS_MAX];
  double offset;
} row;

typedef struct {
  char *missing; /* the first missing or mistyped field, as a JSON pointer */
  size_t n;
} checker;

/* Records "/report/KEY (WHAT)", or with a decision index "/report/decisions/I/KEY (WHAT)",
 * unless a field is already recorded. Returns false. */
static bool missing(checker *ck, size_t index, const char *key, const char *what) {
  if (ck->missing[0] != '\0') return false;
  if (index == SIZE_MAX) {
    snprintf(ck->missing, ck->n, "/report/%s (%s)", key, what);
  } else {
    snprintf(ck->missing, ck->n, "/report/decisions/%zu/%s (%s)", index, key, what);
  }
  return false;
}

/* A whole number in [0, 2^63) under report[key]; *out stays 0 when absent and optional. */
static bool count(checker *ck, const cJSON *report, const char *key, bool required, double *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(report, key);
  *out = 0;
  if (v == NULL && !required) return true;
  if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble >= 9.2233720368547758e18 ||
      v->valuedouble != (double)(int64_t)v->valuedouble) {
    return missing(ck, SIZE_MAX, key, "a whole number");
  }
  *out = v->valuedouble;
  return true;
}

static const char *string_of(checker *ck, const cJSON *d, size_t i, const char *key,
                             bool required) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(d, key);
  if (cJSON_IsString(v) && v->valuestring != NULL) return v->valuestring;
  if (v != NULL || required) missing(ck, i, key, "a string");
  return NULL;
}

/* "a,b,c" from the decision's reasons array, "-" when empty; cut with "..." past REASONS_MAX. */
static bool join_reasons(checker *ck, const cJSON *d, size_t i, char *out) {
  const cJSON *list = cJSON_GetObjectItemCaseSensitive(d, "reasons"), *r;
  if (!cJSON_IsArray(list)) return missing(ck, i, "reasons", "an array");
  size_t len = 0;
  strcpy(out, "-");
  cJSON_ArrayForEach(r, list) {
    if (!cJSON_IsString(r)) return missing(ck, i, "reasons", "strings");
    size_t add = strlen(r->valuestring) + (len ? 1 : 0);
    if (len + add >= REASONS_MAX - 4) {
      strcpy(out + len, "...");
      break;
    }
    snprintf(out + len, REASONS_MAX - len, "%s%s", len ? "," : "", r->valuestring);
    len += add;
  }
  return true;
}

static bool read_row(checker *ck, const cJSON *d, size_t i, row *r) {
  r->node = string_of(ck, d, i, "node", true);
  r->base = string_of(ck, d, i, "base", true);
  r->decision = string_of(ck, d, i, "decision", true);
  r->message = string_of(ck, d, i, "message", true);
  r->target = string_of(ck, d, i, "target", false);
  const cJSON *off = cJSON_GetObjectItemCaseSensitive(d, "offset");
  r->offset = cJSON_IsNumber(off) ? off->valuedouble : 0;
  if (off != NULL && !cJSON_IsNumber(off)) missing(ck, i, "offset", "a number");
  return join_reasons(ck, d, i, r->reasons) && ck->missing[0] == '\0';
}

/* ---- layout ---- */

typedef struct {
  FILE *out;
  int width;
  int col; /* the column the cursor is at */
} printer;

/* Writes n bytes of text with control characters (a name may hold any) shown as '?', so a
 * graph cannot move the terminal's cursor or break a row. */
static void put_text(FILE *out, const char *text, size_t n) {
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)text[i];
    fputc(ch < 0x20 || ch == 0x7f ? '?' : ch, out);
  }
}

static void pad_to(printer *p, int col) {
  if (p->col > col) {
    fputc('\n', p->out);
    p->col = 0;
  }
  for (; p->col < col; p->col++) fputc(' ', p->out);
}

/* Prints text at column col in a cell w wide (gap included); a text that leaves no space
 * before the next cell ends the line, so the next cell starts aligned on the line below. */
static void cell(printer *p, int col, int w, const char *text) {
  pad_to(p, col);
  int len = (int)strlen(text);
  put_text(p->out, text, (size_t)len);
  p->col += len;
  if (len >= w) p->col = p->width + 1; /* the next cell starts a new line */
}

static void end_line(printer *p) {
  fputc('\n', p->out);
  p->col = 0;
}

/* Words of text, wrapped at the width: the first line from column first, the others from
 * column rest; a word longer than a line overflows it (names are never cut). Ends the line. */
static void wrapped(printer *p, int first, int rest, const char *text) {
  const char *s = text;
  int indent = first;
  while (*s != '\0') {
    while (*s == ' ') s++;
    if (*s == '\0') break;
    size_t word = strcspn(s, " ");
    if (p->col > indent && p->col + 1 + (int)word > p->width) {
      end_line(p);
      indent = rest;
    }
    if (p->col < indent) {
      pad_to(p, indent);
    } else if (p->col > 0) {
      fputc(' ', p->out);
      p->col++;
    }
    put_text(p->out, s, word);
    p->col += (int)word;
    s += word;
  }
  if (p->col > 0) end_line(p);
}

static int max_len(const row *rows, size_t n, size_t field, int floor) {
  int w = floor;
  for (size_t i = 0; i < n; i++) {
    const char *s = *(const char *const *)((const char *)&rows[i] + field);
    int len = (int)strlen(s);
    if (len > w) w = len;
  }
  return w;
}

static int min_int(int a, int b) {
  return a < b ? a : b;
}

static void print_rows(printer *p, const row *rows, size_t n) {
  int wd = max_len(rows, n, offsetof(row, decision), 8);
  /* NODE and BASE share what DECISION and a short REASONS column leave. */
  int share = (p->width - wd - 3 * GAP - 14) / 2;
  if (share < 10) share = 10;
  int wn = min_int(max_len(rows, n, offsetof(row, node), 4), share);
  int wb = min_int(max_len(rows, n, offsetof(row, base), 4), share);
  int cols[4] = {0, wn + GAP, wn + wb + 2 * GAP, wn + wb + wd + 3 * GAP};
  const char *head[4] = {"NODE", "BASE", "DECISION", "REASONS"};
  int widths[4] = {wn, wb, wd, p->width};
  for (int k = 0; k < 4; k++) cell(p, cols[k], widths[k] + GAP, head[k]);
  end_line(p);
  for (size_t i = 0; i < n; i++) {
    const row *r = &rows[i];
    const char *text[4] = {r->node, r->base, r->decision, r->reasons};
    for (int k = 0; k < 4; k++) cell(p, cols[k], widths[k] + GAP, text[k]);
    end_line(p);
    char lead[160] = "";
    const char *op = r->target ? strchr(r->target, '.') : NULL;
    int at = 0;
    if (op != NULL && strcmp(r->target, "aten.view_copy.default") != 0) {
      at = snprintf(lead, sizeof lead, "[%.*s] ", (int)strcspn(op + 1, "."), op + 1);
    }
    if (r->offset != 0 && at >= 0 && (size_t)at < sizeof lead) {
      snprintf(lead + at, sizeof lead - (size_t)at, "[offset %.0f] ", r->offset);
    }
    size_t len = strlen(lead) + strlen(r->message) + 1;
    char *line = malloc(len);
    if (line != NULL) snprintf(line, len, "%s%s", lead, r->message);
    wrapped(p, INDENT, INDENT, line ? line : r->message);
    free(line);
  }
}

/* ---- dead nodes: names of the input graph missing from the lowered one ---- */

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The nodes array of a graph: an object, or (as the library gives a printed graph, to keep
 * its literals exact) raw JSON text, parsed into *owned for the names. */
static const cJSON *nodes_of(const cJSON *graph, cJSON **owned) {
  *owned = NULL;
  if (cJSON_IsRaw(graph) && graph->valuestring != NULL) {
    graph = *owned = cJSON_Parse(graph->valuestring);
  }
  const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(graph, "nodes");
  return cJSON_IsArray(nodes) ? nodes : NULL;
}

static const char *name_of(const cJSON *node) {
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(node, "name");
  return cJSON_IsString(name) ? name->valuestring : NULL;
}

/* Appends ", name" (or the first name) to a growing buffer; false on out of memory. */
static bool append(char **buf, size_t *len, size_t *cap, const char *name) {
  size_t add = strlen(name) + 2;
  if (*len + add + 1 > *cap) {
    size_t bigger = (*cap + add + 1) * 2;
    char *b = realloc(*buf, bigger);
    if (b == NULL) return false;
    *buf = b;
    *cap = bigger;
  }
  *len += (size_t)snprintf(*buf + *len, *cap - *len, "%s%s", *len > 16 ? ", " : " ", name);
  return true;
}

static void print_dead(printer *p, const cJSON *input, const cJSON *lowered) {
  cJSON *own_in, *own_out;
  const cJSON *in = nodes_of(input, &own_in), *outn = nodes_of(lowered, &own_out), *n;
  size_t count = (size_t)cJSON_GetArraySize(outn), k = 0;
  const char **names = malloc((count ? count : 1) * sizeof *names);
  size_t len = 16, cap = 64;
  char *line = malloc(cap);
  if (in == NULL || outn == NULL || names == NULL || line == NULL) {
    free(names);
    free(line);
    cJSON_Delete(own_in);
    cJSON_Delete(own_out);
    return;
  }
  cJSON_ArrayForEach(n, outn) {
    if (name_of(n) != NULL && k < count) names[k++] = name_of(n);
  }
  qsort(names, k, sizeof *names, cmp_str);
  memcpy(line, "removed as dead:", 17);
  bool ok = true;
  cJSON_ArrayForEach(n, in) {
    const char *name = name_of(n);
    if (ok && name != NULL && bsearch(&name, names, k, sizeof *names, cmp_str) == NULL) {
      ok = append(&line, &len, &cap, name);
    }
  }
  if (ok && len > 16) wrapped(p, 0, INDENT, line);
  free(line);
  free(names);
  cJSON_Delete(own_in);
  cJSON_Delete(own_out);
}

/* ---- the whole ---- */

typedef struct {
  double view_copy_nodes, replaced, kept, removed_dead, normalized, bytes_saved;
  double layout_copy_nodes, merged, bytes_copied;
  bool fold_keys;
} totals;

static bool read_totals(checker *ck, const cJSON *report, totals *t) {
  bool ok = count(ck, report, "view_copy_nodes", true, &t->view_copy_nodes) &&
            count(ck, report, "replaced", true, &t->replaced) &&
            count(ck, report, "kept", true, &t->kept) &&
            count(ck, report, "removed_dead", true, &t->removed_dead) &&
            count(ck, report, "normalized", true, &t->normalized) &&
            count(ck, report, "bytes_saved", true, &t->bytes_saved) &&
            count(ck, report, "layout_copy_nodes", false, &t->layout_copy_nodes) &&
            count(ck, report, "merged", false, &t->merged) &&
            count(ck, report, "bytes_copied", false, &t->bytes_copied);
  t->fold_keys = cJSON_GetObjectItemCaseSensitive(report, "layout_copy_nodes") != NULL;
  return ok;
}

static void print_totals(printer *p, const totals *t) {
  char line[512];
  if (t->fold_keys) {
    snprintf(line, sizeof line,
             "%.0f layout-only nodes: %.0f replaced, %.0f kept, %.0f merged, %.0f removed as dead",
             t->layout_copy_nodes, t->replaced, t->kept, t->merged, t->removed_dead);
    wrapped(p, 0, INDENT, line);
    snprintf(line, sizeof line,
             "%.0f of them view_copy; %.0f bases normalized; %.0f bytes saved, %.0f bytes still "
             "copied",
             t->view_copy_nodes, t->normalized, t->bytes_saved, t->bytes_copied);
  } else {
    snprintf(line, sizeof line,
             "%.0f view_copy nodes: %.0f replaced, %.0f kept, %.0f removed as dead; %.0f bases "
             "normalized",
             t->view_copy_nodes, t->replaced, t->kept, t->removed_dead, t->normalized);
    wrapped(p, 0, INDENT, line);
    snprintf(line, sizeof line, "%.0f bytes saved", t->bytes_saved);
  }
  wrapped(p, 0, INDENT, line);
}

bool vl__ctl_print_explain(FILE *out, const cJSON *input_graph, const cJSON *result, int width,
                           char *missing_field, size_t n) {
  checker ck = {missing_field, n};
  missing_field[0] = '\0';
  const cJSON *report = cJSON_GetObjectItemCaseSensitive(result, "report");
  const cJSON *decisions = cJSON_GetObjectItemCaseSensitive(report, "decisions"), *d;
  totals t;
  if (!cJSON_IsObject(report)) {
    snprintf(missing_field, n, "/report (an object)");
    return false;
  }
  if (!cJSON_IsArray(decisions)) return missing(&ck, SIZE_MAX, "decisions", "an array");
  if (!read_totals(&ck, report, &t)) return false;
  size_t rows_n = (size_t)cJSON_GetArraySize(decisions), i = 0;
  row *rows = calloc(rows_n ? rows_n : 1, sizeof *rows);
  if (rows == NULL) {
    snprintf(missing_field, n, "memory for the table (out of memory)");
    return false;
  }
  cJSON_ArrayForEach(d, decisions) {
    if (i < rows_n && !read_row(&ck, d, i, &rows[i])) break;
    i++;
  }
  if (ck.missing[0] == '\0') {
    printer p = {out, width < MIN_WIDTH ? MIN_WIDTH : width, 0};
    if (rows_n > 0) {
      print_rows(&p, rows, rows_n);
      end_line(&p);
    }
    print_totals(&p, &t);
    print_dead(&p, input_graph, cJSON_GetObjectItemCaseSensitive(result, "graph"));
  }
  free(rows);
  return ck.missing[0] == '\0';
}

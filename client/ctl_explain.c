/* ctl_explain.c - `viewlowerctl explain`: a lower result for people (a table), as data (JSON)
 * or as a picture (Graphviz dot).
 *
 * Every field is checked before anything is printed: a result that lacks one (a daemon of
 * another version, a broken one) is reported by its JSON pointer, never dereferenced. Columns
 * are as wide as their longest entry, within the width given; a name too long for its column
 * is printed in full on its own line and the row goes on below it, aligned. Each decision's
 * message follows on its own lines, wrapped to the width. Nodes the lowering removed as dead
 * are listed by name (the input graph's nodes missing from the lowered one). The relaid
 * parameters (report `param_layouts`) and the memory plan (report `plan`) follow when the
 * report has them.
 *
 * JSON and dot describe one model: every node of the input graph with its decision
 * (replaced, kept, merged, removed, relaid, or none), its bytes, and the edges between them
 * (data edges of the input graph, alias edges to the storage owner, the strided read of a
 * merged copy). --only keeps the nodes of one decision and their neighbours (as context). */
#include "ctl_explain.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/json_write.h"
#include "viewlower/dtype.h"
#include "viewlower/tensor.h"

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

/* Records "/report/LIST/I/KEY (WHAT)" (I omitted when SIZE_MAX). Returns false. */
static bool missing_in(checker *ck, const char *list, size_t index, const char *key,
                       const char *what) {
  if (ck->missing[0] != '\0') return false;
  if (index == SIZE_MAX) {
    snprintf(ck->missing, ck->n, "/report/%s/%s (%s)", list, key, what);
  } else {
    snprintf(ck->missing, ck->n, "/report/%s/%zu/%s (%s)", list, index, key, what);
  }
  return false;
}

static bool whole(const cJSON *v) {
  return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 9.2233720368547758e18 &&
         v->valuedouble == (double)(int64_t)v->valuedouble;
}

/* A whole number in [0, 2^63) under report[key]; *out stays 0 when absent and optional. */
static bool count(checker *ck, const cJSON *report, const char *key, bool required, double *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(report, key);
  *out = 0;
  if (v == NULL && !required) return true;
  if (!whole(v)) return missing(ck, SIZE_MAX, key, "a whole number");
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

/* ---- relaid parameters and the memory plan (optional report keys) ---- */

static const char *str_member(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

enum { DIMS_MAX = 16 * 4 + 3 };

typedef struct {
  const char *node;
  char dim_order[DIMS_MAX], was[DIMS_MAX];
  double nbytes, aliased;
} relaid_row;

/* "[1,0]" from entry[key], an array of dims (at most 16, each 0..15). */
static bool dims_text(checker *ck, const cJSON *entry, size_t i, const char *key, char *out) {
  const cJSON *list = cJSON_GetObjectItemCaseSensitive(entry, key), *d;
  if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) > 16) {
    return missing_in(ck, "param_layouts", i, key, "an array of at most 16 dims");
  }
  size_t len = 0;
  out[len++] = '[';
  cJSON_ArrayForEach(d, list) {
    if (!whole(d) || d->valuedouble > 15) {
      return missing_in(ck, "param_layouts", i, key, "dims 0 to 15");
    }
    len += (size_t)snprintf(out + len, DIMS_MAX - len, "%s%d", len > 1 ? "," : "",
                            (int)d->valuedouble);
  }
  snprintf(out + len, DIMS_MAX - len, "]");
  return true;
}

/* report.param_layouts (absent: *n = 0, *rows NULL). */
static bool read_relaid(checker *ck, const cJSON *report, relaid_row **rows, size_t *n) {
  const cJSON *list = cJSON_GetObjectItemCaseSensitive(report, "param_layouts"), *e;
  *rows = NULL;
  *n = 0;
  if (list == NULL) return true;
  if (!cJSON_IsArray(list)) return missing(ck, SIZE_MAX, "param_layouts", "an array");
  size_t count_n = (size_t)cJSON_GetArraySize(list), i = 0;
  *rows = calloc(count_n ? count_n : 1, sizeof **rows);
  if (*rows == NULL) return missing(ck, SIZE_MAX, "param_layouts", "out of memory");
  cJSON_ArrayForEach(e, list) {
    relaid_row *r = &(*rows)[i];
    const cJSON *node = cJSON_GetObjectItemCaseSensitive(e, "node");
    const cJSON *nb = cJSON_GetObjectItemCaseSensitive(e, "nbytes");
    const cJSON *al = cJSON_GetObjectItemCaseSensitive(e, "aliased");
    if (!cJSON_IsString(node)) return missing_in(ck, "param_layouts", i, "node", "a string");
    if (!whole(nb)) return missing_in(ck, "param_layouts", i, "nbytes", "a whole number");
    if (!whole(al)) return missing_in(ck, "param_layouts", i, "aliased", "a whole number");
    if (!dims_text(ck, e, i, "dim_order", r->dim_order) || !dims_text(ck, e, i, "was", r->was)) {
      return false;
    }
    r->node = node->valuestring;
    r->nbytes = nb->valuedouble;
    r->aliased = al->valuedouble;
    i++;
  }
  *n = i;
  return true;
}

/* report.params_not_relaid: each entry's node and message (its reasons are checked too). */
static bool read_not_relaid(checker *ck, const cJSON *report, const char ***messages, size_t *n) {
  const cJSON *list = cJSON_GetObjectItemCaseSensitive(report, "params_not_relaid"), *e, *r;
  *messages = NULL;
  *n = 0;
  if (list == NULL) return true;
  if (!cJSON_IsArray(list)) return missing(ck, SIZE_MAX, "params_not_relaid", "an array");
  size_t cap = (size_t)cJSON_GetArraySize(list), i = 0;
  *messages = calloc(cap ? cap : 1, sizeof **messages);
  if (*messages == NULL) return missing(ck, SIZE_MAX, "params_not_relaid", "out of memory");
  cJSON_ArrayForEach(e, list) {
    const cJSON *reasons = cJSON_GetObjectItemCaseSensitive(e, "reasons");
    if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "node"))) {
      return missing_in(ck, "params_not_relaid", i, "node", "a string");
    }
    if (!cJSON_IsArray(reasons)) return missing_in(ck, "params_not_relaid", i, "reasons", "an array");
    cJSON_ArrayForEach(r, reasons) {
      if (!cJSON_IsString(r)) return missing_in(ck, "params_not_relaid", i, "reasons", "strings");
    }
    const char *msg = str_member(e, "message");
    if (msg == NULL) return missing_in(ck, "params_not_relaid", i, "message", "a string");
    (*messages)[i++] = msg;
  }
  *n = i;
  return true;
}

typedef struct {
  bool present;
  double arena, lower_bound, naive, planned, alignment;
} plan_figures;

static bool read_plan(checker *ck, const cJSON *report, plan_figures *pl) {
  const cJSON *plan = cJSON_GetObjectItemCaseSensitive(report, "plan");
  static const char *const keys[] = {"arena_bytes", "lower_bound_bytes", "naive_bytes", "planned",
                                     "alignment"};
  double *dst[] = {&pl->arena, &pl->lower_bound, &pl->naive, &pl->planned, &pl->alignment};
  memset(pl, 0, sizeof *pl);
  if (plan == NULL) return true;
  if (!cJSON_IsObject(plan)) return missing(ck, SIZE_MAX, "plan", "an object");
  for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(plan, keys[k]);
    if (!whole(v)) return missing_in(ck, "plan", SIZE_MAX, keys[k], "a whole number");
    *dst[k] = v->valuedouble;
  }
  pl->present = true;
  return true;
}

static void print_relaid(printer *p, const relaid_row *rows, size_t n) {
  int wn = 5, wd = 9, ww = 3;
  for (size_t i = 0; i < n; i++) {
    int a = (int)strlen(rows[i].node), b = (int)strlen(rows[i].dim_order),
        c = (int)strlen(rows[i].was);
    wn = a > wn ? a : wn;
    wd = b > wd ? b : wd;
    ww = c > ww ? c : ww;
  }
  wn = min_int(wn, p->width / 2);
  int cols[5] = {0, wn + GAP, wn + wd + 2 * GAP, wn + wd + ww + 3 * GAP,
                 wn + wd + ww + 3 * GAP + 12 + GAP};
  const char *head[5] = {"PARAM", "DIM_ORDER", "WAS", "BYTES", "ALIASED"};
  int widths[5] = {wn, wd, ww, 12, p->width};
  for (int k = 0; k < 5; k++) cell(p, cols[k], widths[k] + GAP, head[k]);
  end_line(p);
  for (size_t i = 0; i < n; i++) {
    char bytes[32], aliased[32];
    snprintf(bytes, sizeof bytes, "%.0f", rows[i].nbytes);
    snprintf(aliased, sizeof aliased, "%.0f", rows[i].aliased);
    const char *text[5] = {rows[i].node, rows[i].dim_order, rows[i].was, bytes, aliased};
    for (int k = 0; k < 5; k++) cell(p, cols[k], widths[k] + GAP, text[k]);
    end_line(p);
  }
}

static void print_plan(printer *p, const plan_figures *pl) {
  char line[512];
  snprintf(line, sizeof line,
           "memory plan: arena %.0f bytes for %.0f buffers (lower bound %.0f bytes, one buffer "
           "each %.0f bytes), offsets aligned to %.0f",
           pl->arena, pl->planned, pl->lower_bound, pl->naive, pl->alignment);
  wrapped(p, 0, INDENT, line);
}

/* ---- the text table ---- */

typedef struct {
  double view_copy_nodes, replaced, kept, removed_dead, normalized, bytes_saved;
  double layout_copy_nodes, merged, bytes_copied, params_relaid;
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
            count(ck, report, "bytes_copied", false, &t->bytes_copied) &&
            count(ck, report, "params_relaid", false, &t->params_relaid);
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
  if (t->params_relaid > 0) {
    snprintf(line, sizeof line, "%.0f parameter%s relaid (stored in the dim order their readers want)",
             t->params_relaid, t->params_relaid == 1 ? "" : "s");
    wrapped(p, 0, INDENT, line);
  }
}

static const char *const only_names[] = {NULL, "replaced", "kept", "merged", "removed", "relaid"};

typedef struct {
  const relaid_row *relaid;
  size_t relaid_n;
  const char **not_relaid; /* the messages of params_not_relaid */
  size_t not_relaid_n;
} param_parts;

static void print_text(printer *p, const cJSON *input_graph, const cJSON *result, row *rows,
                       size_t rows_n, const totals *t, const param_parts *pp,
                       const plan_figures *pl, vl__explain_only only) {
  size_t shown = 0;
  for (size_t i = 0; i < rows_n; i++) { /* --only: the rows of that decision, in order */
    if (only == VL__EXPLAIN_ALL || strcmp(rows[i].decision, only_names[only]) == 0) {
      rows[shown++] = rows[i];
    }
  }
  bool all = only == VL__EXPLAIN_ALL;
  bool table = all || only == VL__EXPLAIN_REPLACED || only == VL__EXPLAIN_KEPT ||
               only == VL__EXPLAIN_MERGED;
  if (table && shown > 0) {
    print_rows(p, rows, shown);
    if (all) end_line(p);
  }
  if ((all || only == VL__EXPLAIN_RELAID) && pp->relaid_n > 0) {
    print_relaid(p, pp->relaid, pp->relaid_n);
    if (all || pp->not_relaid_n > 0) end_line(p);
  }
  if ((all || only == VL__EXPLAIN_RELAID) && pp->not_relaid_n > 0) {
    wrapped(p, 0, INDENT, "parameters that keep their declared layout although a reader copies:");
    for (size_t i = 0; i < pp->not_relaid_n; i++) wrapped(p, INDENT, 2 * INDENT, pp->not_relaid[i]);
    if (all) end_line(p);
  }
  if (all) {
    print_totals(p, t);
    if (pl->present) print_plan(p, pl);
  }
  if (all || only == VL__EXPLAIN_REMOVED) {
    print_dead(p, input_graph, cJSON_GetObjectItemCaseSensitive(result, "graph"));
  }
}

/* ---- the model of JSON and dot ---- */

typedef struct {
  const char *name, *op, *target, *decision;
  const cJSON *in, *low, *dec, *relaid, *not_relaid;
  int64_t nbytes; /* -1: not known */
  int show;       /* 0 hidden, 1 selected, 2 context (a neighbour of a selected node) */
} gnode;

typedef enum { EDGE_DATA, EDGE_ALIAS, EDGE_READS } edge_kind;

typedef struct {
  size_t from, to;
  edge_kind kind;
  const cJSON *offset; /* the alias's offset (elements), or NULL */
} gedge;

typedef struct {
  gnode *v;
  size_t n;
  size_t *by_name; /* indices of v sorted by name */
  gedge *e;
  size_t ne, cap;
  /* Edges into one node are added in a run; seen[from * 3 + kind] == run when that edge is in
   * the current run already (one edge per pair and kind, without a search of the run). */
  uint32_t *seen, run;
  cJSON *own_in, *own_low;
  const char *graph_name;
} model;

static const model *sort_model; /* qsort has no context argument; explain is single-threaded */

static int cmp_index(const void *a, const void *b) {
  return strcmp(sort_model->v[*(const size_t *)a].name, sort_model->v[*(const size_t *)b].name);
}

static gnode *lookup(const model *m, const char *name) {
  size_t lo = 0, hi = m->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(m->v[m->by_name[mid]].name, name);
    if (c == 0) return &m->v[m->by_name[mid]];
    if (c < 0) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return NULL;
}

/* nbytes of a spec object (dtype and shape), or -1. */
static int64_t spec_nbytes(const cJSON *spec) {
  const char *dt = str_member(spec, "dtype");
  const cJSON *shape = cJSON_GetObjectItemCaseSensitive(spec, "shape"), *s;
  vl_dtype dtype;
  if (dt == NULL || !vl_dtype_from_name(dt, &dtype) || !cJSON_IsArray(shape) ||
      cJSON_GetArraySize(shape) > VL_MAX_RANK) {
    return -1;
  }
  int64_t dims[VL_MAX_RANK], nbytes;
  uint8_t rank = 0;
  cJSON_ArrayForEach(s, shape) {
    if (!whole(s)) return -1;
    dims[rank++] = (int64_t)s->valuedouble;
  }
  vl_spec spec_v;
  vl_spec_init(&spec_v, dtype, rank, dims);
  return vl_spec_nbytes(&spec_v, &nbytes) ? nbytes : -1;
}

static int64_t node_nbytes(const cJSON *node) {
  const cJSON *val = cJSON_GetObjectItemCaseSensitive(node, "val");
  const cJSON *vals = cJSON_GetObjectItemCaseSensitive(node, "vals"), *v;
  if (val != NULL) return spec_nbytes(val);
  if (!cJSON_IsArray(vals)) return -1;
  int64_t total = 0;
  cJSON_ArrayForEach(v, vals) {
    int64_t b = spec_nbytes(v);
    if (b < 0 || total > INT64_MAX - b) return -1;
    total += b;
  }
  return total;
}

/* An edge, unless the run of edges into `to` at the end has it already. A node with 160,000
 * distinct inputs (a cat) searched its run for each: quadratic, 9 s to explain. */
static bool add_edge(model *m, size_t from, size_t to, edge_kind kind, const cJSON *offset) {
  if (m->ne == 0 || m->e[m->ne - 1].to != to) m->run++;
  uint32_t *seen = &m->seen[from * 3 + (size_t)kind];
  if (*seen == m->run) return true;
  *seen = m->run;
  if (m->ne == m->cap) {
    size_t cap = m->cap ? m->cap * 2 : 64;
    gedge *e = realloc(m->e, cap * sizeof *e);
    if (e == NULL) return false;
    m->e = e;
    m->cap = cap;
  }
  m->e[m->ne++] = (gedge){from, to, kind, offset};
  return true;
}

/* Data edges from every node reference in args (nested lists too) to node `to`. */
static bool add_refs(model *m, const cJSON *args, size_t to) {
  const cJSON *a;
  cJSON_ArrayForEach(a, args) {
    if (cJSON_IsString(a)) {
      gnode *from = lookup(m, a->valuestring);
      if (from != NULL && !add_edge(m, (size_t)(from - m->v), to, EDGE_DATA, NULL)) return false;
    } else if (cJSON_IsArray(a) && !add_refs(m, a, to)) {
      return false;
    }
  }
  return true;
}

static void model_free(model *m) {
  free(m->v);
  free(m->by_name);
  free(m->seen);
  free(m->e);
  cJSON_Delete(m->own_in);
  cJSON_Delete(m->own_low);
}

static bool build_model(model *m, const cJSON *input_graph, const cJSON *result) {
  memset(m, 0, sizeof *m);
  const cJSON *lowered = cJSON_GetObjectItemCaseSensitive(result, "graph");
  const cJSON *report = cJSON_GetObjectItemCaseSensitive(result, "report"), *n;
  const cJSON *in = nodes_of(input_graph != NULL ? input_graph : lowered, &m->own_in);
  const cJSON *low = nodes_of(lowered, &m->own_low);
  if (in == NULL || low == NULL) return false;
  const cJSON *graph_doc = m->own_in != NULL ? m->own_in : input_graph ? input_graph : lowered;
  m->graph_name = str_member(graph_doc, "name");
  size_t cap = (size_t)cJSON_GetArraySize(in);
  m->v = calloc(cap ? cap : 1, sizeof *m->v);
  m->by_name = calloc(cap ? cap : 1, sizeof *m->by_name);
  m->seen = calloc(cap ? cap * 3 : 1, sizeof *m->seen);
  if (m->v == NULL || m->by_name == NULL || m->seen == NULL) return false;
  cJSON_ArrayForEach(n, in) {
    const char *name = name_of(n);
    if (name == NULL || m->n >= cap) continue;
    gnode *g = &m->v[m->n];
    g->name = name;
    g->op = str_member(n, "op");
    g->target = str_member(n, "target");
    g->in = n;
    g->nbytes = node_nbytes(n);
    m->by_name[m->n] = m->n;
    m->n++;
  }
  sort_model = m;
  qsort(m->by_name, m->n, sizeof *m->by_name, cmp_index);
  sort_model = NULL;
  cJSON_ArrayForEach(n, low) {
    gnode *g = name_of(n) ? lookup(m, name_of(n)) : NULL;
    if (g != NULL) g->low = n;
  }
  const cJSON *d;
  cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(report, "decisions")) {
    gnode *g = str_member(d, "node") ? lookup(m, str_member(d, "node")) : NULL;
    if (g != NULL) {
      g->dec = d;
      g->decision = str_member(d, "decision");
    }
  }
  cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(report, "params_not_relaid")) {
    gnode *g = str_member(d, "node") ? lookup(m, str_member(d, "node")) : NULL;
    if (g != NULL) g->not_relaid = d;
  }
  cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(report, "param_layouts")) {
    gnode *g = str_member(d, "node") ? lookup(m, str_member(d, "node")) : NULL;
    if (g != NULL) {
      g->relaid = d;
      g->decision = "relaid";
    }
  }
  for (size_t i = 0; i < m->n; i++) {
    gnode *g = &m->v[i];
    if (g->low == NULL && g->decision == NULL && input_graph != NULL) g->decision = "removed";
    const cJSON *out = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(g->in, "kwargs"), "out");
    if (!add_refs(m, cJSON_GetObjectItemCaseSensitive(g->in, "args"), i)) return false;
    if (cJSON_IsString(out) && lookup(m, out->valuestring) != NULL &&
        !add_edge(m, (size_t)(lookup(m, out->valuestring) - m->v), i, EDGE_DATA, NULL)) {
      return false;
    }
  }
  for (size_t i = 0; i < m->n; i++) { /* alias edges, and the read of a merged copy */
    const gnode *g = &m->v[i];
    const char *owner = str_member(g->low, "alias_of");
    const gnode *to = owner ? lookup(m, owner) : NULL;
    if (to != NULL && !add_edge(m, i, (size_t)(to - m->v), EDGE_ALIAS,
                                cJSON_GetObjectItemCaseSensitive(g->low, "offset"))) {
      return false;
    }
    const char *root = g->decision && strcmp(g->decision, "merged") == 0
                           ? (cJSON_IsString(cJSON_GetArrayItem(
                                  cJSON_GetObjectItemCaseSensitive(g->low, "args"), 0))
                                  ? cJSON_GetArrayItem(
                                        cJSON_GetObjectItemCaseSensitive(g->low, "args"), 0)
                                        ->valuestring
                                  : NULL)
                           : NULL;
    to = root ? lookup(m, root) : NULL;
    if (to != NULL && !add_edge(m, i, (size_t)(to - m->v), EDGE_READS,
                                cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(g->low, "args"),
                                                   3))) {
      return false;
    }
  }
  return true;
}

/* --only: the nodes of that decision (1), their neighbours by any edge (2). */
static void select_nodes(model *m, vl__explain_only only) {
  for (size_t i = 0; i < m->n; i++) {
    gnode *g = &m->v[i];
    g->show = only == VL__EXPLAIN_ALL ||
              (g->decision != NULL && strcmp(g->decision, only_names[only]) == 0);
  }
  if (only == VL__EXPLAIN_ALL) return;
  for (size_t k = 0; k < m->ne; k++) {
    gnode *a = &m->v[m->e[k].from], *b = &m->v[m->e[k].to];
    if (a->show == 1 && b->show == 0) b->show = 2;
    if (b->show == 1 && a->show == 0) a->show = 2;
  }
}

static const char *const edge_kinds[] = {"data", "alias", "reads"};

/* An edge is shown when both its ends are and one of them was selected (not only context). */
static bool edge_shown(const model *m, const gedge *e) {
  int a = m->v[e->from].show, b = m->v[e->to].show;
  return a != 0 && b != 0 && (a == 1 || b == 1);
}

static bool add_copy(cJSON *o, const char *key, const cJSON *v) {
  if (v == NULL) return true;
  cJSON *c = cJSON_Duplicate(v, true);
  return c != NULL && cJSON_AddItemToObject(o, key, c);
}

static cJSON *node_json(const gnode *g) {
  cJSON *o = cJSON_CreateObject();
  bool ok = o != NULL && cJSON_AddStringToObject(o, "name", g->name) &&
            (g->op == NULL || cJSON_AddStringToObject(o, "op", g->op)) &&
            (g->target == NULL || cJSON_AddStringToObject(o, "target", g->target)) &&
            (g->decision == NULL || cJSON_AddStringToObject(o, "decision", g->decision)) &&
            (g->nbytes < 0 || cJSON_AddNumberToObject(o, "nbytes", (double)g->nbytes));
  static const char *const dec_keys[] = {"base", "reasons", "offset", "message"};
  for (size_t k = 0; ok && g->dec && k < sizeof dec_keys / sizeof *dec_keys; k++) {
    ok = add_copy(o, dec_keys[k], cJSON_GetObjectItemCaseSensitive(g->dec, dec_keys[k]));
  }
  static const char *const relaid_keys[] = {"dim_order", "was", "aliased"};
  for (size_t k = 0; ok && g->relaid && k < sizeof relaid_keys / sizeof *relaid_keys; k++) {
    ok = add_copy(o, relaid_keys[k], cJSON_GetObjectItemCaseSensitive(g->relaid, relaid_keys[k]));
  }
  if (ok && g->not_relaid != NULL) {
    cJSON *nr = cJSON_CreateObject();
    ok = nr != NULL && cJSON_AddItemToObject(o, "not_relaid", nr);
    if (!ok) cJSON_Delete(nr);
    static const char *const nr_keys[] = {"reasons", "blockers", "message"};
    for (size_t k = 0; ok && k < sizeof nr_keys / sizeof *nr_keys; k++) {
      ok = add_copy(nr, nr_keys[k], cJSON_GetObjectItemCaseSensitive(g->not_relaid, nr_keys[k]));
    }
  }
  if (ok) ok = add_copy(o, "alias_of", cJSON_GetObjectItemCaseSensitive(g->low, "alias_of"));
  if (ok) ok = add_copy(o, "mem_offset", cJSON_GetObjectItemCaseSensitive(g->low, "mem_offset"));
  if (ok && g->show == 2) ok = cJSON_AddTrueToObject(o, "context") != NULL;
  if (!ok) {
    cJSON_Delete(o);
    return NULL;
  }
  return o;
}

/* {"graph", "nodes", "edges", "report"}: the report without its decisions (they are on the
 * nodes). */
static bool print_json(FILE *out, const model *m, const cJSON *report) {
  cJSON *doc = cJSON_CreateObject(), *nodes = cJSON_CreateArray(), *edges = cJSON_CreateArray();
  cJSON *rep = cJSON_Duplicate(report, true);
  bool ok = doc && nodes && edges && rep;
  if (ok) cJSON_DeleteItemFromObjectCaseSensitive(rep, "decisions");
  ok = ok && (m->graph_name ? cJSON_AddStringToObject(doc, "graph", m->graph_name)
                            : cJSON_AddNullToObject(doc, "graph")) != NULL;
  ok = ok && cJSON_AddItemToObject(doc, "nodes", nodes);
  if (!ok) cJSON_Delete(nodes);
  ok = ok && cJSON_AddItemToObject(doc, "edges", edges);
  if (!ok) cJSON_Delete(edges);
  ok = ok && cJSON_AddItemToObject(doc, "report", rep);
  if (!ok) cJSON_Delete(rep);
  for (size_t i = 0; ok && i < m->n; i++) {
    if (m->v[i].show == 0) continue;
    cJSON *nj = node_json(&m->v[i]);
    ok = nj != NULL && cJSON_AddItemToArray(nodes, nj);
    if (!ok) cJSON_Delete(nj);
  }
  for (size_t k = 0; ok && k < m->ne; k++) {
    const gedge *e = &m->e[k];
    if (!edge_shown(m, e)) continue;
    cJSON *ej = cJSON_CreateObject();
    ok = ej != NULL && cJSON_AddStringToObject(ej, "from", m->v[e->from].name) &&
         cJSON_AddStringToObject(ej, "to", m->v[e->to].name) &&
         cJSON_AddStringToObject(ej, "kind", edge_kinds[e->kind]) &&
         (e->offset == NULL || add_copy(ej, "offset", e->offset));
    ok = ok && cJSON_AddItemToArray(edges, ej);
    if (!ok) cJSON_Delete(ej);
  }
  char *text = ok ? vl__json_print(doc, NULL) : NULL;
  cJSON_Delete(doc);
  if (text == NULL) return false;
  fprintf(out, "%s\n", text);
  free(text);
  return true;
}

/* ---- dot ---- */

/* text inside a dot "..." string: quotes and backslashes escaped, control characters '?'. */
static void dot_text(FILE *out, const char *text) {
  for (const unsigned char *s = (const unsigned char *)text; *s; s++) {
    if (*s == '"' || *s == '\\') {
      fputc('\\', out);
      fputc(*s, out);
    } else {
      fputc(*s < 0x20 || *s == 0x7f ? '?' : *s, out);
    }
  }
}

static const struct {
  const char *decision, *fill, *legend;
} styles[] = {
    {"replaced", "#c8e6c9", "replaced: an alias, no copy"},
    {"kept", "#ffcdd2", "kept: still copies (reasons)"},
    {"merged", "#ffe0b2", "merged: one strided copy"},
    {"removed", "#eeeeee", "removed as dead"},
    {"relaid", "#bbdefb", "relaid parameter"},
};

static int style_of(const char *decision) {
  for (int k = 0; decision != NULL && k < (int)(sizeof styles / sizeof *styles); k++) {
    if (strcmp(styles[k].decision, decision) == 0) return k;
  }
  return -1;
}

/* The operator name of a target (the middle part), or the whole target. */
static void op_name(FILE *out, const char *target) {
  const char *dot = strchr(target, '.');
  if (dot == NULL) {
    dot_text(out, target);
    return;
  }
  size_t n = strcspn(dot + 1, ".");
  char buf[256];
  snprintf(buf, sizeof buf, "%.*s", (int)(n < 255 ? n : 255), dot + 1);
  dot_text(out, buf);
}

static void dot_reasons(FILE *out, const cJSON *dec) {
  const cJSON *r;
  bool first = true;
  cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(dec, "reasons")) {
    if (!cJSON_IsString(r)) continue;
    fputs(first ? ": " : ", ", out);
    dot_text(out, r->valuestring);
    first = false;
  }
}

/* Nodes are named n<index> in the dot text: a node name may end in a backslash, which no dot
 * ID can hold (in a quoted ID only \" is an escape); the name is in the label. */
static void dot_node(FILE *out, const gnode *g, size_t index) {
  int st = style_of(g->decision);
  bool placeholder = g->op && strcmp(g->op, "placeholder") == 0;
  bool output = g->op && strcmp(g->op, "output") == 0;
  fprintf(out, "  n%zu [label=\"", index);
  dot_text(out, g->name);
  if (g->target != NULL) {
    fputs("\\n", out);
    op_name(out, g->target);
  }
  if (g->decision != NULL) {
    fputs("\\n", out);
    dot_text(out, g->decision);
  }
  if (g->dec != NULL) dot_reasons(out, g->dec);
  if (g->not_relaid != NULL) {
    fputs("\\nkeeps its layout", out);
    dot_reasons(out, g->not_relaid);
  }
  if (g->relaid != NULL) {
    char dims[DIMS_MAX], was[DIMS_MAX], miss[8];
    checker ck = {miss, sizeof miss};
    miss[0] = '\0';
    if (dims_text(&ck, g->relaid, 0, "dim_order", dims) && dims_text(&ck, g->relaid, 0, "was", was)) {
      fprintf(out, " %s (was %s)", dims, was);
    }
  }
  if (g->nbytes >= 0 && g->decision != NULL) {
    bool copies = strcmp(g->decision, "kept") == 0 || strcmp(g->decision, "merged") == 0;
    bool saves = strcmp(g->decision, "replaced") == 0 || strcmp(g->decision, "removed") == 0;
    if (copies || saves) {
      fprintf(out, "\\n%s %lld B", copies ? "copies" : "saves", (long long)g->nbytes);
    } else {
      fprintf(out, "\\n%lld B", (long long)g->nbytes);
    }
  }
  const cJSON *mem = cJSON_GetObjectItemCaseSensitive(g->low, "mem_offset");
  if (cJSON_IsNumber(mem)) fprintf(out, "\\narena @%.0f", mem->valuedouble);
  fputs("\"", out);
  if (placeholder) fputs(", shape=ellipse", out);
  if (output) fputs(", shape=invhouse", out);
  if (st >= 0) fprintf(out, ", fillcolor=\"%s\"", styles[st].fill);
  if (st >= 0 && strcmp(styles[st].decision, "removed") == 0) {
    fputs(", style=\"rounded,filled,dashed\", fontcolor=\"#666666\"", out);
  }
  if (g->show == 2) fputs(", color=\"#999999\", fontcolor=\"#666666\"", out);
  fputs("];\n", out);
}

static bool print_dot(FILE *out, const model *m, const totals *t, const plan_figures *pl) {
  fputs("digraph \"", out);
  dot_text(out, m->graph_name ? m->graph_name : "graph");
  fputs("\" {\n  graph [rankdir=TB, fontname=\"Helvetica\", fontsize=10, labelloc=b, label=\"", out);
  if (t->fold_keys) {
    fprintf(out, "%.0f layout-only nodes: %.0f replaced, %.0f kept, %.0f merged, %.0f removed as "
            "dead\\n%.0f bytes saved, %.0f bytes still copied",
            t->layout_copy_nodes, t->replaced, t->kept, t->merged, t->removed_dead,
            t->bytes_saved, t->bytes_copied);
  } else {
    fprintf(out, "%.0f view_copy nodes: %.0f replaced, %.0f kept, %.0f removed as dead\\n"
            "%.0f bytes saved", t->view_copy_nodes, t->replaced, t->kept, t->removed_dead,
            t->bytes_saved);
  }
  if (t->params_relaid > 0) {
    fprintf(out, "\\n%.0f parameter%s relaid", t->params_relaid, t->params_relaid == 1 ? "" : "s");
  }
  if (pl->present) {
    fprintf(out, "\\nmemory plan: arena %.0f bytes (lower bound %.0f, one buffer each %.0f)",
            pl->arena, pl->lower_bound, pl->naive);
  }
  fputs("\"];\n  node [shape=box, style=\"rounded,filled\", fillcolor=\"#ffffff\", "
        "fontname=\"Helvetica\", fontsize=10];\n  edge [fontname=\"Helvetica\", fontsize=9];\n",
        out);
  bool used[sizeof styles / sizeof *styles] = {false};
  for (size_t i = 0; i < m->n; i++) {
    if (m->v[i].show == 0) continue;
    dot_node(out, &m->v[i], i);
    if (style_of(m->v[i].decision) >= 0) used[style_of(m->v[i].decision)] = true;
  }
  for (size_t k = 0; k < m->ne; k++) {
    const gedge *e = &m->e[k];
    if (!edge_shown(m, e)) continue;
    fprintf(out, "  n%zu -> n%zu", e->from, e->to);
    if (e->kind != EDGE_DATA) {
      fprintf(out, " [style=%s, color=\"%s\", constraint=false, label=\"%s",
              e->kind == EDGE_ALIAS ? "dashed" : "dotted",
              e->kind == EDGE_ALIAS ? "#2e7d32" : "#ef6c00",
              e->kind == EDGE_ALIAS ? "alias of" : "strided read");
      if (cJSON_IsNumber(e->offset) && e->offset->valuedouble != 0) {
        fprintf(out, " +%.0f", e->offset->valuedouble);
      }
      fputs("\"]", out);
    }
    fputs(";\n", out);
  }
  bool any = false;
  for (size_t k = 0; k < sizeof styles / sizeof *styles; k++) any = any || used[k];
  if (any) {
    fputs("  subgraph cluster_legend {\n    label=\"decisions\"; fontsize=9; color=\"#cccccc\";\n",
          out);
    for (size_t k = 0; k < sizeof styles / sizeof *styles; k++) {
      if (!used[k]) continue;
      fprintf(out, "    legend_%s [label=\"%s\", fillcolor=\"%s\"%s];\n", styles[k].decision,
              styles[k].legend, styles[k].fill,
              strcmp(styles[k].decision, "removed") == 0 ? ", style=\"rounded,filled,dashed\"" : "");
    }
    fputs("  }\n", out);
  }
  fputs("}\n", out);
  return true;
}

/* ---- the whole ---- */

bool vl__ctl_explain_format_from_name(const char *name, vl__explain_format *out) {
  static const char *const names[] = {"text", "json", "dot"};
  for (int k = 0; k < 3; k++) {
    if (strcmp(name, names[k]) == 0) {
      *out = (vl__explain_format)k;
      return true;
    }
  }
  return false;
}

bool vl__ctl_explain_only_from_name(const char *name, vl__explain_only *out) {
  for (int k = 1; k < (int)(sizeof only_names / sizeof *only_names); k++) {
    if (strcmp(name, only_names[k]) == 0) {
      *out = (vl__explain_only)k;
      return true;
    }
  }
  return false;
}

bool vl__ctl_print_explain(FILE *out, const cJSON *input_graph, const cJSON *result,
                           const vl__explain_opts *opts, char *missing_field, size_t n) {
  checker ck = {missing_field, n};
  missing_field[0] = '\0';
  const cJSON *report = cJSON_GetObjectItemCaseSensitive(result, "report");
  const cJSON *decisions = cJSON_GetObjectItemCaseSensitive(report, "decisions"), *d;
  totals t;
  plan_figures pl;
  relaid_row *relaid = NULL;
  const char **not_relaid = NULL;
  size_t relaid_n = 0, not_relaid_n = 0;
  if (!cJSON_IsObject(report)) {
    snprintf(missing_field, n, "/report (an object)");
    return false;
  }
  if (!cJSON_IsArray(decisions)) return missing(&ck, SIZE_MAX, "decisions", "an array");
  if (!read_totals(&ck, report, &t) || !read_plan(&ck, report, &pl) ||
      !read_relaid(&ck, report, &relaid, &relaid_n) ||
      !read_not_relaid(&ck, report, &not_relaid, &not_relaid_n)) {
    free(relaid);
    free(not_relaid);
    return false;
  }
  size_t rows_n = (size_t)cJSON_GetArraySize(decisions), i = 0;
  row *rows = calloc(rows_n ? rows_n : 1, sizeof *rows);
  if (rows == NULL) {
    free(relaid);
    free(not_relaid);
    snprintf(missing_field, n, "memory for the table (out of memory)");
    return false;
  }
  cJSON_ArrayForEach(d, decisions) {
    if (i < rows_n && !read_row(&ck, d, i, &rows[i])) break;
    i++;
  }
  if (ck.missing[0] == '\0' && opts->format == VL__EXPLAIN_TEXT) {
    printer p = {out, opts->width < MIN_WIDTH ? MIN_WIDTH : opts->width, 0};
    param_parts pp = {relaid, relaid_n, not_relaid, not_relaid_n};
    print_text(&p, input_graph, result, rows, rows_n, &t, &pp, &pl, opts->only);
  } else if (ck.missing[0] == '\0') {
    model m;
    bool ok = build_model(&m, input_graph, result);
    if (ok) select_nodes(&m, opts->only);
    if (!ok) {
      snprintf(missing_field, n, "/graph/nodes (an array of nodes)");
    } else if (opts->format == VL__EXPLAIN_JSON ? !print_json(out, &m, report)
                                                : !print_dot(out, &m, &t, &pl)) {
      snprintf(missing_field, n, "memory for the output (out of memory)");
    }
    model_free(&m);
  }
  free(rows);
  free(relaid);
  free(not_relaid);
  return ck.missing[0] == '\0';
}

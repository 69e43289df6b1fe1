/* plan.c - the memory plan's figures (docs/format.md §9) for viewlower-bench, measured in one run:
 * per graph of tests/data and examples/graphs, before lowering and after (fold and parameter
 * layouts on), naive_bytes (one buffer each), lower_bound_bytes, arena_bytes (ours),
 * executorch_greedy_bytes (ExecuTorch's `greedy` of exir/memory_planning.py re-implemented on
 * the same storages: sizes decreasing, reuse the first shared object none of whose allocations
 * overlaps in lifetime, else the first whose allocations overlapping it leave room above them
 * within its size, else a new object; objects laid end to end), arena_ratio (arena / lower
 * bound) and plan_ms (median of repeats); then planning chains of 10k to 1M nodes, per node. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_daemon.h"
#include "chain.h"
#include "graph/storage.h"
#include "timing.h"
#include "viewlower/lower.h"
#include "viewlower/plan.h"
#include <time.h>

#define ALIGNMENT 16

typedef struct {
  int64_t size;
  uint32_t n, cap;
  uint32_t *allocs; /* storage indices */
  int64_t *offsets; /* within the object */
} shared_obj;

static bool lifetimes_overlap(const vl_storage *a, const vl_storage *b) {
  return a->start <= b->end && b->start <= a->end;
}

typedef struct {
  int64_t size;
  uint32_t index;
} sized;

static int cmp_sized(const void *a, const void *b) {
  const sized *x = a, *y = b;
  if (x->size != y->size) return x->size > y->size ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index; /* Python's sort is stable */
}

static int64_t executorch_greedy(const vl_storages *s) {
  sized *order = malloc((s->n ? s->n : 1) * sizeof *order);
  shared_obj *objs = calloc(s->n ? s->n : 1, sizeof *objs);
  uint32_t n_objs = 0;
  if (order == NULL || objs == NULL) return -1;
  for (uint32_t k = 0; k < s->n; k++) order[k] = (sized){s->s[k].size, k};
  qsort(order, s->n, sizeof *order, cmp_sized);
  for (uint32_t i = 0; i < s->n; i++) {
    uint32_t k = order[i].index;
    const vl_storage *x = &s->s[k];
    shared_obj *pick = NULL;
    int64_t at = 0;
    for (uint32_t o = 0; o < n_objs && pick == NULL; o++) {
      bool free_all = true;
      for (uint32_t a = 0; a < objs[o].n && free_all; a++) {
        free_all = !lifetimes_overlap(&s->s[objs[o].allocs[a]], x);
      }
      if (free_all) pick = &objs[o];
    }
    for (uint32_t o = 0; o < n_objs && pick == NULL; o++) {
      int64_t top = 0;
      for (uint32_t a = 0; a < objs[o].n; a++) {
        const vl_storage *y = &s->s[objs[o].allocs[a]];
        if (lifetimes_overlap(y, x) && objs[o].offsets[a] + y->size > top) {
          top = objs[o].offsets[a] + y->size;
        }
      }
      if (top + x->size <= objs[o].size) {
        pick = &objs[o];
        at = top;
      }
    }
    if (pick == NULL) pick = &objs[n_objs++];
    if (pick->n == pick->cap) {
      pick->cap = pick->cap ? 2 * pick->cap : 8;
      pick->allocs = realloc(pick->allocs, pick->cap * sizeof *pick->allocs);
      pick->offsets = realloc(pick->offsets, pick->cap * sizeof *pick->offsets);
      if (pick->allocs == NULL || pick->offsets == NULL) return -1;
    }
    pick->allocs[pick->n] = k;
    pick->offsets[pick->n++] = at;
    if (at + x->size > pick->size) pick->size = at + x->size;
  }
  int64_t total = 0;
  for (uint32_t o = 0; o < n_objs; o++) {
    total += (objs[o].size + ALIGNMENT - 1) / ALIGNMENT * ALIGNMENT;
    free(objs[o].allocs);
    free(objs[o].offsets);
  }
  free(objs);
  free(order);
  return total;
}

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (buf != NULL && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  if (buf != NULL) buf[n] = '\0';
  *len = (size_t)n;
  return buf;
}

/* The figures of g planned as it is (lowered or not). */
static cJSON *plan_figures(const vl_graph *g, int repeats) {
  double t[9];
  vl_plan_report pr = {0};
  vl_error err;
  for (int r = 0; r < repeats; r++) {
    vl_graph *c = NULL;
    if (vl_graph_clone(g, &c, &err) != VL_OK) return NULL;
    double t0 = now_s();
    vl_status st = vl_plan(c, ALIGNMENT, &pr, &err);
    t[r] = now_s() - t0;
    vl_graph_free(c);
    if (st != VL_OK) return NULL;
  }
  vl_storages s;
  if (vl__storages_build(g, ALIGNMENT, &s) != VL_OK) return NULL;
  int64_t et = executorch_greedy(&s);
  vl__storages_free(&s);
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "naive_bytes", (double)pr.naive_bytes);
  cJSON_AddNumberToObject(o, "lower_bound_bytes", (double)pr.lower_bound_bytes);
  cJSON_AddNumberToObject(o, "arena_bytes", (double)pr.arena_bytes);
  cJSON_AddNumberToObject(o, "executorch_greedy_bytes", (double)et);
  cJSON_AddNumberToObject(
      o, "arena_ratio",
      pr.lower_bound_bytes ? (double)pr.arena_bytes / (double)pr.lower_bound_bytes : 1.0);
  cJSON_AddNumberToObject(o, "planned", pr.planned);
  cJSON_AddNumberToObject(o, "plan_ms", median(t, repeats) * 1e3);
  return o;
}

static cJSON *graph_entry(const char *path, int repeats) {
  size_t len;
  char *text = read_file(path, &len);
  vl_graph *g = NULL;
  vl_error err;
  vl_report r;
  if (text == NULL || vl_graph_parse(text, len, NULL, &g, &err) != VL_OK) {
    free(text);
    return NULL;
  }
  free(text);
  cJSON *o = cJSON_CreateObject();
  const char *base = strrchr(path, '/');
  cJSON_AddStringToObject(o, "graph", base ? base + 1 : path);
  cJSON_AddNumberToObject(o, "nodes", g->n_nodes);
  cJSON_AddItemToObject(o, "before_lowering", plan_figures(g, repeats));
  vl_lower_options opts;
  vl_lower_options_default(&opts);
  if (vl_lower(g, &opts, &r, &err) == VL_OK) {
    cJSON_AddItemToObject(o, "lowered", plan_figures(g, repeats));
    vl_report_clear(&r);
  }
  vl_graph_free(g);
  return o;
}

static void add_dir(cJSON *list, const char *dir, int repeats) {
  DIR *d = opendir(dir);
  if (d == NULL) return;
  char *names[256];
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL && n < 256) {
    size_t l = strlen(e->d_name);
    if (l > 5 && strcmp(e->d_name + l - 5, ".json") == 0) names[n++] = strdup(e->d_name);
  }
  closedir(d);
  for (int i = 0; i < n; i++) { /* in name order */
    for (int j = i + 1; j < n; j++) {
      if (strcmp(names[j], names[i]) < 0) {
        char *t = names[i];
        names[i] = names[j];
        names[j] = t;
      }
    }
  }
  for (int i = 0; i < n; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    cJSON *entry = graph_entry(path, repeats);
    if (entry != NULL) cJSON_AddItemToArray(list, entry);
    free(names[i]);
  }
}

/* A chain x -> relu -> relu ... of n nodes, planned after lowering: time per node. */
static cJSON *chain_entry(int n) {
  char *json = vl_bench_chain(n, "aten.relu.default", "", "[64]");
  if (json == NULL) return NULL;
  vl_graph *g = NULL;
  vl_error err;
  vl_plan_report pr;
  cJSON *o = NULL;
  if (vl_graph_parse(json, strlen(json), NULL, &g, &err) == VL_OK) {
    struct timespec c0, c1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    double t0 = now_s();
    vl_status st = vl_plan(g, ALIGNMENT, &pr, &err);
    double dt = now_s() - t0;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    double cpu = (double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) * 1e-9;
    if (st == VL_OK) {
      o = cJSON_CreateObject();
      cJSON_AddNumberToObject(o, "nodes", n);
      cJSON_AddNumberToObject(o, "plan_ms", dt * 1e3);
      cJSON_AddNumberToObject(o, "plan_us_per_node", dt * 1e6 / n);
      cJSON_AddNumberToObject(o, "plan_cpu_ms", cpu * 1e3); /* the wall figure on a busy machine */
      cJSON_AddNumberToObject(o, "arena_bytes", (double)pr.arena_bytes);
      cJSON_AddNumberToObject(o, "lower_bound_bytes", (double)pr.lower_bound_bytes);
    }
    vl_graph_free(g);
  }
  free(json);
  return o;
}

cJSON *vl_bench_plan(bool quick) {
  cJSON *o = cJSON_CreateObject();
  cJSON *graphs = cJSON_AddArrayToObject(o, "graphs");
  int repeats = quick ? 3 : 9;
  add_dir(graphs, VL_SOURCE_DIR "/tests/data", repeats);
  add_dir(graphs, VL_SOURCE_DIR "/examples/graphs", repeats);
  cJSON *chains = cJSON_AddArrayToObject(o, "chains");
  static const int sizes[] = {
      10000, 100000, 999998}; /* with the placeholder and the output: 1M nodes, the limit */
  for (int k = 0; k < (quick ? 2 : 3); k++) {
    cJSON *c = chain_entry(sizes[k]);
    if (c != NULL) cJSON_AddItemToArray(chains, c);
  }
  return o;
}

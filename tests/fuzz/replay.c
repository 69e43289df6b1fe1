/* replay.c - runs a fuzz harness body over files without libFuzzer: every regular file of every
 * directory (or file) named on the command line is fed once to LLVMFuzzerTestOneInput. Used by
 * the normal build's ctests to replay the seed corpus and the regression inputs, so every crash
 * ever found stays fixed. Exits 0 when every input passed (an oracle failure aborts). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
    return -1;
  }
  uint8_t *buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len == cap) {
      cap = cap ? 2 * cap : 4096;
      uint8_t *p = realloc(buf, cap);
      if (p == NULL) {
        fclose(f);
        free(buf);
        return -1;
      }
      buf = p;
    }
    size_t n = fread(buf + len, 1, cap - len, f);
    len += n;
    if (n == 0) break;
  }
  fclose(f);
  /* A copy of exactly len bytes, so reads past the input are caught under ASan. */
  uint8_t *exact = malloc(len ? len : 1);
  if (exact == NULL) {
    free(buf);
    return -1;
  }
  if (len) memcpy(exact, buf, len);
  free(buf);
  LLVMFuzzerTestOneInput(exact, len);
  free(exact);
  return 0;
}

static int run_path(const char *path, unsigned *count) {
  struct stat st;
  if (stat(path, &st) != 0) {
    fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
    return -1;
  }
  if (!S_ISDIR(st.st_mode)) {
    (*count)++;
    return run_file(path);
  }
  DIR *d = opendir(path);
  if (d == NULL) return -1;
  int rc = 0;
  struct dirent *e;
  char full[4096];
  while (rc == 0 && (e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    snprintf(full, sizeof full, "%s/%s", path, e->d_name);
    if (stat(full, &st) == 0 && S_ISREG(st.st_mode)) {
      (*count)++;
      rc = run_file(full);
    }
  }
  closedir(d);
  return rc;
}

int main(int argc, char **argv) {
  unsigned count = 0;
  for (int i = 1; i < argc; i++) {
    if (run_path(argv[i], &count) != 0) return 1;
  }
  printf("replayed %u inputs\n", count);
  return 0;
}

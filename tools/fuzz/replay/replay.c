/* replay.c — a libFuzzer target's LLVMFuzzerTestOneInput run without libFuzzer (linked
 * with each tools/fuzz/fuzz_<name>.c as fuzz_<name>_replay in the normal build), so CI
 * exercises every file reader on every run with no clang, sanitizers or corpus:
 *
 *   fuzz_ndload_replay [-mutate N] [-seed S] [-max_len L] FILE...
 *
 * Each FILE is run as it is, then N inputs made from them by deterministic mutations
 * (bit flips, interesting bytes and integers, truncations, repeated and inserted slices:
 * what a corrupted or hostile file looks like), the same N for the same seed. The
 * harness aborts on a wrong status itself; a signal here is a crash of the reader: the
 * input in flight is written to fuzz-replay-crash-<pid> and the signal re-raised, so the
 * spec can name it and `build-fuzz/fuzz_<name> FILE` (the libFuzzer build, under ASan)
 * can replay it. Prints "replayed K inputs". */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t *cur;
static size_t cur_len;

static void on_crash(int sig) {
  char path[64];
  snprintf(path, sizeof path, "fuzz-replay-crash-%d", (int)getpid());
  FILE *f = fopen(path, "wb");
  if (f) {
    if (cur_len) fwrite(cur, 1, cur_len, f);
    fclose(f);
  }
  fprintf(stderr, "fuzz replay: signal %d on an input of %zu bytes, written to %s\n", sig,
          cur_len, path);
  signal(sig, SIG_DFL);
  raise(sig);
}

static uint64_t rng = 0x9E3779B97F4A7C15ULL;
static uint64_t next(void) { /* xorshift64* */
  rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
  return rng * 0x2545F4914F6CDD1DULL;
}
static size_t below(size_t n) { return n ? (size_t)(next() % n) : 0; }

static uint8_t *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, n = 0;
  uint8_t *b = malloc(cap);
  size_t got;
  while (b && (got = fread(b + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) {
      uint8_t *nb = realloc(b, cap *= 2);
      if (!nb) { free(b); b = NULL; }
      else b = nb;
    }
  }
  fclose(f);
  *len = n;
  return b;
}

/* One mutation of buf (len bytes, capacity cap) in place; the new length. */
static size_t mutate(uint8_t *buf, size_t len, size_t cap) {
  static const uint64_t ints[] = {0, 1, 0x7f, 0x80, 0xff, 0x7fff, 0xffff, 0x7fffffff,
                                  0x80000000, 0xffffffff, 0x7fffffffffffffffULL,
                                  0xffffffffffffffffULL, 1ULL << 40};
  switch (below(6)) {
  case 0: /* flip a bit */
    if (len) buf[below(len)] ^= (uint8_t)(1u << below(8));
    return len;
  case 1: /* an interesting byte */
    if (len) buf[below(len)] = (uint8_t)ints[below(5)];
    return len;
  case 2: { /* an interesting integer of 4 or 8 bytes, either byte order */
    size_t w = below(2) ? 8 : 4;
    if (len < w) return len;
    uint64_t v = ints[below(sizeof ints / sizeof ints[0])];
    size_t at = below(len - w + 1);
    bool be = below(2);
    for (size_t i = 0; i < w; i++) buf[at + i] = (uint8_t)(v >> (8 * (be ? w - 1 - i : i)));
    return len;
  }
  case 3: /* truncate */
    return below(len + 1);
  case 4: { /* repeat a slice */
    if (!len || len >= cap) return len;
    size_t a = below(len), n = below(len - a) + 1;
    if (len + n > cap) n = cap - len;
    size_t at = below(len + 1);
    memmove(buf + at + n, buf + at, len - at);
    memmove(buf + at, buf + (a >= at ? a + n : a), n);
    return len + n;
  }
  default: { /* insert random bytes */
    if (len >= cap) return len;
    size_t n = below(16) + 1;
    if (len + n > cap) n = cap - len;
    size_t at = below(len + 1);
    memmove(buf + at + n, buf + at, len - at);
    for (size_t i = 0; i < n; i++) buf[at + i] = (uint8_t)next();
    return len + n;
  }
  }
}

int main(int argc, char **argv) {
  long mutations = 0, max_len = 1 << 16;
  int first = 1;
  for (; first < argc && argv[first][0] == '-'; first += 2) {
    if (first + 1 >= argc) break;
    if (!strcmp(argv[first], "-mutate")) mutations = atol(argv[first + 1]);
    else if (!strcmp(argv[first], "-seed")) rng ^= (uint64_t)atoll(argv[first + 1]) * 0xD1B54A32D192ED03ULL;
    else if (!strcmp(argv[first], "-max_len")) max_len = atol(argv[first + 1]);
    else { fprintf(stderr, "fuzz replay: unknown option %s\n", argv[first]); return 2; }
  }
  int nf = argc - first;
  if (nf < 1) {
    fprintf(stderr, "usage: %s [-mutate N] [-seed S] [-max_len L] FILE...\n", argv[0]);
    return 2;
  }
  signal(SIGSEGV, on_crash);
  signal(SIGBUS, on_crash);
  signal(SIGFPE, on_crash);
  signal(SIGILL, on_crash);
  signal(SIGABRT, on_crash);
  uint8_t **files = calloc((size_t)nf, sizeof *files);
  size_t *lens = calloc((size_t)nf, sizeof *lens);
  size_t cap = (size_t)max_len + 64;
  cur = malloc(cap);
  if (!files || !lens || !cur) return 2;
  long runs = 0;
  for (int i = 0; i < nf; i++) {
    files[i] = read_file(argv[first + i], &lens[i]);
    if (!files[i]) { fprintf(stderr, "fuzz replay: cannot read %s\n", argv[first + i]); return 2; }
    cur_len = lens[i] < (size_t)max_len ? lens[i] : (size_t)max_len;
    memcpy(cur, files[i], cur_len);
    LLVMFuzzerTestOneInput(cur, cur_len);
    runs++;
  }
  for (long m = 0; m < mutations; m++) {
    int i = (int)below((size_t)nf);
    cur_len = lens[i] < (size_t)max_len ? lens[i] : (size_t)max_len;
    memcpy(cur, files[i], cur_len);
    for (size_t k = 0, nk = below(4) + 1; k < nk; k++) cur_len = mutate(cur, cur_len, (size_t)max_len);
    LLVMFuzzerTestOneInput(cur, cur_len);
    runs++;
  }
  printf("replayed %ld inputs\n", runs);
  return 0;
}

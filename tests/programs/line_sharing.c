// Three cache-line sharing shapes for the watch (tests/cli_diagnose.rs): ./line_sharing false|true|padded [seconds]
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
struct stats { long hits; long misses; } stats;
struct padded { long hits; char pad[120]; long misses; } padded __attribute__((aligned(128)));
long shared_count;
static double secs = 1e9;
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
#define LOOP(body) double end = now() + secs; while (now() < end) for (int i = 0; i < 100000; i++) { body; } return 0;
__attribute__((noinline)) void *count_hits(void *p) { LOOP(__atomic_fetch_add(&stats.hits, 1, __ATOMIC_RELAXED)) }
__attribute__((noinline)) void *count_misses(void *p) { LOOP(__atomic_fetch_add(&stats.misses, 1, __ATOMIC_RELAXED)) }
__attribute__((noinline)) void *padded_hits(void *p) { LOOP(__atomic_fetch_add(&padded.hits, 1, __ATOMIC_RELAXED)) }
__attribute__((noinline)) void *padded_misses(void *p) { LOOP(__atomic_fetch_add(&padded.misses, 1, __ATOMIC_RELAXED)) }
__attribute__((noinline)) void *count_all(void *p) { LOOP(__atomic_fetch_add(&shared_count, 1, __ATOMIC_RELAXED)) }
int main(int argc, char **argv) {
  const char *shape = argc > 1 ? argv[1] : "false";
  if (argc > 2) secs = atof(argv[2]);
  void *(*a)(void *), *(*b)(void *);
  if (!strcmp(shape, "false")) { a = count_hits; b = count_misses; }
  else if (!strcmp(shape, "true")) { a = count_all; b = count_all; }
  else if (!strcmp(shape, "padded")) { a = padded_hits; b = padded_misses; }
  else { fprintf(stderr, "usage: shapes false|true|padded [seconds]\n"); return 2; }
  pthread_t ta, tb;
  pthread_create(&ta, 0, a, 0); pthread_create(&tb, 0, b, 0);
  pthread_setname_np(ta, "writer-a"); pthread_setname_np(tb, "writer-b");
  pthread_join(ta, 0); pthread_join(tb, 0);
  printf("%ld %ld %ld %ld %ld\n", stats.hits, stats.misses, padded.hits, padded.misses, shared_count);
  return 0;
}

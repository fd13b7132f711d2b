/* Independent pointer-chase latency for bench/mem.sh: plain C, no code shared with cpudoctor.
 * Maps BYTES with 4 KiB pages (MADV_NOHUGEPAGE) or transparent huge pages (2 MiB-aligned,
 * MADV_HUGEPAGE), links its 64-byte lines into one random cycle (a Fisher-Yates shuffle of the
 * line order, each line pointing at the next in that order, drand48 as the generator), then
 * times REPS runs of LOADS dependent loads with clock_gettime(CLOCK_MONOTONIC) and prints the
 * median ns per load. It also prints AnonHugePages of the process so a THP run that did not
 * get huge pages is visible.
 * Usage: chase_ref BYTES 4k|thp [LOADS] [REPS] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static long anon_huge_kb(void) {
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "AnonHugePages: %ld kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s BYTES 4k|thp [LOADS] [REPS]\n", argv[0]);
        return 2;
    }
    size_t bytes = strtoull(argv[1], NULL, 0);
    int thp = strcmp(argv[2], "thp") == 0;
    long loads = argc > 3 ? atol(argv[3]) : 1L << 20;
    int reps = argc > 4 ? atoi(argv[4]) : 7;
    size_t huge = 2UL << 20;
    char *raw = mmap(NULL, bytes + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) { perror("mmap"); return 1; }
    char *buf = (char *)(((uintptr_t)raw + huge - 1) & ~(huge - 1));
    if (madvise(buf, bytes, thp ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) != 0) perror("madvise");
    memset(buf, 0, bytes);

    size_t n = bytes / 64;
    uint32_t *order = malloc(n * sizeof *order);
    for (size_t i = 0; i < n; i++) order[i] = (uint32_t)i;
    srand48(12345);
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)(drand48() * (double)(i + 1));
        uint32_t t = order[i]; order[i] = order[j]; order[j] = t;
    }
    for (size_t i = 0; i < n; i++)
        *(void **)(buf + (size_t)order[i] * 64) = buf + (size_t)order[(i + 1) % n] * 64;
    free(order);

    void **p = (void **)buf;
    for (long i = 0; i < loads; i++) p = (void **)*p; /* warm-up */
    double *ns = malloc(reps * sizeof *ns);
    for (int r = 0; r < reps; r++) {
        double t0 = now_ns();
        for (long i = 0; i < loads; i++) p = (void **)*p;
        ns[r] = (now_ns() - t0) / loads;
    }
    qsort(ns, reps, sizeof *ns, cmp);
    printf("%.3f %ld\n", ns[reps / 2], anon_huge_kb());
    return p == NULL;
}

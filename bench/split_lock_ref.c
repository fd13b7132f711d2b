/* Independent split-lock timing: `lock add` on a u32 at byte 62 of a 64-byte line (bytes
 * 62..66 straddle two lines), a plain C loop with inline assembly, no code shared with
 * cpudoctor. Three figures per round:
 *   aligned  mean ns per `lock add` on an aligned u32 (a loop of N, timed as a whole);
 *   split    mean ns per split `lock add` (a loop of N, timed as a whole);
 *   per op   each split `lock add` timed alone with the TSC (lfence; rdtsc; lfence ... rdtscp;
 *            lfence), TSC ticks turned into ns by the TSC rate measured against
 *            CLOCK_MONOTONIC over the same loop; the mean and the percentiles p0 p10 p50 p90
 *            p99 p100 of the per-op times, in us (the form of the refs.txt files of the machine corpus).
 * On a machine that bus-locks, every op takes about the same ~0.3-7 us; where the host or the
 * kernel traps split locks, the per-op times are bimodal (bus locks and 100 us-10 ms traps).
 * Run it pinned (taskset -c CPU). Usage: split_lock_ref [N] [ROUNDS]   (default 3000 3) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <x86intrin.h>

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static inline void lock_add(volatile uint32_t *p) {
    __asm__ volatile("lock addl $1, %0" : "+m"(*p) : : "memory");
}

static inline uint64_t tsc_start(void) {
    _mm_lfence();
    uint64_t t = __rdtsc();
    _mm_lfence();
    return t;
}

static inline uint64_t tsc_end(void) {
    unsigned aux;
    uint64_t t = __rdtscp(&aux);
    _mm_lfence();
    return t;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double loop_ns(volatile uint32_t *p, long n) {
    double t0 = now_ns();
    for (long i = 0; i < n; i++) lock_add(p);
    return (now_ns() - t0) / n;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 3000;
    int rounds = argc > 2 ? atoi(argv[2]) : 3;
    if (n < 1 || rounds < 1) {
        fprintf(stderr, "usage: split_lock_ref [N >= 1] [ROUNDS >= 1]\n");
        return 2;
    }
    unsigned char *block = aligned_alloc(128, 128);
    volatile uint32_t *aligned = (volatile uint32_t *)(block + 0);
    volatile uint32_t *split = (volatile uint32_t *)(block + 62);
    double *per = malloc(sizeof(double) * n);
    uint64_t *ticks = malloc(sizeof(uint64_t) * n);
    if (!block || !per || !ticks) return 1;
    loop_ns(aligned, 1000); /* warm-up */
    for (int r = 0; r < rounds; r++) {
        double a = loop_ns(aligned, n * 100);
        double s = loop_ns(split, n);
        double w0 = now_ns();
        uint64_t c0 = __rdtsc();
        for (long i = 0; i < n; i++) {
            uint64_t t0 = tsc_start();
            lock_add(split);
            ticks[i] = tsc_end() - t0;
        }
        double ns_per_tick = (now_ns() - w0) / (double)(__rdtsc() - c0);
        double sum = 0;
        for (long i = 0; i < n; i++) {
            per[i] = ticks[i] * ns_per_tick;
            sum += per[i];
        }
        qsort(per, n, sizeof(double), cmp);
        const double q[] = {0, 0.10, 0.50, 0.90, 0.99, 1.0};
        const char *name[] = {"p0", "p10", "p50", "p90", "p99", "p100"};
        printf("aligned %.1f ns, split %.1f ns; per op: mean %.2f us; percentiles (us):", a, s,
               sum / n / 1e3);
        for (int k = 0; k < 6; k++) {
            long i = (long)(q[k] * (n - 1) + 0.5);
            printf(" %s %.2f", name[k], per[i] / 1e3);
        }
        printf("\n");
    }
    return 0;
}

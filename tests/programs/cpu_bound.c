/* Fixed CPU-bound work for the overhead benchmark: prints its own wall seconds and its own CPU
   seconds (CLOCK_THREAD_CPUTIME_ID: unlike wall time, not inflated while other tenants' threads
   run on its CPU, but inflated by sampling interrupts, which run on its time).
   With DEPTH the loop runs DEPTH calls deep, so that a sampled call chain has that many
   frames to walk (built with frame pointers by the benchmark).
   Usage: cpu_bound [ITERATIONS] [DEPTH] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double seconds(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static uint64_t work(long n) {
    uint64_t x = 88172645463325252ULL, acc = 0;
    for (long i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        acc += x;
    }
    return acc;
}

/* Real recursion: the empty asm keeps gcc from turning it into a loop, so every level keeps
   its frame. */
__attribute__((noinline)) static uint64_t nested(int depth, long n) {
    if (depth <= 0)
        return work(n);
    uint64_t r = nested(depth - 1, n);
    __asm__ volatile("" : "+r"(r));
    return r + 1;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 2000000000L;
    int depth = argc > 2 ? atoi(argv[2]) : 0;
    double wall0 = seconds(CLOCK_MONOTONIC), cpu0 = seconds(CLOCK_THREAD_CPUTIME_ID);
    uint64_t acc = nested(depth, n);
    double wall = seconds(CLOCK_MONOTONIC) - wall0, cpu = seconds(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    printf("%.6f %.6f %llu\n", wall, cpu, (unsigned long long)acc);
    return 0;
}

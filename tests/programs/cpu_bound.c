/* Fixed CPU-bound work for the overhead benchmark: prints its own wall seconds and its own CPU
   seconds (CLOCK_THREAD_CPUTIME_ID: unlike wall time, not inflated while other tenants' threads
   run on its CPU, but inflated by sampling interrupts, which run on its time).
   Usage: cpu_bound [ITERATIONS] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double seconds(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 2000000000L;
    double wall0 = seconds(CLOCK_MONOTONIC), cpu0 = seconds(CLOCK_THREAD_CPUTIME_ID);
    uint64_t x = 88172645463325252ULL, acc = 0;
    for (long i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        acc += x;
    }
    double wall = seconds(CLOCK_MONOTONIC) - wall0, cpu = seconds(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    printf("%.6f %.6f %llu\n", wall, cpu, (unsigned long long)acc);
    return 0;
}

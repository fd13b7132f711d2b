/* Fixed CPU-bound work for the overhead benchmark: prints its own elapsed seconds.
   Usage: cpu_bound [ITERATIONS] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 2000000000L;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    uint64_t x = 88172645463325252ULL, acc = 0;
    for (long i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        acc += x;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%.6f %llu\n", (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9,
           (unsigned long long)acc);
    return 0;
}

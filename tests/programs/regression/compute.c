/* Plain integer computation, the control of the regression corpus: a xorshift generator
   folded into a sum, no memory traffic, no locked or serialising instruction. A fixed number
   of iterations takes a fixed number of cycles, so its time goes with the core clock alone
   (and the design's integer throughput). Defaults: 1,200,000,000 iterations, ~1.2 s at 2.6 GHz
   (Zen 4 guest). Usage: compute [ITERATIONS] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double seconds(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) uint64_t compute(long n) {
    uint64_t x = 88172645463325252ULL, acc = 0;
    for (long i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        acc += x * 0x9e3779b97f4a7c15ULL;
    }
    return acc;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1200000000L;
    double t0 = seconds(CLOCK_MONOTONIC), c0 = seconds(CLOCK_PROCESS_CPUTIME_ID);
    uint64_t acc = compute(n);
    double t = seconds(CLOCK_MONOTONIC) - t0, c = seconds(CLOCK_PROCESS_CPUTIME_ID) - c0;
    printf("ns/iteration: %.4f\n", t * 1e9 / (double)n);
    printf("seconds: %.6f\n", t);
    printf("cpu_seconds: %.6f\n", c);
    printf("sum %llu\n", (unsigned long long)acc);
    return 0;
}

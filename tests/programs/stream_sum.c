/* Streams reads over a buffer (malloc, 256 MiB by default) PASSES times, summing 8-byte words:
   a program whose speed is memory bandwidth. Prints GB/s. Usage: stream_sum [MIB] [PASSES] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    size_t mib = argc > 1 ? (size_t)atol(argv[1]) : 256;
    int passes = argc > 2 ? atoi(argv[2]) : 8;
    size_t words = mib * 1024 * 1024 / 8;
    uint64_t *buf = malloc(words * 8);
    if (!buf)
        return 1;
    memset(buf, 1, words * 8);
    uint64_t sum = 0;
    double t0 = now();
    for (int p = 0; p < passes; p++)
        for (size_t i = 0; i < words; i++)
            sum += buf[i];
    double t1 = now();
    printf("GB/s: %.2f\n", (double)words * 8 * passes / (t1 - t0) / 1e9);
    printf("sum %llu\n", (unsigned long long)sum);
    return 0;
}

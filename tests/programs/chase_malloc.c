/* A dependent pointer chase over a buffer from malloc (so GLIBC_TUNABLES=glibc.malloc.hugetlb=1
   reaches it, and PR_SET_THP_DISABLE takes it away): one random cycle through every 64-byte
   line (Sattolo's shuffle), then STEPS loads each waiting for the one before. Prints the time
   per step of the chase alone. Usage: chase_malloc [MIB] [STEPS] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t next_random(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

int main(int argc, char **argv) {
    size_t mib = argc > 1 ? (size_t)atol(argv[1]) : 1024;
    long steps = argc > 2 ? atol(argv[2]) : 5000000;
    size_t lines = mib * 1024 * 1024 / 64;
    uint64_t *buf = malloc(lines * 64);
    uint32_t *order = malloc(lines * sizeof(uint32_t));
    if (!buf || !order)
        return 1;
    for (size_t i = 0; i < lines; i++)
        order[i] = (uint32_t)i;
    /* Sattolo: one cycle through every line. */
    for (size_t i = lines - 1; i > 0; i--) {
        size_t j = next_random() % i;
        uint32_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (size_t i = 0; i < lines; i++)
        buf[(size_t)order[i] * 8] = (uint64_t)order[(i + 1) % lines] * 8;
    free(order);
    uint64_t p = 0;
    double t0 = now();
    for (long i = 0; i < steps; i++)
        p = buf[p];
    double t1 = now();
    printf("ns/step: %.2f\n", (t1 - t0) * 1e9 / steps);
    printf("end %llu\n", (unsigned long long)p);
    return 0;
}

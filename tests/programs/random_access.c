/* Random loads over a large buffer kept on 4 KiB pages (MADV_NOHUGEPAGE, so the result does
   not depend on the THP mode): each load likely misses the TLB. Usage:
   random_access [SECONDS] [MIB] */
#include <stdint.h>
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) uint64_t random_reads(const uint64_t *buf, uint64_t words, long n,
                                                uint64_t *state) {
    uint64_t sum = 0, x = *state;
    for (long i = 0; i < n; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        sum += buf[(x >> 17) % words];
    }
    *state = x;
    return sum;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 1.0;
    size_t mib = argc > 2 ? (size_t)atol(argv[2]) : 256;
    uint64_t words = mib * 1024 * 1024 / 8;
    uint64_t *buf = mmap(NULL, words * 8, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                         -1, 0);
    if (buf == MAP_FAILED)
        return 1;
    madvise(buf, words * 8, MADV_NOHUGEPAGE);
    memset(buf, 1, words * 8);
    double end = now() + seconds;
    uint64_t sum = 0, state = 42;
    while (now() < end)
        sum += random_reads(buf, words, 1 << 16, &state);
    printf("%llu\n", (unsigned long long)sum);
    return 0;
}

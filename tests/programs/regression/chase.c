/* A random pointer chase over a malloc'd buffer much larger than the last-level cache: one
   random cycle through every 64-byte line (Sattolo's shuffle, done in the buffer itself),
   then LOADS dependent loads, each waiting for the one before. Nearly every load misses the
   caches and, on 4 KiB pages, the TLB as well: its time goes with the machine's DRAM latency
   and, on 4 KiB pages, the page walk on top (the 4 KiB penalty).
   The buffer comes from malloc, so the page size is glibc's and the kernel's choice, not the
   program's: with THP `madvise`, GLIBC_TUNABLES=glibc.malloc.hugetlb=1 makes malloc advise
   huge pages (the program gets THP), and without it the buffer is on 4 KiB pages; under THP
   `always` it gets them either way. glibc 2.35-2.36 (Debian 12) takes that tunable in some
   runs only (it compares THP's mode read from sysfs without ending the string: whatever byte
   the stack holds next decides), so CHASE_MADVISE=1 has the program advise its own buffer
   (madvise MADV_HUGEPAGE, what the tunable does when it takes). A fixed amount of work. Defaults: 1024 MiB (the size the
   check's DRAM latency curve ends at, so its 4 KiB penalty is the one that applies) and
   10,000,000 loads, ~2-3 s of chase on the Zen 4 guest after ~1 s of building the cycle.
   Prints, for `diagnose --metric`, the chase's loads per second of wall time and of its
   thread's CPU time, and the ns per load of each (the CPU-time figures are not inflated while
   other tasks hold the CPU, on a shared machine), then the AnonHugePages of the process as the
   kernel counts them (smaps_rollup) while the buffer is live. Usage: chase [MIB] [LOADS] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double seconds(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t next_random(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Sattolo's shuffle of the identity, in the first word of every line: the result, read as
   line i -> buf[i * 8] / 8, is one cycle through every line. Entries hold word indices. */
__attribute__((noinline)) void build_cycle(uint64_t *buf, size_t lines) {
    for (size_t i = 0; i < lines; i++)
        buf[i * 8] = i * 8;
    for (size_t i = lines - 1; i > 0; i--) {
        size_t j = next_random() % i;
        uint64_t t = buf[i * 8];
        buf[i * 8] = buf[j * 8];
        buf[j * 8] = t;
    }
}

__attribute__((noinline)) uint64_t chase(const uint64_t *buf, long loads) {
    uint64_t p = 0;
    for (long i = 0; i < loads; i++)
        p = buf[p];
    return p;
}

/* AnonHugePages of this process in KiB, or -1 where smaps_rollup cannot be read. */
static long anon_huge_kib(void) {
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    if (!f)
        return -1;
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "AnonHugePages:", 14) == 0)
            kib = atol(line + 14);
    fclose(f);
    return kib;
}

int main(int argc, char **argv) {
    size_t mib = argc > 1 ? (size_t)atol(argv[1]) : 1024;
    long loads = argc > 2 ? atol(argv[2]) : 10000000L;
    size_t lines = mib * 1024 * 1024 / 64;
    uint64_t *buf = malloc(lines * 64);
    if (!buf || lines < 2)
        return 1;
    if (getenv("CHASE_MADVISE")) {
        /* madvise wants a page-aligned start: from the first whole page of the buffer. */
        uintptr_t start = ((uintptr_t)buf + 4095) & ~(uintptr_t)4095;
        uintptr_t end = ((uintptr_t)buf + lines * 64) & ~(uintptr_t)4095;
        if (end > start && madvise((void *)start, end - start, MADV_HUGEPAGE) != 0)
            perror("madvise");
    }
    build_cycle(buf, lines);
    double t0 = seconds(CLOCK_MONOTONIC), c0 = seconds(CLOCK_THREAD_CPUTIME_ID);
    uint64_t end = chase(buf, loads);
    double t = seconds(CLOCK_MONOTONIC) - t0, c = seconds(CLOCK_THREAD_CPUTIME_ID) - c0;
    printf("loads/s: %.0f\n", loads / t);
    printf("loads/cpu-s: %.0f\n", loads / c);
    printf("ns/load: %.2f\n", t * 1e9 / loads);
    printf("cpu_ns/load: %.2f\n", c * 1e9 / loads);
    printf("anon_huge_kib: %ld\n", anon_huge_kib());
    printf("end %llu\n", (unsigned long long)end);
    free(buf);
    return 0;
}

/* A contended atomic: two threads each add COUNT times to one shared counter with `lock xadd`
   (a fetch-and-add whose result is used), so every add waits for the line to come over from
   the other core. A fixed amount of work: its time goes with the machine's cross-core line
   transfer, not its clock. Defaults: 100,000,000 adds per thread, ~1-1.5 s where a contended
   add takes ~10 ns (Zen 4 guest, both vCPUs on one CCX). Prints ns per add (wall / adds of
   one thread). Usage: contended_atomic [COUNT] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long counter __attribute__((aligned(64)));
static long count;

static double seconds(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* COUNT fetch-and-adds on the shared line; the sum of the old values keeps the result used,
   so the compiler must emit `lock xadd` (not `lock add`). */
__attribute__((noinline)) long contended_add(long n) {
    long seen = 0;
    for (long i = 0; i < n; i++)
        seen += __atomic_fetch_add(&counter, 1, __ATOMIC_SEQ_CST);
    return seen;
}

static void *worker(void *arg) {
    long *seen = arg;
    *seen = contended_add(count);
    return NULL;
}

int main(int argc, char **argv) {
    count = argc > 1 ? atol(argv[1]) : 100000000L;
    pthread_t th[2];
    long seen[2];
    double t0 = seconds(CLOCK_MONOTONIC), c0 = seconds(CLOCK_PROCESS_CPUTIME_ID);
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, worker, &seen[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    double t = seconds(CLOCK_MONOTONIC) - t0, c = seconds(CLOCK_PROCESS_CPUTIME_ID) - c0;
    printf("ns/add: %.3f\n", t * 1e9 / (double)count);
    printf("seconds: %.6f\n", t);
    printf("cpu_seconds: %.6f\n", c);
    printf("seen %ld\n", seen[0] + seen[1]);
    return counter != 2 * count;
}

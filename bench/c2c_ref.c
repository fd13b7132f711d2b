/* Independent core-to-core latency for bench/c2c.sh: a plain C CAS ping-pong, no code shared
 * with cpudoctor. Two pthreads pinned to CPUs A and B bounce a counter on one 128-byte-aligned
 * 8-byte value with __atomic_compare_exchange_n (lock cmpxchg); thread A increments even values,
 * thread B odd ones. Thread A times blocks of N handoffs with clock_gettime(CLOCK_MONOTONIC).
 * Prints the median one-way latency in ns (block time / N).
 * Usage: c2c_ref A B [N] [SAMPLES] */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static uint64_t *value;
static long handoffs, samples, warmup = 1000;
static volatile int ready;

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) {
        fprintf(stderr, "cannot pin to CPU %d\n", cpu);
        exit(1);
    }
}

static uint64_t total(void) { return warmup + samples * handoffs + 2; }

static void *responder(void *arg) {
    pin(*(int *)arg);
    __atomic_add_fetch(&ready, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&ready, __ATOMIC_SEQ_CST) < 2) {}
    for (uint64_t cur = 1; cur < total();) {
        uint64_t expected = cur;
        if (__atomic_compare_exchange_n(value, &expected, cur + 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
            cur += 2;
    }
    return NULL;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: c2c_ref A B [N] [SAMPLES]\n");
        return 2;
    }
    int a = atoi(argv[1]), b = atoi(argv[2]);
    handoffs = argc > 3 ? atol(argv[3]) : 4000;
    samples = argc > 4 ? atol(argv[4]) : 31;
    value = aligned_alloc(128, 128);
    *value = 0;
    double *stamp = malloc(sizeof(double) * (samples + 1)), *per = malloc(sizeof(double) * samples);
    pthread_t t;
    pthread_create(&t, NULL, responder, &b);
    pin(a);
    __atomic_add_fetch(&ready, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&ready, __ATOMIC_SEQ_CST) < 2) {}
    long k = 0;
    uint64_t next = warmup;
    for (uint64_t cur = 0; cur < total();) {
        uint64_t expected = cur;
        if (__atomic_compare_exchange_n(value, &expected, cur + 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
            if (cur == next && k <= samples) {
                stamp[k++] = now_ns();
                next += handoffs;
            }
            cur += 2;
        }
    }
    pthread_join(t, NULL);
    for (long i = 0; i < samples; i++) per[i] = (stamp[i + 1] - stamp[i]) / handoffs;
    qsort(per, samples, sizeof(double), cmp);
    printf("%.3f\n", per[samples / 2]);
    return 0;
}

/* Independent core-to-core latency for bench/c2c.sh: a plain C CAS ping-pong, no code shared
 * with cpudoctor. Two pthreads pinned to CPUs A and B bounce one 128-byte-aligned 8-byte value
 * with __atomic_compare_exchange_n (lock cmpxchg). Thread A times blocks of N handoffs with
 * clock_gettime(CLOCK_MONOTONIC) and prints "MEDIAN MEAN" of the one-way latency in ns.
 *
 * PROTOCOL selects how the value is bounced, so bench/c2c.sh can tell which difference between
 * cpudoctor and core-to-core-latency moves the figure:
 *   counter   thread A moves even values to odd, B odd to even (cpudoctor's protocol);
 *   flag      the value alternates between two constants, PING and PONG (core-to-core-latency
 *             1.2.0's CAS benchmark, src/bench/cas.rs);
 *   counter+check  counter, plus cpudoctor's watchdog bookkeeping after each failed CAS
 *             (a counter increment and a test of its low 16 bits).
 * Usage: c2c_ref A B [N] [SAMPLES] [PROTOCOL] */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t *value;
static long handoffs, samples, warmup = 1000;
static volatile int ready;
static int protocol; /* 0 counter, 1 flag, 2 counter+check */
static volatile uint32_t sink;

enum { PING = 1, PONG = 2 };

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

/* One handoff: returns when this thread has moved the value from `from` to `to`. */
static inline void hand(uint64_t from, uint64_t to, uint32_t *spins) {
    for (;;) {
        uint64_t expected = from;
        if (__atomic_compare_exchange_n(value, &expected, to, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
            return;
        if (protocol == 2 && (++*spins & 0xffff) == 0) sink = *spins;
    }
}

static void *responder(void *arg) {
    pin(*(int *)arg);
    __atomic_add_fetch(&ready, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&ready, __ATOMIC_SEQ_CST) < 2) {}
    uint32_t spins = 0;
    for (uint64_t cur = 1; cur < total(); cur += 2) {
        if (protocol == 1) hand(PING, PONG, &spins);
        else hand(cur, cur + 1, &spins);
    }
    return NULL;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: c2c_ref A B [N] [SAMPLES] [counter|flag|counter+check]\n");
        return 2;
    }
    int a = atoi(argv[1]), b = atoi(argv[2]);
    handoffs = argc > 3 ? atol(argv[3]) : 4000;
    samples = argc > 4 ? atol(argv[4]) : 31;
    const char *p = argc > 5 ? argv[5] : "counter";
    if (!strcmp(p, "counter")) protocol = 0;
    else if (!strcmp(p, "flag")) protocol = 1;
    else if (!strcmp(p, "counter+check")) protocol = 2;
    else {
        fprintf(stderr, "unknown protocol %s\n", p);
        return 2;
    }
    handoffs += handoffs % 2;
    value = aligned_alloc(128, 128);
    *value = protocol == 1 ? PONG : 0;
    double *stamp = malloc(sizeof(double) * (samples + 1)), *per = malloc(sizeof(double) * samples);
    pthread_t t;
    pthread_create(&t, NULL, responder, &b);
    pin(a);
    __atomic_add_fetch(&ready, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&ready, __ATOMIC_SEQ_CST) < 2) {}
    long k = 0;
    uint64_t next = warmup;
    uint32_t spins = 0;
    for (uint64_t cur = 0; cur < total(); cur += 2) {
        if (protocol == 1) hand(PONG, PING, &spins);
        else hand(cur, cur + 1, &spins);
        if (cur == next && k <= samples) {
            stamp[k++] = now_ns();
            next += handoffs;
        }
    }
    pthread_join(t, NULL);
    double sum = 0;
    for (long i = 0; i < samples; i++) {
        per[i] = (stamp[i + 1] - stamp[i]) / handoffs;
        sum += per[i];
    }
    qsort(per, samples, sizeof(double), cmp);
    printf("%.3f %.3f\n", per[samples / 2], sum / samples);
    return 0;
}

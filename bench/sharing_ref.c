/* Independent false- and true-sharing reference for the sharing probe: plain C, no code shared
 * with cpudoctor. Two pthreads pinned to CPUs A and B work on two 8-byte fields OFF bytes apart
 * in a fresh 128-byte-aligned block (OFF 8: one 64-byte line; 128: two lines apart, past the
 * adjacent-line prefetcher's pair; 0: the same field). Each thread times its own part with
 * clock_gettime(CLOCK_MONOTONIC) and the program prints ns per operation per thread:
 *
 *   mode 0  plain increments: each thread `(*(volatile uint64_t *)f)++`, N times
 *   mode 1  atomic increments: each thread __atomic_fetch_add(f, 1) with the old value used
 *           (lock xadd), N times; OFF 0 is one atomic written from both cores (true sharing)
 *   mode 2  thread 0 stores to its field N times (the JVM's _secondary_super_cache); thread 1
 *           loads the other field (_secondary_supers, JDK-8180450) until thread 0 is done, so
 *           every load it times ran while the line was being written
 *   alone   mode 1 on CPU A with no second thread: what a private atomic costs by itself
 *
 * Output, one line per measurement (the format of the "false sharing" section of
 * shared/machines/emerald-rapids-kvm/refs.txt, plus, for increments, the wall time from the
 * first thread's start to the last one's end per op, and the true-sharing and alone lines):
 *   off=8 mode=1 t0 29.41 ns/op t1 29.62 ns/op wall 29.70 ns/op
 *   alone mode=1 t0 6.02 ns/op
 * Each line is the median of REPS measurements of N operations each, taken back to back: on a
 * shared machine a thread preempted for a scheduler tick (4 ms at HZ=250) stretches a
 * measurement by whole ticks (private atomics here read 4.7, 8.7, 12.8 or 16.8 ns per op with
 * N = 1M under load), and short measurements with a median dodge most of it, as the probe's
 * samples do.
 * Usage: sharing_ref [A B [ROUNDS [N [REPS]]]]   (defaults: 0 1 3 200000 9) */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long n_ops = 200000;
static int reps = 9;
static volatile uint64_t sink;

struct job {
    int cpu, mode, role; /* role 0: thread 0 (the writer in mode 2); 1: thread 1 */
    uint64_t *field;
    volatile int *ready, *done;
    int threads;
    double ns_per_op, start, end;
};

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

static void *work(void *arg) {
    struct job *j = arg;
    pin(j->cpu);
    __atomic_add_fetch(j->ready, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(j->ready, __ATOMIC_SEQ_CST) < j->threads) {}
    volatile uint64_t *f = j->field;
    uint64_t acc = 0, ops = 0;
    double t0 = now_ns();
    if (j->mode == 0) {
        for (long i = 0; i < n_ops; i++) (*f)++;
        ops = n_ops;
    } else if (j->mode == 1) {
        for (long i = 0; i < n_ops; i++) acc += __atomic_fetch_add(j->field, 1, __ATOMIC_SEQ_CST);
        ops = n_ops;
    } else if (j->role == 0) {
        for (long i = 0; i < n_ops; i++) *f = i;
        __atomic_store_n(j->done, 1, __ATOMIC_RELEASE);
        ops = n_ops;
    } else {
        while (!__atomic_load_n(j->done, __ATOMIC_ACQUIRE)) {
            for (int k = 0; k < 64; k++) {
                acc += *f; acc += *f; acc += *f; acc += *f;
                acc += *f; acc += *f; acc += *f; acc += *f;
            }
            ops += 512;
        }
    }
    j->start = t0;
    j->end = now_ns();
    j->ns_per_op = (j->end - t0) / (ops ? ops : 1);
    sink = acc;
    return NULL;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One measurement: `threads` threads (1 or 2) on fields `off` bytes apart. out: thread 0's and
 * thread 1's ns per op, and the wall time from the first start to the last end per op (what
 * the probe reports for increments: a thread that wins the line more often finishes first and
 * the other then runs alone, so one thread's own figure understates the contended cost). */
static void measure(int a, int b, int off, int mode, int threads, double out[3]) {
    /* Fresh lines each time, and the done flag on lines of its own. */
    char *block = aligned_alloc(128, 512);
    memset(block, 0, 512);
    volatile int *ready = (volatile int *)(block + 256);
    volatile int *done = (volatile int *)(block + 384);
    struct job jobs[2] = {
        {a, mode, 0, (uint64_t *)block, ready, done, threads, 0, 0, 0},
        {b, mode, 1, (uint64_t *)(block + off), ready, done, threads, 0, 0, 0},
    };
    pthread_t t[2];
    for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, work, &jobs[i]);
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    out[0] = jobs[0].ns_per_op;
    out[1] = jobs[1].ns_per_op;
    double start = jobs[0].start, end = jobs[0].end;
    if (threads > 1) {
        if (jobs[1].start < start) start = jobs[1].start;
        if (jobs[1].end > end) end = jobs[1].end;
    }
    out[2] = (end - start) / n_ops;
    free(block);
}

/* The median of `reps` measurements, figure by figure. */
static void measure_median(int a, int b, int off, int mode, int threads, double out[3]) {
    double v[3][reps];
    for (int i = 0; i < reps; i++) {
        double r[3];
        measure(a, b, off, mode, threads, r);
        for (int k = 0; k < 3; k++) v[k][i] = r[k];
    }
    for (int k = 0; k < 3; k++) {
        qsort(v[k], reps, sizeof(double), cmp);
        out[k] = v[k][reps / 2];
    }
}

int main(int argc, char **argv) {
    int a = argc > 2 ? atoi(argv[1]) : 0, b = argc > 2 ? atoi(argv[2]) : 1;
    int rounds = argc > 3 ? atoi(argv[3]) : 3;
    if (argc > 4) n_ops = atol(argv[4]);
    if (argc > 5) reps = atoi(argv[5]);
    if (argc == 2 || rounds < 1 || n_ops < 1 || reps < 1) {
        fprintf(stderr, "usage: sharing_ref [A B [ROUNDS [N [REPS]]]]\n");
        return 2;
    }
    double r[3];
    for (int round = 0; round < rounds; round++) {
        for (int mode = 0; mode <= 2; mode++) {
            int offs[] = {8, 128};
            for (int k = 0; k < 2; k++) {
                measure_median(a, b, offs[k], mode, 2, r);
                printf("off=%d mode=%d t0 %.2f ns/op t1 %.2f ns/op", offs[k], mode, r[0], r[1]);
                if (mode < 2) printf(" wall %.2f ns/op", r[2]);
                printf("\n");
            }
        }
        measure_median(a, b, 0, 1, 2, r);
        printf("off=0 mode=1 t0 %.2f ns/op t1 %.2f ns/op wall %.2f ns/op\n", r[0], r[1], r[2]);
        measure_median(a, b, 128, 1, 1, r);
        printf("alone mode=1 t0 %.2f ns/op\n", r[0]);
        fflush(stdout);
    }
    return 0;
}

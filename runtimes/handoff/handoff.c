// The seed's producer/consumer handoff with a pthread mutex and condition variable.
// Usage and output format: README.md beside this file.
// Build: cc -O2 -pthread handoff.c -o handoff
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int64_t now_ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// Busy work for `ms` of wall time, as the seed's SimulateWork: the thread keeps its CPU.
static void busy_ms(double ms) {
    int64_t end = now_ns(CLOCK_MONOTONIC) + (int64_t)(ms * 1e6);
    while (now_ns(CLOCK_MONOTONIC) < end) {
    }
}

struct run {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_barrier_t start;
    long items;
    double work_ms, delay_ms;
    long pending;   // items sent and not yet processed; guarded by `lock`
    long completed; // written by the worker only
    int64_t sender_lock_wait_ns, sender_wait_cpu_ns, worker_wait_cpu_ns;
    // Each thread stamps its own start (after the barrier) and end: the main thread may get a
    // CPU late when both workers keep the CPUs busy, so its own stamps would cut the run short.
    int64_t worker_start_ns, worker_end_ns, sender_start_ns, sender_end_ns;
};

static void *worker(void *arg) {
    struct run *r = arg;
    pthread_barrier_wait(&r->start);
    r->worker_start_ns = now_ns(CLOCK_MONOTONIC);
    while (r->completed < r->items) {
        int64_t cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
        pthread_mutex_lock(&r->lock);
        while (r->pending == 0)
            pthread_cond_wait(&r->cond, &r->lock);
        r->worker_wait_cpu_ns += now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
        long n = r->pending;
        for (long i = 0; i < n; i++) {
            busy_ms(r->work_ms); // under the lock, as in the seed
            r->completed++;
        }
        r->pending = 0;
        pthread_mutex_unlock(&r->lock);
    }
    r->worker_end_ns = now_ns(CLOCK_MONOTONIC);
    return NULL;
}

static void *sender(void *arg) {
    struct run *r = arg;
    pthread_barrier_wait(&r->start);
    r->sender_start_ns = now_ns(CLOCK_MONOTONIC);
    for (long i = 0; i < r->items; i++) {
        int64_t cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
        int64_t t0 = now_ns(CLOCK_MONOTONIC);
        pthread_mutex_lock(&r->lock);
        r->sender_lock_wait_ns += now_ns(CLOCK_MONOTONIC) - t0;
        r->sender_wait_cpu_ns += now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
        r->pending++;
        pthread_cond_broadcast(&r->cond);
        pthread_mutex_unlock(&r->lock);
        busy_ms(r->delay_ms);
    }
    r->sender_end_ns = now_ns(CLOCK_MONOTONIC);
    return NULL;
}

static int fail(const char *what, int err) {
    fprintf(stderr, "handoff: %s: %s\n", what, strerror(err));
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s default|adaptive ITEMS WORK_MS REPETITIONS DELAY_MS[,DELAY_MS...]\n", argv[0]);
        return 2;
    }
    const char *variant = argv[1];
    int mutex_type;
    if (strcmp(variant, "default") == 0)
        mutex_type = PTHREAD_MUTEX_DEFAULT;
    else if (strcmp(variant, "adaptive") == 0)
        mutex_type = PTHREAD_MUTEX_ADAPTIVE_NP;
    else {
        fprintf(stderr, "handoff: unknown variant '%s' (default or adaptive)\n", variant);
        return 2;
    }
    long items = atol(argv[2]);
    double work_ms = atof(argv[3]);
    long reps = atol(argv[4]);
    if (items <= 0 || work_ms < 0 || reps <= 0) {
        fprintf(stderr, "handoff: ITEMS and REPETITIONS must be positive, WORK_MS not negative\n");
        return 2;
    }
    double delays[64];
    int ndelays = 0;
    char *list = strdup(argv[5]);
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        if (ndelays == 64) {
            fprintf(stderr, "handoff: at most 64 delays\n");
            return 2;
        }
        char *end;
        delays[ndelays] = strtod(tok, &end);
        if (*end != '\0' || delays[ndelays] < 0) {
            fprintf(stderr, "handoff: bad delay '%s'\n", tok);
            return 2;
        }
        ndelays++;
    }

    printf("cpudoctor-handoff 1 runtime=c variant=%s\n", variant);
    fflush(stdout);
    int runs = 0;
    for (int d = 0; d < ndelays; d++) {
        for (long rep = 0; rep < reps; rep++) {
            struct run r;
            memset(&r, 0, sizeof r);
            r.items = items;
            r.work_ms = work_ms;
            r.delay_ms = delays[d];
            pthread_mutexattr_t attr;
            pthread_mutexattr_init(&attr);
            int err = pthread_mutexattr_settype(&attr, mutex_type);
            if (err)
                return fail("pthread_mutexattr_settype", err);
            pthread_mutex_init(&r.lock, &attr);
            pthread_mutexattr_destroy(&attr);
            pthread_cond_init(&r.cond, NULL);
            pthread_barrier_init(&r.start, NULL, 2);
            int64_t p0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
            pthread_t tw, ts;
            if ((err = pthread_create(&tw, NULL, worker, &r)) || (err = pthread_create(&ts, NULL, sender, &r)))
                return fail("pthread_create", err);
            pthread_join(tw, NULL);
            pthread_join(ts, NULL);
            int64_t start = r.worker_start_ns < r.sender_start_ns ? r.worker_start_ns : r.sender_start_ns;
            int64_t end = r.worker_end_ns > r.sender_end_ns ? r.worker_end_ns : r.sender_end_ns;
            int64_t wall = end - start;
            int64_t pcpu = now_ns(CLOCK_PROCESS_CPUTIME_ID) - p0;
            printf("run delay_ms=%.15g rep=%ld items=%ld work_ms=%.15g items_done=%ld wall_ns=%lld "
                   "sender_lock_wait_ns=%lld sender_wait_cpu_ns=%lld worker_wait_cpu_ns=%lld "
                   "process_cpu_ns=%lld\n",
                   delays[d], rep, items, work_ms, r.completed, (long long)wall,
                   (long long)r.sender_lock_wait_ns, (long long)r.sender_wait_cpu_ns,
                   (long long)r.worker_wait_cpu_ns, (long long)pcpu);
            fflush(stdout);
            runs++;
            pthread_barrier_destroy(&r.start);
            pthread_cond_destroy(&r.cond);
            pthread_mutex_destroy(&r.lock);
        }
    }
    printf("end runs=%d\n", runs);
    free(list);
    return 0;
}

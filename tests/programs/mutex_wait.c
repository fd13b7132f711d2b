// Four threads take one pthread mutex and compute for about 2 ms while holding it: each
// waits asleep on the lock most of its wall time (the lock serialises them), the case
// `diagnose`'s wall-clock view must show as blocked on the mutex, with the caller that
// takes it. Usage: mutex_wait [SECONDS] [THREADS]
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static volatile unsigned long sink;
static double seconds = 3.0;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

// About 2 ms of arithmetic on a ~2.5 GHz core; not inlined, so it is named in the samples.
__attribute__((noinline)) static void compute_under_lock(void) {
    unsigned long x = sink;
    for (long i = 0; i < 2500000; i++) x = x * 6364136223846793005UL + 1;
    sink = x;
}

__attribute__((noinline)) static void take_lock_and_work(void) {
    pthread_mutex_lock(&lock);
    compute_under_lock();
    pthread_mutex_unlock(&lock);
}

static void *worker(void *arg) {
    (void)arg;
    double end = now() + seconds;
    while (now() < end) take_lock_and_work();
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) seconds = atof(argv[1]);
    int n = argc > 2 ? atoi(argv[2]) : 4;
    pthread_t t[64];
    for (int i = 0; i < n && i < 64; i++) pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < n && i < 64; i++) pthread_join(t[i], NULL);
    printf("%lu\n", sink);
    return 0;
}

/* A thread that starts late: main waits DELAY seconds (long enough for `diagnose --pid` to
   attach), then starts one thread that computes for SECONDS of its own CPU time, and joins it.
   Guards attaching: a thread created after the attach must be sampled once, not twice.
   Usage: late_thread [DELAY] [SECONDS] */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static double cpu_seconds;

static double thread_cpu(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void late_work(void) {
    volatile uint64_t x = 1;
    double end = thread_cpu() + cpu_seconds;
    while (thread_cpu() < end)
        for (int i = 0; i < 100000; i++)
            x = x * 6364136223846793005ULL + 1;
}

static void *worker(void *arg) {
    (void)arg;
    late_work();
    return NULL;
}

int main(int argc, char **argv) {
    double delay = argc > 1 ? atof(argv[1]) : 1.0;
    cpu_seconds = argc > 2 ? atof(argv[2]) : 1.0;
    struct timespec ts = {(time_t)delay, (long)((delay - (time_t)delay) * 1e9)};
    nanosleep(&ts, NULL);
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_join(t, NULL);
    return 0;
}

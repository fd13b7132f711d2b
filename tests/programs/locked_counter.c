/* Two threads increment one counter with a lock-prefixed add for SECONDS: a contended locked
   read-modify-write. Usage: locked_counter [SECONDS] */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

static long counter;
static volatile int stop;

__attribute__((noinline)) void contended_increment(void) {
    while (!stop)
        for (int i = 0; i < 1024; i++)
            __atomic_fetch_add(&counter, 1, __ATOMIC_SEQ_CST);
}

static void *worker(void *arg) {
    (void)arg;
    contended_increment();
    return NULL;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 1.0;
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, worker, NULL);
    struct timespec ts = {(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)};
    nanosleep(&ts, NULL);
    stop = 1;
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    return counter == 0;
}

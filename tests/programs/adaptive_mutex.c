/* A glibc adaptive mutex (PTHREAD_MUTEX_ADAPTIVE_NP) contended by 4 threads for SECONDS:
   waiters spin in pthread_mutex_lock before they sleep in __lll_lock_wait.
   Usage: adaptive_mutex [SECONDS] */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static pthread_mutex_t lock;
static unsigned long counter;
static volatile int stop;

__attribute__((noinline)) void update_shared_counter(void) {
    while (!stop) {
        pthread_mutex_lock(&lock);
        for (int i = 0; i < 200; i++)
            counter += i ^ (counter >> 3);
        pthread_mutex_unlock(&lock);
    }
}

static void *worker(void *arg) {
    (void)arg;
    update_shared_counter();
    return NULL;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 1.0;
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&lock, &a);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, worker, NULL);
    struct timespec ts = {(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)};
    nanosleep(&ts, NULL);
    stop = 1;
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    printf("%lu\n", counter);
    return 0;
}

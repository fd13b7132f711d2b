/* A spin-wait on PAUSE: one thread waits for a flag that main sets after SECONDS. The wait
   loop is the seed's pattern (pause; check; jump back). Usage: pause_spin [SECONDS] */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static volatile int released;

__attribute__((noinline)) void spin_wait_on_flag(void) {
    while (!released)
        __builtin_ia32_pause();
}

static void *waiter(void *arg) {
    (void)arg;
    spin_wait_on_flag();
    return NULL;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 1.0;
    pthread_t t;
    pthread_create(&t, NULL, waiter, NULL);
    struct timespec ts = {(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)};
    nanosleep(&ts, NULL);
    released = 1;
    pthread_join(t, NULL);
    return 0;
}

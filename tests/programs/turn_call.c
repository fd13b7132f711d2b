/* Two threads hand a turn back and forth, each waiting for its turn in a loop that calls a
 * function to load it, with no PAUSE: the spin-wait of issue 28, whose loop is a call and whose
 * load sits in another function. `load_turn` is kept out of line, as a getter in another
 * translation unit or a library would be. Runs for argv[1] seconds (default 1).
 * Usage: turn_call [SECONDS] */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

static _Atomic int turn;
static _Atomic int stop;

/* A short load-only leaf: one acquire load and a return. */
__attribute__((noinline)) int load_turn(void) {
    return atomic_load_explicit(&turn, memory_order_acquire);
}

/* The wait: re-reads the turn through a call until it is ours, no pause hint. */
__attribute__((noinline)) void wait_turn(int me) {
    while (load_turn() != me && !atomic_load_explicit(&stop, memory_order_relaxed))
        ;
}

static void *player(void *arg) {
    int me = (int)(long)arg;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        wait_turn(me);
        atomic_store_explicit(&turn, 1 - me, memory_order_release);
    }
    return NULL;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 1.0;
    pthread_t t[2];
    for (long i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, player, (void *)i);
    struct timespec ts = {(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)};
    nanosleep(&ts, NULL);
    atomic_store(&stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    return 0;
}

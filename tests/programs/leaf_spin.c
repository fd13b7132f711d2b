/* A spin-wait in a leaf function, called from main through two functions: the shape of the
 * Skylake PAUSE case's "who calls the spin". Built with and without frame pointers, diagnose
 * must show main;run_round;wait_for_peer either way. Runs for argv[1] seconds (default 2). */
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

static _Atomic int peer_ready;

/* A leaf: GCC gives it no frame set-up even with -fno-omit-frame-pointer. */
__attribute__((noinline)) static void wait_for_peer(long spins) {
    for (long i = 0; i < spins && !atomic_load_explicit(&peer_ready, memory_order_acquire); i++)
        __builtin_ia32_pause();
}

__attribute__((noinline)) static void run_round(long spins) {
    wait_for_peer(spins);
    __asm__ volatile("" ::: "memory"); /* not a tail call: run_round stays on the stack */
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 2.0;
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    do {
        run_round(100000);
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while ((now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9 < seconds);
    return 0;
}

/* Work alternated with a spin-wait of N PAUSEs per wait: the Skylake PAUSE case in small. The
   same program at a small N is the old CPU (PAUSE cheap, the wait short), at a large N the new
   one (PAUSE ~10x dearer, the same spin count lasting 10x longer).

   Usage: spin_phases SECONDS PAUSES [WORK]   serve for SECONDS: WORK steps of computation
                                              (default 20000), then a wait of PAUSES PAUSEs
          spin_phases --calibrate             print "PAUSE_NS WORK_NS": ns per PAUSE and per
                                              default unit of work on this machine

   The call chain is main -> serve -> do_work / wait_for_item, each kept out of line so a
   profile names it under its caller. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile int item_ready; /* never set: every wait runs its PAUSEs out */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Called first by do_work and wait_for_item, so neither is a leaf: GCC 12 sets up no frame
   for a leaf even with -mno-omit-leaf-frame-pointer, and the stack walk (along frame
   pointers) would then skip its caller. */
__attribute__((noinline)) long budget(long n) {
    __asm__ volatile("" : "+r"(n));
    return n;
}

/* A dependent chain of multiply-adds: plain computation. */
__attribute__((noinline)) unsigned long do_work(long steps, unsigned long x) {
    steps = budget(steps);
    for (long i = 0; i < steps; i++) {
        x = x * 6364136223846793005UL + 1442695040888963407UL;
        __asm__ volatile("" : "+r"(x));
    }
    return x;
}

/* The spin-wait: poll a flag, PAUSE between polls, give up after `pauses`. */
__attribute__((noinline)) void wait_for_item(long pauses) {
    pauses = budget(pauses);
    for (long i = 0; i < pauses && !item_ready; i++)
        __builtin_ia32_pause();
}

__attribute__((noinline)) unsigned long serve(double seconds, long pauses, long steps) {
    unsigned long x = 1;
    double end = now_s() + seconds;
    for (long round = 0;; round++) {
        if ((round & 15) == 0 && now_s() >= end)
            break;
        x = do_work(steps, x);
        wait_for_item(pauses);
    }
    return x;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--calibrate") == 0) {
        const long pauses = 200000, rounds = 200;
        double t0 = now_s();
        wait_for_item(pauses);
        double t1 = now_s();
        unsigned long x = 1;
        for (long r = 0; r < rounds; r++)
            x = do_work(20000, x);
        double t2 = now_s();
        printf("%.3f %.1f\n", (t1 - t0) * 1e9 / pauses, (t2 - t1) * 1e9 / rounds + (x & 0));
        return 0;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: spin_phases SECONDS PAUSES [WORK] | spin_phases --calibrate\n");
        return 2;
    }
    double seconds = atof(argv[1]);
    long pauses = atol(argv[2]);
    long steps = argc > 3 ? atol(argv[3]) : 20000;
    unsigned long x = serve(seconds, pauses, steps);
    return (int)(x & 0);
}

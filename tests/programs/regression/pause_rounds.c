/* A spin tuned on one CPU: each round executes a fixed count of PAUSEs, as .NET's legacy
   spin-wait did (a count chosen where PAUSE took ~10 ns, kept when PAUSE became ~140 ns on
   Skylake-SP). A fixed amount of work, single thread: its time is ROUNDS x COUNT x the PAUSE
   latency of the machine, nothing else, so a diff across machines should be predicted by
   the ratio of their PAUSE figures alone. Defaults: 60,000 rounds of 1,000 PAUSEs, ~1.5 s at
   24.5 ns (Zen 4), ~0.8 s at 13 ns (Emerald Rapids). Prints the mean ns per PAUSE.
   Usage: pause_rounds [ROUNDS] [COUNT] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double seconds(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* One round: COUNT PAUSEs, the loop counter the only other work. */
__attribute__((noinline)) void spin_round(long count) {
    for (long i = 0; i < count; i++)
        __builtin_ia32_pause();
}

int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 60000;
    long count = argc > 2 ? atol(argv[2]) : 1000;
    double t0 = seconds(CLOCK_MONOTONIC), c0 = seconds(CLOCK_PROCESS_CPUTIME_ID);
    for (long r = 0; r < rounds; r++)
        spin_round(count);
    double t = seconds(CLOCK_MONOTONIC) - t0, c = seconds(CLOCK_PROCESS_CPUTIME_ID) - c0;
    printf("ns/pause: %.3f\n", t * 1e9 / ((double)rounds * (double)count));
    printf("seconds: %.6f\n", t);
    printf("cpu_seconds: %.6f\n", c);
    return 0;
}

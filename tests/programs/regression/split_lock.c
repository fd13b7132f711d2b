/* A split lock: COUNT locked adds on an 8-byte value that straddles two cache lines (bytes
   60..67 of a 64-byte aligned buffer), single thread. Each one takes a bus lock where the
   CPU does not trap it (~1 us on the Zen 4 guest) or a trap where the kernel has
   split_lock_detect (and with split_lock_mitigate, a 10 ms sleep per trap: set COUNT small
   there). A fixed amount of work whose time goes with the machine's split-lock cost. Bus
   locks slow every core of the host, so the default is short: 200,000 adds, ~0.2 s of bus
   locking on the Zen 4 guest. Prints ns per add. Usage: split_lock [COUNT] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static char buffer[128] __attribute__((aligned(64)));

static double seconds(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void split_locked_add(long n) {
    for (long i = 0; i < n; i++)
        __atomic_fetch_add((long *)(buffer + 60), 1, __ATOMIC_SEQ_CST);
}

int main(int argc, char **argv) {
    long count = argc > 1 ? atol(argv[1]) : 200000;
    double t0 = seconds(CLOCK_MONOTONIC), c0 = seconds(CLOCK_PROCESS_CPUTIME_ID);
    split_locked_add(count);
    double t = seconds(CLOCK_MONOTONIC) - t0, c = seconds(CLOCK_PROCESS_CPUTIME_ID) - c0;
    printf("ns/add: %.3f\n", t * 1e9 / (double)count);
    printf("seconds: %.6f\n", t);
    printf("cpu_seconds: %.6f\n", c);
    return 0;
}

/* A locked add on an 8-byte value that straddles two cache lines (bytes 60..67 of a 64-byte
   aligned buffer): every execution is a split lock, which takes a bus lock. Kept short by
   default: bus locks slow every core of the host. Usage: split_lock [SECONDS] */
#include <stdlib.h>
#include <time.h>

static char buffer[128] __attribute__((aligned(64)));

__attribute__((noinline)) void split_locked_increment(int n) {
    for (int i = 0; i < n; i++)
        __atomic_fetch_add((long *)(buffer + 60), 1, __ATOMIC_SEQ_CST);
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    double end = now() + (argc > 1 ? atof(argv[1]) : 0.3);
    while (now() < end)
        split_locked_increment(256);
    return 0;
}

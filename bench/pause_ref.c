/* Independent PAUSE timing for bench/pause.sh: a plain C loop with the _mm_pause intrinsic,
 * timed with clock_gettime(CLOCK_MONOTONIC), no code shared with cpudoctor. Prints the median
 * ns per PAUSE over REPS runs of N PAUSEs. Usage: pause_ref [N] [REPS] */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    int reps = argc > 2 ? atoi(argv[2]) : 21;
    double *per = malloc(sizeof(double) * reps);
    for (long i = 0; i < n; i++) _mm_pause(); /* warm-up */
    for (int r = 0; r < reps; r++) {
        double t0 = now_ns();
        for (long i = 0; i < n; i++) _mm_pause();
        per[r] = (now_ns() - t0) / n;
    }
    qsort(per, reps, sizeof(double), cmp);
    printf("%.4f\n", per[reps / 2]);
    return 0;
}

/* One thread per CPU it may run on (its affinity), each adding to its own counter with an
   atomic increment, TOTAL increments split among them. `packed`: the counters sit side by side
   in one cache line (false sharing: every increment takes the line from the other cores);
   `padded`: each counter on its own line. Usage: thread_counters packed|padded [TOTAL] */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_THREADS 256

static uint64_t packed[MAX_THREADS] __attribute__((aligned(64)));
static struct {
    uint64_t v;
    char pad[56];
} padded[MAX_THREADS] __attribute__((aligned(64)));

static long per_thread;
static int use_padded;

static void *work(void *arg) {
    long i = (long)arg;
    uint64_t *c = use_padded ? &padded[i].v : &packed[i];
    for (long n = 0; n < per_thread; n++)
        __atomic_fetch_add(c, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2 || (strcmp(argv[1], "packed") && strcmp(argv[1], "padded"))) {
        fprintf(stderr, "usage: thread_counters packed|padded [TOTAL]\n");
        return 2;
    }
    use_padded = !strcmp(argv[1], "padded");
    long total = argc > 2 ? atol(argv[2]) : 200000000;
    cpu_set_t set;
    sched_getaffinity(0, sizeof set, &set);
    int threads = CPU_COUNT(&set);
    if (threads > MAX_THREADS)
        threads = MAX_THREADS;
    per_thread = total / threads;
    pthread_t t[MAX_THREADS];
    for (long i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, work, (void *)i);
    uint64_t sum = 0;
    for (long i = 0; i < threads; i++) {
        pthread_join(t[i], NULL);
        sum += use_padded ? padded[i].v : packed[i];
    }
    printf("threads %d increments %llu\n", threads, (unsigned long long)sum);
    return 0;
}

/* A JIT in miniature: copies machine code into anonymous executable memory, publishes the
   two functions in /tmp/perf-PID.map (one address written with 0x, one without, as different
   JITs do), runs them for SECONDS, then removes the map. The hot one is a PAUSE spin, like the
   .NET JIT helper of the Skylake seed. With `memfd`, the code lives in a memfd mapped twice,
   writable and executable, as .NET 7+ does for W^X ("doublemapper"): the executable mapping
   is then a file mapping named "/memfd:doublemapper (deleted)", not anonymous memory.
   Usage: jit [SECONDS] [memfd] */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* mov ecx, 2000; loop: pause; sub ecx, 1; jne loop; ret */
static const unsigned char spin_wait[] = {0xb9, 0xd0, 0x07, 0x00, 0x00, 0xf3, 0x90,
                                          0x83, 0xe9, 0x01, 0x75, 0xf9, 0xc3};
/* mov ecx, 100000; loop: sub ecx, 1; jne loop; ret */
static const unsigned char count_down[] = {0xb9, 0xa0, 0x86, 0x01, 0x00, 0x83, 0xe9,
                                           0x01, 0x75, 0xfb, 0xc3};

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 1.0;
    int memfd = argc > 2 && strcmp(argv[2], "memfd") == 0;
    unsigned char *code, *write_view;
    if (memfd) {
        int fd = memfd_create("doublemapper", 0);
        if (fd < 0 || ftruncate(fd, 8192) != 0)
            return 1;
        write_view = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        code = mmap(NULL, 8192, PROT_READ | PROT_EXEC, MAP_SHARED, fd, 0);
        close(fd);
    } else {
        code = write_view = mmap(NULL, 8192, PROT_READ | PROT_WRITE | PROT_EXEC,
                                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    }
    if (code == MAP_FAILED || write_view == MAP_FAILED)
        return 1;
    memcpy(write_view, spin_wait, sizeof spin_wait);
    memcpy(write_view + 4096, count_down, sizeof count_down);
    char path[64];
    snprintf(path, sizeof path, "/tmp/perf-%d.map", getpid());
    FILE *map = fopen(path, "w");
    if (!map)
        return 1;
    fprintf(map, "%lx %zx JitCompiled::spinWait\n", (unsigned long)code, sizeof spin_wait);
    fprintf(map, "0x%lx 0x%zx JitCompiled::countDown\n", (unsigned long)(code + 4096),
            sizeof count_down);
    fclose(map);
    void (*spin)(void) = (void (*)(void))code;
    void (*count)(void) = (void (*)(void))(code + 4096);
    double end = now() + seconds;
    while (now() < end) {
        spin();
        count();
    }
    unlink(path);
    return 0;
}

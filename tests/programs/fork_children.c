/* A pre-fork server in miniature: the parent forks N workers (named fork_worker) that compute
   until they are killed, and then only waits, using no CPU itself; each SIGUSR1 makes it fork
   one more. A worker dies with the parent (PR_SET_PDEATHSIG), so killing the parent ends all.
   Guards `diagnose --pid PARENT`: the workers that ran before the attach are followed, and one
   forked while recording too; with --no-children, none of them.
   Usage: fork_children [N] */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

static volatile sig_atomic_t asked;

static void on_usr1(int sig) {
    (void)sig;
    asked++;
}

__attribute__((noinline)) void worker_compute(void) {
    volatile uint64_t x = 1;
    for (;;)
        x = x * 6364136223846793005ULL + 1;
}

static void fork_worker(void) {
    pid_t parent = getpid();
    if (fork() == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(0);
        prctl(PR_SET_NAME, "fork_worker");
        worker_compute();
    }
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 2;
    sigset_t usr1, waiting;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    /* Blocked except inside sigsuspend, so a signal between the check and the wait is kept. */
    sigprocmask(SIG_BLOCK, &usr1, &waiting);
    struct sigaction sa = {0};
    sa.sa_handler = on_usr1;
    sigaction(SIGUSR1, &sa, NULL);
    for (int i = 0; i < n; i++)
        fork_worker();
    int forked = 0;
    for (;;) {
        while (forked < asked) {
            fork_worker();
            forked++;
        }
        sigsuspend(&waiting);
    }
}

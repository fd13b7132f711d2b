// Does this host kill a program whose watchpoint traps? (bench/debug_traps.sh; docs/diagnose.md
// "Why it is off by default"). ./debug_trap_ref SECONDS [s]: a child writes one word in a loop;
// a write watchpoint (perf_event_open, PERF_TYPE_BREAKPOINT) counts its writes for SECONDS
// (with `s`, each write also a sample). Prints the hits and whether the child survived: a
// host that loses a debug trap's cause kills it with SIGTRAP.
#define _GNU_SOURCE
#include <linux/perf_event.h>
#include <linux/hw_breakpoint.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/ioctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <signal.h>
#include <time.h>
volatile long word;
int main(int argc, char **argv) {
  double secs = atof(argv[1]); int sample = argc > 2;
  pid_t c = fork();
  if (!c) { for (;;) word++; }
  struct perf_event_attr a; memset(&a, 0, sizeof a);
  a.size = sizeof a; a.type = PERF_TYPE_BREAKPOINT; a.bp_type = HW_BREAKPOINT_W;
  a.bp_addr = (unsigned long)&word; a.bp_len = 8; a.disabled = 1; a.exclude_kernel = 1; a.exclude_hv = 1;
  if (sample) { a.sample_period = 1; a.sample_type = PERF_SAMPLE_IP; }
  int fd = syscall(SYS_perf_event_open, &a, c, -1, -1, 0);
  if (fd < 0) { perror("open"); kill(c, 9); return 1; }
  ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
  struct timespec t0, t; clock_gettime(CLOCK_MONOTONIC, &t0);
  int st = 0; pid_t w = 0;
  do { usleep(10000); w = waitpid(c, &st, WNOHANG); clock_gettime(CLOCK_MONOTONIC, &t); } while (!w && (t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 < secs);
  long long n = 0; read(fd, &n, sizeof n);
  double el = (t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9;
  if (w) printf("died %s after %lld hits %.3f s\n", WIFSIGNALED(st) ? strsignal(WTERMSIG(st)) : "exit", n, el);
  else { printf("alive after %lld hits %.3f s\n", n, el); kill(c, 9); waitpid(c, 0, 0); }
  return 0;
}

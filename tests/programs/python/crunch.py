# A small hot Python function nobody tuned, for `diagnose` on CPython 3.12 with `-X perf`
# (tests/diagnose_coverage.rs): runs until the process has used 2 s of CPU.
import time


def crunch_numbers(n):
    s = 0
    for i in range(n):
        s = (s * 31 + i) % 1000003
    return s


t = 0
while time.process_time() < 2.0:
    t += crunch_numbers(20000)
print(t)

// The seed's producer/consumer handoff with Go's sync.Mutex and sync.Cond.
// Usage and output format: README.md beside this file.
// Build: go build -o handoff handoff.go
//
// The goroutines are ordinary ones, scheduled as a Go program schedules them: locking them to
// OS threads (runtime.LockOSThread) would let a per-thread CPU clock time each one, but waking
// a locked goroutine takes a thread hand-off, and that is not the runtime users run. So the
// waiting CPU is the process's CPU less the busy work asked for, items x (work + delay),
// printed as wait_cpu_ns with wait_cpu_from=process_minus_busy; it includes the runtime's own
// threads (scheduler, GC), and preemption inside the busy work lowers it.
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

const clockProcessCPUTime = 2 // CLOCK_PROCESS_CPUTIME_ID

func cpuNs(clock uintptr) int64 {
	var ts syscall.Timespec
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clock, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}

// Busy work for ms of wall time, as the seed's SimulateWork: the goroutine keeps its CPU.
func busy(ms float64) {
	end := time.Now().Add(time.Duration(ms * 1e6))
	for time.Now().Before(end) {
	}
}

type run struct {
	mu        sync.Mutex
	cond      *sync.Cond
	items     int64
	workMs    float64
	delayMs   float64
	pending   int64 // guarded by mu
	completed int64 // written by the worker only

	senderLockWaitNs                               int64
	workerStart, workerEnd, senderStart, senderEnd time.Time
}

func (r *run) worker(ready, done *sync.WaitGroup, start chan struct{}) {
	defer done.Done()
	ready.Done()
	<-start
	r.workerStart = time.Now()
	for r.completed < r.items {
		r.mu.Lock()
		for r.pending == 0 {
			r.cond.Wait()
		}
		n := r.pending
		for i := int64(0); i < n; i++ {
			busy(r.workMs) // under the lock, as in the seed
			r.completed++
		}
		r.pending = 0
		r.mu.Unlock()
	}
	r.workerEnd = time.Now()
}

func (r *run) sender(ready, done *sync.WaitGroup, start chan struct{}) {
	defer done.Done()
	ready.Done()
	<-start
	r.senderStart = time.Now()
	for i := int64(0); i < r.items; i++ {
		t0 := time.Now()
		r.mu.Lock()
		r.senderLockWaitNs += time.Since(t0).Nanoseconds()
		r.pending++
		r.cond.Broadcast()
		r.mu.Unlock()
		busy(r.delayMs)
	}
	r.senderEnd = time.Now()
}

func die(code int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "handoff: "+format+"\n", args...)
	os.Exit(code)
}

func main() {
	if len(os.Args) != 6 {
		die(2, "usage: %s sync ITEMS WORK_MS REPETITIONS DELAY_MS[,DELAY_MS...]", os.Args[0])
	}
	variant := os.Args[1]
	if variant != "sync" {
		die(2, "unknown variant '%s' (sync)", variant)
	}
	items, err1 := strconv.ParseInt(os.Args[2], 10, 64)
	workMs, err2 := strconv.ParseFloat(os.Args[3], 64)
	reps, err3 := strconv.ParseInt(os.Args[4], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || items <= 0 || workMs < 0 || reps <= 0 {
		die(2, "ITEMS and REPETITIONS must be positive integers, WORK_MS a non-negative number")
	}
	var delays []float64
	for _, tok := range strings.Split(os.Args[5], ",") {
		d, err := strconv.ParseFloat(tok, 64)
		if err != nil || d < 0 {
			die(2, "bad delay '%s'", tok)
		}
		delays = append(delays, d)
	}

	fmt.Printf("cpudoctor-handoff 1 runtime=go variant=%s\n", variant)
	runs := 0
	for _, delay := range delays {
		for rep := int64(0); rep < reps; rep++ {
			r := &run{items: items, workMs: workMs, delayMs: delay}
			r.cond = sync.NewCond(&r.mu)
			var ready, done sync.WaitGroup
			start := make(chan struct{})
			ready.Add(2)
			done.Add(2)
			p0 := cpuNs(clockProcessCPUTime)
			go r.worker(&ready, &done, start)
			go r.sender(&ready, &done, start)
			ready.Wait()
			close(start)
			done.Wait()
			begin := r.workerStart
			if r.senderStart.Before(begin) {
				begin = r.senderStart
			}
			end := r.workerEnd
			if r.senderEnd.After(end) {
				end = r.senderEnd
			}
			pcpu := cpuNs(clockProcessCPUTime) - p0
			busyNs := int64(float64(items) * (workMs + delay) * 1e6)
			waitCPU := pcpu - busyNs
			if waitCPU < 0 {
				waitCPU = 0
			}
			fmt.Printf("run delay_ms=%s rep=%d items=%d work_ms=%s items_done=%d wall_ns=%d "+
				"sender_lock_wait_ns=%d wait_cpu_ns=%d wait_cpu_from=process_minus_busy process_cpu_ns=%d\n",
				strconv.FormatFloat(delay, 'g', -1, 64), rep, items,
				strconv.FormatFloat(workMs, 'g', -1, 64), r.completed, end.Sub(begin).Nanoseconds(),
				r.senderLockWaitNs, waitCPU, pcpu)
			runs++
		}
	}
	fmt.Printf("end runs=%d\n", runs)
}

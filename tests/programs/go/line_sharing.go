// Two goroutines count into two fields of one struct (the false-sharing shape of
// line_sharing.c, in Go): ./line_sharing SECONDS. For the cache-line watch
// (tests/diagnose_runtimes.rs).
package main

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

type Stats struct {
	Hits   int64
	Misses int64
}

var stats Stats

//go:noinline
func countHits(end time.Time) {
	for time.Now().Before(end) {
		for i := 0; i < 100000; i++ {
			atomic.AddInt64(&stats.Hits, 1)
		}
	}
}

//go:noinline
func countMisses(end time.Time) {
	for time.Now().Before(end) {
		for i := 0; i < 100000; i++ {
			atomic.AddInt64(&stats.Misses, 1)
		}
	}
}

func main() {
	secs, _ := strconv.ParseFloat(os.Args[1], 64)
	end := time.Now().Add(time.Duration(secs * float64(time.Second)))
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { countHits(end); wg.Done() }()
	go func() { countMisses(end); wg.Done() }()
	wg.Wait()
	fmt.Println(stats.Hits, stats.Misses)
}

// A sync.Mutex contended by GOMAXPROCS goroutines: each increments one shared counter under
// the lock, so waiters spin in runtime.procyield (sync.(*Mutex).lockSlow) before they sleep.
// Usage: mutex SECONDS
package main

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

var (
	mu      sync.Mutex
	counter uint64
)

//go:noinline
func incrementShared(stop *bool) {
	for !*stop {
		mu.Lock()
		for i := uint64(0); i < 50; i++ {
			counter += i ^ (counter >> 3)
		}
		mu.Unlock()
	}
}

func main() {
	seconds, _ := strconv.ParseFloat(os.Args[1], 64)
	stop := false
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); incrementShared(&stop) }()
	}
	time.Sleep(time.Duration(seconds * float64(time.Second)))
	mu.Lock()
	stop = true
	mu.Unlock()
	wg.Wait()
	fmt.Println(counter)
}

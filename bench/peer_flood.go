// peer_flood: the peer of bench/floodwork for the flood benchmark
// (bench/bench_flood.py): a Go process serving net/http/pprof on
// 127.0.0.1 (any free port) that does the same work on request. Prints
// "port N"; for every line "run SECONDS" on stdin runs the same CPU-bound
// loop (10,000 xorshift steps per call) on one goroutine for that long and
// prints "rate R cpu_ms C" (calls per second; C is the work thread's CPU
// time: the goroutine is locked to its thread). Exits at end of input.
package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"runtime"
	"syscall"
	"time"
)

var sink uint64

//go:noinline
func work(x uint64) uint64 {
	for i := 0; i < 10000; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	return x
}

// The calling thread's CPU time (RUSAGE_THREAD).
func cpuMs() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(1, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e6
}

func main() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	go http.Serve(ln, nil)
	fmt.Printf("port %d\n", ln.Addr().(*net.TCPAddr).Port)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var secs float64
		if n, _ := fmt.Sscanf(in.Text(), "run %g", &secs); n != 1 || secs <= 0 {
			continue
		}
		// One OS thread for the work, as floodwork's.
		runtime.LockOSThread()
		x, n := uint64(1), 0
		c0 := cpuMs()
		t0 := time.Now()
		d := time.Duration(secs * float64(time.Second))
		for time.Since(t0) < d {
			for i := 0; i < 16; i++ {
				x = work(x)
			}
			n += 16
		}
		el := time.Since(t0).Seconds()
		c1 := cpuMs()
		runtime.UnlockOSThread()
		sink += x
		fmt.Printf("rate %.1f cpu_ms %.1f\n", float64(n)/el, c1-c0)
	}
}

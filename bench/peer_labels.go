// peer_labels: the peer of bench/bench_labels — what Go charges for the
// same label scopes with runtime/pprof, printed in the same table shape
// (nanoseconds per scope, median of 5 timings):
//
//	one label      pprof.Do(ctx, pprof.Labels("endpoint", "/api/users"), f)
//	two nested     pprof.Do with endpoint, then pprof.Do with tenant inside
//	1000 values    endpoint=/api/v/<i % 1000>
//	2 threads      "one label" on two goroutines at once (GOMAXPROCS 2)
//	set, restore   pprof.SetGoroutineLabels(labelled ctx), then back
//
// Usage: go run bench/peer_labels.go [ROUNDS]  (million scopes, default 5)
package main

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"sort"
	"strconv"
	"sync"
	"time"
)

var rounds = 5000000
var values [1000]string
var sink int

func nothing(ctx context.Context) { sink++ }

func oneLabel() float64 {
	ctx := context.Background()
	t0 := time.Now()
	for i := 0; i < rounds; i++ {
		pprof.Do(ctx, pprof.Labels("endpoint", "/api/users"), nothing)
	}
	return float64(time.Since(t0).Nanoseconds()) / float64(rounds)
}

func twoNested() float64 {
	ctx := context.Background()
	t0 := time.Now()
	for i := 0; i < rounds; i++ {
		tenant := "a"
		if i&1 == 1 {
			tenant = "b"
		}
		pprof.Do(ctx, pprof.Labels("endpoint", "/api/users"), func(c context.Context) {
			pprof.Do(c, pprof.Labels("tenant", tenant), nothing)
		})
	}
	return float64(time.Since(t0).Nanoseconds()) / float64(rounds)
}

func manyValues() float64 {
	ctx := context.Background()
	t0 := time.Now()
	for i := 0; i < rounds; i++ {
		pprof.Do(ctx, pprof.Labels("endpoint", values[i%1000]), nothing)
	}
	return float64(time.Since(t0).Nanoseconds()) / float64(rounds)
}

func twoThreads() float64 {
	var wg sync.WaitGroup
	var r [2]float64
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			r[g] = oneLabel()
		}(g)
	}
	wg.Wait()
	return (r[0] + r[1]) / 2
}

func setRestore() float64 {
	base := context.Background()
	labelled := pprof.WithLabels(base, pprof.Labels("endpoint", "/api/users"))
	t0 := time.Now()
	for i := 0; i < rounds; i++ {
		pprof.SetGoroutineLabels(labelled)
		sink++
		pprof.SetGoroutineLabels(base)
	}
	return float64(time.Since(t0).Nanoseconds()) / float64(rounds)
}

func median(f func() float64) float64 {
	r := make([]float64, 5)
	for i := range r {
		r[i] = f()
	}
	sort.Float64s(r)
	return r[2]
}

func main() {
	if len(os.Args) > 1 {
		if n, err := strconv.Atoi(os.Args[1]); err == nil && n > 0 {
			rounds = n * 1000000
		}
	}
	for i := range values {
		values[i] = fmt.Sprintf("/api/v/%d", i)
	}
	fmt.Println("| shape | ns per scope |")
	fmt.Println("|---|---|")
	fmt.Printf("| one label (pprof.Do) | %.1f |\n", median(oneLabel))
	fmt.Printf("| two nested | %.1f |\n", median(twoNested))
	fmt.Printf("| 1000 values | %.1f |\n", median(manyValues))
	fmt.Printf("| 2 threads at once | %.1f |\n", median(twoThreads))
	fmt.Printf("| set, restore (SetGoroutineLabels) | %.1f |\n", median(setRestore))
}

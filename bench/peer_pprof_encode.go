// peer_pprof_encode: the peer for bench_profile's encode column. It builds
// the same shape of profile (N unique stacks of depth 30, N distinct leaf
// locations and 2000 shared callers, each location with a function and a
// line) with github.com/google/pprof/profile, the package go tool pprof
// itself uses, and times Profile.Write (serialize, then gzip at the default
// level 6). Each time is the median of 5 runs.
//
// Usage: peer_pprof_encode SIZES...
package main

import (
	"bytes"
	"fmt"
	"os"
	"sort"
	"strconv"
	"time"

	"github.com/google/pprof/profile"
)

const depth = 30
const callers = 2000

func build(n int) *profile.Profile {
	m := &profile.Mapping{ID: 1, Start: 0x400000, Limit: 0x7fffffff, File: "/bin/peer",
		HasFunctions: true, HasFilenames: true, HasLineNumbers: true}
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"},
			{Type: "cpu", Unit: "nanoseconds"}},
		PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:     10000000,
		Mapping:    []*profile.Mapping{m},
	}
	loc := func(id int, addr uint64) *profile.Location {
		f := &profile.Function{ID: uint64(id), Name: "fn" + strconv.Itoa(id),
			SystemName: "fn" + strconv.Itoa(id), Filename: "file.c", StartLine: int64(id)}
		p.Function = append(p.Function, f)
		l := &profile.Location{ID: uint64(id), Mapping: m, Address: addr,
			Line: []profile.Line{{Function: f, Line: int64(id % 1000)}}}
		p.Location = append(p.Location, l)
		return l
	}
	shared := make([]*profile.Location, callers)
	for i := range shared {
		shared[i] = loc(i+1, 0x500000+uint64(i)*32)
	}
	for i := 0; i < n; i++ {
		stack := []*profile.Location{loc(callers+i+1, 0x400000+uint64(i)*16)}
		for d := 1; d < depth; d++ {
			stack = append(stack, shared[(i*7+d*13)%callers])
		}
		p.Sample = append(p.Sample, &profile.Sample{Location: stack,
			Value: []int64{2, 20000000}})
	}
	return p
}

func main() {
	fmt.Println("| stacks | Go pprof Write ms (gzip 6) | bytes |")
	fmt.Println("|---:|---:|---:|")
	for _, a := range os.Args[1:] {
		n, _ := strconv.Atoi(a)
		p := build(n)
		var times []float64
		var size int
		for run := 0; run < 5; run++ {
			var buf bytes.Buffer
			t := time.Now()
			if err := p.Write(&buf); err != nil {
				panic(err)
			}
			times = append(times, float64(time.Since(t).Microseconds())/1000)
			size = buf.Len()
		}
		sort.Float64s(times)
		fmt.Printf("| %d | %.1f | %d |\n", n, times[2], size)
	}
}

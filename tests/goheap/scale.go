// scale.go - prints "count size rate scaledCount scaledSize" for many
// inputs, computed exactly as runtime/pprof's scaleHeapSample does (the
// reference for pushprof's C port, math.Exp included).
package main

import (
	"bufio"
	"fmt"
	"math"
	"math/rand"
	"os"
)

func scaleHeapSample(count, size, rate int64) (int64, int64) {
	if count == 0 || size == 0 {
		return 0, 0
	}
	if rate <= 1 {
		return count, size
	}
	avgSize := float64(size) / float64(count)
	scale := 1 / (1 - math.Exp(-avgSize/float64(rate)))
	return int64(float64(count) * scale), int64(float64(size) * scale)
}

func main() {
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	r := rand.New(rand.NewSource(1))
	rates := []int64{0, 1, 2, 4096, 524288, 1 << 20, 7777777}
	for i := 0; i < 200000; i++ {
		count := r.Int63n(100000) + 1
		sizes := []int64{8, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 4096, 8192, 32768,
			73728, 1 << 20, 1 << 30}
		size := sizes[r.Intn(len(sizes))]
		if i%3 == 0 {
			size = r.Int63n(1 << 24) + 1
		}
		rate := rates[r.Intn(len(rates))]
		if i%5 == 0 {
			rate = r.Int63n(1<<21) + 2
		}
		total := count * size
		c, s := scaleHeapSample(count, total, rate)
		fmt.Fprintf(w, "%d %d %d %d %d\n", count, total, rate, c, s)
	}
	for _, x := range []int64{0, 1} {
		c, s := scaleHeapSample(x, 0, 524288)
		fmt.Fprintf(w, "%d %d %d %d %d\n", x, int64(0), int64(524288), c, s)
	}
}

package rings

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestPingPongTmp(t *testing.T) {
	var line struct {
		_ [128]byte
		a atomic.Uint32
		_ [128]byte
		b atomic.Uint32
		_ [128]byte
	}
	const n = 1_000_000
	var wg sync.WaitGroup
	wg.Add(2)
	var d time.Duration
	go func() {
		defer wg.Done()
		runtime.LockOSThread()
		pinThread(0)
		start := time.Now()
		for i := uint32(1); i <= n; i++ {
			line.a.Store(i)
			for line.b.Load() != i {
			}
		}
		d = time.Since(start)
	}()
	go func() {
		defer wg.Done()
		runtime.LockOSThread()
		pinThread(1)
		for i := uint32(1); i <= n; i++ {
			for line.a.Load() != i {
			}
			line.b.Store(i)
		}
	}()
	wg.Wait()
	t.Logf("round trip %.1f ns", float64(d.Nanoseconds())/n)
}

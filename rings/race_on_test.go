//go:build race

package rings

// stressItems is smaller under the race detector, which slows every atomic
// and copy several times over, to keep the package's tests well under 20 s on
// a shared two-core machine.
const stressItems = 100_000

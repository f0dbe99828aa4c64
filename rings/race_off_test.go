//go:build !race

package rings

// stressItems is how many items each concurrent stress test moves.
const stressItems = 200_000

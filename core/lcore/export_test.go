package lcore

// Iterate exposes one loop iteration to the tests: it must not allocate.
func (l *Loop) Iterate() int { return l.iterate() }

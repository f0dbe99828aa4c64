package rt

// indexList is an intrusive FIFO of indexes in [0, n) with O(1) push,
// pop and removal from anywhere; an index is on the list at most once.
// The endpoint queues connections (ACKs to send, control packets) and
// retransmission contexts (first sends, resends) on these, and unlinks an
// entry the moment it goes away, so a list never names a dead slot.
type indexList struct {
	next, prev []int32
	on         []bool
	head, tail int32
	n          int
}

func newIndexList(n int) indexList {
	return indexList{next: make([]int32, n), prev: make([]int32, n), on: make([]bool, n), head: -1, tail: -1}
}

func (l *indexList) len() int              { return l.n }
func (l *indexList) contains(i int32) bool { return l.on[i] }

// push appends i unless it is already on the list.
func (l *indexList) push(i int32) {
	if l.on[i] {
		return
	}
	l.on[i] = true
	l.next[i], l.prev[i] = -1, l.tail
	if l.tail >= 0 {
		l.next[l.tail] = i
	} else {
		l.head = i
	}
	l.tail = i
	l.n++
}

// remove takes i off the list if it is on it.
func (l *indexList) remove(i int32) {
	if !l.on[i] {
		return
	}
	l.on[i] = false
	n, p := l.next[i], l.prev[i]
	if p >= 0 {
		l.next[p] = n
	} else {
		l.head = n
	}
	if n >= 0 {
		l.prev[n] = p
	} else {
		l.tail = p
	}
	l.n--
}

// front returns the first index, or -1.
func (l *indexList) front() int32 { return l.head }

// pop removes and returns the first index, or -1 when empty.
func (l *indexList) pop() int32 {
	i := l.head
	if i >= 0 {
		l.remove(i)
	}
	return i
}

// clear empties the list.
func (l *indexList) clear() {
	for l.head >= 0 {
		l.remove(l.head)
	}
}

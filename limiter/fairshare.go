package limiter

import "container/list"

// fairShare chooses which class goes next among those that wait, so that
// while several wait each is given slots (or seats) in proportion to its
// weight, and a class that waits again after a pause starts level with
// the others rather than with the credit of its pause: start-time fair
// queuing over classes, as API Priority and Fairness queues flows, with
// one request a class per turn. Ties go to the lower class (writes
// first). Its user serialises calls.
type fairShare struct {
	weights Weights
	pass    [NumClasses]float64 // each class's virtual start of its next turn
	vtime   float64             // the virtual start of the last turn given
}

// newFairShare returns the chooser of the classes of weights w.
func newFairShare(w Weights) *fairShare {
	return &fairShare{weights: w}
}

// classSet is a set of classes, one bit each.
type classSet uint8

func (s classSet) with(c Class) classSet { return s | 1<<c }
func (s classSet) has(c Class) bool      { return s&(1<<c) != 0 }

// waitingIn returns the classes whose queues, indexed by class, are not
// empty.
func waitingIn(queues *[NumClasses]list.List) classSet {
	var w classSet
	for c := range Class(NumClasses) {
		if queues[c].Len() > 0 {
			w = w.with(c)
		}
	}
	return w
}

// start returns the virtual start of class c's next turn.
func (f *fairShare) start(c Class) float64 { return max(f.pass[c], f.vtime) }

// pick returns the class of waiting whose turn comes first; ok is false
// when waiting is empty.
func (f *fairShare) pick(waiting classSet) (best Class, ok bool) {
	var first float64
	for c := range Class(NumClasses) {
		if !waiting.has(c) {
			continue
		}
		if s := f.start(c); !ok || s < first {
			best, first, ok = c, s, true
		}
	}
	return best, ok
}

// charge gives class c its turn.
func (f *fairShare) charge(c Class) {
	s := f.start(c)
	f.vtime = s
	f.pass[c] = s + 1/float64(max(f.weights[c], 1))
}

package k8sratelimit

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/k8sratelimit/k8sratelimit/limiter"
)

// Class is the traffic class of a request: ClassWrite, ClassRead,
// ClassList or ClassEvent. Inside one API server's budget, when requests
// wait, the classes share its rate slots and seats by weight
// (Config.ClassWeights), first come, first served within a class; events
// that would wait long are refused at once. A request's class comes from
// its method and path; WithClass sets it.
type Class = limiter.Class

// The traffic classes.
const (
	// ClassWrite is POST, PUT, PATCH and DELETE, events aside.
	ClassWrite = limiter.ClassWrite
	// ClassRead is a GET of one object (or of discovery).
	ClassRead = limiter.ClassRead
	// ClassList is a list or a watch.
	ClassList = limiter.ClassList
	// ClassEvent is a write of core/v1 or events.k8s.io events.
	ClassEvent = limiter.ClassEvent
)

// WithClass returns a context whose Kubernetes requests are of class c,
// whatever their method and path: a reconciler's bulk reads can be
// marked ClassList, or a write that can wait ClassEvent.
func WithClass(ctx context.Context, c Class) context.Context {
	return limiter.WithClass(ctx, c)
}

// ClassWeights are the weights of the traffic classes: while requests of
// several classes wait, each class is given rate slots and seats in
// proportion to its weight, and a class with none waiting lends its
// share. A zero weight is the class's default (DefaultClassWeights).
type ClassWeights struct {
	Write, Read, List, Event int
}

// DefaultClassWeights are the weights of the classes unless configured.
var DefaultClassWeights = ClassWeights{
	Write: limiter.DefaultWeights[ClassWrite],
	Read:  limiter.DefaultWeights[ClassRead],
	List:  limiter.DefaultWeights[ClassList],
	Event: limiter.DefaultWeights[ClassEvent],
}

// MaxClassWeight is the largest accepted class weight.
const MaxClassWeight = 100

// EnvClasses is the variable of the traffic classes: on (the default
// weights), off (one line for all requests), or weights such as
// write=8,read=4,list=2,event=1, the classes left out keeping theirs.
const EnvClasses = "KUBERNETES_RATELIMIT_CLASSES"

var reasonClasses = fmt.Sprintf("on, off, or weights of the classes write, read, list and event, each from 1 to %d, such as write=8,read=4,list=2,event=1", MaxClassWeight)

// classesVar is the row of the configuration table for the classes.
var classesVar = envVar{EnvClasses, func(c *Config, v string) error {
	off, w, err := parseClasses(v)
	if err != nil {
		return err
	}
	c.ClassesOff, c.ClassWeights = off, w
	return nil
}}

// parseClasses parses a value of EnvClasses.
func parseClasses(v string) (off bool, w ClassWeights, err error) {
	switch asciiLower(v) {
	case "on":
		return false, ClassWeights{}, nil
	case "off":
		return true, ClassWeights{}, nil
	}
	seen := map[string]bool{}
	for item := range strings.SplitSeq(v, ",") {
		name, weight, ok := strings.Cut(item, "=")
		name = asciiLower(strings.TrimSpace(name))
		weight = strings.TrimSpace(weight)
		field := w.field(name)
		switch {
		case !ok || name == "":
			return false, ClassWeights{}, invalid(EnvClasses, v, reasonClasses)
		case field == nil:
			return false, ClassWeights{}, invalid(EnvClasses, v, fmt.Sprintf("no class %q: %s", name, reasonClasses))
		case seen[name]:
			return false, ClassWeights{}, invalid(EnvClasses, v, fmt.Sprintf("class %s given twice: %s", name, reasonClasses))
		}
		seen[name] = true
		if err := parseInt(weight, 1, MaxClassWeight, field, EnvClasses, reasonClasses); err != nil {
			return false, ClassWeights{}, invalid(EnvClasses, v, fmt.Sprintf("weight of %s %q: %s", name, weight, reasonClasses))
		}
	}
	return false, w, nil
}

// field returns the weight of the class named name, nil when there is
// no such class.
func (w *ClassWeights) field(name string) *int {
	switch name {
	case "write":
		return &w.Write
	case "read":
		return &w.Read
	case "list":
		return &w.List
	case "event":
		return &w.Event
	}
	return nil
}

func (c Config) checkClasses() error {
	w := c.ClassWeights
	for _, x := range []int{w.Write, w.Read, w.List, w.Event} {
		if x < 0 || x > MaxClassWeight {
			return invalid(EnvClasses, c.describeClasses(), reasonClasses)
		}
	}
	if c.ClassesOff && w != (ClassWeights{}) {
		return invalid(EnvClasses, c.describeClasses(), "weights are set with the classes off")
	}
	return nil
}

// weights returns the engine's weights of the configuration, nil with the
// classes off.
func (c Config) weights() *limiter.Weights {
	if c.ClassesOff {
		return nil
	}
	w := c.ClassWeights.orDefault()
	return &limiter.Weights{ClassWrite: w.Write, ClassRead: w.Read, ClassList: w.List, ClassEvent: w.Event}
}

// orDefault returns w, each zero weight its default.
func (w ClassWeights) orDefault() ClassWeights {
	d := DefaultClassWeights
	if w.Write == 0 {
		w.Write = d.Write
	}
	if w.Read == 0 {
		w.Read = d.Read
	}
	if w.List == 0 {
		w.List = d.List
	}
	if w.Event == 0 {
		w.Event = d.Event
	}
	return w
}

// describeClasses returns the value EnvClasses is printed with: off, or
// every class's weight in effect.
func (c Config) describeClasses() string {
	if c.ClassesOff && c.ClassWeights == (ClassWeights{}) {
		return "off"
	}
	w := c.ClassWeights.orDefault()
	return "write=" + strconv.Itoa(w.Write) + ",read=" + strconv.Itoa(w.Read) +
		",list=" + strconv.Itoa(w.List) + ",event=" + strconv.Itoa(w.Event)
}

// canonicalClasses writes weights that are the defaults as zero, and
// others in full, so that the weights Describe prints load as the same
// Config as those it was given.
func (c *Config) canonicalClasses() {
	if c.ClassesOff {
		return
	}
	if w := c.ClassWeights.orDefault(); w != DefaultClassWeights {
		c.ClassWeights = w
		return
	}
	c.ClassWeights = ClassWeights{}
}

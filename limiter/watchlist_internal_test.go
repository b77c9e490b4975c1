package limiter

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The mark that ends a watch-list's initial events is found whatever
// the reads cut the stream into, and only where it is.
func FuzzWatchListBodyFindsTheEndOfTheInitialEvents(f *testing.F) {
	f.Add([]byte(`{"type":"BOOKMARK","object":{"metadata":{"annotations":{"k8s.io/initial-events-end":"true"}}}}`), uint8(1))
	f.Add([]byte(`{"type":"ADDED"}k8s.io/initial-events-en`), uint8(7))
	f.Fuzz(func(t *testing.T, stream []byte, chunk uint8) {
		wb := &watchListBody{}
		r := io.Reader(bytes.NewReader(stream))
		found := false
		buf := make([]byte, max(int(chunk), 1))
		for !found {
			n, err := r.Read(buf)
			found = wb.marked(buf[:n])
			if err != nil {
				break
			}
		}
		assert.Equal(t, bytes.Contains(stream, initialEventsEndBytes), found)
	})
}

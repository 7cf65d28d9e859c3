package chaos_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestChaosPauseChecker runs TestChaosPause's checks on hand-written logs: what must count as an
// overlap, a hold live after a stop, or a fencing violation, and what must not.
func TestChaosPauseChecker(t *testing.T) {
	const long, short = "CONT 0 1500000000", "CONT 0 100000000" // a stop past the lease, and within it
	for _, tc := range []struct {
		name                      string
		log                       string
		overlaps, liveAfter, fenc int
		explained                 bool
	}{
		{"holder stopped past its lease steps again after another took the lock", `
B 0.0.1 m w 1
E 0.0.1 1
P 0.0.1
S 0.0.1
P 0.0.1
S 0.0.1
STOP 0
B 1.0.1 m w 1
E 1.0.1 2
P 1.0.1
S 1.0.1
P 1.0.1
S 1.0.1
X 1.0.1 ok
U 1.0.1 ok
` + long + `
P 0.0.1
S 0.0.1
X 0.0.1 ok
U 0.0.1 lost`, 1, 1, 0, true},
		{"... and finds its context done", `
B 0.0.1 m w 1
E 0.0.1 1
P 0.0.1
S 0.0.1
STOP 0
B 1.0.1 m w 1
E 1.0.1 2
P 1.0.1
S 1.0.1
P 1.0.1
S 1.0.1
X 1.0.1 ok
U 1.0.1 ok
` + long + `
P 0.0.1
X 0.0.1 lost
U 0.0.1 lost`, 0, 0, 0, false},
		{"holder stopped past its lease steps again, nobody took the lock", `
B 0.0.1 m w 1
E 0.0.1 1
P 0.0.1
S 0.0.1
STOP 0
` + long + `
P 0.0.1
S 0.0.1
X 0.0.1 ok
U 0.0.1 lost`, 0, 1, 0, false},
		{"a short stop is no loss", `
B 0.0.1 m w 1
E 0.0.1 1
P 0.0.1
S 0.0.1
STOP 0
` + short + `
P 0.0.1
S 0.0.1
X 0.0.1 ok
U 0.0.1 ok`, 0, 0, 0, false},
		{"stopped between its check and its record: no overlap", `
B 0.0.1 m w 1
E 0.0.1 1
P 0.0.1
S 0.0.1
P 0.0.1
STOP 0
B 1.0.1 m w 1
E 1.0.1 2
P 1.0.1
S 1.0.1
P 1.0.1
S 1.0.1
X 1.0.1 ok
U 1.0.1 ok
` + long + `
S 0.0.1
P 0.0.1
X 0.0.1 lost
U 0.0.1 lost`, 0, 0, 0, false},
		{"two writers interleaved", `
B 0.0.1 rw w 1
B 1.0.1 rw w 1
E 0.0.1 1
E 1.0.1 2
P 0.0.1
S 0.0.1
P 1.0.1
S 1.0.1
P 0.0.1
S 0.0.1
X 0.0.1 ok
X 1.0.1 ok
U 0.0.1 ok
U 1.0.1 ok`, 1, 0, 0, false},
		{"readers together, a writer after them", `
B 0.0.1 rw r 1
B 1.0.1 rw r 1
E 0.0.1 3
E 1.0.1 3
P 0.0.1
S 0.0.1
P 1.0.1
S 1.0.1
P 0.0.1
S 0.0.1
P 1.0.1
S 1.0.1
X 0.0.1 ok
X 1.0.1 ok
U 0.0.1 ok
U 1.0.1 ok
B 2.0.1 rw w 1
E 2.0.1 4
P 2.0.1
S 2.0.1
X 2.0.1 ok
U 2.0.1 ok`, 0, 0, 0, false},
		{"a reader inside a writer's span", `
B 0.0.1 rw w 1
B 1.0.1 rw r 1
E 0.0.1 3
P 0.0.1
S 0.0.1
E 1.0.1 3
P 1.0.1
S 1.0.1
P 0.0.1
S 0.0.1
X 0.0.1 ok
X 1.0.1 ok
U 0.0.1 ok
U 1.0.1 ok`, 1, 0, 0, false},
		{"a smaller token seen after a larger one, and an equal write token", `
B 0.0.1 fm w 1
E 0.0.1 5
P 0.0.1
S 0.0.1
X 0.0.1 ok
U 0.0.1 ok
B 1.0.1 fm w 1
E 1.0.1 4
P 1.0.1
S 1.0.1
X 1.0.1 ok
U 1.0.1 ok
B 1.0.2 fm w 1
E 1.0.2 5
P 1.0.2
S 1.0.2
X 1.0.2 ok
U 1.0.2 ok`, 0, 0, 2, false},
		{"a read token equal to the last write's", `
B 0.0.1 frw w 1
E 0.0.1 5
P 0.0.1
S 0.0.1
X 0.0.1 ok
U 0.0.1 ok
B 1.0.1 frw r 1
E 1.0.1 5
P 1.0.1
S 1.0.1
X 1.0.1 ok
U 1.0.1 ok`, 0, 0, 0, false},
		{"a semaphore of 3: 2+1 permits, then 2+1+1", `
B 0.0.1 sn s 2
B 1.0.1 sn s 1
B 2.0.1 sn s 1
E 0.0.1 0
E 1.0.1 0
P 0.0.1
S 0.0.1
P 1.0.1
S 1.0.1
P 0.0.1
S 0.0.1
P 1.0.1
S 1.0.1
E 2.0.1 0
P 2.0.1
S 2.0.1
P 0.0.1
S 0.0.1
P 1.0.1
S 1.0.1
X 0.0.1 ok
X 1.0.1 ok
X 2.0.1 ok
U 0.0.1 ok
U 1.0.1 ok
U 2.0.1 ok`, 1, 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := analyzeChaosPause(strings.Split(strings.TrimSpace(tc.log), "\n"))
			assert.Empty(t, a.parseErrs)
			assert.Len(t, a.overlaps, tc.overlaps, "overlaps")
			assert.Equal(t, tc.liveAfter, a.liveAfterN, "live after a stop")
			assert.Equal(t, tc.fenc, a.fencingN, "fencing violations")
			for _, o := range a.overlaps {
				assert.Equal(t, tc.explained, a.explained(o), "explained by a hold live after a stop")
			}
		})
	}
}

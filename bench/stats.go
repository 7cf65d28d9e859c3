package main

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// percentile returns the p-th percentile (0..100) of ds by the nearest-rank
// method, or NaN for no samples. It sorts ds.
func percentile(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return math.NaN()
	}
	slices.Sort(ds)
	rank := int(math.Ceil(p / 100 * float64(len(ds))))
	rank = min(max(rank, 1), len(ds))
	return float64(ds[rank-1])
}

// An acquisition is one hold as a worker saw it, in wall-clock Unix
// nanoseconds, so that holds of different processes on one machine can be
// put in one order.
type acquisition struct {
	Proc   int   `json:"p"` // worker process index
	Worker int   `json:"w"` // goroutine index within the process
	Asked  int64 `json:"s"` // Lock called
	Got    int64 `json:"a"` // Lock returned the hold
	Freed  int64 `json:"r"` // Release called
	// Write marks a write hold of a read-write lock (read-heavy scenario only).
	Write bool `json:"x,omitempty"`
	// Accts are the accounts a transfer held, Retries its starts again (transfer scenario only).
	Accts   []int `json:"k,omitempty"`
	Retries int   `json:"t,omitempty"`
}

// holdAnalysis is what the merged acquisitions of a multi-process run show.
type holdAnalysis struct {
	Count    int
	Overlaps int             // holds that began before the previous one was released
	Handoffs []time.Duration // release -> next hold, over consecutive holds
	// Waits: Lock called -> Lock returned; a Lock still waiting at the end
	// counts with its wait so far, so starved goroutines are not left out.
	Waits []time.Duration
	// CrossWaits: for holds that had to wait for a holder in another
	// process, the time from the first release after Lock was called to
	// the acquisition (see README, ping-pong).
	CrossWaits []time.Duration
	// PendingCross counts the CrossWaits of Locks still waiting at the end.
	PendingCross int
	// FreeAcquires counts holds that saw no release while waiting (the lock
	// was free when asked, or only the asker's own process held it).
	FreeAcquires int
	// Switches: release -> next hold, only where the next hold is in
	// another process (the mechanism's own latency, races lost excluded).
	Switches []time.Duration
}

// analyzeHolds merges the acquisitions of all processes of one run, and
// the Locks still pending when it ended at end. Under mutual exclusion the
// holds are disjoint intervals, so sorting by acquisition time gives the
// order in which the lock changed hands.
func analyzeHolds(acqs, pending []acquisition, end int64) holdAnalysis {
	slices.SortFunc(acqs, func(a, b acquisition) int { return cmp.Compare(a.Got, b.Got) })
	h := holdAnalysis{Count: len(acqs)}
	for i, a := range acqs {
		h.Waits = append(h.Waits, time.Duration(a.Got-a.Asked))
		if i == 0 {
			continue
		}
		prev := acqs[i-1]
		if a.Got < prev.Freed {
			h.Overlaps++
			continue
		}
		h.Handoffs = append(h.Handoffs, time.Duration(a.Got-prev.Freed))
		if a.Proc != prev.Proc {
			h.Switches = append(h.Switches, time.Duration(a.Got-prev.Freed))
		}
	}

	// Releases in time order, to find the first release by another
	// process after a Lock call.
	type release struct {
		at   int64
		proc int
	}
	rels := make([]release, len(acqs))
	for i, a := range acqs {
		rels[i] = release{a.Freed, a.Proc}
	}
	slices.SortFunc(rels, func(a, b release) int { return cmp.Compare(a.at, b.at) })
	crossWait := func(proc int, asked, got int64) (time.Duration, bool) {
		j, _ := slices.BinarySearchFunc(rels, asked, func(r release, t int64) int { return cmp.Compare(r.at, t) })
		for ; j < len(rels) && rels[j].at <= got; j++ {
			if rels[j].proc != proc {
				return time.Duration(got - rels[j].at), true
			}
		}
		return 0, false
	}
	for _, a := range acqs {
		if w, ok := crossWait(a.Proc, a.Asked, a.Got); ok {
			h.CrossWaits = append(h.CrossWaits, w)
		} else {
			h.FreeAcquires++
		}
	}
	// A Lock still waiting at the end counts with its wait so far: a lower
	// bound, which keeps starved waiters in the percentiles.
	for _, p := range pending {
		h.Waits = append(h.Waits, time.Duration(end-p.Asked))
		if w, ok := crossWait(p.Proc, p.Asked, end); ok {
			h.CrossWaits = append(h.CrossWaits, w)
			h.PendingCross++
		}
	}
	return h
}

// shareRatio is max/min acquisitions per worker; +Inf when one got none.
func shareRatio(perWorker map[[2]int]int, workers [][2]int) (ratio float64, starved int) {
	lo, hi := math.MaxInt, 0
	for _, w := range workers {
		n := perWorker[w]
		lo, hi = min(lo, n), max(hi, n)
		if n == 0 {
			starved++
		}
	}
	if len(workers) == 0 {
		return math.NaN(), 0
	}
	if lo == 0 {
		return math.Inf(1), starved
	}
	return float64(hi) / float64(lo), 0
}

// inversions counts pairs that were served in the opposite order of their
// arrival: order[k] is the arrival index of the k-th waiter served.
func inversions(order []int) int {
	n := 0
	for i := range order {
		for j := i + 1; j < len(order); j++ {
			if order[i] > order[j] {
				n++
			}
		}
	}
	return n
}

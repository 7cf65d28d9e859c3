package main

import (
	"cmp"
	"slices"
	"time"
)

// rwAnalysis is what the merged holds of a read-heavy run show.
type rwAnalysis struct {
	Reads, Writes int
	// Waits, ReadWaits, WriteWaits: Lock or RLock called -> returned, of every hold, of read
	// holds, of write holds. A call still waiting when the run ended counts with its wait so
	// far (a lower bound), as in the contended scenario.
	Waits, ReadWaits, WriteWaits []time.Duration
	// Conflicts counts holds that began while a hold they exclude was in progress: a write
	// hold while any hold was, a read hold while a write hold was. It must be 0.
	Conflicts int
	// MaxReaders is the most read holds in progress at once.
	MaxReaders int
}

// analyzeRW merges the holds (acquisitions with Write set for write holds) of all processes
// of one read-heavy run, and the calls still pending when it ended at end.
func analyzeRW(acqs, pending []acquisition, end int64) rwAnalysis {
	var h rwAnalysis
	wait := func(a acquisition, d time.Duration) {
		h.Waits = append(h.Waits, d)
		if a.Write {
			h.WriteWaits = append(h.WriteWaits, d)
		} else {
			h.ReadWaits = append(h.ReadWaits, d)
		}
	}
	sorted := slices.Clone(acqs)
	slices.SortFunc(sorted, func(a, b acquisition) int { return cmp.Compare(a.Got, b.Got) })
	// In the order holds began, a hold conflicts with an earlier one exactly when that one
	// was still held (its release came after this one began) and one of the two is a write.
	var lastFreed, lastWriteFreed int64
	for _, a := range sorted {
		wait(a, time.Duration(a.Got-a.Asked))
		if a.Write {
			h.Writes++
		} else {
			h.Reads++
		}
		if lastWriteFreed > a.Got || (a.Write && lastFreed > a.Got) {
			h.Conflicts++
		}
		lastFreed = max(lastFreed, a.Freed)
		if a.Write {
			lastWriteFreed = max(lastWriteFreed, a.Freed)
		}
	}
	for _, p := range pending {
		wait(p, time.Duration(end-p.Asked))
	}
	reads := slices.DeleteFunc(slices.Clone(acqs), func(a acquisition) bool { return a.Write })
	h.MaxReaders, _ = together(reads, 0)
	return h
}

// together returns the most holds of acqs in progress at once, and how many holds began
// while limit or more others were in progress (limit 0: not counted). A hold is in progress
// from Got to Freed; a hold that began at the instant another was freed does not overlap it.
func together(acqs []acquisition, limit int) (most, over int) {
	type event struct {
		at    int64
		delta int // +1 a hold began, -1 one was freed
	}
	evs := make([]event, 0, 2*len(acqs))
	for _, a := range acqs {
		evs = append(evs, event{a.Got, 1}, event{a.Freed, -1})
	}
	// Releases before acquisitions at the same instant.
	slices.SortFunc(evs, func(a, b event) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.delta, b.delta)) })
	n := 0
	for _, ev := range evs {
		if ev.delta > 0 && limit > 0 && n >= limit {
			over++
		}
		n += ev.delta
		most = max(most, n)
	}
	return most, over
}

// semAnalysis is what the merged holds of a semaphore run show.
type semAnalysis struct {
	Count int
	// Waits: Acquire called -> returned; a call still waiting at the end counts with its wait
	// so far.
	Waits []time.Duration
	// MaxOut is the most permits out at once; OverPermits counts holds that began while all
	// permits were out (it must be 0).
	MaxOut, OverPermits int
}

// analyzeSem merges the holds of one permit each of all processes of one semaphore run with
// permits permits, and the calls still pending when it ended at end.
func analyzeSem(acqs, pending []acquisition, end int64, permits int) semAnalysis {
	h := semAnalysis{Count: len(acqs)}
	for _, a := range acqs {
		h.Waits = append(h.Waits, time.Duration(a.Got-a.Asked))
	}
	for _, p := range pending {
		h.Waits = append(h.Waits, time.Duration(end-p.Asked))
	}
	h.MaxOut, h.OverPermits = together(acqs, permits)
	return h
}

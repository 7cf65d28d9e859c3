package main

import (
	"testing"
	"time"
)

// TestAnalyzeTransfers: holds of one account that overlap count once each, holds of other
// accounts at the same time do not; retries add up; a pending call waits until the end.
func TestAnalyzeTransfers(t *testing.T) {
	ms := int64(time.Millisecond)
	acqs := []acquisition{
		{Asked: 0, Got: 1 * ms, Freed: 5 * ms, Accts: []int{1, 2}},
		{Asked: 0, Got: 2 * ms, Freed: 6 * ms, Accts: []int{3, 4}, Retries: 2},      // other accounts
		{Asked: 1 * ms, Got: 4 * ms, Freed: 7 * ms, Accts: []int{2, 5}},             // 2 still held: overlap
		{Asked: 2 * ms, Got: 7 * ms, Freed: 8 * ms, Accts: []int{5, 1}, Retries: 1}, // after both
	}
	h := analyzeTransfers(acqs, []acquisition{{Asked: 5 * ms}}, 10*ms)
	if h.Count != 4 || h.Overlaps != 1 || h.Retries != 3 || len(h.Waits) != 5 {
		t.Errorf("got count %d, overlaps %d, retries %d, %d waits; want 4, 1, 3, 5", h.Count, h.Overlaps, h.Retries, len(h.Waits))
	}
	if w := h.Waits[4]; w != 5*time.Millisecond {
		t.Errorf("pending wait %v, want 5ms", w)
	}
}

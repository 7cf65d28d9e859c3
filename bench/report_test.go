package main

import (
	"strings"
	"testing"
)

// TestQuickNote: a -quick table names its rough figures (tails, shares, ratios) and its exact
// safety counts, and a table with neither gets no note.
func TestQuickNote(t *testing.T) {
	s := &ScenarioResult{Columns: []Column{
		{"acq_per_s", "acquisitions/s", unitRate},
		{"wait_p99_us", "wait p99", unitMicros},
		{"share_max_min", "share max/min", unitRatio},
		{"ops_vs_mutex", "ops/s vs Mutex", unitRatio},
		{"overlaps", "overlaps", unitCount},
	}}
	note := quickNote(s)
	for _, want := range []string{"rough: wait p99, share max/min, ops/s vs Mutex (", "; counted, not sampled, and 0 in any run: overlaps."} {
		if !strings.Contains(note, want) {
			t.Errorf("quickNote = %q, want it to contain %q", note, want)
		}
	}
	if strings.Contains(note, "acquisitions/s") {
		t.Errorf("quickNote = %q names a throughput as rough or exact", note)
	}
	if note := quickNote(&ScenarioResult{Columns: []Column{{"heap", "client heap/hold", unitBytes}}}); note != "" {
		t.Errorf("quickNote of a table without tails or counts = %q, want none", note)
	}
}

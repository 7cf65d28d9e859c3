package main

import (
	"context"
	"math"
	"testing"

	"github.com/redis/rueidis"
)

// fakeClient answers every call with an empty result.
type fakeClient struct{ rueidis.Client }

func (fakeClient) Do(context.Context, rueidis.Completed) rueidis.RedisResult {
	return rueidis.RedisResult{}
}

func (fakeClient) DoMulti(_ context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	return make([]rueidis.RedisResult, len(multi))
}

// TestCountingClient: a Do is one round trip and one command, a DoMulti one round trip and
// as many commands as it carries.
func TestCountingClient(t *testing.T) {
	var cmd rueidis.Completed
	c := &countingClient{Client: fakeClient{}}
	ctx := context.Background()
	c.Do(ctx, cmd)
	c.DoMulti(ctx, cmd, cmd, cmd)
	if got := c.calls.Load(); got != 2 {
		t.Errorf("round trips = %d, want 2", got)
	}
	if got := c.cmds.Load(); got != 4 {
		t.Errorf("commands = %d, want 4", got)
	}
}

func TestClientConnections(t *testing.T) {
	list := "id=3 addr=127.0.0.1:1 name=rlock-bench-waiters db=0 sub=0 psub=0 ssub=0 multi=-1 cmd=evalsha\n" +
		"id=4 addr=127.0.0.1:2 name=rlock-bench-waiters db=0 sub=1000 psub=0 ssub=0 multi=-1 cmd=subscribe\n" +
		"id=5 addr=127.0.0.1:3 name=other db=0 sub=7 psub=0 ssub=0 multi=-1 cmd=subscribe\n" +
		"id=6 addr=127.0.0.1:4 name=rlock-bench-waiters db=0 sub=0 psub=0 ssub=3 multi=-1 cmd=ssubscribe\n" +
		"id=7 addr=127.0.0.1:5 name= db=0 sub=0 psub=0 ssub=0 multi=-1 cmd=client|list\n"
	conns, subscribed := clientConnections(list, waiterClientName)
	if conns != 3 || subscribed != 2 {
		t.Errorf("connections %d, subscribed %d; want 3 and 2", conns, subscribed)
	}
}

func TestWithThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 100000: "100,000", 1234567: "1,234,567"} {
		if got := withThousands(n); got != want {
			t.Errorf("withThousands(%d) = %q, want %q", n, got, want)
		}
	}
	if got := joinInts([]int{1000, 10000}); got != "1,000 / 10,000" {
		t.Errorf("joinInts = %q", got)
	}
}

func TestFormatBytes(t *testing.T) {
	for v, want := range map[float64]string{812: "812 B", 2918: "2.85 KiB", 102400: "100 KiB", 3 << 20: "3.00 MiB"} {
		if got := formatValue(v, unitBytes); got != want {
			t.Errorf("formatValue(%v, B) = %q, want %q", v, got, want)
		}
	}
}

// TestScaleRatios: the holds targets are taken from the largest size that has figures, the
// round-trip limit grows with it, and the new contended targets compare with the best
// barging peer.
func TestScaleRatios(t *testing.T) {
	res := &Results{Scenarios: []*ScenarioResult{
		{ID: "holds", Rows: []*Row{
			{Contender: "holds-1000", Values: map[string]num{"heap_per_hold": 2000, "round_trips_per_period": 1}},
			{Contender: "holds-10000", Values: map[string]num{"heap_per_hold": 900, "round_trips_per_period": 100}},
			{Contender: "holds-100000", Error: "out of memory"},
		}},
		{ID: "pingpong", Rows: []*Row{{Contender: "rlock-fair", Values: map[string]num{"handoff_vs_floor": 0.7}}}},
		{ID: "contended", Rows: []*Row{
			{Contender: "rlock-fair", Values: map[string]num{"acq_per_s": 4000}},
			{Contender: "redsync", Values: map[string]num{"acq_per_s": 4400}},
			{Contender: "redislock", Error: "x"},
		}},
	}}
	got := map[string]Ratio{}
	for _, r := range computeRatios(res) {
		got[r.Figure] = r
	}
	check := func(figure string, value float64, status string) {
		t.Helper()
		r, ok := got[figure]
		if !ok {
			t.Errorf("no ratio %q", figure)
			return
		}
		if (math.Abs(float64(r.Value)-value) > 1e-9 && !math.IsNaN(value)) || r.Status != status {
			t.Errorf("%s = %v %s, want %v %s", figure, r.Value, r.Status, value, status)
		}
	}
	check("client heap bytes / hold, the Mutex included, 10,000 holds", 900, "met")
	check("renewal round trips / period, 10,000 holds", 100, "met") // limit 101
	check("rlock fair handoff p50 / publish floor handoff p50", 0.7, "met")
	check("rlock fair acq/s / max(redsync, bsm/redislock) acq/s", 4000.0/4400, "missed")
	if r := got["rlock PubSub acq/s / rueidislock acq/s"]; r.Status != "n/a" {
		t.Errorf("PubSub vs rueidislock without figures: %s", r.Status)
	}
	if r := got["renewal round trips / period / master, 10,000 holds"]; r.Status != "n/a" {
		t.Errorf("round trips per master without the figure: %s", r.Status)
	}
	if maxOf(math.NaN(), 3, 5, math.NaN()) != 5 || !math.IsNaN(maxOf(math.NaN())) {
		t.Error("maxOf")
	}
}

// TestClusterRatios: on a cluster the fair handoff is compared with the sharded floor (rlock
// waits with SSUBSCRIBE there), the scripts-per-period target of the renewal scenario is left
// out (a script's keys share a slot), and renewal round trips are counted per master.
func TestClusterRatios(t *testing.T) {
	res := &Results{Meta: Meta{Topology: topoCluster}, Scenarios: []*ScenarioResult{
		{ID: "pingpong", Rows: []*Row{{Contender: "rlock-fair",
			Values: map[string]num{"handoff_vs_floor": 0.5, "handoff_vs_sfloor": 0.9}}}},
		{ID: "renewal", Rows: []*Row{{Contender: "rlock-pubsub", Values: map[string]num{"scripts_per_period": 7600}}}},
		{ID: "holds", Rows: []*Row{{Contender: "holds-10000",
			Values: map[string]num{"round_trips_per_period": 3, "round_trips_per_node_period": 1}}}},
	}}
	got := map[string]Ratio{}
	for _, r := range computeRatios(res) {
		got[r.Figure] = r
	}
	if r := got["rlock fair handoff p50 / spublish floor handoff p50"]; float64(r.Value) != 0.9 || r.Status != "missed" {
		t.Errorf("fair vs spublish floor = %v %s", r.Value, r.Status)
	}
	if _, ok := got["rlock mutex scripts / renewal period"]; ok {
		t.Error("scripts per period target on a cluster")
	}
	if r := got["renewal round trips / period / master, 10,000 holds"]; float64(r.Value) != 1 || r.Status != "met" {
		t.Errorf("round trips per master = %v %s", r.Value, r.Status)
	}
}

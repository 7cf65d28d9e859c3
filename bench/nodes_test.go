package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestServerFiguresAdd: readings of several nodes add up per command, and the sums are new
// maps (the readings are not changed).
func TestServerFiguresAdd(t *testing.T) {
	a := parseServerCPU(infoCPUReply)
	b := parseServerCPU("used_cpu_sys:0.5\r\nused_cpu_user:0.25\r\n" +
		"cmdstat_evalsha:calls=5,usec=30\r\ncmdstat_spublish:calls=2,usec=4\r\n")
	sum := serverCPU{}.plus(a).plus(b)
	if want := 3750500*time.Microsecond + 750*time.Millisecond; sum.CPU != want {
		t.Errorf("CPU = %v, want %v", sum.CPU, want)
	}
	if sum.Calls["evalsha"] != 15 || sum.Calls["spublish"] != 2 || sum.Calls["set"] != 7 {
		t.Errorf("calls = %v", sum.Calls)
	}
	if sum.Usec.scripts() != 150 {
		t.Errorf("script usec = %d, want 150", sum.Usec.scripts())
	}
	if a.Calls["evalsha"] != 10 || b.Calls["evalsha"] != 5 {
		t.Error("plus changed a reading")
	}

	m := monitorCounts{Client: map[string]int64{"evalsha": 3}, Script: map[string]int64{"del": 1}}
	n := monitorCounts{Client: map[string]int64{"evalsha": 1, "ssubscribe": 2}, Script: map[string]int64{}}
	got := monitorCounts{}.plus(m).plus(n)
	if got.clientTotal() != 6 || got.Client["ssubscribe"] != 2 || got.Script["del"] != 1 {
		t.Errorf("monitor sum = %+v", got)
	}
}

// TestRoundTrips: a pipeline is one round trip per master its slots belong to; commands
// without a slot go along with the others, or to one node; one server is always one.
func TestRoundTrips(t *testing.T) {
	owners := map[uint16]string{}
	for s := range 16384 {
		owners[uint16(s)] = []string{"a", "b", "c"}[s*3/16384]
	}
	for _, c := range []struct {
		slots []uint16
		want  int
	}{
		{[]uint16{1, 2, 3}, 1},
		{[]uint16{1, 6000, 12000}, 3},
		{[]uint16{1, 6000, 2, 6001}, 2},
		{[]uint16{anySlot, 6000}, 1},
		{[]uint16{anySlot, anySlot}, 1},
		{nil, 1},
	} {
		if got := roundTrips(c.slots, owners); got != c.want {
			t.Errorf("roundTrips(%v) = %d, want %d", c.slots, got, c.want)
		}
	}
	if got := roundTrips([]uint16{1, 6000, 12000}, nil); got != 1 {
		t.Errorf("one server: %d round trips, want 1", got)
	}
}

func TestVersionAtLeast(t *testing.T) {
	for v, want := range map[string]bool{"7.0.15": true, "7.2.4": true, "6.2.14": false, "10.0.0": true, "": false, "x": false} {
		if got := versionAtLeast(v, 7); got != want {
			t.Errorf("versionAtLeast(%q, 7) = %v", v, got)
		}
	}
}

func TestSplitAddrs(t *testing.T) {
	got := splitAddrs(" 127.0.0.1:1,127.0.0.1:2,,127.0.0.1:3 \n")
	if !slices.Equal(got, []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}) {
		t.Errorf("splitAddrs = %q", got)
	}
	if splitAddrs("") != nil {
		t.Error("splitAddrs of nothing is not empty")
	}
}

func TestParseSizes(t *testing.T) {
	if got, err := parseSizes("1000, 10000"); err != nil || !slices.Equal(got, []int{1000, 10000}) {
		t.Errorf("parseSizes = %v, %v", got, err)
	}
	if got, err := parseSizes(""); err != nil || got != nil {
		t.Errorf("parseSizes of nothing = %v, %v", got, err)
	}
	for _, bad := range []string{"0", "-5", "1k", "1000,"} {
		if _, err := parseSizes(bad); err == nil {
			t.Errorf("parseSizes(%q) took it", bad)
		}
	}
}

// TestFindUp: the cluster script is found from a directory below the one that holds it.
func TestFindUp(t *testing.T) {
	root := t.TempDir()
	script := filepath.Join(root, "scripts", "with-cluster.sh")
	if err := os.MkdirAll(filepath.Dir(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	below := filepath.Join(root, "bench", "sub")
	if err := os.MkdirAll(below, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(below)
	got, err := findUp(clusterScript)
	if err != nil || got != script {
		t.Errorf("findUp = %q, %v; want %q", got, err, script)
	}
	if _, err := findUp("scripts/no-such-script.sh"); err == nil {
		t.Error("findUp found a file that is not there")
	}
}

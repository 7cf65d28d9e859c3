package main

import (
	"testing"
	"time"
)

// An INFO cpu + commandstats reply as Redis 7.0 writes it (CRLF line ends).
const infoCPUReply = "# CPU\r\n" +
	"used_cpu_sys:1.250000\r\n" +
	"used_cpu_user:2.500500\r\n" +
	"used_cpu_sys_children:0.000000\r\n" +
	"used_cpu_user_children:0.000000\r\n" +
	"used_cpu_sys_main_thread:1.200000\r\n" +
	"used_cpu_user_main_thread:2.400000\r\n" +
	"\r\n# Commandstats\r\n" +
	"cmdstat_evalsha:calls=10,usec=120,usec_per_call=12.00,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_set:calls=7,usec=14,usec_per_call=2.00,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_client|setname:calls=2,usec=3,usec_per_call=1.50,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_info:calls=5,usec=500,usec_per_call=100.00,rejected_calls=0,failed_calls=0\r\n"

func TestParseServerCPU(t *testing.T) {
	s := parseServerCPU(infoCPUReply)
	if want := 3750500 * time.Microsecond; s.CPU != want {
		t.Errorf("CPU = %v, want %v (used_cpu_user + used_cpu_sys, not the children or main-thread lines)", s.CPU, want)
	}
	if s.Usec["evalsha"] != 120 || s.Usec["set"] != 14 || s.Usec["client|setname"] != 3 {
		t.Errorf("usec = %v", s.Usec)
	}
	if s.Calls["evalsha"] != 10 || s.Calls["set"] != 7 {
		t.Errorf("calls = %v", s.Calls)
	}
	// The delta leaves out the benchmark's own INFO; scripts() sums the script commands only.
	before := parseServerCPU("cmdstat_evalsha:calls=4,usec=50\r\ncmdstat_info:calls=1,usec=100\r\n")
	if got := s.Usec.delta(before.Usec).scripts(); got != 70 {
		t.Errorf("script usec delta = %d, want 70", got)
	}
	if got := s.Usec.delta(before.Usec)["info"]; got != 0 {
		t.Errorf("info usec in delta = %d, want it left out", got)
	}
}

func TestParseCommandStatsUnchanged(t *testing.T) {
	st := parseCommandStats(infoCPUReply)
	if st["evalsha"] != 10 || st["client|setname"] != 2 || len(st) != 4 {
		t.Errorf("calls = %v", st)
	}
}

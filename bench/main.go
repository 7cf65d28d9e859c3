// Command bench measures rlock's locks against the other Go Redis lock
// libraries on one throwaway redis-server (or a throwaway Redis Cluster,
// -topology cluster): latency, throughput, handoff
// under contention, FIFO order, commands per acquisition and renewal cost;
// and rlock's read-write mutex and semaphore under a read-heavy load and
// under contention for 4 permits.
// See README.md for what each scenario measures.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if job := os.Getenv(workerEnv); job != "" {
		os.Exit(workerMain(job))
	}
	if job := os.Getenv(electionEnv); job != "" {
		os.Exit(electionMain(job))
	}
	os.Exit(run())
}

func run() int {
	sortContenders()
	var (
		quick      = flag.Bool("quick", false, "run each scenario briefly (a CI smoke test, about 80 seconds; rough figures)")
		scenList   = flag.String("scenarios", "all", "scenarios to run: all, or a comma list of numbers or names ("+scenarioNames()+")")
		contList   = flag.String("contenders", "all", "contenders to run: all, or a comma list of ids ("+contenderIDs()+")")
		out        = flag.String("out", filepath.Join("results", "results.json"), "JSON results file")
		chart      = flag.String("chart", "", "SVG chart file (default: chart.svg next to -out)")
		useMonitor = flag.Bool("monitor", true, "count client-sent commands with MONITOR (off: those columns are n/a)")
		raw        = flag.Bool("raw", false, "also write every acquisition of the multi-process scenarios to raw/ next to -out")
		listAndEnd = flag.Bool("list", false, "list scenarios and contenders with their settings, then exit")
		replot     = flag.String("replot", "", "draw -chart (.svg or .png) from this results JSON file, then exit")
		topology   = flag.String("topology", topoStandalone, "standalone: one redis-server (REDIS_ADDR, or started); "+
			"cluster: a Redis Cluster (REDIS_CLUSTER_ADDRS, or 3 masters + 3 replicas started with "+clusterScript+")")
		holdSizes = flag.String("holds", "", "hold counts of the holds scenario, comma-separated (default 1000,10000,100000; quick: 1000)")
		cpuProf   = flag.String("cpuprofile", "", "write a Go CPU profile of this process (the in-process scenarios) to this file")
		mutexProf = flag.String("mutexprofile", "", "write a Go mutex profile (every contention) of this process to this file")
		workProf  = flag.String("workerprofiles", "", "write Go CPU and mutex profiles of each worker process of the contended scenario (3) to this directory")
	)
	flag.Parse()
	if *replot != "" {
		if *chart == "" {
			*chart = filepath.Join(filepath.Dir(*replot), "chart.svg")
		}
		res, err := readJSON(*replot)
		if err == nil {
			err = writeChart(*chart, res)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		fmt.Printf("Wrote %s.\n", absPath(*chart))
		return 0
	}
	if *listAndEnd {
		for _, s := range scenarios {
			fmt.Printf("scenario %d %-12s %s\n", s.Num, s.ID, s.Title)
		}
		for _, c := range allContenders() {
			fmt.Printf("contender %-16s %s: %s\n", c.ID, c.Name, c.Settings)
		}
		return 0
	}
	selScen, err := selectScenarios(*scenList)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}
	selCont, err := selectContenders(*contList, contenders)
	var selRW, selSem, selTr []contenderSpec
	if err == nil {
		selRW, _ = selectContenders(*contList, rwContenders)
		selSem, _ = selectContenders(*contList, semContenders)
		selTr, _ = selectContenders(*contList, transferContenders)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}
	sizes, err := parseSizes(*holdSizes)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: -holds:", err)
		return 2
	}
	if *chart == "" {
		*chart = filepath.Join(filepath.Dir(*out), "chart.svg")
	}

	// The first Ctrl-C cancels the run (children are stopped, results so
	// far are written); a second one kills the program at once.
	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	go func() { <-ctx.Done(); stopSignals() }()

	stopProfiles, err := startProfiles(*cpuProf, *mutexProf)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	defer func() {
		if err := stopProfiles(); err != nil {
			fmt.Fprintln(os.Stderr, "bench: profiles:", err)
		}
	}()

	prog := newProgress()
	began := time.Now()
	srv, err := startRedis(ctx, *topology)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	defer srv.Stop()
	how := "REDIS_ADDR"
	switch {
	case srv.cluster != nil:
		how = "started by bench: " + srv.cluster.started
	case srv.Started:
		how = "started by bench"
	case srv.Cluster():
		how = "REDIS_CLUSTER_ADDRS"
	}
	prog.Linef("redis %s %s at %s (%s)", srv.Version, srv.Topology, srv.Describe(), how)

	nodes, err := dialNodes(srv.Masters)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	defer closeNodes(nodes)
	replicas, err := dialNodes(srv.Replicas)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	defer closeNodes(replicas)

	e := &env{redis: srv, nodes: nodes, replicas: replicas, contenders: selCont, rwContenders: selRW, semContenders: selSem,
		transferContenders: selTr,
		progress:           prog, runID: randomID()[:8], quick: *quick, monitor: *useMonitor, holdSizes: sizes}
	if *raw {
		e.rawDir = filepath.Join(filepath.Dir(*out), "raw")
	}
	if *workProf != "" {
		if err := os.MkdirAll(*workProf, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		if e.workerProfDir, err = filepath.Abs(*workProf); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
	}
	res := &Results{Meta: Meta{
		Started: began.UTC(), Quick: *quick, Command: strings.Join(os.Args[1:], " "),
		GoVersion: runtime.Version(), OSArch: runtime.GOOS + "/" + runtime.GOARCH, CPUs: runtime.NumCPU(),
		RedisVersion: srv.Version, Topology: srv.Topology, RedisAddr: srv.Describe(), RedisStarted: srv.Started,
	}}
	for _, c := range slices.Concat(selCont, selRW, selSem) {
		res.Meta.Contenders = append(res.Meta.Contenders, ContenderInfo{c.ID, c.Name, c.Settings})
	}

	fmt.Printf("# rlock benchmark\n\n%s, %d CPUs, Redis %s %s, %s", res.Meta.OSArch, res.Meta.CPUs, srv.Version,
		topologyLabel(srv), res.Meta.GoVersion)
	if *quick {
		fmt.Print(", -quick (short runs: figures are rough)")
	}
	fmt.Println()
	fmt.Printf("\n| contender | settings |\n|---|---|\n")
	for _, c := range res.Meta.Contenders {
		fmt.Printf("| %s | %s |\n", c.Name, escapeCell(c.Settings))
	}
	for i, sc := range selScen {
		if ctx.Err() != nil {
			break
		}
		prog.Linef("[%d/%d] %s", i+1, len(selScen), sc.Title)
		start := time.Now()
		s := sc.Run(ctx, e)
		s.ID, s.Title = sc.ID, sc.Title
		res.Scenarios = append(res.Scenarios, s)
		prog.Linef("[%d/%d] %s: %.1fs", i+1, len(selScen), sc.Title, time.Since(start).Seconds())
		writeTable(os.Stdout, s)
		if *quick {
			if note := quickNote(s); note != "" {
				fmt.Printf("\n%s\n", note)
			}
		}
	}
	res.Ratios = computeRatios(res)
	writeRatios(os.Stdout, res.Ratios, *quick)
	res.Goals = computeGoals(res)
	writeGoals(os.Stdout, res.Goals, res.Meta.Quick)
	res.Meta.Seconds = time.Since(began).Seconds()

	code := 0
	if err := writeJSON(*out, res); err != nil {
		fmt.Fprintln(os.Stderr, "bench: write results:", err)
		code = 1
	}
	if err := writeChart(*chart, res); err != nil {
		fmt.Fprintln(os.Stderr, "bench: write chart:", err)
		code = 1
	}
	fmt.Printf("\nWrote %s and %s in %.0fs.\n", absPath(*out), absPath(*chart), res.Meta.Seconds)
	if ctx.Err() != nil {
		fmt.Fprintln(os.Stderr, "bench: interrupted; results are partial")
		return 130
	}
	return code
}

// absPath returns path made absolute, so that a message names the file
// whatever directory the user started from (make runs the program in
// bench/); path itself when the working directory is unknown.
func absPath(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}

// scenarioNames lists the scenario ids, comma-separated.
func scenarioNames() string {
	var ns []string
	for _, s := range scenarios {
		ns = append(ns, s.ID)
	}
	return strings.Join(ns, ", ")
}

// allContenders lists the contenders of every scenario, each id once (the read-heavy
// scenario's Mutex row is the rlock-pubsub contender).
func allContenders() []contenderSpec {
	var all []contenderSpec
	for _, c := range slices.Concat(contenders, rwContenders, semContenders, transferContenders) {
		if !slices.ContainsFunc(all, func(a contenderSpec) bool { return a.ID == c.ID }) {
			all = append(all, c)
		}
	}
	return all
}

// contenderIDs lists the contender ids, comma-separated.
func contenderIDs() string {
	var ids []string
	for _, c := range allContenders() {
		ids = append(ids, c.ID)
	}
	return strings.Join(ids, ", ")
}

// selectScenarios parses -scenarios.
func selectScenarios(list string) ([]scenario, error) {
	if list == "all" || list == "" {
		return scenarios, nil
	}
	var sel []scenario
	for f := range strings.SplitSeq(list, ",") {
		f = strings.TrimSpace(f)
		i := slices.IndexFunc(scenarios, func(s scenario) bool { return s.ID == f || strconv.Itoa(s.Num) == f })
		if i < 0 {
			return nil, fmt.Errorf("unknown scenario %q (have %s)", f, scenarioNames())
		}
		if !slices.ContainsFunc(sel, func(s scenario) bool { return s.ID == scenarios[i].ID }) {
			sel = append(sel, scenarios[i])
		}
	}
	slices.SortFunc(sel, func(a, b scenario) int { return a.Num - b.Num })
	return sel, nil
}

// selectContenders parses -contenders and returns the ones of from that it names, keeping
// table order. An id that no scenario has is an error.
func selectContenders(list string, from []contenderSpec) ([]contenderSpec, error) {
	if list == "all" || list == "" {
		return from, nil
	}
	want := map[string]bool{}
	for f := range strings.SplitSeq(list, ",") {
		f = strings.TrimSpace(f)
		if !slices.ContainsFunc(allContenders(), func(c contenderSpec) bool { return c.ID == f }) {
			return nil, fmt.Errorf("unknown contender %q (have %s)", f, contenderIDs())
		}
		want[f] = true
	}
	var sel []contenderSpec
	for _, c := range from {
		if want[c.ID] {
			sel = append(sel, c)
		}
	}
	return sel, nil
}

// topologyLabel names the topology in the header: "standalone", or "cluster (3 masters + 3 replicas)".
func topologyLabel(s *redisServer) string {
	if !s.Cluster() {
		return s.Topology
	}
	return fmt.Sprintf("cluster (%d masters + %d replicas)", len(s.Masters), len(s.Replicas))
}

// parseSizes parses -holds: positive counts, comma-separated; nil for "".
func parseSizes(list string) ([]int, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	var ns []int
	for f := range strings.SplitSeq(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive count", f)
		}
		ns = append(ns, n)
	}
	return ns, nil
}

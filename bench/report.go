package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Results is everything one run measured; it is written as JSON.
type Results struct {
	Meta      Meta              `json:"meta"`
	Scenarios []*ScenarioResult `json:"scenarios"`
	Ratios    []Ratio           `json:"ratios"`
	Goals     []Ratio           `json:"goals,omitempty"` // issue 17's (goals.go)
}

// Meta describes the run and the machine.
type Meta struct {
	Started      time.Time       `json:"started"`
	Seconds      float64         `json:"seconds"`
	Quick        bool            `json:"quick"`
	Command      string          `json:"command"`
	GoVersion    string          `json:"go_version"`
	OSArch       string          `json:"os_arch"`
	CPUs         int             `json:"cpus"`
	RedisVersion string          `json:"redis_version"`
	Topology     string          `json:"topology"`   // standalone or cluster
	RedisAddr    string          `json:"redis_addr"` // the server, or the cluster's masters and replicas
	RedisStarted bool            `json:"redis_started_by_bench"`
	Contenders   []ContenderInfo `json:"contenders"`
}

// ContenderInfo names a contender and its settings.
type ContenderInfo struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Settings string `json:"settings"`
}

// ScenarioResult is one scenario's table.
type ScenarioResult struct {
	ID      string   `json:"id"`
	Title   string   `json:"title"`
	Setup   string   `json:"setup"` // what was run, in words
	Columns []Column `json:"columns"`
	Rows    []*Row   `json:"rows"`
}

// Column is one figure of a scenario table.
type Column struct {
	Key    string `json:"key"`
	Header string `json:"header"`
	Unit   string `json:"unit"` // see formatValue
}

// Units of column values.
const (
	unitMicros  = "us"    // a duration in microseconds
	unitRate    = "/s"    // per second
	unitCount   = "count" // a whole number
	unitRatio   = "x"     // a ratio
	unitNum     = "num"   // a number with two decimals
	unitPercent = "%"     // a fraction shown as a percentage
	unitNum1    = "num1"  // a number with one decimal
	unitBytes   = "B"     // a size in bytes, shown in B, KiB or MiB
)

// Row is one contender's figures in a scenario.
type Row struct {
	Contender string         `json:"contender"`
	Name      string         `json:"name"`
	Values    map[string]num `json:"values"`
	Note      string         `json:"note,omitempty"`
	Error     string         `json:"error,omitempty"`
	// Commands seen in the counting window, by command name: sent by
	// clients (MONITOR) and all calls including script-internal ones
	// (INFO commandstats).
	ClientCommands map[string]int64 `json:"client_commands,omitempty"`
	ServerCalls    map[string]int64 `json:"server_calls,omitempty"`
}

func (r *Row) set(key string, v float64) {
	if r.Values == nil {
		r.Values = map[string]num{}
	}
	r.Values[key] = num(v)
}

// value returns a figure, or NaN when it is missing.
func (r *Row) value(key string) float64 {
	if r == nil || r.Error != "" {
		return math.NaN()
	}
	v, ok := r.Values[key]
	if !ok {
		return math.NaN()
	}
	return float64(v)
}

// scenario finds a scenario's result by id, or nil when it did not run.
func (res *Results) scenario(id string) *ScenarioResult {
	for _, s := range res.Scenarios {
		if s.ID == id {
			return s
		}
	}
	return nil
}

// value returns a figure of a contender in a scenario, or NaN when it is missing.
func (res *Results) value(scenario, contender, key string) float64 {
	return res.scenario(scenario).row(contender).value(key)
}

// row finds a contender's row.
func (s *ScenarioResult) row(contender string) *Row {
	if s == nil {
		return nil
	}
	for _, r := range s.Rows {
		if r.Contender == contender {
			return r
		}
	}
	return nil
}

// num is a float64 whose NaN is JSON null and whose infinities are the
// strings "+Inf"/"-Inf" (encoding/json rejects both).
type num float64

func (n num) MarshalJSON() ([]byte, error) {
	f := float64(n)
	switch {
	case math.IsNaN(f):
		return []byte("null"), nil
	case math.IsInf(f, 1):
		return []byte(`"+Inf"`), nil
	case math.IsInf(f, -1):
		return []byte(`"-Inf"`), nil
	}
	return json.Marshal(f)
}

func (n *num) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case "null":
		*n = num(math.NaN())
	case `"+Inf"`:
		*n = num(math.Inf(1))
	case `"-Inf"`:
		*n = num(math.Inf(-1))
	default:
		var f float64
		if err := json.Unmarshal(b, &f); err != nil {
			return err
		}
		*n = num(f)
	}
	return nil
}

// readJSON reads results written by writeJSON.
func readJSON(path string) (*Results, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var res Results
	return &res, json.Unmarshal(b, &res)
}

// formatValue renders a value for a table cell.
func formatValue(v float64, unit string) string {
	switch {
	case math.IsNaN(v):
		return "n/a"
	case math.IsInf(v, 1):
		return "∞"
	}
	switch unit {
	case unitMicros:
		return formatMicros(v)
	case unitRate:
		if v >= 100 {
			return strconv.FormatFloat(v, 'f', 0, 64)
		}
		return strconv.FormatFloat(v, 'f', 1, 64)
	case unitCount:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case unitRatio:
		return strconv.FormatFloat(v, 'f', 2, 64) + "x"
	case unitNum1:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case unitPercent:
		return strconv.FormatFloat(v*100, 'f', 0, 64) + "%"
	case unitBytes:
		return formatBytes(v)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

// formatMicros renders microseconds as µs, ms or s with three digits.
func formatMicros(us float64) string {
	switch {
	case us < 1000:
		return strconv.FormatFloat(us, 'f', 0, 64) + "µs"
	case us < 1e6:
		return strconv.FormatFloat(us/1e3, 'f', precision(us/1e3), 64) + "ms"
	default:
		return strconv.FormatFloat(us/1e6, 'f', precision(us/1e6), 64) + "s"
	}
}

// formatBytes renders a size as B, KiB or MiB with three digits.
func formatBytes(b float64) string {
	switch a := math.Abs(b); {
	case a < 1000:
		return strconv.FormatFloat(b, 'f', 0, 64) + " B"
	case a < 1000*1024:
		return strconv.FormatFloat(b/1024, 'f', precision(a/1024), 64) + " KiB"
	default:
		return strconv.FormatFloat(b/(1<<20), 'f', precision(a/(1<<20)), 64) + " MiB"
	}
}

func precision(v float64) int {
	switch {
	case v < 10:
		return 2
	case v < 100:
		return 1
	}
	return 0
}

// writeTable prints a scenario as a markdown table.
func writeTable(w io.Writer, s *ScenarioResult) {
	fmt.Fprintf(w, "\n### %s\n\n%s\n\n", s.Title, s.Setup)
	header := []string{"contender"}
	for _, c := range s.Columns {
		header = append(header, c.Header)
	}
	header = append(header, "note")
	fmt.Fprintf(w, "| %s |\n", strings.Join(header, " | "))
	align := make([]string, len(header))
	for i := range align {
		align[i] = "---:"
	}
	align[0], align[len(align)-1] = "---", "---"
	fmt.Fprintf(w, "|%s|\n", strings.Join(align, "|"))
	for _, r := range s.Rows {
		cells := []string{r.Name}
		for _, c := range s.Columns {
			if r.Error != "" {
				cells = append(cells, "–")
				continue
			}
			cells = append(cells, formatValue(r.value(c.Key), c.Unit))
		}
		note := r.Note
		if r.Error != "" {
			note = "error: " + r.Error
		}
		cells = append(cells, escapeCell(note))
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
}

// quickNote says, for a table of a -quick run, which of its figures are rough: tails (p99),
// shares, ratios and FIFO inversions rest on a short run (one FIFO round) with few samples,
// often including the cold start of the worker processes, and can read several times what a
// full run measures; the safety counts (overlaps, conflicts, over permits) are counted, not
// sampled, and must be 0 in any run. It returns "" when the table has neither.
func quickNote(s *ScenarioResult) string {
	var rough, exact []string
	for _, c := range s.Columns {
		h := c.Header
		switch {
		case strings.Contains(h, "p99"), strings.Contains(h, "share"), strings.Contains(h, " vs "),
			strings.HasPrefix(h, "vs "), c.Unit == unitRatio, strings.HasPrefix(h, "inversions"):
			rough = append(rough, h)
		case h == "overlaps", h == "conflicts", h == "over permits":
			exact = append(exact, h)
		}
	}
	if len(rough) == 0 && len(exact) == 0 {
		return ""
	}
	var parts []string
	if len(rough) > 0 {
		parts = append(parts, "rough: "+strings.Join(rough, ", ")+" (tails and ratios of a few seconds, "+
			"cold start included, can read several times what make bench measures)")
	}
	if len(exact) > 0 {
		parts = append(parts, "counted, not sampled, and 0 in any run: "+strings.Join(exact, ", "))
	}
	return "-quick, few samples; " + strings.Join(parts, "; ") + "."
}

func escapeCell(s string) string {
	s = strings.ReplaceAll(s, "|", "\\|")
	return strings.ReplaceAll(s, "\n", " ")
}

// Ratio is one target, as a figure compared with its limit.
type Ratio struct {
	Target string  `json:"target"`
	Figure string  `json:"figure"` // how Value is computed
	Value  num     `json:"value"`
	Cmp    string  `json:"cmp"` // "<=" or ">="
	Limit  float64 `json:"limit"`
	Status string  `json:"status"` // "met", "missed" or "n/a"
}

func newRatio(target, figure string, value float64, cmp string, limit float64) Ratio {
	r := Ratio{Target: target, Figure: figure, Value: num(value), Cmp: cmp, Limit: limit, Status: "n/a"}
	if !math.IsNaN(value) {
		ok := value <= limit
		if cmp == ">=" {
			ok = value >= limit
		}
		r.Status = map[bool]string{true: "met", false: "missed"}[ok]
	}
	return r
}

// writeRatios prints the targets table; quick says the run was a -quick one, whose ratios are
// rough.
func writeRatios(w io.Writer, rs []Ratio, quick bool) {
	fmt.Fprintf(w, "\n### Targets\n\n")
	if quick {
		fmt.Fprintf(w, "-quick: these ratios come from short runs with few samples; only a full run (make bench) says whether a target is met.\n\n")
	}
	fmt.Fprintf(w, "| target | figure | value | goal | status |\n|---|---|---:|---:|---|\n")
	for _, r := range rs {
		fmt.Fprintf(w, "| %s | %s | %s | %s %s | %s |\n", r.Target, r.Figure,
			formatValue(float64(r.Value), unitNum), r.Cmp, strconv.FormatFloat(r.Limit, 'g', -1, 64), r.Status)
	}
}

// writeJSON writes the results, creating the directory.
func writeJSON(path string, res *Results) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// notef formats a note when cond holds, else returns "".
func notef(cond bool, format string, args ...any) string {
	if !cond {
		return ""
	}
	return fmt.Sprintf(format, args...)
}

// joinNotes joins the non-empty notes with "; ".
func joinNotes(notes ...string) string {
	out := ""
	for _, n := range notes {
		if n == "" {
			continue
		}
		if out != "" {
			out += "; "
		}
		out += n
	}
	return out
}

// ratioOf divides two figures; NaN when either is missing or b is 0.
func ratioOf(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}

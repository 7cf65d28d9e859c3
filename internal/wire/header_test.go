package wire

import (
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// argStringer is every ARGV type of args.go.
type argStringer interface{ Strings() []string }

// scriptSpec ties a script file to the Go side of its contract.
type scriptSpec struct {
	file string
	args argStringer         // the zero value of its ARGV type
	keys func(Keys) []string // its KEYS (with perHold: one hold's); nil: not checked
	// perHold: KEYS repeat per hold (KEYS[i], or KEYS[2i-1] and KEYS[2i], ...); the number of
	// keys per hold the Go side gives.
	perHold int
}

func specs() []scriptSpec {
	return []scriptSpec{
		{file: "acquire.lua", args: AcquireArgs{}, keys: func(k Keys) []string { return k.Acquire(true) }},
		{file: "release.lua", args: ReleaseArgs{}, keys: Keys.Release},
		{file: "renew.lua", args: RenewArgs{}, perHold: len(Keys{}.Renew(false))},
		{file: "inspect.lua", args: InspectArgs{}, keys: Keys.Inspect},
		{file: "forceunlock.lua", args: ForceUnlockArgs{}, keys: func(k Keys) []string { return k.ForceUnlock(true) }},
		{file: "fair_acquire.lua", args: FairAcquireArgs{}, keys: Keys.FairAcquire},
		{file: "fair_release.lua", args: FairReleaseArgs{}, keys: Keys.FairRelease},
		{file: "fair_leave.lua", args: FairLeaveArgs{}, keys: Keys.FairLeave},
		{file: "rw_acquire.lua", args: RWAcquireArgs{}, keys: Keys.RWAcquire},
		{file: "rw_release.lua", args: RWReleaseArgs{}, keys: Keys.RWRelease},
		{file: "rw_leave.lua", args: RWLeaveArgs{}, keys: Keys.RWRelease},
		{file: "rw_renew.lua", args: RenewArgs{}, perHold: len(Keys{}.Renew(true))},
		{file: "rw_inspect.lua", args: InspectArgs{}, keys: Keys.RWInspect},
		{file: "rw_forceunlock.lua", args: RWForceUnlockArgs{}, keys: Keys.RWForceUnlock},
		{file: "sem_acquire.lua", args: SemAcquireArgs{}, keys: Keys.Sem},
		{file: "sem_release.lua", args: SemReleaseArgs{}, keys: Keys.Sem},
		{file: "sem_leave.lua", args: SemLeaveArgs{}, keys: Keys.Sem},
		{file: "sem_renew.lua", args: RenewArgs{}, perHold: len(Keys{}.Renew(true))},
		{file: "sem_inspect.lua", args: SemInspectArgs{}, keys: Keys.SemInspect},
		{file: "sem_forcerelease.lua", args: SemForceReleaseArgs{}, keys: Keys.Sem},
		{file: "el_campaign.lua", args: CampaignArgs{}, keys: Keys.Election},
		{file: "el_resign.lua", args: ResignArgs{}, keys: Keys.Election},
		{file: "el_proclaim.lua", args: ProclaimArgs{}, keys: Keys.Election},
		{file: "el_leave.lua", args: ElectionLeaveArgs{}, keys: Keys.Election},
		{file: "el_leader.lua", args: NoArgs{}, keys: Keys.Leadership},
		{file: "el_forceunlock.lua", args: NoArgs{}, keys: Keys.Election},
		{file: "multi_acquire.lua", args: MultiAcquireArgs{}, keys: Keys.Member, perHold: len(Keys{}.Member())},
		{file: "multi_release.lua", args: MultiReleaseArgs{}, keys: Keys.Member, perHold: len(Keys{}.Member())},
		{file: "multi_leave.lua", args: MultiLeaveArgs{}, keys: Keys.Member, perHold: len(Keys{}.Member())},
		{file: "state.lua", args: StateArgs{}},
		{file: "check.lua", args: CheckArgs{}}, // its KEYS are renewal's, per kind
	}
}

// keyPhrase is a phrase that the header line of each key of Keys contains.
var keyPhrase = map[string]string{
	"Lock": "hash", "Fence": "fencing counter", "Channel": "channel", "Queue": "queue",
	"Deadlines": "deadlines", "Leases": "leases", "Writers": "waiting writers", "Leader": "leader channel",
}

// A definition in a script's header: "-- ARGV[3] request id ...", or one after a comma on such
// a line ("-- KEYS[1] hash, KEYS[2] leases"); prose that mentions an argument is not one.
var headerRef = regexp.MustCompile(`(ARGV|KEYS)\[([^\]]+)\]`)

// header returns the definitions in the header comment of a script file: "ARGV[3]" -> the text
// that describes it (the rest of its line up to the next definition, and the lines indented
// under it), up to the description of its replies.
func header(src string) (map[string]string, error) {
	defs := make(map[string]string)
	last := ""
	for _, line := range strings.Split(src, "\n") {
		if !strings.HasPrefix(line, "--") || strings.HasPrefix(line, "-- Returns") {
			break // the definitions come before the replies
		}
		if strings.HasPrefix(line, "--  ") {
			if last != "" {
				defs[last] += " " + strings.TrimSpace(strings.TrimPrefix(line, "--"))
			}
			continue
		}
		last = ""
		if !strings.HasPrefix(line, "-- ARGV[") && !strings.HasPrefix(line, "-- KEYS[") {
			continue
		}
		var starts []int
		var names []string
		for _, m := range headerRef.FindAllStringIndex(line, -1) {
			if m[0] == 3 || strings.HasSuffix(line[:m[0]], ", ") {
				starts = append(starts, m[0])
				names = append(names, line[m[0]:m[1]])
			}
		}
		for i, s := range starts {
			end := len(line)
			if i+1 < len(starts) {
				end = starts[i+1]
			}
			if _, dup := defs[names[i]]; dup {
				return nil, fmt.Errorf("%s defined twice", names[i])
			}
			defs[names[i]] = strings.TrimSpace(line[s+len(names[i]) : end])
			last = names[i]
		}
	}
	return defs, nil
}

// numbered returns how many of defs' prefix[n] (ARGV or KEYS) have a number for n, and
// whether they are prefix[1] to prefix[that many].
func numbered(defs map[string]string, prefix string) (int, bool) {
	n := 0
	for name := range defs {
		if strings.HasPrefix(name, prefix+"[") && regexp.MustCompile(`^\w+\[\d+\]$`).MatchString(name) {
			n++
		}
	}
	for i := 1; i <= n; i++ {
		if _, ok := defs[fmt.Sprintf("%s[%d]", prefix, i)]; !ok {
			return n, false
		}
	}
	return n, true
}

// checkArgs reports how ARGV type args disagrees with header defs: each field i is ARGV[i+1],
// whose header line contains the field's argv tag; a trailing []string field is ARGV[i+k]
// (k: the fields before it); Strings puts each field at its place.
func checkArgs(defs map[string]string, args argStringer) []string {
	var problems []string
	t := reflect.TypeOf(args)
	fixed, ok := numbered(defs, "ARGV")
	if !ok {
		problems = append(problems, "the header's ARGV are not numbered 1 to n")
	}
	fields := t.NumField()
	for i := 0; i < fields; i++ {
		f := t.Field(i)
		name := fmt.Sprintf("ARGV[%d]", i+1)
		if f.Type.Kind() == reflect.Slice {
			name = fmt.Sprintf("ARGV[i+%d]", i)
			if i != fields-1 {
				problems = append(problems, f.Name+": a list of arguments must come last")
			}
			fields--
		}
		desc, ok := defs[name]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s.%s: the header defines no %s", t.Name(), f.Name, name))
		case f.Tag.Get("argv") == "" || !strings.Contains(strings.ToLower(desc), strings.ToLower(f.Tag.Get("argv"))):
			problems = append(problems, fmt.Sprintf("%s.%s (argv %q): the header's %s reads %q", t.Name(), f.Name, f.Tag.Get("argv"), name, desc))
		}
		// Strings puts this field, and no other, at ARGV[i+1].
		v := reflect.New(t).Elem()
		switch f.Type.Kind() {
		case reflect.String:
			v.Field(i).SetString("X")
		case reflect.Bool:
			v.Field(i).SetBool(true)
		case reflect.Int64:
			v.Field(i).SetInt(7)
		case reflect.Slice:
			v.Field(i).Set(reflect.ValueOf([]string{"X"}))
		}
		if at := firstDiff(args.Strings(), v.Interface().(argStringer).Strings()); at != i {
			problems = append(problems, fmt.Sprintf("%s.Strings puts field %s at ARGV[%d], not ARGV[%d]", t.Name(), f.Name, at+1, i+1))
		}
	}
	if fixed != fields {
		problems = append(problems, fmt.Sprintf("%s has %d fixed arguments, the header %d", t.Name(), fields, fixed))
	}
	return problems
}

// firstDiff returns the first index where a and b differ (in value or length), or -1.
func firstDiff(a, b []string) int {
	for i := 0; i < len(a) || i < len(b); i++ {
		if i >= len(a) || i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	return -1
}

// checkKeys reports how the KEYS the Go side gives disagree with header defs.
func checkKeys(defs map[string]string, s scriptSpec) []string {
	var problems []string
	n, ok := numbered(defs, "KEYS")
	if !ok {
		problems = append(problems, "the header's KEYS are not numbered 1 to n")
	}
	if s.perHold > 0 {
		per := 0
		for name := range defs {
			if strings.HasPrefix(name, "KEYS[") && strings.Contains(name, "i") {
				per++
			}
		}
		if n != 0 || per != s.perHold {
			problems = append(problems, fmt.Sprintf("%d keys per hold, the header %d (and %d fixed)", s.perHold, per, n))
		}
	}
	if s.keys == nil {
		return problems
	}
	names := s.keys(Keys{Lock: "Lock", Fence: "Fence", Channel: "Channel", Queue: "Queue",
		Deadlines: "Deadlines", Leases: "Leases", Writers: "Writers", Leader: "Leader"})
	if s.perHold > 0 {
		// KEYS[5i-4] ... KEYS[5i] (KEYS[i] for one key per hold)
		if len(names) != s.perHold {
			problems = append(problems, fmt.Sprintf("%d keys per hold, the Go side %d", s.perHold, len(names)))
		}
		for j, k := range names {
			name := "KEYS[i]"
			if off := len(names) - 1 - j; off > 0 {
				name = fmt.Sprintf("KEYS[%di-%d]", len(names), off)
			} else if len(names) > 1 {
				name = fmt.Sprintf("KEYS[%di]", len(names))
			}
			if desc := defs[name]; !strings.Contains(strings.ToLower(desc), keyPhrase[k]) {
				problems = append(problems, fmt.Sprintf("%s is %s, the header's reads %q", name, k, desc))
			}
		}
		return problems
	}
	if len(names) != n {
		problems = append(problems, fmt.Sprintf("%d KEYS, the header %d", len(names), n))
	}
	for i, k := range names {
		name := fmt.Sprintf("KEYS[%d]", i+1)
		if desc := defs[name]; !strings.Contains(strings.ToLower(desc), keyPhrase[k]) {
			problems = append(problems, fmt.Sprintf("%s is %s, the header's reads %q", name, k, desc))
		}
	}
	return problems
}

// Each script's header states its KEYS and ARGV; the Go types that the library passes must
// agree with it, field for field.
func TestScriptHeadersMatchGoTypes(t *testing.T) {
	covered := make(map[string]bool)
	for _, s := range specs() {
		covered[s.file] = true
		src := luaSource(s.file)
		defs, err := header(src)
		if !assert.NoError(t, err, s.file) {
			continue
		}
		for _, p := range append(checkArgs(defs, s.args), checkKeys(defs, s)...) {
			t.Errorf("%s: %s", s.file, p)
		}
	}
	for _, f := range Files() {
		assert.True(t, covered[f], "%s has no Go types in specs", f)
	}
}

// The check catches drift: two fields swapped, Strings out of order, an argument missing.
func TestScriptHeaderCheckCatchesDrift(t *testing.T) {
	defs, err := header(luaSource("acquire.lua"))
	assert.NoError(t, err)
	assert.Empty(t, checkArgs(defs, AcquireArgs{}))
	assert.NotEmpty(t, checkArgs(defs, swappedAcquireArgs{}), "fields swapped")
	assert.NotEmpty(t, checkArgs(defs, misorderedAcquireArgs{}), "Strings out of order")
	assert.NotEmpty(t, checkArgs(defs, ReleaseArgs{}), "one argument short")
	assert.NotEmpty(t, checkKeys(defs, scriptSpec{keys: func(k Keys) []string { return []string{k.Fence, k.Lock} }}), "keys swapped")
	assert.NotEmpty(t, checkKeys(defs, scriptSpec{keys: Keys.Inspect}), "one key short")

	defs, err = header(luaSource("multi_acquire.lua"))
	assert.NoError(t, err)
	assert.Empty(t, checkKeys(defs, scriptSpec{keys: Keys.Member, perHold: 5}))
	swapped := func(k Keys) []string { return []string{k.Lock, k.Queue, k.Channel, k.Deadlines, k.Fence} }
	assert.NotEmpty(t, checkKeys(defs, scriptSpec{keys: swapped, perHold: 5}), "a member's keys swapped")
	assert.NotEmpty(t, checkKeys(defs, scriptSpec{keys: Keys.Member, perHold: 4}), "one key per member short")
	defs, err = header(luaSource("el_resign.lua"))
	assert.NoError(t, err)
	assert.Empty(t, checkArgs(defs, ResignArgs{}))
	assert.NotEmpty(t, checkArgs(defs, swappedResignArgs{}), "an int64 field out of place")
}

type swappedResignArgs ResignArgs

func (a swappedResignArgs) Strings() []string {
	return []string{strconv.FormatInt(a.Term, 10), a.Candidate}
}

type swappedAcquireArgs struct {
	Request string `argv:"request id"`
	LeaseMs string `argv:"lease in milliseconds"`
	Owner   string `argv:"owner id"`
	Mode    Mode   `argv:"mode"`
}

func (a swappedAcquireArgs) Strings() []string {
	return []string{a.Request, a.LeaseMs, a.Owner, string(a.Mode)}
}

type misorderedAcquireArgs AcquireArgs

func (a misorderedAcquireArgs) Strings() []string {
	return []string{a.Request, a.LeaseMs, a.Owner, string(a.Mode)}
}

package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/rlock-go/rlock"
)

// Scenario 12 runs like scenario 8 (worker processes, contenders interleaved): transfers
// between random pairs of accounts, each account a Mutex, taken four ways.

const (
	transferAccounts = 100                    // accounts, one Mutex each
	transferTimeout  = 100 * time.Millisecond // one-by-one: the wait for the second account
)

// transferContenders are the ways to hold two accounts of scenario 12, in table order: every
// one an rlock Client (PubSub waits, watchdog 30s) with plain Mutexes.
var transferContenders = []contenderSpec{
	{ID: "multilock", Name: "rlock MultiLock",
		Settings: "NewMultiLock(from, to): both accounts in one script, in the global order"},
	{ID: "caller-order", Name: "one by one, caller order",
		Settings: "Lock(from), then TryLock(to, 100ms); on a timeout Unlock(from) and start again"},
	{ID: "sorted-order", Name: "one by one, sorted",
		Settings: "as caller order, but the lower account first (no cycle, so timeouts only from long waits)"},
	{ID: "global", Name: "one global lock",
		Settings: "one Mutex for every account"},
}

// openTransfer connects the transfer contender id and returns each goroutine's lockOp: a
// transfer between two distinct random accounts, whose Hold names them and its retries.
func openTransfer(job workerJob) (newOp func(key string, g int) lockOp, closeClient func(), err error) {
	if _, err := specByID(modeTransfer, job.Contender); err != nil {
		return nil, nil, err
	}
	rc, c, err := dialRlock(contenderConfig{Addrs: job.Addrs, Cluster: job.Cluster, KeyPrefix: job.KeyPrefix})
	if err != nil {
		return nil, nil, err
	}
	accts := make([]*rlock.Mutex, transferAccounts)
	for i := range accts {
		accts[i] = c.NewMutex(fmt.Sprintf("acct-%d", i))
	}
	global := c.NewMutex("all-accounts")
	closeClient = func() { _ = c.Close(); rc.Close() }
	return func(_ string, g int) lockOp {
		rng := rand.New(rand.NewPCG(uint64(job.Proc)+1000, uint64(g)))
		return func(ctx context.Context) (Hold, bool, error) {
			from := rng.IntN(transferAccounts)
			to := (from + 1 + rng.IntN(transferAccounts-1)) % transferAccounts
			pair := []int{from, to}
			switch job.Contender {
			case "multilock":
				ml := c.NewMultiLock(accts[from], accts[to])
				h, err := ml.Lock(ctx)
				if err != nil {
					return Hold{}, false, err
				}
				return Hold{Release: func(context.Context) error { return ml.Unlock(h) }, Accounts: pair}, false, nil
			case "global":
				h, err := global.Lock(ctx)
				if err != nil {
					return Hold{}, false, err
				}
				return Hold{Release: func(context.Context) error { return global.Unlock(h) }, Accounts: pair}, false, nil
			}
			first, second := accts[from], accts[to]
			if job.Contender == "sorted-order" && to < from {
				first, second = second, first
			}
			return oneByOne(ctx, first, second, pair)
		}
	}, closeClient, nil
}

// oneByOne takes first, then second within transferTimeout; on a timeout it gives first back
// and starts again, counting the retry.
func oneByOne(ctx context.Context, first, second *rlock.Mutex, pair []int) (Hold, bool, error) {
	retries := 0
	for {
		h1, err := first.Lock(ctx)
		if err != nil {
			return Hold{}, false, err
		}
		h2, err := second.TryLock(ctx, transferTimeout)
		if err == nil {
			return Hold{Release: func(context.Context) error {
				return errors.Join(second.Unlock(h2), first.Unlock(h1))
			}, Accounts: pair, Retries: retries}, false, nil
		}
		if uerr := first.Unlock(h1); uerr != nil {
			return Hold{}, false, uerr
		}
		if !errors.Is(err, rlock.ErrNotObtained) || ctx.Err() != nil {
			return Hold{}, false, err
		}
		retries++
	}
}

// transferAnalysis is what the merged transfers of the processes of one run show.
type transferAnalysis struct {
	Count    int
	Waits    []time.Duration // the Lock call to its return; pending calls with their wait so far
	Retries  int             // one-by-one: releases and new starts after a timeout
	Overlaps int             // holds of an account that began before its previous hold was released
}

// analyzeTransfers merges the transfers of one run that ended at end.
func analyzeTransfers(acqs, pending []acquisition, end int64) transferAnalysis {
	h := transferAnalysis{Count: len(acqs)}
	byAcct := map[int][]acquisition{}
	for _, a := range acqs {
		h.Waits = append(h.Waits, time.Duration(a.Got-a.Asked))
		h.Retries += a.Retries
		for _, k := range a.Accts {
			byAcct[k] = append(byAcct[k], a)
		}
	}
	for _, p := range pending {
		h.Waits = append(h.Waits, time.Duration(end-p.Asked))
	}
	for _, holds := range byAcct {
		slices.SortFunc(holds, func(a, b acquisition) int { return int(a.Got - b.Got) })
		var freed int64
		for i, a := range holds {
			if i > 0 && a.Got < freed {
				h.Overlaps++
			}
			freed = max(freed, a.Freed)
		}
	}
	return h
}

// transferRuns is scenario 12 for one contender.
type transferRuns struct {
	kindRuns
	h transferAnalysis // pooled over the runs
}

func newTransferRuns(e *env, spec contenderSpec, procs, goroutines int, hold time.Duration) *transferRuns {
	r := &transferRuns{kindRuns: kindRuns{e: e, spec: spec, scenario: "transfers", procs: procs,
		job: workerJob{Contender: spec.ID, Goroutines: goroutines, Hold: hold, Mode: modeTransfer}}}
	r.analyze = func(pr procRun) {
		a := analyzeTransfers(pr.Acqs, pr.Pending, pr.End)
		r.h.Count += a.Count
		r.h.Waits = append(r.h.Waits, a.Waits...)
		r.h.Retries += a.Retries
		r.h.Overlaps += a.Overlaps
	}
	return r
}

func (r *transferRuns) finish(_ context.Context, row *Row) error {
	if err := r.common(row, "transfers_per_s", "per_transfer"); err != nil {
		return err
	}
	h := r.h
	row.set("wait_p50_us", micros(percentile(h.Waits, 50)))
	row.set("wait_p99_us", micros(percentile(h.Waits, 99)))
	row.set("wait_max_us", micros(percentile(h.Waits, 100)))
	row.set("timeouts", float64(h.Retries))
	row.set("overlaps", float64(h.Overlaps))
	row.Note = joinNotes(notef(h.Overlaps > 0, "ACCOUNT HELD TWICE %d times", h.Overlaps), row.Note)
	return nil
}

func runTransfers(ctx context.Context, e *env) *ScenarioResult {
	const (
		procs      = 3
		goroutines = 16
		hold       = time.Millisecond
	)
	d := e.pick(5*time.Second, time.Second)
	s := &ScenarioResult{
		ID: "transfers",
		Setup: fmt.Sprintf("%d worker processes x %d goroutines loop on transfers between two distinct random accounts of %d "+
			"(one plain rlock Mutex each): hold both, sleep %v, release both, again at once; %v per contender, in one run. "+
			"MultiLock holds the pair as one; one by one takes one account and then the other within %v, and on a timeout "+
			"gives the first back and starts again (caller order: the pair as drawn, so two transfers in opposite directions "+
			"can block each other until one times out; sorted: the lower account first, so they cannot); one global lock "+
			"holds every account. Wait is the whole transfer's acquisition (retries included; a call still waiting at the "+
			"end counts with its wait so far); timeouts counts the starts again; server calls/transfer is every command from "+
			"INFO commandstats over the timed run per transfer. Overlaps counts holds of an account that began before its "+
			"previous hold was released: it must be 0.",
			procs, goroutines, transferAccounts, hold, d, transferTimeout),
		Columns: []Column{
			{"transfers_per_s", "transfers/s", unitRate},
			{"wait_p50_us", "wait p50", unitMicros},
			{"wait_p99_us", "wait p99", unitMicros},
			{"wait_max_us", "wait max", unitMicros},
			{"server_calls_per_transfer", "server calls/transfer", unitNum},
			{"scripts_per_transfer", "scripts/transfer", unitNum},
			{"timeouts", "timeouts", unitCount},
			{"share_max_min", "share max/min", unitRatio},
			{"overlaps", "overlaps", unitCount},
		},
	}
	e.interleave(ctx, s, e.transferContenders, nil, 1, d, func(_ context.Context, spec contenderSpec) (sliceRunner, error) {
		return newTransferRuns(e, spec, procs, goroutines, hold), nil
	}, func(r *Row) string {
		return fmt.Sprintf("%s transfers/s, wait p99 %s, %s timeouts, %s overlaps",
			formatValue(r.value("transfers_per_s"), unitRate), formatValue(r.value("wait_p99_us"), unitMicros),
			formatValue(r.value("timeouts"), unitCount), formatValue(r.value("overlaps"), unitCount))
	})
	return s
}

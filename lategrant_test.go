package rlock_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A late grant message is not a fresh grant (issue 16, defect 1). Waiter V is granted the
// lock, but its receive path is held back (the proxy holds every byte from the server to V)
// longer than the grant's claim; B takes the lock meanwhile, V's next poll finds B holding and
// queues V again, and only then do the old grant message and the poll's reply reach V. V must
// not return holding while B holds, and once it holds, its queue entry must be gone.
func TestHandoff_lateGrantIsNotFresh(t *testing.T) {
	for _, k := range handoffKinds {
		t.Run(k.name, func(t *testing.T) {
			eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
				e := newEnv(t)
				p := e.newProxy()
				attempts := countScripts(p, k.script, e.lockKey("g"))
				opts := rlock.Options{WatchdogTimeout: 3 * time.Second, FairWaitTimeout: 3 * time.Second, Wait: wait}
				take, release := k.acquire(e.client(opts), "g")
				btake, brelease := k.acquire(e.client(opts), "g")
				vtake, vrelease := k.acquire(e.through(p).client(opts), "g", rlock.WithLease(200*time.Millisecond))
				ctx := context.Background()
				queued := func() int64 {
					n, err := e.do("LLEN", e.lockKey("g")+":queue").AsInt64()
					require.NoError(t, err)
					return n
				}

				h, err := take(ctx)
				require.NoError(t, err)
				type result struct {
					ctx context.Context
					err error
				}
				got := make(chan result, 1)
				go func() {
					vh, err := vtake(ctx)
					got <- result{vh, err}
				}()
				require.Eventually(t, func() bool { return queued() == 1 }, 5*time.Second, time.Millisecond)
				time.Sleep(50 * time.Millisecond) // past a second attempt on the subscription's confirmation

				flow := p.HoldReplies()
				defer flow()
				require.NoError(t, release(h)) // grants the lock to V, whose message is held back
				// The claim (200ms) runs out in Redis; B, queued meanwhile, takes the lock.
				bctx, cancelB := context.WithTimeout(ctx, 5*time.Second)
				defer cancelB()
				bh, err := btake(bctx)
				require.NoError(t, err, "B takes the lock once V's claim ran out")
				// V's next attempt (its poll) finds B holding and queues V again; its reply is held
				// back too. (A spinning waiter has an attempt in flight all along: none comes.)
				before := attempts.Load()
				polled := time.Now().Add(2 * time.Second)
				for attempts.Load() == before && time.Now().Before(polled) {
					time.Sleep(time.Millisecond)
				}
				time.Sleep(30 * time.Millisecond) // the attempt runs
				flow()                            // the old grant message and the reply reach V

				select {
				case r := <-got:
					// Only a grant Redis confirmed while it was V's may return; one whose claim ran
					// out before its reply arrived comes with its hold context already done.
					require.NoError(t, r.err)
					live := r.ctx.Err() == nil
					assert.False(t, live && bh.Err() == nil, "V's Lock returned with a live hold context while B holds")
					assert.Zero(t, queued(), "V's queue entry is gone once its Lock returned holding")
					_ = vrelease(r.ctx)
					require.NoError(t, brelease(bh))
					return
				case <-time.After(400 * time.Millisecond):
				}
				require.NoError(t, bh.Err())
				require.NoError(t, brelease(bh))
				var r result
				select {
				case r = <-got:
				case <-time.After(5 * time.Second):
					t.Fatal("V did not get the lock after B released it")
				}
				require.NoError(t, r.err)
				require.NoError(t, r.ctx.Err())
				assert.Zero(t, queued(), "V's queue entry is gone once it holds")
				require.NoError(t, vrelease(r.ctx))
			})
		})
	}
}

// helperGranted waits for the lock (queuing on a fair mutex), says whether its hold context is
// live when Lock returns, and releases it once told (a line on stdin).
func helperGranted(_ rueidis.Client, m *rlock.Mutex) error {
	fmt.Println("waiting")
	h, err := m.Lock(bg)
	if err != nil {
		return err
	}
	fmt.Println("locked", h.Err() == nil)
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return err
	}
	fmt.Println("unlock", m.Unlock(h))
	return nil
}

// The same with the waiter's whole process paused (SIGSTOP) past its grant's claim, as a GC or
// VM pause would: when it resumes, the grant message waiting in its socket and its overdue poll
// race. Its Lock must not return holding while B holds. (A fair Mutex; the queued kinds share
// the waiting code.)
func TestHandoff_pausedWaiterTakesNoLateGrant(t *testing.T) {
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		w := "pubsub"
		if strings.HasPrefix(wait.String(), "spin") {
			w = "spin"
		}
		const fairWait = time.Second // the claim: min(watchdog lease, FairWaitTimeout)
		opts := rlock.Options{WatchdogTimeout: 3 * time.Second, FairWaitTimeout: fairWait, Wait: wait}
		holder := e.client(opts).NewFairMutex("p")
		b := e.client(opts).NewFairMutex("p")
		h, err := holder.Lock(bg)
		require.NoError(t, err)
		v := startChild(t, "granted", "PREFIX="+e.prefix, "LOCK=p", "FAIR=1", "WAIT="+w,
			"WATCHDOG=3s", "FAIRWAIT="+fairWait.String())
		v.expect(t, "waiting")
		e.awaitQueue("p", 1)
		time.Sleep(100 * time.Millisecond)
		require.NoError(t, v.cmd.Process.Signal(syscall.SIGSTOP))
		require.Eventually(t, func() bool { return stopped(v.cmd.Process.Pid) }, 5*time.Second, time.Millisecond)
		require.NoError(t, holder.Unlock(h)) // grants V the lock; V hears nothing
		bctx, cancel := context.WithTimeout(bg, 5*time.Second)
		defer cancel()
		bh, err := b.Lock(bctx) // once V's claim ran out
		require.NoError(t, err)
		require.NoError(t, v.cmd.Process.Signal(syscall.SIGCONT))
		lines := make(chan string, 2)
		go func() {
			for v.out.Scan() {
				lines <- v.out.Text()
			}
			close(lines)
		}()
		select {
		case l := <-lines:
			t.Errorf("V's Lock returned (%s) while B held the lock", l)
		case <-time.After(time.Second):
		}
		require.NoError(t, bh.Err(), "B held the lock all along")
		require.NoError(t, b.Unlock(bh))
		select {
		case l := <-lines:
			if l != "locked true" {
				t.Logf("V: %s", l)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("V did not get the lock after B released it")
		}
		_, err = io.WriteString(v.in, "go\n")
		require.NoError(t, err)
		for l := range lines {
			t.Logf("V: %s", l)
		}
		require.NoError(t, v.cmd.Wait())
	})
}

// stopped reports whether every thread of process pid is stopped (SIGSTOP has taken effect).
func stopped(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, task := range tasks {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			return false
		}
		_, rest, _ := strings.Cut(string(stat), ") ")
		if !strings.HasPrefix(rest, "T") && !strings.HasPrefix(rest, "t") {
			return false
		}
	}
	return true
}

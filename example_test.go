package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock"
)

// Example is the quick start of the README: lock, re-enter through the hold context, check
// for loss, unlock.
func Example() {
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{os.Getenv("REDIS_ADDR")}})
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	locks, err := rlock.New(rc, rlock.Options{}) // watchdog lease 30s, pub/sub waits
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()

	m := locks.NewMutex("invoice:42")
	held, err := m.Lock(context.Background()) // waits until acquired
	if err != nil {
		log.Fatal(err)
	}
	// The hold context carries the owner: a Lock given it re-enters instead of waiting.
	inner, err := m.Lock(held)
	if err != nil {
		log.Fatal(err)
	}
	n, _ := m.HoldCount(inner)
	fmt.Println("holds:", n)
	_ = m.Unlock(inner)

	// Work under held: it is cancelled if the lease is lost, and rlock.Lost(held) says so.
	fmt.Println("lost:", rlock.Lost(held))
	if err := m.Unlock(held); err != nil {
		log.Fatal(err) // ErrLockLost: the work may have overlapped another holder's
	}
	fmt.Println("released")
	// Output:
	// holds: 2
	// lost: false
	// released
}

// ExampleMutex_TryLock gives up after a bounded wait.
func ExampleMutex_TryLock() {
	rc, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{os.Getenv("REDIS_ADDR")}})
	defer rc.Close()
	locks, _ := rlock.New(rc, rlock.Options{})
	defer locks.Close()
	m := locks.NewMutex("report", rlock.WithLease(time.Minute))

	first, _ := m.Lock(context.Background())
	_, err := m.TryLock(context.Background(), 50*time.Millisecond) // another owner
	fmt.Println(errors.Is(err, rlock.ErrNotObtained))
	_ = m.Unlock(first)
	// Output: true
}

// ExampleWithOwner shares one hold count between processes that use the same owner id.
func ExampleWithOwner() {
	rc, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{os.Getenv("REDIS_ADDR")}})
	defer rc.Close()
	locks, _ := rlock.New(rc, rlock.Options{})
	defer locks.Close()
	m := locks.NewMutex("migration")

	// Process A: takes the lock for a job id it will hand to process B.
	job := rlock.WithOwner(context.Background(), "job-7f3a")
	a, _ := m.Lock(job)
	// Process B (here: the same code path) re-enters with the same owner id at once.
	b, err := m.TryLock(rlock.WithOwner(context.Background(), "job-7f3a"), 0)
	fmt.Println(err)
	n, _ := m.HoldCount(b)
	fmt.Println("holds:", n)
	_ = m.Unlock(b)
	_ = m.Unlock(a)
	// Output:
	// <nil>
	// holds: 2
}

// ExampleWithFencing passes a fencing token to the guarded resource, which rejects writes with
// a token lower than one it has seen.
func ExampleWithFencing() {
	rc, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{os.Getenv("REDIS_ADDR")}})
	defer rc.Close()
	prefix := "example-" + rlock.NewOwnerID()[:6]
	locks, _ := rlock.New(rc, rlock.Options{KeyPrefix: prefix})
	defer locks.Close()
	m := locks.NewMutex("ledger", rlock.WithFencing())

	var last int64
	for range 2 {
		held, _ := m.Lock(context.Background())
		token, _ := m.Token(held)
		fmt.Println("token increases:", token > last)
		last = token
		_ = m.Unlock(held)
	}
	_ = rc.Do(context.Background(), rc.B().Del().Key(prefix+":{ledger}:fence").Build()) // counters outlive locks
	// Output:
	// token increases: true
	// token increases: true
}

// ExampleClient_NewFairMutex takes turns in arrival order.
func ExampleClient_NewFairMutex() {
	rc, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{os.Getenv("REDIS_ADDR")}})
	defer rc.Close()
	locks, _ := rlock.New(rc, rlock.Options{FairWaitTimeout: 5 * time.Second})
	defer locks.Close()
	m := locks.NewFairMutex("batch")

	held, _ := m.Lock(context.Background())
	var order []int // appended under the lock
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := m.Lock(context.Background()) // queues behind earlier arrivals
			if err == nil {
				order = append(order, i)
				_ = m.Unlock(h)
			}
		}()
		time.Sleep(100 * time.Millisecond) // arrive in order 0, 1, 2
	}
	_ = m.Unlock(held)
	wg.Wait()
	fmt.Println(order)
	// Output: [0 1 2]
}

// ExampleClient_NewRWMutex lets readers in together, and a writer alone.
func ExampleClient_NewRWMutex() {
	rc, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{os.Getenv("REDIS_ADDR")}})
	defer rc.Close()
	locks, _ := rlock.New(rc, rlock.Options{})
	defer locks.Close()
	rw := locks.NewRWMutex("catalog")

	r1, _ := rw.RLock(context.Background())
	r2, err := rw.TryRLock(context.Background(), 0) // another reader: in at once
	fmt.Println("second reader:", err)
	_, err = rw.TryLock(context.Background(), 50*time.Millisecond) // a writer waits for both
	fmt.Println("writer:", errors.Is(err, rlock.ErrNotObtained))
	_ = rw.RUnlock(r2)
	_ = rw.RUnlock(r1)
	w, err := rw.Lock(context.Background())
	fmt.Println("writer after the readers:", err)
	_ = rw.Unlock(w)
	// Output:
	// second reader: <nil>
	// writer: true
	// writer after the readers: <nil>
}

// ExampleClient_NewSemaphore lets at most 3 permits out at once.
func ExampleClient_NewSemaphore() {
	rc, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{os.Getenv("REDIS_ADDR")}})
	defer rc.Close()
	locks, _ := rlock.New(rc, rlock.Options{})
	defer locks.Close()
	sem := locks.NewSemaphore("encoders", 3) // everyone using "encoders" must say 3

	big, _ := sem.Acquire(context.Background(), 2) // one hold of 2 permits
	small, _ := sem.Acquire(context.Background(), 1)
	_, err := sem.TryAcquire(context.Background(), 1, 0) // none left
	fmt.Println(errors.Is(err, rlock.ErrNotObtained))
	_ = sem.Release(big) // gives back both of its permits
	n, _ := sem.Available(context.Background())
	fmt.Println("available:", n)
	_ = sem.Release(small)
	// Output:
	// true
	// available: 2
}

// ExampleMutex_State shows who holds a lock and who waits for it, as an operator would: one
// read-only round trip, which also works on a replica.
func ExampleMutex_State() {
	rc, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{os.Getenv("REDIS_ADDR")}})
	defer rc.Close()
	locks, _ := rlock.New(rc, rlock.Options{})
	defer locks.Close()
	m := locks.NewFairMutex("deploy")

	held, _ := m.Lock(rlock.WithOwner(context.Background(), "web-1"))
	waiting, stop := context.WithCancel(rlock.WithOwner(context.Background(), "web-2"))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = m.Lock(waiting) // queues behind web-1 until stopped
	}()
	var st rlock.State
	for len(st.Waiters) == 0 { // until web-2 has queued
		time.Sleep(10 * time.Millisecond)
		var err error
		if st, err = m.State(context.Background()); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println(st.Name, st.Kind)
	for _, h := range st.Holders {
		fmt.Printf("held by %s (%d hold), lease left: %v\n", h.Owner, h.Count, h.Lease > 0)
	}
	for i, w := range st.Waiters {
		fmt.Printf("%d. %s waits, keeps its place for another %v if it stops polling\n", i+1, w.Owner, w.Deadline.Round(time.Second))
	}
	stop()
	<-done
	_ = m.Unlock(held)
	// Output:
	// deploy fair_mutex
	// held by web-1 (1 hold), lease left: true
	// 1. web-2 waits, keeps its place for another 5s if it stops polling
}

// ExampleClient_NewMultiLock holds two accounts for a transfer: both or neither, in an order
// that every client computes alike, so transfers in opposite directions never deadlock.
func ExampleClient_NewMultiLock() {
	rc, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{os.Getenv("REDIS_ADDR")}})
	defer rc.Close()
	locks, _ := rlock.New(rc, rlock.Options{})
	defer locks.Close()
	// One {tag}: one hash slot on a Cluster too, so both are taken by one script.
	from, to := locks.NewMutex("{ledger}account:4"), locks.NewMutex("{ledger}account:17")
	transfer := locks.NewMultiLock(from, to)
	fmt.Println(transfer.Names()) // the order they are taken in

	held, err := transfer.Lock(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	n, _ := from.HoldCount(held) // each member accepts the set's hold context
	fmt.Println("holds of account 4:", n)
	// Another set over the same accounts, given in the other order, waits (here: gives up).
	back := locks.NewMultiLock(to, from)
	_, err = back.TryLock(context.Background(), 10*time.Millisecond)
	fmt.Println(errors.Is(err, rlock.ErrNotObtained))
	// ... move the money under held: it is cancelled if any member is lost ...
	if err := transfer.Unlock(held); err != nil {
		log.Fatal(err) // ErrLockLost: the transfer may have overlapped another holder's
	}
	held, err = back.TryLock(context.Background(), 0)
	fmt.Println("other direction:", err)
	_ = back.Unlock(held)
	// Output:
	// [{ledger}account:17 {ledger}account:4]
	// holds of account 4: 1
	// true
	// other direction: <nil>
}

// ExampleElection_Run leads while the service runs: lead works under the term context and
// stamps its writes with the term; Run resigns when lead returns and campaigns again, and when
// ctx ends it resigns and returns.
func ExampleElection_Run() {
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{os.Getenv("REDIS_ADDR")}})
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	locks, err := rlock.New(rc, rlock.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()

	el := locks.NewElection("scheduler")
	ctx, stop := context.WithCancel(context.Background()) // a service: until SIGTERM
	rounds := 0
	err = el.Run(ctx, "10.0.0.7:8080", func(term context.Context) error {
		// Leading until term is done (lost, or ctx ended). Send t with every write, so that
		// the store refuses a deposed leader's (docs/election.md).
		t, _ := el.Term(term)
		l, _ := el.Leader(term)
		fmt.Println("leading:", l.Term == t, l.Value)
		if rounds++; rounds == 2 {
			stop() // shutting down: Run resigns and returns
		}
		return nil // resign; Run campaigns again
	})
	fmt.Println(errors.Is(err, context.Canceled))
	l, _ := el.Leader(context.Background())
	fmt.Println("leads after Run:", l.Term != 0)
	// Output:
	// leading: true 10.0.0.7:8080
	// leading: true 10.0.0.7:8080
	// true
	// leads after Run: false
}

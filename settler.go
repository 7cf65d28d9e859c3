package rlock

import (
	"context"
	"time"
)

// settler is the Client's goroutine that settles the work calls left on their lanes (see
// lane.go) once they returned: requests whose reply was lost (resolved, replayed), queue
// places given up, holds to give back. A call leaves work there when Redis did not answer it
// within its bound (see bound.go), and the reaper and the renewals leave holds they ended that
// Redis may still have. It is woken when work is left (see settleSoon), and by the watchdog
// every period; while work is left it tries again after 10ms doubling to 1s.
type settler struct {
	c      *core
	shards *shards
}

// run is the goroutine; it returns when the client closes.
func (s *settler) run() {
	c := s.c
	defer c.wg.Done()
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	backoff := newBackoff()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.settle:
		case <-t.C:
		}
		if s.pass() {
			t.Reset(backoff.next())
		} else {
			backoff = newBackoff()
		}
	}
}

// pass settles every lane with work left that nobody is using, each as a flight of its own
// (see bound.go), and waits for them within releaseWait: a node that does not answer holds up
// neither the lanes of the other nodes nor, past that bound, the settler. A flight it leaves
// keeps its lane's turn until it returns, then wakes the settler. It reports whether work is
// left: on lanes it could not settle, or on lanes a call is using.
func (s *settler) pass() bool {
	c := s.c
	type work struct {
		sh  *shard
		l   *lane
		f   *flight
		err error
	}
	var todo []*work
	left := false
	var ls []*lane
	s.shards.each(func(sh *shard) {
		var busy bool
		ls, busy = sh.lanes.idle(ls[:0])
		left = left || busy
		for _, l := range ls {
			todo = append(todo, &work{sh: sh, l: l})
		}
	})
	for _, w := range todo {
		select {
		case w.l.turn <- struct{}{}:
		default:
			w.sh.lanes.drop(w.l) // a call took it meanwhile
			continue
		}
		sh, l := w.sh, w.l
		w.f = c.launch(context.Background(), false, func(ctx context.Context) { w.err = sh.settle(ctx, l) }, func() {
			sh.lanes.exit(l)
			c.settleSoon()
		})
		if w.f == nil {
			sh.lanes.exit(l) // closed
		}
	}
	b := within(releaseWait)
	for _, w := range todo {
		if w.f == nil {
			continue
		}
		if err := w.f.wait(c, b); err != nil {
			left = true // the flight has the lane's turn
			continue
		}
		w.sh.lanes.exit(w.l)
		left = left || w.err != nil
	}
	return left
}

// settleLeft is the last pass, run by Close once the client's goroutines are joined: the work
// left on lanes that nobody uses (a queue place given up, a hold to give back, a release whose
// reply was lost) is settled on Close's goroutine, within replyGrace for every lane in all.
// What it cannot settle by then lapses in Redis by itself: a place after FairWaitTimeout, a
// hold with its lease. (Without it, a waiter that Close ended while a flight had its lane left
// its queue place, which a release then granted to nobody.)
func (s *settler) settleLeft() {
	ctx, cancel := giveUpAfter(context.Background(), replyGrace)
	defer cancel()
	type work struct {
		sh *shard
		l  *lane
	}
	var todo []work
	var ls []*lane
	s.shards.each(func(sh *shard) {
		ls, _ = sh.lanes.idle(ls[:0])
		for _, l := range ls {
			todo = append(todo, work{sh, l})
		}
	})
	for _, w := range todo {
		select {
		case w.l.turn <- struct{}{}:
			_ = w.sh.settle(giveUp{ctx}, w.l)
			w.sh.lanes.exit(w.l)
		default:
			w.sh.lanes.drop(w.l)
		}
	}
}

package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
)

// Live room events (GET /labs/{id}/events) are server-sent events
// (docs/protocol.md §9). Each event carries an id "M.E" (apiv1.Cursor): the
// last message seq and the last claim-event seq the client has seen. A client that reconnects sends it back as
// Last-Event-ID (EventSource does this itself) and resumes exactly after
// it: nothing lost, nothing repeated.
//
// One hub goroutine per room with subscribers reads new messages and state
// changes from the store and fans them out. It is woken at once by the
// store's announcements (Notifier: on PostgreSQL LISTEN/NOTIFY, so a change
// made by any server process sharing the database; on SQLite in process),
// or, without a Notifier, by this process's handlers; a slow fallback poll
// (Config.EventPoll) recovers anything an announcement missed. The cursor
// is the store's (seqs of the claim's messages and history), so it means
// the same on every server process.

// sseEvent is one encoded event with the seqs it advances to.
type sseEvent struct {
	msgSeq, evSeq int64 // seq of the message or state change (0 when not this kind)
	data          []byte
	// frame is the whole SSE frame, encoded once by the hub for every live
	// subscriber, with id = the room's cursor after this event (curMsg.curEv).
	frame         []byte
	curMsg, curEv int64
}

// kind is the SSE event type.
func (ev sseEvent) kind() string {
	if ev.msgSeq > 0 {
		return "message"
	}
	return "state"
}

// encode builds the frame for a cursor.
func (ev sseEvent) encode(msg, evSeq int64) []byte {
	return fmt.Appendf(nil, "id: %s\nevent: %s\ndata: %s\n\n", apiv1.Cursor{Msg: msg, Ev: evSeq}, ev.kind(), ev.data)
}

type hub struct {
	store  service
	logger *slog.Logger
	poll   time.Duration
	mu     sync.Mutex
	rooms  map[string]*room
}

type room struct {
	id   string
	subs map[chan sseEvent]struct{}
	wake chan struct{}
	// want and msgHint (under hub.mu) are what the wakes since the last
	// fetch asked for: wantMsgs, wantEvents, and the newest message seq
	// announced (0: unknown).
	want    uint8
	msgHint int64
	// lastMsg and lastEv are the seqs fetched so far (the hub goroutine's).
	lastMsg int64
	lastEv  int64
}

// What a wake asks a room's fetch to read.
const (
	wantMsgs   uint8 = 1 << iota // the room's messages (a post)
	wantEvents                   // the claim's history (any other change)
	wantAll    = wantMsgs | wantEvents
)

func newHub(store service, logger *slog.Logger, poll time.Duration) *hub {
	return &hub{store: store, logger: logger, poll: poll, rooms: map[string]*room{}}
}

// subscribe registers a subscriber on a room; the returned cancel removes it.
func (h *hub) subscribe(ctx context.Context, claimID string) (chan sseEvent, func(), error) {
	ch := make(chan sseEvent, 256)
	h.mu.Lock()
	rm, ok := h.rooms[claimID]
	if ok {
		rm.subs[ch] = struct{}{}
		h.mu.Unlock()
		return ch, h.unsubscribe(rm, ch), nil
	}
	h.mu.Unlock()
	// A new room starts from what exists now; each subscriber reads its own
	// backlog after subscribing, so nothing posted from here on is missed.
	// The store is read outside the hub's lock.
	msg, ev, err := h.store.LabLatest(ctx, claimID)
	if err != nil {
		return nil, nil, err
	}
	h.mu.Lock()
	rm, ok = h.rooms[claimID]
	if !ok {
		rm = &room{id: claimID, subs: map[chan sseEvent]struct{}{}, wake: make(chan struct{}, 1), lastMsg: msg, lastEv: ev}
		h.rooms[claimID] = rm
		go h.run(rm)
	}
	rm.subs[ch] = struct{}{}
	h.mu.Unlock()
	return ch, h.unsubscribe(rm, ch), nil
}

func (h *hub) unsubscribe(rm *room, ch chan sseEvent) func() {
	return func() {
		h.mu.Lock()
		if _, ok := rm.subs[ch]; ok {
			delete(rm.subs, ch)
			close(ch)
		}
		h.mu.Unlock()
	}
}

// notify wakes a room's hub goroutine to read what = wantMsgs (a message
// up to seq msgSeq was posted; 0: unknown), wantEvents or wantAll.
func (h *hub) notify(claimID string, what uint8, msgSeq int64) {
	h.mu.Lock()
	rm, ok := h.rooms[claimID]
	if ok {
		rm.want |= what
		rm.msgHint = max(rm.msgHint, msgSeq)
		select {
		case rm.wake <- struct{}{}:
		default:
		}
	}
	h.mu.Unlock()
}

// notifyAll wakes every room to read everything (a resync: announcements
// may have been missed).
func (h *hub) notifyAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, rm := range h.rooms {
		rm.want = wantAll
		select {
		case rm.wake <- struct{}{}:
		default:
		}
	}
}

// run fetches for one room until it has no subscribers: everything at
// start and on each poll, what a wake asks for otherwise.
func (h *hub) run(rm *room) {
	ctx := context.Background()
	t := time.NewTicker(h.poll)
	defer t.Stop()
	what, hint := wantAll, int64(0)
	for {
		if !h.fetch(ctx, rm, what, hint) {
			return
		}
		select {
		case <-rm.wake:
			h.mu.Lock()
			what, hint = rm.want, rm.msgHint
			rm.want, rm.msgHint = 0, 0
			h.mu.Unlock()
		case <-t.C:
			what, hint = wantAll, 0
		}
	}
}

// fetch delivers what is new of what was asked (messages are not read again
// when the announced seq hint was fetched already: a post by this process
// is announced to it twice); it returns false (and forgets the room) once
// no subscriber is left.
func (h *hub) fetch(ctx context.Context, rm *room, what uint8, hint int64) bool {
	h.mu.Lock()
	if len(rm.subs) == 0 {
		delete(h.rooms, rm.id)
		h.mu.Unlock()
		return false
	}
	h.mu.Unlock()
	var out []sseEvent
	var msgs []dotlab.LabMessage
	var evs []dotlab.ClaimEvent
	var err error
	if what&wantMsgs != 0 && (what != wantMsgs || hint == 0 || hint > rm.lastMsg) {
		if msgs, err = h.store.LabMessages(ctx, rm.id, rm.lastMsg, 500); err != nil {
			h.logger.Warn("sse: read messages", "claim", rm.id, "err", err)
			return true
		}
	}
	if what&wantEvents != 0 {
		if evs, err = h.store.ClaimEvents(ctx, rm.id, rm.lastEv); err != nil {
			h.logger.Warn("sse: read events", "claim", rm.id, "err", err)
			return true
		}
	}
	for _, m := range msgs {
		ev := messageEvent(m)
		rm.lastMsg = m.Seq
		ev.curMsg, ev.curEv = rm.lastMsg, rm.lastEv
		ev.frame = ev.encode(ev.curMsg, ev.curEv)
		out = append(out, ev)
	}
	for _, e := range evs {
		ev := stateEvent(e)
		rm.lastEv = e.Seq
		ev.curMsg, ev.curEv = rm.lastMsg, rm.lastEv
		ev.frame = ev.encode(ev.curMsg, ev.curEv)
		out = append(out, ev)
	}
	if len(out) == 0 {
		return true
	}
	h.mu.Lock()
	for ch := range rm.subs {
		for _, ev := range out {
			select {
			case ch <- ev:
			default:
				// A subscriber too slow to keep up is dropped; its client
				// reconnects with Last-Event-ID and loses nothing.
				delete(rm.subs, ch)
				close(ch)
			}
			if _, ok := rm.subs[ch]; !ok {
				break
			}
		}
	}
	h.mu.Unlock()
	return true
}

func messageEvent(m dotlab.LabMessage) sseEvent {
	b, _ := json.Marshal(m)
	return sseEvent{msgSeq: m.Seq, data: b}
}

func stateEvent(e dotlab.ClaimEvent) sseEvent {
	b, _ := json.Marshal(e)
	return sseEvent{evSeq: e.Seq, data: b}
}

// handleLabEvents streams a room (docs/protocol.md §9): first the backlog
// after the cursor (Last-Event-ID header, or ?cursor=M.E; from the start
// when absent), then live events. Event types: "message" (a LabMessage) and
// "state" (a ClaimEvent). A comment line is sent every 15 s to keep proxies
// open. Once the stream has opened, a failure ends it (the client
// reconnects) instead of returning an error.
func (s *Server) handleLabEvents(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := s.claimExists(r, id); err != nil {
		return err
	}
	cursor := r.Header.Get("Last-Event-ID")
	if cursor == "" {
		cursor = r.URL.Query().Get("cursor")
	}
	cur, err := apiv1.ParseCursor(cursor)
	if err != nil {
		return err
	}
	release, err := s.addrStreams.acquire(w, clientAddr(r, s.trusted))
	if err != nil {
		return err
	}
	defer release()
	if n := s.streams.Add(1); n > s.maxStream {
		s.streams.Add(-1)
		w.Header().Set("Retry-After", "30")
		return dotlab.Errorf(dotlab.EUNAVAILABLE, "the server holds %d live streams already: retry later, or read GET /labs/%s/messages", s.maxStream, id)
	}
	defer s.streams.Add(-1)
	fl, ok := w.(http.Flusher)
	if !ok {
		return errNoFlush
	}
	// Subscribe before reading the backlog, so nothing falls in between;
	// duplicates are skipped by seq.
	ch, cancel, err := s.hub.subscribe(r.Context(), id)
	if err != nil {
		return err
	}
	defer cancel()
	st := &stream{w: w, fl: fl, cur: cur}
	st.open()
	if st.backlog(r.Context(), s.store, id) == nil {
		st.live(r.Context(), s.done, ch)
	}
	return nil
}

// errNoFlush is a response writer that cannot stream (500 internal).
var errNoFlush = errors.New("response writer cannot flush")

// stream is one open event stream and the cursor it has delivered up to.
type stream struct {
	w   http.ResponseWriter
	fl  http.Flusher
	cur apiv1.Cursor
}

// open writes the event-stream headers and the reconnect delay.
func (st *stream) open() {
	h := st.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	st.w.WriteHeader(http.StatusOK)
	fmt.Fprintf(st.w, "retry: 1000\n\n")
}

// send writes ev unless the cursor is past it.
func (st *stream) send(ev sseEvent) error {
	if ev.msgSeq > 0 {
		if ev.msgSeq <= st.cur.Msg {
			return nil
		}
		st.cur.Msg = ev.msgSeq
	} else {
		if ev.evSeq <= st.cur.Ev {
			return nil
		}
		st.cur.Ev = ev.evSeq
	}
	frame := ev.frame
	if frame == nil || ev.curMsg != st.cur.Msg || ev.curEv != st.cur.Ev {
		// Backlog, or a cursor that differs from the room's: encode our own.
		st.cur.Msg, st.cur.Ev = max(st.cur.Msg, ev.curMsg), max(st.cur.Ev, ev.curEv)
		frame = ev.encode(st.cur.Msg, st.cur.Ev)
	}
	_, err := st.w.Write(frame)
	return err
}

// backlog sends the messages after the cursor, then the state changes
// after it, and flushes.
func (st *stream) backlog(ctx context.Context, store service, id string) error {
	for {
		msgs, err := store.LabMessages(ctx, id, st.cur.Msg, 500)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if err := st.send(messageEvent(m)); err != nil {
				return err
			}
		}
		if len(msgs) < 500 {
			break
		}
	}
	evs, err := store.ClaimEvents(ctx, id, st.cur.Ev)
	if err != nil {
		return err
	}
	for _, e := range evs {
		if err := st.send(stateEvent(e)); err != nil {
			return err
		}
	}
	st.fl.Flush()
	return nil
}

// live relays the room's events from ch, with a keep-alive every 15 s,
// until the client leaves, the server closes, or the hub drops the stream.
func (st *stream) live(ctx context.Context, done <-chan struct{}, ch <-chan sseEvent) {
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-done:
			st.closing()
			return
		case <-keep.C:
			if _, err := fmt.Fprint(st.w, ": keep-alive\n\n"); err != nil {
				return
			}
			st.fl.Flush()
		case ev, ok := <-ch:
			if !ok || st.send(ev) != nil {
				return // !ok: dropped as too slow; the client reconnects
			}
			if !st.drain(ch) {
				return
			}
			st.fl.Flush()
		}
	}
}

// drain sends what is already queued on ch (so that it is flushed once);
// false means the stream is over.
func (st *stream) drain(ch <-chan sseEvent) bool {
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				st.fl.Flush()
				return false
			}
			if st.send(ev) != nil {
				return false
			}
		default:
			return true
		}
	}
}

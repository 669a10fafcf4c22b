package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dotlab/dotlab"
)

// Live room events (GET /labs/{id}/events) are server-sent events. Each
// event carries an id "M.E": the last message seq and the last claim-event
// seq the client has seen. A client that reconnects sends it back as
// Last-Event-ID (EventSource does this itself) and resumes exactly after
// it: nothing lost, nothing repeated.
//
// One hub goroutine per room with subscribers reads new messages and state
// changes from the store and fans them out: woken at once by posts and
// state changes in this process, and by a poll for changes made by other
// server processes sharing a PostgreSQL database.

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
	return fmt.Appendf(nil, "id: %d.%d\nevent: %s\ndata: %s\n\n", msg, evSeq, ev.kind(), ev.data)
}

type hub struct {
	store  Store
	logger *slog.Logger
	poll   time.Duration
	mu     sync.Mutex
	rooms  map[string]*room
}

type room struct {
	id      string
	subs    map[chan sseEvent]struct{}
	wake    chan struct{}
	lastMsg int64
	lastEv  int64
}

func newHub(store Store, logger *slog.Logger, poll time.Duration) *hub {
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

// notify wakes a room's hub goroutine (a message was posted or the claim
// changed state in this process).
func (h *hub) notify(claimID string) {
	h.mu.Lock()
	rm, ok := h.rooms[claimID]
	h.mu.Unlock()
	if ok {
		select {
		case rm.wake <- struct{}{}:
		default:
		}
	}
}

// run polls one room until it has no subscribers.
func (h *hub) run(rm *room) {
	ctx := context.Background()
	t := time.NewTicker(h.poll)
	defer t.Stop()
	for {
		if !h.fetch(ctx, rm) {
			return
		}
		select {
		case <-rm.wake:
		case <-t.C:
		}
	}
}

// fetch delivers what is new; it returns false (and forgets the room) once
// no subscriber is left.
func (h *hub) fetch(ctx context.Context, rm *room) bool {
	h.mu.Lock()
	if len(rm.subs) == 0 {
		delete(h.rooms, rm.id)
		h.mu.Unlock()
		return false
	}
	h.mu.Unlock()
	var out []sseEvent
	msgs, err := h.store.LabMessages(ctx, rm.id, rm.lastMsg, 500)
	if err != nil {
		h.logger.Warn("sse: read messages", "claim", rm.id, "err", err)
		return true
	}
	evs, err := h.store.ClaimEvents(ctx, rm.id, rm.lastEv)
	if err != nil {
		h.logger.Warn("sse: read events", "claim", rm.id, "err", err)
		return true
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

// parseCursor reads "M.E" (Last-Event-ID or ?cursor=); empty means from the
// start.
func parseCursor(s string) (msg, ev int64, err error) {
	if s == "" {
		return 0, 0, nil
	}
	a, b, ok := strings.Cut(s, ".")
	msg, err1 := strconv.ParseInt(a, 10, 64)
	ev, err2 := strconv.ParseInt(b, 10, 64)
	if !ok || err1 != nil || err2 != nil || msg < 0 || ev < 0 {
		return 0, 0, dotlab.Errorf(dotlab.EINVALID, "Last-Event-ID: %q must be M.E (last message seq, last state-change seq), e.g. 12.5", s)
	}
	return msg, ev, nil
}

// handleLabEvents streams a room: first the backlog after the cursor
// (Last-Event-ID header, or ?cursor=M.E; from the start when absent), then
// live events. Event types: "message" (a LabMessage) and "state" (a
// ClaimEvent). A comment line is sent every 15 s to keep proxies open.
func (s *Server) handleLabEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := s.store.FindClaim(r.Context(), id); err != nil {
		s.writeError(w, r, err)
		return
	}
	cursor := r.Header.Get("Last-Event-ID")
	if cursor == "" {
		cursor = r.URL.Query().Get("cursor")
	}
	lastMsg, lastEv, err := parseCursor(cursor)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if n := s.streams.Add(1); n > s.maxStream {
		s.streams.Add(-1)
		w.Header().Set("Retry-After", "30")
		s.writeError(w, r, dotlab.Errorf(dotlab.EUNAVAILABLE, "the server holds %d live streams already: retry later, or read GET /labs/%s/messages", s.maxStream, id))
		return
	}
	defer s.streams.Add(-1)
	fl, ok := w.(http.Flusher)
	if !ok {
		s.writeError(w, r, fmt.Errorf("response writer cannot flush"))
		return
	}
	// Subscribe before reading the backlog, so nothing falls in between;
	// duplicates are skipped by seq.
	ch, cancel, err := s.hub.subscribe(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer cancel()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(ev sseEvent) error {
		if ev.msgSeq > 0 {
			if ev.msgSeq <= lastMsg {
				return nil
			}
			lastMsg = ev.msgSeq
		} else {
			if ev.evSeq <= lastEv {
				return nil
			}
			lastEv = ev.evSeq
		}
		frame := ev.frame
		if frame == nil || ev.curMsg != lastMsg || ev.curEv != lastEv {
			// Backlog, or a cursor that differs from the room's: encode our own.
			lastMsg, lastEv = max(lastMsg, ev.curMsg), max(lastEv, ev.curEv)
			frame = ev.encode(lastMsg, lastEv)
		}
		_, err := w.Write(frame)
		return err
	}
	fmt.Fprintf(w, "retry: 1000\n\n")
	for {
		msgs, err := s.store.LabMessages(r.Context(), id, lastMsg, 500)
		if err != nil {
			return
		}
		for _, m := range msgs {
			if send(messageEvent(m)) != nil {
				return
			}
		}
		if len(msgs) < 500 {
			break
		}
	}
	evs, err := s.store.ClaimEvents(r.Context(), id, lastEv)
	if err != nil {
		return
	}
	for _, e := range evs {
		if send(stateEvent(e)) != nil {
			return
		}
	}
	fl.Flush()
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		case <-keep.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			fl.Flush()
		case ev, ok := <-ch:
			if !ok {
				return // dropped as too slow: the client reconnects
			}
			if send(ev) != nil {
				return
			}
			// Drain what is already queued before flushing once.
			for more := true; more; {
				select {
				case ev, ok := <-ch:
					if !ok {
						fl.Flush()
						return
					}
					if send(ev) != nil {
						return
					}
				default:
					more = false
				}
			}
			fl.Flush()
		}
	}
}

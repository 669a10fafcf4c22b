package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"
)

// children are the subscriber processes: each was started with its share
// of the subscribers and has said "ready" once all its streams were open.
type children struct {
	cmds  []*exec.Cmd
	stdin []io.WriteCloser
	out   []*bufio.Reader
}

// startClients starts nprocs copies of this program in client mode on url,
// nsubs subscribers shared among them, and returns once every one has
// opened all its streams (or an error, the started ones killed).
func startClients(url, cursor string, nsubs, nprocs, nmsgs int) (*children, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	k := &children{}
	for p := 0; p < nprocs; p++ {
		n := nsubs / nprocs
		if p < nsubs%nprocs {
			n++
		}
		cmd := exec.Command(self, "-client", url, "-cursor", cursor,
			"-subscribers", strconv.Itoa(n), "-messages", strconv.Itoa(nmsgs))
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			k.kill()
			return nil, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			k.kill()
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			k.kill()
			return nil, err
		}
		k.cmds, k.stdin, k.out = append(k.cmds, cmd), append(k.stdin, in), append(k.out, bufio.NewReaderSize(out, 1<<20))
	}
	for p, out := range k.out {
		line, err := out.ReadString('\n')
		if err != nil || line != "ready\n" {
			k.kill()
			return nil, fmt.Errorf("subscriber process %d: %q %v", p, line, err)
		}
	}
	return k, nil
}

// collect waits up to timeout for every process to have read every
// message, then tells the rest to stop (stdin closed) and returns all
// subscribers' receive times (Unix nanoseconds, 0 for never).
func (k *children) collect(timeout time.Duration) ([][]int64, error) {
	stopAt := time.AfterFunc(timeout, func() {
		for _, in := range k.stdin {
			in.Close()
		}
	})
	defer stopAt.Stop()
	var all [][]int64
	for p, out := range k.out {
		var got [][]int64
		if err := json.NewDecoder(out).Decode(&got); err != nil {
			return nil, fmt.Errorf("subscriber process %d: %w", p, err)
		}
		all = append(all, got...)
	}
	for _, c := range k.cmds {
		c.Wait()
	}
	return all, nil
}

// kill ends every started subscriber process.
func (k *children) kill() {
	for _, c := range k.cmds {
		if c.ProcessState == nil && c.Process != nil {
			c.Process.Kill()
			c.Wait()
		}
	}
}

// clientMain is a subscriber process: nsubs streams on url from cursor,
// "ready" on stdout once all are open, then, once every stream has read
// nmsgs messages or stdin is closed, the receive times as JSON on stdout.
func clientMain(url, cursor string, nsubs, nmsgs int) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr := &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}
	client := &http.Client{Transport: tr}
	received := make([][]int64, nsubs)
	var ready, done sync.WaitGroup
	dialing := make(chan struct{}, 64) // at most 64 connections being opened at once
	for i := range received {
		received[i] = make([]int64, nmsgs)
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			subscriber(ctx, client, url, cursor, received[i], &ready, dialing)
		}()
	}
	ready.Wait()
	os.Stdout.WriteString("ready\n")
	finished := make(chan struct{})
	go func() { done.Wait(); close(finished) }()
	stdinClosed := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(stdinClosed) }()
	select {
	case <-finished:
	case <-stdinClosed:
		cancel()
		<-finished
	}
	return json.NewEncoder(os.Stdout).Encode(received)
}

// subscriber reads one stream, marking ready once it is open, and records
// in received when each message (by its seq) arrives.
func subscriber(ctx context.Context, client *http.Client, url, cursor string, received []int64, ready *sync.WaitGroup, dialing chan struct{}) {
	nmsgs := len(received)
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("Last-Event-ID", cursor)
	dialing <- struct{}{}
	res, err := client.Do(req)
	<-dialing
	ready.Done()
	if err != nil {
		fmt.Fprintln(os.Stderr, "subscribe:", err)
		return
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	got := 0
	for got < nmsgs && sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte("data: ")) {
			continue
		}
		var msg struct {
			Seq int64 `json:"seq"`
		}
		if json.Unmarshal(line[6:], &msg) == nil && msg.Seq >= 1 && msg.Seq <= int64(nmsgs) && received[msg.Seq-1] == 0 {
			received[msg.Seq-1] = time.Now().UnixNano()
			got++
		}
	}
}

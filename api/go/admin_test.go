package wharf_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"

	wharf "github.com/wharf/wharf/api/go"
)

// Every handle closes as an io.Closer.
var (
	_ io.Closer = (*wharf.Engine)(nil)
	_ io.Closer = (*wharf.Runtime)(nil)
	_ io.Closer = (*wharf.Standby)(nil)
)

// Cursors are read, set, copied, listed and deleted; each change is what the next read sees.
func TestCursorsRoundTrip(t *testing.T) {
	engine := open(t, "partitions=2")
	var last uint64
	for i := 1; i <= 6; i++ {
		last = commitOrder(t, engine, fmt.Sprintf("o-%d", i), fmt.Sprintf("c-%d", i), i)
	}
	rt, err := wharf.NewRuntime(engine, "workers=1")
	if err != nil {
		t.Fatal(err)
	}
	err = rt.Subscribe("audit", []string{"OrderPlaced"}, "", func(*wharf.Fact) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	drain(t, rt)
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	cursors, err := engine.Cursors()
	if err != nil || len(cursors) != 2 || cursors[0].Consumer != "audit" || cursors[1].Partition != 1 {
		t.Fatalf("cursors: %+v %v, want audit's two partitions", cursors, err)
	}
	highest := cursors[0].FactID
	if cursors[1].FactID > highest {
		highest = cursors[1].FactID
	}
	if highest != last {
		t.Fatalf("cursors %+v: none at the last fact %d", cursors, last)
	}
	if at, err := engine.Cursor("audit", cursors[0].Partition); err != nil || at != cursors[0].FactID {
		t.Fatalf("Cursor: %d %v, want %d", at, err, cursors[0].FactID)
	}
	if err := engine.SetCursor("audit", 0); err != nil {
		t.Fatal(err)
	}
	for p := uint32(0); p < 2; p++ {
		if at, err := engine.Cursor("audit", p); err != nil || at != 0 {
			t.Fatalf("after SetCursor(0), partition %d at %d %v", p, at, err)
		}
	}
	if err := engine.SetCursor("audit", last); err != nil {
		t.Fatal(err)
	}
	if err := engine.CopyCursors("audit", "audit-v2", false); err != nil {
		t.Fatal(err)
	}
	err = engine.CopyCursors("audit", "audit-v2", false)
	var werr *wharf.Error
	if !errors.As(err, &werr) || werr.Status != wharf.StatusInvalidArgument ||
		werr.Subcode != wharf.SubcodeAlreadyExists {
		t.Fatalf("copy onto existing cursors without force: %v", err)
	}
	if err := engine.CopyCursors("audit", "audit-v2", true); err != nil {
		t.Fatalf("copy with force: %v", err)
	}
	if err := engine.DeleteCursors("audit-v2"); err != nil {
		t.Fatal(err)
	}
	if err := engine.DeleteCursors("audit-v2"); !errors.Is(err, wharf.ErrNotFound) {
		t.Fatalf("second delete: %v, want ErrNotFound", err)
	}
	if _, err := engine.Cursor("bad\x00name", 0); !errors.Is(err, wharf.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "consumer") {
		t.Fatalf("a consumer with a NUL byte: %v", err)
	}
	if err := engine.CopyCursors("audit", "", false); !errors.Is(err, wharf.ErrInvalidArgument) {
		t.Fatalf("copy to an empty name: %v", err)
	}
}

// Dead letters are retried (re-emitted to their consumer, which handles them this time) and
// purged; trim, leases, retention losses and stat answer.
func TestDeadLettersLeasesTrimAndStat(t *testing.T) {
	engine := open(t, "partitions=1")
	for i := 1; i <= 4; i++ {
		commitOrder(t, engine, fmt.Sprintf("o-%d", i), "alice", i)
	}
	rt, err := wharf.NewRuntime(engine, "workers=1;instance=test-instance")
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	var mu sync.Mutex
	rejecting := true
	var handled []uint64
	err = rt.Subscribe("picky", []string{"OrderPlaced"}, "", func(f *wharf.Fact) error {
		mu.Lock()
		defer mu.Unlock()
		if rejecting && f.ID%2 == 0 {
			return wharf.Reject(errors.New("even"))
		}
		handled = append(handled, f.ID)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	drain(t, rt)
	letters, err := engine.DeadLetters("picky")
	if err != nil || len(letters) != 2 || letters[0].Fact.ID != 2 || letters[1].Fact.ID != 4 {
		t.Fatalf("dead letters %+v %v, want facts 2 and 4", letters, err)
	}
	if _, err := engine.PurgeDeadLetters("picky", 3); !errors.Is(err, wharf.ErrNotFound) {
		t.Fatalf("purge of a fact that is no dead letter: %v", err)
	}
	mu.Lock()
	rejecting = false
	mu.Unlock()
	retried, err := engine.RetryDeadLetters("picky", 2)
	if err != nil || len(retried) != 1 || retried[0].DeadFactID != 2 || retried[0].NewFactID <= 4 {
		t.Fatalf("retry: %+v %v", retried, err)
	}
	drain(t, rt)
	mu.Lock()
	if handled[len(handled)-1] != retried[0].NewFactID {
		t.Errorf("handled %v: the re-emitted fact %d was not delivered", handled, retried[0].NewFactID)
	}
	mu.Unlock()
	if n, err := engine.PurgeDeadLetters("picky"); err != nil || n != 1 {
		t.Fatalf("purge of every letter: %d %v, want 1 (fact 4)", n, err)
	}
	if letters, err := engine.DeadLetters("picky"); err != nil || len(letters) != 0 {
		t.Fatalf("after purge: %+v %v", letters, err)
	}

	if err := rt.Start(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "a lease", func() bool {
		leases, err := engine.Leases()
		if err != nil {
			t.Fatal(err)
		}
		return len(leases) == 1 && leases[0].Consumer == "picky" && leases[0].Owner == "test-instance"
	})
	if err := rt.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := engine.ReleaseLease("nobody"); !errors.Is(err, wharf.ErrNotFound) {
		t.Fatalf("release of a lease never held: %v", err)
	}

	report, err := engine.Trim(true)
	if err != nil || report.ConsumerCount != 1 || len(report.Partitions) != 1 ||
		report.FactCount == 0 {
		t.Fatalf("trim dry run: %+v %v", report, err)
	}
	stat, err := engine.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if stat.FactCount != 5 || stat.DurableLSN != 5 || len(stat.Partitions) != 1 ||
		len(stat.Consumers) != 1 || stat.Consumers[0].Consumer != "picky" ||
		len(stat.Consumers[0].Lanes) != 1 || stat.Consumers[0].Lanes[0].FactID != 5 ||
		stat.DeadLetterCount != 0 || stat.LastBackup != nil {
		t.Fatalf("stat after a dry run: %+v", stat)
	}
	if report, err = engine.Trim(false); err != nil || report.FactCount != 5 {
		t.Fatalf("trim: %+v %v", report, err)
	}
	if stat, err = engine.Stat(); err != nil || stat.FactCount != 0 {
		t.Fatalf("stat after trim: %+v %v", stat, err)
	}
	if losses, err := engine.RetentionLosses(); err != nil || len(losses) != 0 {
		t.Fatalf("retention losses without retention: %+v %v", losses, err)
	}
}

// The metrics text parses as Prometheus' exposition format and agrees with Metrics.
func TestMetricsTextParses(t *testing.T) {
	engine := open(t, "")
	for i := 1; i <= 3; i++ {
		commitOrder(t, engine, fmt.Sprintf("o-%d", i), "alice", i)
	}
	text, err := engine.MetricsText()
	if err != nil {
		t.Fatal(err)
	}
	samples := map[string]float64{}
	scanner := bufio.NewScanner(strings.NewReader(text))
	for line := 1; scanner.Scan(); line++ {
		l := scanner.Text()
		if l == "" || strings.HasPrefix(l, "# HELP ") || strings.HasPrefix(l, "# TYPE ") {
			continue
		}
		cut := strings.LastIndexByte(l, ' ')
		if cut <= 0 {
			t.Fatalf("line %d %q: no value", line, l)
		}
		series, value := l[:cut], l[cut+1:]
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("line %d %q: value: %v", line, l, err)
		}
		name := series
		if brace := strings.IndexByte(series, '{'); brace >= 0 {
			if !strings.HasSuffix(series, "}") {
				t.Fatalf("line %d %q: unterminated labels", line, l)
			}
			name = series[:brace]
		}
		for _, r := range name {
			if !(r == '_' || r == ':' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' ||
				r >= '0' && r <= '9') {
				t.Fatalf("line %d %q: bad metric name", line, l)
			}
		}
		samples[series] = v
	}
	if samples["wharf_facts_committed_total"] < 3 {
		t.Fatalf("wharf_facts_committed_total %v, want >= 3; text:\n%s",
			samples["wharf_facts_committed_total"], text)
	}
	metrics, err := engine.Metrics()
	if err != nil || len(metrics) == 0 {
		t.Fatalf("Metrics: %d samples %v", len(metrics), err)
	}
	for _, m := range metrics {
		if _, ok := samples[m.Name+m.Labels]; !ok {
			t.Fatalf("sample %s%s of Metrics is not in the text", m.Name, m.Labels)
		}
	}
	engine.Close()
	if _, err := engine.MetricsText(); !errors.Is(err, wharf.ErrClosed) {
		t.Fatalf("metrics of a closed engine: %v", err)
	}
}

// A trace function receives the runtime's events, with the consumer, the fact, the reason and
// the attempt.
func TestTraceEventsReachTheTraceFunction(t *testing.T) {
	engine := open(t, "partitions=1")
	id := commitOrder(t, engine, "o-1", "alice", 1)
	var mu sync.Mutex
	var events []wharf.TraceEvent
	rt, err := wharf.NewRuntime(engine, "workers=1;backoff_initial_ms=1", wharf.WithTrace(
		func(e wharf.TraceEvent) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, e)
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	err = rt.Subscribe("mailer", []string{"OrderPlaced"}, "", func(f *wharf.Fact) error {
		if f.Attempt == 1 {
			return errors.New("smtp down")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	drain(t, rt)
	mu.Lock()
	defer mu.Unlock()
	for _, e := range events {
		if e.Consumer == "mailer" && e.FactID == id && strings.Contains(e.Reason, "smtp down") {
			if e.Attempt != 1 || e.Level == wharf.TraceInfo {
				t.Fatalf("failure event %+v: want attempt 1 at warning or error", e)
			}
			return
		}
	}
	t.Fatalf("no trace event for the failed delivery among %+v", events)
}

func TestRuntimeOptionsAndRelayBadInput(t *testing.T) {
	engine := open(t, "")
	if _, err := wharf.NewRuntime(engine, "", nil); !errors.Is(err, wharf.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "RuntimeOption") {
		t.Fatalf("a nil RuntimeOption: %v", err)
	}
	rt, err := wharf.NewRuntime(engine, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Relay("out", []string{"OrderPlaced"}, "url=redis://x"); !errors.Is(err,
		wharf.ErrInvalidArgument) || !strings.Contains(err.Error(), "kind") {
		t.Fatalf("a relay without kind: %v", err)
	}
	if err := rt.Relay("out", []string{"OrderPlaced"}, "kind=carrier_pigeon"); !errors.Is(err,
		wharf.ErrInvalidArgument) || !strings.Contains(err.Error(), "carrier_pigeon") {
		t.Fatalf("a relay of an unknown kind: %v", err)
	}
	if err := rt.Project("p", []string{"OrderPlaced"}, "", nil); !errors.Is(err,
		wharf.ErrInvalidArgument) || !strings.Contains(err.Error(), "Runtime.Project") {
		t.Fatalf("a nil projection: %v", err)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := rt.Start(); !errors.Is(err, wharf.ErrClosed) {
		t.Fatalf("Start after Close: %v", err)
	}
}

package wharf_test

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	wharf "github.com/wharf/wharf/api/go"
)

// collector is a subscriber's handler that keeps what it received.
type collector struct {
	mu    sync.Mutex
	facts []*wharf.Fact
}

func (c *collector) handle(f *wharf.Fact) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.facts = append(c.facts, f)
	return nil
}

func (c *collector) received() []*wharf.Fact {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*wharf.Fact(nil), c.facts...)
}

// waitFor polls c until it holds n facts (or fails after a while).
func (c *collector) waitFor(t *testing.T, n int) []*wharf.Fact {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; {
		if facts := c.received(); len(facts) >= n {
			return facts
		}
		if time.Now().After(deadline) {
			t.Fatalf("received %d facts, want %d", len(c.received()), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// wrapping is an upcaster that wraps the payload in "tag(...)".
func wrapping(tag string) wharf.UpcastFunc {
	return func(p []byte) ([]byte, error) { return []byte(tag + "(" + string(p) + ")"), nil }
}

// declareChain declares typ at version 1, then at version top.
func declareChain(t *testing.T, engine *wharf.Engine, typ string, top uint32) {
	t.Helper()
	if err := engine.DeclareType(typ, 1); err != nil {
		t.Fatalf("declare %s at 1: %v", typ, err)
	}
	if err := engine.DeclareType(typ, top); err != nil {
		t.Fatalf("declare %s at %d: %v", typ, top, err)
	}
	if v, err := engine.DeclaredVersion(typ); err != nil || v != top {
		t.Fatalf("declared version of %s: %d %v, want %d", typ, v, err, top)
	}
}

// emitVersions commits one fact of typ per payload, in one transaction, the i-th at versions[i].
func emitVersions(t *testing.T, engine *wharf.Engine, typ string, payloads []string, versions []uint32) {
	t.Helper()
	txn, err := engine.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i, payload := range payloads {
		err := txn.EmitWith(typ, []byte("k"), []byte(payload), wharf.EmitOptions{Version: versions[i]})
		if err != nil {
			t.Fatalf("emit %q at version %d: %v", payload, versions[i], err)
		}
	}
	if _, err := txn.Commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

func newRuntime(t *testing.T, engine *wharf.Engine) *wharf.Runtime {
	t.Helper()
	runtime, err := wharf.NewRuntime(engine, "workers=2;backoff_initial_ms=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(runtime.Free)
	return runtime
}

// A chain 1→2→3: a consumer receives every fact at version 3, lifted by the upcasters of the
// versions between (StoredVersion the one emitted); with payload_version=stored, as written.
func TestUpcastChainDeliversTheDeclaredVersion(t *testing.T) {
	engine := open(t, "partitions=2")
	declareChain(t, engine, "Priced", 3)
	for from, tag := range map[uint32]string{1: "v2", 2: "v3"} {
		if err := engine.RegisterUpcaster("Priced", from, wrapping(tag)); err != nil {
			t.Fatalf("register %d: %v", from, err)
		}
	}
	emitVersions(t, engine, "Priced", []string{"a", "b", "c", "d"}, []uint32{1, 2, 3, 0})

	runtime := newRuntime(t, engine)
	var latest, stored collector
	if err := runtime.Subscribe("latest", []string{"Priced"}, "", latest.handle); err != nil {
		t.Fatal(err)
	}
	if err := runtime.Subscribe("stored", []string{"Priced"}, "payload_version=stored",
		stored.handle); err != nil {
		t.Fatal(err)
	}
	if err := runtime.Drain(); err != nil {
		t.Fatalf("drain: %v", err)
	}
	describe := func(facts []*wharf.Fact) string {
		var parts []string
		for _, f := range facts {
			parts = append(parts, fmt.Sprintf("%s v%d stored v%d", f.Payload, f.Version, f.StoredVersion))
		}
		return strings.Join(parts, "; ")
	}
	want := "v3(v2(a)) v3 stored v1; v3(b) v3 stored v2; c v3 stored v3; d v3 stored v3"
	if got := describe(latest.received()); got != want {
		t.Fatalf("latest received %s, want %s", got, want)
	}
	want = "a v1 stored v1; b v2 stored v2; c v3 stored v3; d v3 stored v3"
	if got := describe(stored.received()); got != want {
		t.Fatalf("stored received %s, want %s", got, want)
	}
	// Read back, the facts are as stored.
	partition, _ := engine.PartitionOf([]byte("k"))
	facts, err := engine.ReadFacts(partition, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := describe(facts); got != want {
		t.Fatalf("read back %s, want %s", got, want)
	}
}

// A chain that misses a step: Start refuses a consumer of the type, naming the step; one taking
// payload_version=stored needs no upcaster.
func TestMissingUpcasterFailsStart(t *testing.T) {
	engine := open(t, "")
	declareChain(t, engine, "Gapped", 3)
	if err := engine.RegisterUpcaster("Gapped", 2, wrapping("v3")); err != nil {
		t.Fatal(err)
	}
	runtime := newRuntime(t, engine)
	var c collector
	if err := runtime.Subscribe("reader", []string{"Gapped"}, "", c.handle); err != nil {
		t.Fatal(err)
	}
	err := runtime.Start()
	if !errors.Is(err, wharf.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "no upcaster lifts it from version 1 to 2") ||
		!strings.Contains(err.Error(), "'Gapped'") {
		t.Fatalf("start with a missing step: %v", err)
	}

	asStored := newRuntime(t, engine)
	if err := asStored.Subscribe("raw", []string{"Gapped"}, "payload_version=stored", c.handle); err != nil {
		t.Fatal(err)
	}
	if err := asStored.Start(); err != nil {
		t.Fatalf("start of a consumer taking payload_version=stored: %v", err)
	}
	if err := asStored.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := asStored.Subscribe("bad", []string{"Gapped"}, "payload_version=oldest", c.handle); !errors.Is(
		err, wharf.ErrInvalidArgument) || !strings.Contains(err.Error(), "payload_version") {
		t.Fatalf("a bad payload_version: %v", err)
	}
}

// An upcaster that fails in any way (an error, a panic, an error whose text cannot be read) fails
// only that fact: it becomes one dead letter "upcast-failed" naming the step and the failure,
// holding the stored payload, and its neighbours are delivered.
func TestFailingUpcasterGivesOneDeadLetterEach(t *testing.T) {
	engine := open(t, "partitions=1")
	declareChain(t, engine, "Brittle", 2)
	err := engine.RegisterUpcaster("Brittle", 1, func(p []byte) ([]byte, error) {
		switch string(p) {
		case "error":
			return nil, errors.New("field cents is missing")
		case "panic":
			panic("upcaster bug")
		case "explosive":
			return nil, explosiveError{}
		case "empty":
			return []byte("ignored"), errors.New("")
		}
		return append([]byte("lifted:"), p...), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	emitVersions(t, engine, "Brittle", []string{"a", "error", "b", "panic", "explosive", "empty", "c"},
		[]uint32{1, 1, 1, 1, 1, 1, 1})

	runtime := newRuntime(t, engine)
	var c collector
	if err := runtime.Subscribe("reader", []string{"Brittle"}, "", c.handle); err != nil {
		t.Fatal(err)
	}
	if err := runtime.Drain(); err != nil {
		t.Fatalf("drain: %v", err)
	}
	var delivered []string
	for _, f := range c.received() {
		delivered = append(delivered, string(f.Payload))
	}
	if got := strings.Join(delivered, " "); got != "lifted:a lifted:b lifted:c" {
		t.Fatalf("delivered %s, want the neighbours of the failures, lifted", got)
	}
	letters, err := engine.DeadLetters("reader")
	if err != nil {
		t.Fatal(err)
	}
	step := "upcast-failed: upcasting 'Brittle' from version 1 to 2: "
	wants := []struct{ payload, reason string }{
		{"error", "field cents is missing"},
		{"panic", "the upcaster panicked: upcaster bug"},
		{"explosive", "the upcaster returned a wharf_test.explosiveError whose Error method panicked"},
		{"empty", "the upcaster returned a *errors.errorString with an empty message"},
	}
	if len(letters) != len(wants) {
		t.Fatalf("%d dead letters, want %d: %+v", len(letters), len(wants), letters)
	}
	for i, want := range wants {
		letter := letters[i]
		if letter.Consumer != "reader" || string(letter.Fact.Payload) != want.payload ||
			letter.Fact.StoredVersion != 1 || !strings.HasPrefix(letter.Reason, step) ||
			!strings.HasSuffix(letter.Reason, want.reason) {
			t.Errorf("dead letter %d: %s %q (stored v%d) %q, want %q ending %q", i, letter.Consumer,
				letter.Fact.Payload, letter.Fact.StoredVersion, letter.Reason, want.payload,
				step+"..."+want.reason)
		}
	}
	if all, err := engine.DeadLetters(""); err != nil || len(all) != len(wants) {
		t.Fatalf("dead letters of every consumer: %d %v", len(all), err)
	}
}

// EmitWith's headers, version and delivery time come back on the delivered fact; so do a
// reaction's source and depth.
func TestEmitWithRoundTrips(t *testing.T) {
	engine := open(t, "partitions=2")
	declareChain(t, engine, "Mail", 2)
	if err := engine.DeclareTypes("Echo"); err != nil {
		t.Fatal(err)
	}
	if err := engine.RegisterUpcaster("Mail", 1, wrapping("v2")); err != nil {
		t.Fatal(err)
	}
	headers := []wharf.Header{{Name: "trace", Value: []byte("t-1")},
		{Name: "empty", Value: []byte{}}, {Name: "bin", Value: []byte{0, 1, 0xff}},
		{Name: "trace", Value: []byte("t-2")}}
	txn, _ := engine.Begin()
	if err := txn.EmitWith("Mail", []byte("k"), []byte("now"),
		wharf.EmitOptions{Headers: headers, Version: 1}); err != nil {
		t.Fatal(err)
	}
	immediateID, err := txn.Commit()
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().UnixMilli() + 300
	txn, _ = engine.Begin()
	if err := txn.EmitWith("Mail", []byte("k"), []byte("later"),
		wharf.EmitOptions{Headers: headers[:1], DeliverAtMs: at}); err != nil {
		t.Fatal(err)
	}
	scheduledID, err := txn.Commit()
	if err != nil {
		t.Fatal(err)
	}

	// Read back as stored, before anything is delivered: the delayed fact is not in the outbox yet.
	partition, _ := engine.PartitionOf([]byte("k"))
	facts, err := engine.ReadFacts(partition, 0, 10)
	if err != nil || len(facts) != 1 {
		t.Fatalf("read back %d facts %v, want the immediate one", len(facts), err)
	}
	// By name the last value of a repeated name; in order, every one.
	wantHeaders := map[string][]byte{"trace": []byte("t-2"), "empty": {}, "bin": {0, 1, 0xff}}
	if f := facts[0]; f.ID != immediateID || string(f.Payload) != "now" || f.Version != 1 ||
		f.StoredVersion != 1 || !reflect.DeepEqual(f.Headers, wantHeaders) || f.DeliverAtMs != 0 ||
		!reflect.DeepEqual(f.HeaderList, headers) {
		t.Fatalf("read back %+v", f)
	}

	runtime := newRuntime(t, engine)
	var mail, echo collector
	if err := runtime.Subscribe("mailer", []string{"Mail"}, "", mail.handle); err != nil {
		t.Fatal(err)
	}
	err = runtime.React("echo", []string{"Mail"}, "", func(f *wharf.Fact, effects *wharf.Txn) error {
		return effects.EmitWith("Echo", f.Key, f.Payload, wharf.EmitOptions{
			Headers: []wharf.Header{{Name: "of", Value: []byte(fmt.Sprint(f.ID))}}})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := runtime.Subscribe("echoes", []string{"Echo"}, "", echo.handle); err != nil {
		t.Fatal(err)
	}
	if err := runtime.Start(); err != nil {
		t.Fatal(err)
	}
	delivered := mail.waitFor(t, 2)
	echoes := echo.waitFor(t, 2)
	if err := runtime.Stop(); err != nil {
		t.Fatal(err)
	}
	now, later := delivered[0], delivered[1]
	if now.ID != immediateID || string(now.Payload) != "v2(now)" || now.Version != 2 ||
		now.StoredVersion != 1 || !reflect.DeepEqual(now.Headers, wantHeaders) ||
		now.DeliverAtMs != 0 || now.ScheduledID != 0 || now.Source != "" || now.Depth != 0 {
		t.Fatalf("immediate fact delivered as %+v", now)
	}
	if later.ID == scheduledID || later.ScheduledID != scheduledID || later.DeliverAtMs != at ||
		string(later.Payload) != "later" || later.Version != 2 || later.StoredVersion != 2 ||
		!reflect.DeepEqual(later.Headers, map[string][]byte{"trace": []byte("t-1")}) {
		t.Fatalf("delayed fact (scheduled id %d, due %d) delivered as %+v", scheduledID, at, later)
	}
	for i, e := range echoes {
		want := map[string][]byte{"of": []byte(fmt.Sprint(delivered[i].ID))}
		if e.Source != "echo" || e.Depth != 1 || !reflect.DeepEqual(e.Headers, want) ||
			!bytes.Equal(e.Payload, delivered[i].Payload) || e.Version != 1 || e.StoredVersion != 1 {
			t.Fatalf("echo %d delivered as %+v", i, e)
		}
	}
}

// Bad input is refused, named, and releases what it was handed.
func TestVersionsBadInput(t *testing.T) {
	engine := open(t, "")
	invalid := func(what string, err error, mentions string) {
		t.Helper()
		if !errors.Is(err, wharf.ErrInvalidArgument) || !strings.Contains(err.Error(), mentions) {
			t.Errorf("%s: %v, want ErrInvalidArgument mentioning %q", what, err, mentions)
		}
	}
	invalid("version 0", engine.DeclareType("Zero", 0), "version")
	invalid("a NUL in the name", engine.DeclareType("Bad\x00Name", 1), "NUL")
	if v, err := engine.DeclaredVersion("Never"); err != nil || v != 0 {
		t.Errorf("declared version of an undeclared type: %d %v, want 0", v, err)
	}
	if err := engine.DeclareType("Doc", 2); err != nil {
		t.Fatal(err)
	}
	invalid("a version going back", engine.DeclareType("Doc", 1), "version")
	if err := engine.DeclareType("Doc", 2); err != nil {
		t.Errorf("declaring the version it has: %v", err)
	}

	txn, _ := engine.Begin()
	emit := func(opts wharf.EmitOptions) error {
		return txn.EmitWith("Doc", []byte("k"), []byte("p"), opts)
	}
	invalid("a version above the declared one", emit(wharf.EmitOptions{Version: 3}), "3")
	invalid("a version below the first declared one", emit(wharf.EmitOptions{Version: 1}), "1")
	invalid("a negative delivery time", emit(wharf.EmitOptions{DeliverAtMs: -1}), "deliver_at_ms")
	invalid("a NUL in a header name",
		emit(wharf.EmitOptions{Headers: []wharf.Header{{Name: "a\x00b"}}}), "NUL")
	invalid("an empty header name", emit(wharf.EmitOptions{Headers: []wharf.Header{{Name: ""}}}),
		"header_names[0]")
	invalid("65 headers", emit(wharf.EmitOptions{Headers: make([]wharf.Header, 65)}), "64")
	if err := emit(wharf.EmitOptions{Version: 2}); err != nil {
		t.Errorf("emit at the declared version: %v", err)
	}
	txn.Abort()

	cells := wharf.LiveCells()
	lift := wrapping("v")
	invalid("an undeclared type", engine.RegisterUpcaster("Never", 1, lift), "Never")
	invalid("from version 0", engine.RegisterUpcaster("Doc", 0, lift), "0")
	invalid("from the declared version", engine.RegisterUpcaster("Doc", 2, lift), "2")
	invalid("a nil upcaster", engine.RegisterUpcaster("Doc", 1, nil), "nil")
	invalid("a NUL in the type", engine.RegisterUpcaster("Doc\x00", 1, lift), "NUL")
	if now := wharf.LiveCells(); now != cells {
		t.Errorf("failed registrations left %d upcasters unreleased", now-cells)
	}
	if err := engine.RegisterUpcaster("Doc", 1, lift); err != nil {
		t.Fatal(err)
	}
	invalid("the same step twice", engine.RegisterUpcaster("Doc", 1, lift), "1")
	if now := wharf.LiveCells(); now != cells+1 {
		t.Errorf("%d upcasters held after one registration, want 1", now-cells)
	}
	if err := engine.Close(); err != nil {
		t.Fatal(err)
	}
	if now := wharf.LiveCells(); now != cells {
		t.Errorf("Close left %d upcasters unreleased", now-cells)
	}
	if err := engine.DeclareType("Doc", 3); !errors.Is(err, wharf.ErrClosed) {
		t.Errorf("declare after Close: %v", err)
	}
	if err := engine.RegisterUpcaster("Doc", 1, lift); !errors.Is(err, wharf.ErrClosed) {
		t.Errorf("register after Close: %v", err)
	}
	if now := wharf.LiveCells(); now != cells {
		t.Errorf("a registration after Close left %d upcasters unreleased", now-cells)
	}
}

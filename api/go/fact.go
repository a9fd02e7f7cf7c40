package wharf

/*
#include <wharf.h>
*/
import "C"

import "unsafe"

// Fact is a delivered or read fact, copied out of the C ABI's borrowed view.
type Fact struct {
	ID        uint64 // strictly increasing over the database
	Type      string
	Key       []byte
	Payload   []byte
	Partition uint32
	Depth     uint32 // 0 for application commits; a reaction's emit: trigger's depth + 1
	Source    string // the consumer that emitted it; "" for application commits
	// The payload's version as delivered: in a handler, its type's declared version, the payload
	// lifted from StoredVersion by the upcasters (Engine.RegisterUpcaster), unless the consumer
	// takes payload_version=stored.
	Version       uint32
	StoredVersion uint32 // the payload's version as stored (the one its producer emitted)
	CommitMs      int64  // wall-clock ms its transaction committed
	DeliverAtMs   int64  // a delayed fact: when it was due (EmitOptions.DeliverAtMs); else 0
	ScheduledID   uint64 // a delayed fact: the id its commit returned; else 0
	// By name; of headers emitted under the same name, the last one's value.
	Headers map[string][]byte
	// Every header in emit order, repeated names included (Headers keeps one value per name).
	HeaderList []Header
	// In a handler: which delivery of the fact this is (1 first, +1 per redelivery to this
	// consumer, counted across restarts for a fact it keeps failing on); 0 for a fact read.
	Attempt uint32
}

func goBytes(p unsafe.Pointer, n C.size_t) []byte {
	if n == 0 {
		return []byte{}
	}
	return C.GoBytes(p, C.int(n))
}

// copyFact copies every field of a borrowed C fact.
func copyFact(f *C.wharf_fact) *Fact {
	var n C.size_t
	fact := &Fact{ID: uint64(C.wharf_fact_id(f))}
	typ := C.wharf_fact_type(f, &n)
	fact.Type = C.GoStringN(typ, C.int(n))
	key := C.wharf_fact_key(f, &n)
	fact.Key = goBytes(key, n)
	payload := C.wharf_fact_payload(f, &n)
	fact.Payload = goBytes(payload, n)
	fact.Partition = uint32(C.wharf_fact_partition(f))
	fact.Depth = uint32(C.wharf_fact_depth(f))
	source := C.wharf_fact_source(f, &n)
	fact.Source = C.GoStringN(source, C.int(n))
	fact.Version = uint32(C.wharf_fact_version(f))
	fact.StoredVersion = uint32(C.wharf_fact_stored_version(f))
	fact.CommitMs = int64(C.wharf_fact_commit_ms(f))
	fact.DeliverAtMs = int64(C.wharf_fact_deliver_at_ms(f))
	fact.ScheduledID = uint64(C.wharf_fact_scheduled_id(f))
	fact.Attempt = uint32(C.wharf_fact_attempt(f))
	count := int(C.wharf_fact_header_count(f))
	if count > 0 {
		fact.Headers = make(map[string][]byte, count)
		fact.HeaderList = make([]Header, 0, count)
		for i := 0; i < count; i++ {
			var name *C.char
			var nameLen, valueLen C.size_t
			var value unsafe.Pointer
			if C.wharf_fact_header(f, C.size_t(i), &name, &nameLen, &value, &valueLen) == C.WHARF_OK {
				header := Header{Name: C.GoStringN(name, C.int(nameLen)), Value: goBytes(value, valueLen)}
				fact.Headers[header.Name] = header.Value
				fact.HeaderList = append(fact.HeaderList, header)
			}
		}
	}
	return fact
}

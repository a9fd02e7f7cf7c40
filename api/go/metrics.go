package wharf

// Metrics (wharf.h METRICS): what the engine and its runtimes have done since it opened, as
// Prometheus names them.

/*
#include <stdlib.h>
#include <wharf.h>

wharf_status metrics_go(wharf_engine* engine, void* ctx);
*/
import "C"

import "unsafe"

// Metric is one sample: a name ("wharf_facts_committed_total", "wharf_commit_seconds_bucket"...),
// its label set in Prometheus' text form with values escaped (`{consumer="audit",partition="3"}`;
// "" when it has none) and its value.
type Metric struct {
	Name   string
	Labels string
	Value  float64
}

// Metrics takes one metrics snapshot: every sample, in the order of the Prometheus text (family
// by family; a histogram's _bucket samples, then _sum and _count). Counters restart at 0 at each
// Open. ErrClosed: the engine is closed.
func (e *Engine) Metrics() ([]Metric, error) {
	var samples []Metric
	err := e.withCell(func(m Metric) { samples = append(samples, m) },
		func(c *C.wharf_engine, cell unsafe.Pointer) C.wharf_status {
			return C.metrics_go(c, cell)
		})
	return samples, err
}

//export wharfGoMetric
func wharfGoMetric(ctx unsafe.Pointer, name, labels *C.char, value C.double) {
	cellValue(ctx).(func(Metric))(Metric{C.GoString(name), C.GoString(labels), float64(value)})
}

// MetricsText is one metrics snapshot as Prometheus text (exposition format 0.0.4, what the
// engine's metrics_listen serves), e.g. for an application's own /metrics handler.
func (e *Engine) MetricsText() (string, error) {
	var text *C.char
	err := e.with(func(c *C.wharf_engine) C.wharf_status { return C.wharf_metrics_text(c, &text) })
	if err != nil {
		return "", err
	}
	defer C.wharf_free(unsafe.Pointer(text))
	return C.GoString(text), nil
}

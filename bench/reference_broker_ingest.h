// W7-relay's references: the broker's own ingest rate, measured by a client of the broker's own
// library publishing the same facts as the same entries as the relay, as fast as a competent user
// would (bench/README.md says what was tried):
//   redis_pipelined  hiredis, XADD of the relay's fields with explicit ids "<fact id>-0" into one
//                    stream per partition, pipelined: each connection (thread) keeps two windows
//                    of kW7RedisWindow commands in flight
//   nats_async       nats.c, js_PublishMsgAsync of the relay's messages (payload as data, the
//                    relay's headers with Nats-Msg-Id) on one subject per partition, up to
//                    kW7NatsMaxPending unacknowledged per connection, then js_PublishAsyncComplete
// Partition p goes to connection p % connections; each connection publishes its partitions' facts
// in turns, in id order within each partition. Every publish must be acknowledged as stored.
#pragma once

#include <string>

#include "bench/w7_shape.h"

namespace wharf::bench {

inline constexpr int kW7RedisConnections = 16;
inline constexpr size_t kW7RedisWindow = 1024;  // the relay's default in_flight
inline constexpr int kW7NatsConnections = 1;
inline constexpr int64_t kW7NatsMaxPending = 4096;

// Publishes every fact of `facts` into the broker at `url` (redis://127.0.0.1:PORT or
// nats://127.0.0.1:PORT; for NATS the stream must exist) with `connections` connections, each
// on a thread of its own. Sets *seconds (first publish to last acknowledgement). Returns "" or
// the first error.
std::string IngestRedisPipelined(const std::string& host, int port, const W7Facts& facts,
                                 int connections, double* seconds);
std::string IngestNatsAsync(const std::string& url, const W7Facts& facts, int connections,
                            double* seconds);

// What the references are, for the report.
std::string DescribeW7Reference(W7Broker broker);

}  // namespace wharf::bench

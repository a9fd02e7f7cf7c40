// Where `wharf metrics` and `wharf top` get a metrics snapshot (wharf/metrics.h): from the engine
// that holds the database, over its admin socket (wharf/admin_client.h); or, when no engine
// answers, from what the database itself records, read as a secondary (wharf/inspect.h).
//
// Thread safety: none needed (the CLI is single-threaded).
#pragma once

#include <memory>
#include <string>

#include "tools/cli/commands.h"
#include "wharf/admin_client.h"
#include "wharf/metrics.h"

namespace wharf::cli {

// Connects to the engine serving the admin socket of context.db (or --admin-socket). Returns
// kExitOk with *client set when one answers, or with *client null and *why saying why none did
// (no engine holds the database, or it serves no socket there: not an error by itself). Returns an
// exit code, the error printed, when the socket is served by the engine of another database or
// cannot be used at all, or when the engine there is busy or does not answer within --timeout
// (kExitTryAgain).
int ConnectEngine(const Context& context, std::unique_ptr<AdminClient>* client, std::string* why);

// A snapshot that is not live (live=false), from the database's own records: the last LSN
// written (durable_lsn 0: a secondary cannot know it), per consumer its positions, lag in facts
// and seconds (from the oldest undelivered fact's commit time), the retry it is stuck on and its
// last error as stored; retention losses as `dropped`; the directory's bytes. Every counter and
// histogram is 0. Returns an exit code, the error printed (no database at the path: 2).
int ReadStoredMetrics(const Context& context, MetricsSnapshot* snapshot);

}  // namespace wharf::cli

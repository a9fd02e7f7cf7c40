// Reads of state: a transaction's (from its snapshot, overlaid with its own writes, recorded for
// validation) and the engine's durable scans. Txn, Effects and Engine reach them from
// engine/core/engine.cc and engine/runtime/effects.cc.
//
// Scans read their snapshot in chunks (kScanChunkRows rows or kScanChunkBytes bytes at most),
// each under the engine's read guard, and call the caller's RowFn outside it: a callback may take
// as long as it likes, even close the engine (the scan then ends with Closed), and memory does not
// grow with the table.
//
// Thread safety: as a Txn (one thread at a time per transaction); DurableScan is thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "engine/commit/txn_rep.h"
#include "wharf/engine.h"

namespace wharf::internal {

class EngineCore;

// Txn::Get: the transaction's own last write of the key if any (not recorded: it depends on no
// other commit), else the value in its snapshot (taken now if it has none), recorded.
Status TxnGet(EngineCore* core, TxnRep* rep, std::string_view table, std::string_view key,
              std::string* value);
// Txn::Scan: the snapshot's rows merged with the transaction's own writes in the range; records
// the range visited.
Status TxnScan(EngineCore* core, TxnRep* rep, std::string_view table, const KeyRange& range,
               size_t limit, const RowFn& row, ScanResult* result);
// Engine::Scan: a fresh snapshot, once every group it may see is acknowledged.
Status DurableScan(EngineCore* core, std::string_view table, const KeyRange& range, size_t limit,
                   const RowFn& row, ScanResult* result);

}  // namespace wharf::internal

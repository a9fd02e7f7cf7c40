// TextfileWriter: the engine option `metrics_textfile`, node-exporter's textfile convention. The
// Prometheus text of a snapshot is written to `PATH.tmp.<pid>` in PATH's directory, fsynced, and
// renamed over PATH, so a reader (node-exporter's collector) sees the old file or the new one,
// never a part. Written at Start, every `interval_ms`, and at Stop.
//
// Failures (a directory removed or read-only, a full disk, the engine's snapshot failing) never
// reach a commit: each kind (step and errno) is reported once on the log (stderr by default, as
// the engine's other background problems), the temp file is removed, and the next interval tries
// again; after a success, a new failure is reported again.
//
// Ownership: borrows `engine`, which must outlive Stop() (EngineCore stops it in Close() while
// the engine is still open, for the last write). Thread safety: Start/Stop from one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "engine/base/mutex.h"
#include "engine/core/engine_service.h"
#include "wharf/engine.h"
#include "wharf/status.h"

namespace wharf::internal {

class TextfileWriter : public EngineService {
 public:
  using Log = std::function<void(const std::string& line)>;

  // Checks that PATH's directory exists (else InvalidArgument naming the option and the path),
  // writes once and starts the thread. An empty `log` writes to stderr.
  static Status Start(Engine* engine, const std::string& path, uint32_t interval_ms, Log log,
                      std::unique_ptr<TextfileWriter>* writer);
  ~TextfileWriter() override;
  TextfileWriter(const TextfileWriter&) = delete;
  TextfileWriter& operator=(const TextfileWriter&) = delete;

  // Writes a last time and joins the thread. Idempotent.
  void Stop();
  void OnClose(CloseStep step) override {
    if (step == CloseStep::kEngineOpen) Stop();
  }

  // Writes now (the thread's step; tests call it). OK, or the failure (already logged).
  Status WriteOnce();

  uint64_t writes() const;  // successful writes so far

 private:
  TextfileWriter() = default;
  void Run();
  void Report(const std::string& kind, const std::string& message);

  Engine* engine_ = nullptr;
  std::string path_;
  std::string temp_path_;
  uint32_t interval_ms_ = 0;
  Log log_;

  mutable Mutex mutex_;
  CondVar wake_;
  bool stopping_ WHARF_GUARDED_BY(mutex_) = false;
  uint64_t writes_ WHARF_GUARDED_BY(mutex_) = 0;
  // Failure kinds logged since the last success.
  std::set<std::string> reported_ WHARF_GUARDED_BY(mutex_);
  Mutex write_mutex_;  // one write at a time (the thread, Stop, tests)
  std::thread thread_;
};

}  // namespace wharf::internal

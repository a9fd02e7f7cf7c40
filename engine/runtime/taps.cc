#include "engine/runtime/taps.h"

#include <exception>

#include "engine/base/assert.h"
#include "engine/base/exception_text.h"
#include "engine/base/thread_name.h"
#include "engine/core/engine_core.h"
#include "engine/runtime/upcast_batch.h"

namespace wharf::internal {

void Taps::Start(const std::vector<std::unique_ptr<Consumer>>& consumers) {
  WHARF_ASSERT(taps_.empty());
  for (const auto& consumer : consumers) {
    if (consumer->kind != ConsumerKind::kTap) continue;
    WHARF_ASSERT(consumer->options.tap_inbox_facts >= 1);  // checked at registration
    auto tap = std::make_unique<Tap>();
    tap->consumer = consumer.get();
    taps_.push_back(std::move(tap));
  }
  for (const auto& tap : taps_) {
    tap->thread = std::thread([this, t = tap.get()] {
      io::NameThisThread("wharf-tap");
      Loop(t);
    });
  }
}

void Taps::Stop() {
  stopping_.store(true);
  for (const auto& tap : taps_) {
    tap->wake.signal();
    if (tap->thread.joinable()) tap->thread.join();
  }
}

void Taps::Dispatch(const std::vector<FactPtr>& facts) {
  for (const auto& tap : taps_) {
    if (tap->severed.load()) continue;
    for (const FactPtr& fact : facts) {
      if (!tap->consumer->Takes(*fact)) continue;
      if (tap->queued.load() >= tap->consumer->options.tap_inbox_facts) {
        tap->severed.store(true);  // never grow memory for a tap that cannot keep up
        break;
      }
      tap->queued.fetch_add(1);
      tap->inbox.enqueue(fact);
    }
    tap->wake.signal();
  }
}

bool Taps::RunQueued(Tap* tap) {
  FactPtr stored;
  const std::shared_ptr<const FactTypes> types = core_->types();
  while (!tap->severed.load() && tap->inbox.try_dequeue(stored)) {
    tap->queued.fetch_sub(1);
    FactPtr fact;
    std::string upcast_error;
    if (!UpcastBatch::LiftOne(*types, *tap->consumer, stored, &fact, &upcast_error)) {
      // At most once: the fact is not delivered to this tap.
      (*trace_)(TraceEvent::Level::kWarning, "upcast-failed", tap->consumer, stored->id,
                std::move(upcast_error));
      continue;
    }
    try {
      tap->consumer->tap(*fact);
    } catch (const std::exception& e) {
      (*trace_)(TraceEvent::Level::kWarning, "handler-failed", tap->consumer, fact->id,
                std::string("tap handler threw: ") + ExceptionText(e));
    } catch (...) {
      (*trace_)(TraceEvent::Level::kWarning, "handler-failed", tap->consumer, fact->id,
                "tap handler threw a non-standard exception");
    }
  }
  return !tap->severed.load();
}

void Taps::Loop(Tap* tap) {
  while (!stopping_.load()) {
    tap->wake.wait(100'000);
    if (RunQueued(tap)) continue;
    FactPtr dropped;
    while (tap->inbox.try_dequeue(dropped)) {
    }
    (*trace_)(TraceEvent::Level::kWarning, "tap-severed", tap->consumer, 0,
              "tap fell behind by more than " +
                  std::to_string(tap->consumer->options.tap_inbox_facts) +
                  " facts and was severed");
    if (tap->consumer->options.on_severed) tap->consumer->options.on_severed();
    return;
  }
}

}  // namespace wharf::internal

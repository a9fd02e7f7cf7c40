// Inboxes (wharf.h INBOXES): an asynchronous subscriber whose deliveries the runtime's workers
// queue, and a caller's event loop takes in batches, woken by an eventfd; and completions in
// batches (wharf_deliveries_done). Built on the public C ABI of asynchronous subscribers
// (wharf_runtime_subscribe_async, wharf_delivery_done): an inbox is that subscriber's handler.
//
// Thread safety: a worker pushes under the inbox's mutex; the caller's one thread takes. The
// eventfd is written when a push finds the queue empty and drained when a take empties it, both
// under the mutex.
// Invariants: the eventfd's counter is non-zero exactly while `queued` is non-empty; an entry's
// view points into the entry itself, which stays at one address (unique_ptr) until it is dropped.
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "api/c/c_common.h"
#include "wharf.h"

namespace {

// One delivery's copy of its fact (the wharf_fact is valid only during the handler call).
struct Entry {
  wharf_inbox_fact view{};
  std::string type, key, payload, source;
  std::vector<std::string> header_names, header_values;
  std::vector<const char*> header_name_ptrs;
  std::vector<const void*> header_value_ptrs;
  std::vector<size_t> header_value_lens;
};

std::string Bytes(const void* data, size_t len) {
  return len == 0 ? std::string() : std::string(static_cast<const char*>(data), len);
}

std::unique_ptr<Entry> CopyFact(const wharf_fact* fact, wharf_delivery delivery) {
  auto entry = std::make_unique<Entry>();
  size_t len = 0;
  const char* type = wharf_fact_type(fact, &len);
  entry->type = Bytes(type, len);
  const void* key = wharf_fact_key(fact, &len);
  entry->key = Bytes(key, len);
  const void* payload = wharf_fact_payload(fact, &len);
  entry->payload = Bytes(payload, len);
  const char* source = wharf_fact_source(fact, &len);
  entry->source = Bytes(source, len);
  const size_t header_count = wharf_fact_header_count(fact);
  for (size_t i = 0; i < header_count; ++i) {
    const char* name = nullptr;
    const void* value = nullptr;
    size_t name_len = 0, value_len = 0;
    if (wharf_fact_header(fact, i, &name, &name_len, &value, &value_len) != WHARF_OK) break;
    entry->header_names.push_back(Bytes(name, name_len));
    entry->header_values.push_back(Bytes(value, value_len));
  }
  for (size_t i = 0; i < entry->header_names.size(); ++i) {
    entry->header_name_ptrs.push_back(entry->header_names[i].c_str());
    entry->header_value_ptrs.push_back(entry->header_values[i].data());
    entry->header_value_lens.push_back(entry->header_values[i].size());
  }
  wharf_inbox_fact& v = entry->view;
  v.delivery = delivery;
  v.id = wharf_fact_id(fact);
  v.type = entry->type.c_str();
  v.type_len = entry->type.size();
  v.key = entry->key.data();
  v.key_len = entry->key.size();
  v.payload = entry->payload.data();
  v.payload_len = entry->payload.size();
  v.source = entry->source.c_str();
  v.source_len = entry->source.size();
  v.partition = wharf_fact_partition(fact);
  v.depth = wharf_fact_depth(fact);
  v.version = wharf_fact_version(fact);
  v.stored_version = wharf_fact_stored_version(fact);
  v.attempt = wharf_fact_attempt(fact);
  v.commit_ms = wharf_fact_commit_ms(fact);
  v.deliver_at_ms = wharf_fact_deliver_at_ms(fact);
  v.scheduled_id = wharf_fact_scheduled_id(fact);
  v.header_count = entry->header_names.size();
  if (v.header_count > 0) {
    v.header_names = entry->header_name_ptrs.data();
    v.header_values = entry->header_value_ptrs.data();
    v.header_value_lens = entry->header_value_lens.data();
  }
  return entry;
}

}  // namespace

struct wharf_inbox {
  explicit wharf_inbox(int fd) : event_fd(fd) {}
  ~wharf_inbox() { ::close(event_fd); }
  wharf_inbox(const wharf_inbox&) = delete;
  wharf_inbox& operator=(const wharf_inbox&) = delete;

  const int event_fd;
  std::mutex mutex;
  std::vector<std::unique_ptr<Entry>> queued;  // guarded by mutex
  bool freed = false;                          // guarded by mutex: wharf_inbox_free ran
  // The caller's last batch (its thread only): the entries and their views.
  std::vector<std::unique_ptr<Entry>> taken;
  std::vector<wharf_inbox_fact> batch;
};

namespace {

using InboxPtr = std::shared_ptr<wharf_inbox>;

// The inboxes the caller holds (created, not yet freed), so a stale or made-up pointer is refused
// rather than dereferenced.
struct LiveInboxes {
  std::mutex mutex;
  std::unordered_map<const wharf_inbox*, InboxPtr> inboxes;
};

LiveInboxes& Live() {
  static LiveInboxes* live = new LiveInboxes();  // never destroyed: a worker may race exit
  return *live;
}

InboxPtr LookupInbox(const wharf_inbox* inbox) {
  LiveInboxes& live = Live();
  std::lock_guard lock(live.mutex);
  auto it = live.inboxes.find(inbox);
  return it == live.inboxes.end() ? nullptr : it->second;
}

void Signal(int fd) {
  const uint64_t one = 1;
  while (::write(fd, &one, sizeof one) < 0 && errno == EINTR) {
  }
}

void Drain(int fd) {
  uint64_t count = 0;
  while (::read(fd, &count, sizeof count) < 0 && errno == EINTR) {
  }
}

// The subscriber's handler, on a worker thread: queue the delivery, wake the loop if it was idle.
wharf_outcome InboxHandler(void* ctx, const wharf_fact* fact, wharf_delivery delivery) {
  wharf_inbox& inbox = **static_cast<InboxPtr*>(ctx);
  std::unique_ptr<Entry> entry = CopyFact(fact, delivery);
  std::lock_guard lock(inbox.mutex);
  if (inbox.freed) {
    wharf_handler_reason(fact, "the inbox was freed");
    return WHARF_RETRY;
  }
  inbox.queued.push_back(std::move(entry));
  if (inbox.queued.size() == 1) Signal(inbox.event_fd);
  return WHARF_PENDING;
}

void DestroyInboxRef(void* ctx) { delete static_cast<InboxPtr*>(ctx); }

}  // namespace

extern "C" {

wharf_status wharf_runtime_subscribe_inbox(wharf_runtime* rt, const char* name,
                                           const char* const* types, size_t n_types,
                                           const char* options, wharf_inbox** out) {
  constexpr const char* kFunction = "wharf_runtime_subscribe_inbox";
  try {
    if (out == nullptr)
      return wharf::capi::SetError(kFunction, WHARF_INVALID_ARGUMENT, "out is NULL");
    const int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0) {
      return wharf::capi::SetError(kFunction, WHARF_IO_ERROR,
                                   std::string("eventfd: ") + std::strerror(errno));
    }
    auto inbox = std::make_shared<wharf_inbox>(fd);
    // The runtime's reference: released by the registration's destroy callback (also when the
    // registration fails).
    auto* runtime_ref = new InboxPtr(inbox);
    const wharf_status status = wharf_runtime_subscribe_async(
        rt, name, types, n_types, options, InboxHandler, runtime_ref, DestroyInboxRef);
    if (status != WHARF_OK) return status;  // its message names the argument
    {
      LiveInboxes& live = Live();
      std::lock_guard lock(live.mutex);
      live.inboxes.emplace(inbox.get(), inbox);
    }
    *out = inbox.get();
    return WHARF_OK;
  } catch (...) {
    return wharf::capi::SetError(kFunction, WHARF_INTERNAL, wharf::capi::CaughtText());
  }
}

wharf_status wharf_inbox_fd(wharf_inbox* inbox, int* fd) {
  constexpr const char* kFunction = "wharf_inbox_fd";
  if (fd == nullptr) return wharf::capi::SetError(kFunction, WHARF_INVALID_ARGUMENT, "fd is NULL");
  InboxPtr live = LookupInbox(inbox);
  if (live == nullptr) {
    return wharf::capi::SetError(kFunction, WHARF_INVALID_ARGUMENT, "inbox is not a live inbox");
  }
  *fd = live->event_fd;
  return WHARF_OK;
}

wharf_status wharf_inbox_take(wharf_inbox* inbox, size_t max, const wharf_inbox_fact** facts,
                              size_t* count) {
  constexpr const char* kFunction = "wharf_inbox_take";
  try {
    if (facts == nullptr || count == nullptr) {
      return wharf::capi::SetError(kFunction, WHARF_INVALID_ARGUMENT, "facts or count is NULL");
    }
    InboxPtr live = LookupInbox(inbox);
    if (live == nullptr) {
      return wharf::capi::SetError(kFunction, WHARF_INVALID_ARGUMENT, "inbox is not a live inbox");
    }
    live->taken.clear();
    {
      std::lock_guard lock(live->mutex);
      const size_t n = max == 0 ? live->queued.size() : std::min(max, live->queued.size());
      auto end = live->queued.begin() + static_cast<std::ptrdiff_t>(n);
      std::move(live->queued.begin(), end, std::back_inserter(live->taken));
      live->queued.erase(live->queued.begin(), end);
      if (n > 0 && live->queued.empty()) Drain(live->event_fd);
    }
    live->batch.clear();
    for (const auto& entry : live->taken) live->batch.push_back(entry->view);
    *facts = live->batch.empty() ? nullptr : live->batch.data();
    *count = live->batch.size();
    return WHARF_OK;
  } catch (...) {
    return wharf::capi::SetError(kFunction, WHARF_INTERNAL, wharf::capi::CaughtText());
  }
}

void wharf_inbox_free(wharf_inbox* inbox) {
  if (inbox == nullptr) return;
  InboxPtr live;
  {
    LiveInboxes& table = Live();
    std::lock_guard lock(table.mutex);
    auto it = table.inboxes.find(inbox);
    if (it == table.inboxes.end()) return;
    live = std::move(it->second);
    table.inboxes.erase(it);
  }
  std::vector<std::unique_ptr<Entry>> left;
  {
    std::lock_guard lock(live->mutex);
    live->freed = true;
    left.swap(live->queued);
    if (!left.empty()) Drain(live->event_fd);
  }
  for (const auto& entry : left) {
    // Refused (not pending any more) is fine: the fact is delivered again either way.
    (void)wharf_delivery_done(entry->view.delivery, WHARF_RETRY, "the inbox was freed");
  }
  live->taken.clear();
  live->batch.clear();
}

wharf_status wharf_deliveries_done(const wharf_delivery_result* results, size_t count,
                                   size_t* refused) {
  constexpr const char* kFunction = "wharf_deliveries_done";
  if (results == nullptr && count > 0) {
    return wharf::capi::SetError(kFunction, WHARF_INVALID_ARGUMENT, "results is NULL");
  }
  size_t refused_count = 0;
  for (size_t i = 0; i < count; ++i) {
    const wharf_delivery_result& r = results[i];
    if (wharf_delivery_done(r.delivery, static_cast<wharf_outcome>(r.outcome), r.reason) !=
        WHARF_OK) {
      ++refused_count;
    }
  }
  if (refused != nullptr) *refused = refused_count;
  return WHARF_OK;
}

}  // extern "C"

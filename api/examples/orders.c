/*
** orders.c: Wharf from C. Commits orders together with OrderPlaced facts, projects them into a
** state table exactly once, notifies a subscriber at least once, and reads the projection back.
**
**   cc -std=c99 orders.c $(pkg-config --cflags --libs wharf) -o orders && ./orders /tmp/orders-db
**
** Running it again on the same database re-commits the same orders (puts overwrite) and emits
** three more facts; the projection is keyed by order id, so the totals it prints stay the same.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wharf.h>

typedef struct order {
  const char* id;
  const char* customer;
  long cents;
} order;

static const order kOrders[] = {
    {"o-1", "alice", 1250},
    {"o-2", "bob", 700},
    {"o-3", "alice", 2500},
};
enum { kOrderCount = sizeof kOrders / sizeof kOrders[0] };

static int ok(wharf_status status, const char* what) {
  if (status == WHARF_OK) return 1;
  fprintf(stderr, "orders: %s failed: %s (%s)\n", what, wharf_errstr(status), wharf_last_error());
  return 0;
}

/* Copies a byte view into a NUL-terminated buffer (payloads are bytes, not C strings). */
static void copy_text(char* out, size_t out_size, const void* data, size_t len) {
  if (len >= out_size) len = out_size - 1;
  memcpy(out, data, len);
  out[len] = '\0';
}

/* Projection (worker threads): order-totals[order id] = cents, committed together with the
** consumer's cursor, so a crash never applies an order twice nor loses one. */
static wharf_outcome project_order(void* ctx, const wharf_fact* fact, wharf_txn* effects) {
  char payload[128];
  char* cents;
  size_t len = 0;
  const void* bytes = wharf_fact_payload(fact, &len);
  (void)ctx;
  copy_text(payload, sizeof payload, bytes, len); /* "o-1:1250" */
  cents = strchr(payload, ':');
  if (cents == NULL) return WHARF_REJECTED; /* malformed: dead letter, move on */
  *cents++ = '\0';
  if (wharf_txn_put(effects, "order-totals", payload, strlen(payload), cents, strlen(cents)) !=
      WHARF_OK) {
    return WHARF_FAILED;
  }
  return WHARF_HANDLED;
}

/* Subscriber (worker threads): a side effect at the edge, delivered at least once. A real one
** would send an e-mail, keyed by the fact id so that a redelivery is recognized. */
static wharf_outcome notify_customer(void* ctx, const wharf_fact* fact) {
  char customer[64];
  size_t len = 0;
  const void* key = wharf_fact_key(fact, &len);
  (void)ctx;
  copy_text(customer, sizeof customer, key, len);
  printf("notify: fact %llu, order placed by %s\n", (unsigned long long)wharf_fact_id(fact),
         customer);
  return WHARF_HANDLED;
}

static int place_orders(wharf_engine* engine) {
  int i;
  for (i = 0; i < kOrderCount; ++i) {
    const order* o = &kOrders[i];
    char payload[128];
    wharf_txn* txn = NULL;
    uint64_t fact_id = 0;
    snprintf(payload, sizeof payload, "%s:%ld", o->id, o->cents);
    if (!ok(wharf_txn_begin(engine, &txn), "wharf_txn_begin")) return 0;
    /* The order row and its fact commit together, or not at all. */
    if (!ok(wharf_txn_put(txn, "orders", o->id, strlen(o->id), payload, strlen(payload)),
            "wharf_txn_put") ||
        !ok(wharf_txn_emit(txn, "OrderPlaced", o->customer, strlen(o->customer), payload,
                           strlen(payload)),
            "wharf_txn_emit")) {
      wharf_txn_abort(txn);
      return 0;
    }
    if (!ok(wharf_txn_commit(txn, &fact_id), "wharf_txn_commit")) return 0;
    printf("committed order %s as fact %llu\n", o->id, (unsigned long long)fact_id);
  }
  return 1;
}

static int deliver(wharf_engine* engine) {
  static const char* const types[] = {"OrderPlaced"};
  wharf_runtime* rt = NULL;
  int good;
  if (!ok(wharf_runtime_new(engine, "workers=2", &rt), "wharf_runtime_new")) return 0;
  good = ok(wharf_runtime_project(rt, "order-totals", types, 1, project_order, NULL),
            "wharf_runtime_project") &&
         ok(wharf_runtime_subscribe(rt, "order-mailer", types, 1, notify_customer, NULL),
            "wharf_runtime_subscribe") &&
         ok(wharf_runtime_start(rt), "wharf_runtime_start") &&
         ok(wharf_runtime_drain(rt), "wharf_runtime_drain") &&
         ok(wharf_runtime_stop(rt), "wharf_runtime_stop");
  wharf_runtime_free(rt);
  return good;
}

static int report(wharf_engine* engine) {
  long total = 0;
  int projected = 0;
  int i;
  for (i = 0; i < kOrderCount; ++i) {
    void* value = NULL;
    size_t len = 0;
    char text[32];
    wharf_status status =
        wharf_get(engine, "order-totals", kOrders[i].id, strlen(kOrders[i].id), &value, &len);
    if (status == WHARF_NOT_FOUND) continue;
    if (!ok(status, "wharf_get")) return 0;
    copy_text(text, sizeof text, value, len);
    wharf_free(value);
    total += strtol(text, NULL, 10);
    ++projected;
  }
  printf("orders: %d orders projected, total %ld cents\n", projected, total);
  return projected == kOrderCount;
}

int main(int argc, char** argv) {
  static const char* const types[] = {"OrderPlaced"};
  const char* path = argc > 1 ? argv[1] : "orders-db";
  wharf_engine* engine = NULL;
  int good;
  printf("wharf %s\n", wharf_version());
  if (!ok(wharf_open(path, "partitions=4", &engine), "wharf_open")) return 1;
  good = ok(wharf_declare_types(engine, types, 1), "wharf_declare_types") && place_orders(engine) &&
         deliver(engine) && report(engine);
  if (!ok(wharf_close(engine), "wharf_close")) good = 0;
  return good ? 0 : 1;
}

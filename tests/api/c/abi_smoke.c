/*
** abi_smoke.c: compiled as strict C99 (-std=c99 -pedantic -Wstrict-prototypes -Werror) against
** the shared library only, to prove that wharf.h is valid C and that the ABI works from C: version
** macros and their run-time twins, error reporting, a commit read back, a projection, facts read
** back with their accessors, cursors, a scan and wharf_transact.
** Usage: c_abi_smoke DIRECTORY (must not hold a database).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wharf.h>

static int failures = 0;

#define EXPECT(cond)                                                                           \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      fprintf(stderr, "%s:%d: EXPECT(%s) failed; last error: %s\n", __FILE__, __LINE__, #cond, \
              wharf_last_error());                                                             \
      ++failures;                                                                              \
    }                                                                                          \
  } while (0)

#if !WHARF_CHECK_VERSION(0, 1, 0)
#error "WHARF_CHECK_VERSION(0, 1, 0) is false for version 0.1.0"
#endif

typedef struct counter {
  int facts;
  uint64_t last_id;
} counter;

static wharf_outcome count_fact(void* ctx, const wharf_fact* fact, wharf_txn* effects) {
  counter* c = (counter*)ctx;
  size_t len = 0;
  const void* payload = wharf_fact_payload(fact, &len);
  if (wharf_txn_put(effects, "seen", payload, len, "1", 1) != WHARF_OK) return WHARF_FAILED;
  /* Only one worker runs this consumer's single partition at a time (partitions=1). */
  c->facts++;
  c->last_id = wharf_fact_id(fact);
  return WHARF_HANDLED;
}

static void read_fact(void* ctx, const wharf_fact* fact) {
  counter* c = (counter*)ctx;
  size_t type_len = 0;
  const char* type = wharf_fact_type(fact, &type_len);
  if (type != NULL && type_len == 4 && strcmp(type, "Ping") == 0) c->facts++;
  c->last_id = wharf_fact_id(fact);
}

static void test_version(void) {
  EXPECT(strcmp(wharf_version(), WHARF_VERSION) == 0);
  EXPECT(strcmp(WHARF_VERSION, WHARF_EXPECTED_VERSION) == 0); /* header vs project(VERSION) */
  EXPECT(wharf_version_number() == WHARF_VERSION_NUMBER);
  EXPECT(strcmp(wharf_errstr(WHARF_OK), "OK") == 0);
  EXPECT(strcmp(wharf_errstr(WHARF_CLOSED), "closed") == 0);
  EXPECT(strcmp(wharf_errstr((wharf_status)99), "unknown status") == 0);
}

static void test_errors(void) {
  wharf_engine* engine = NULL;
  EXPECT(wharf_open(NULL, NULL, &engine) == WHARF_INVALID_ARGUMENT);
  EXPECT(strstr(wharf_last_error(), "path") != NULL);
  EXPECT(engine == NULL);
  EXPECT(wharf_close(NULL) == WHARF_OK);
  wharf_txn_abort(NULL);
  wharf_runtime_free(NULL);
  wharf_free(NULL);
}

static int count_row(void* ctx, const void* key, size_t key_len, const void* value,
                     size_t value_len) {
  (void)key;
  (void)key_len;
  (void)value;
  (void)value_len;
  ((counter*)ctx)->facts++;
  return 0;
}

/* wharf_transact's function: appends "+" to t/k. */
static wharf_status append_plus(void* ctx, wharf_txn* txn) {
  char buffer[64];
  void* value = NULL;
  size_t len = 0;
  wharf_status status = wharf_txn_get(txn, "t", "k", 1, &value, &len);
  (void)ctx;
  if (status != WHARF_OK) return status;
  if (len + 1 > sizeof(buffer)) len = sizeof(buffer) - 1;
  memcpy(buffer, value, len);
  wharf_free(value);
  buffer[len] = '+';
  return wharf_txn_put(txn, "t", "k", 1, buffer, len + 1);
}

static void test_roundtrip(const char* dir) {
  static const char* const types[] = {"Ping"};
  wharf_engine* engine = NULL;
  wharf_runtime* rt = NULL;
  wharf_txn* txn = NULL;
  counter projected = {0, 0};
  counter read = {0, 0};
  uint64_t last_id = 0;
  uint64_t cursor = 0;
  void* value = NULL;
  size_t value_len = 0;
  size_t count = 0;
  int i;

  if (wharf_open(dir, "partitions=1", &engine) != WHARF_OK) {
    fprintf(stderr, "wharf_open(%s): %s\n", dir, wharf_last_error());
    ++failures;
    return;
  }
  EXPECT(wharf_declare_types(engine, types, 1) == WHARF_OK);
  for (i = 0; i < 3; ++i) {
    char payload[16];
    sprintf(payload, "p-%d", i);
    EXPECT(wharf_txn_begin(engine, &txn) == WHARF_OK);
    EXPECT(wharf_txn_put(txn, "t", "k", 1, payload, strlen(payload)) == WHARF_OK);
    EXPECT(wharf_txn_emit(txn, "Ping", NULL, 0, payload, strlen(payload)) == WHARF_OK);
    EXPECT(wharf_txn_commit(txn, &last_id) == WHARF_OK);
  }
  EXPECT(last_id >= 3);
  EXPECT(wharf_get(engine, "t", "k", 1, &value, &value_len) == WHARF_OK);
  EXPECT(value_len == 3 && memcmp(value, "p-2", 3) == 0);
  wharf_free(value);

  {
    counter rows = {0, 0};
    uint8_t more = 1;
    EXPECT(wharf_transact(engine, append_plus, NULL, "attempts_max=4", NULL) == WHARF_OK);
    EXPECT(wharf_get(engine, "t", "k", 1, &value, &value_len) == WHARF_OK);
    EXPECT(value_len == 4 && memcmp(value, "p-2+", 4) == 0);
    wharf_free(value);
    EXPECT(wharf_scan(engine, "t", "k", 1, NULL, 0, NULL, 0, 10, count_row, &rows, &count, &more) ==
           WHARF_OK);
    EXPECT(rows.facts == 1 && count == 1 && more == 0);
  }

  EXPECT(wharf_read_facts(engine, 0, 0, 100, read_fact, &read, &count) == WHARF_OK);
  EXPECT(count == 3 && read.facts == 3 && read.last_id == last_id);

  EXPECT(wharf_runtime_new(engine, "workers=1", &rt) == WHARF_OK);
  EXPECT(wharf_runtime_project(rt, "pings", types, 1, count_fact, &projected) == WHARF_OK);
  EXPECT(wharf_runtime_drain(rt) == WHARF_OK);
  EXPECT(projected.facts == 3 && projected.last_id == last_id);
  wharf_runtime_free(rt);
  EXPECT(wharf_cursor_get(engine, "pings", 0, &cursor) == WHARF_OK);
  EXPECT(cursor == last_id);
  EXPECT(wharf_get(engine, "seen", "p-1", 3, &value, &value_len) == WHARF_OK);
  wharf_free(value);
  EXPECT(wharf_close(engine) == WHARF_OK);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s DIRECTORY\n", argv[0]);
    return 2;
  }
  test_version();
  test_errors();
  test_roundtrip(argv[1]);
  if (failures != 0) {
    fprintf(stderr, "abi_smoke: %d failure(s)\n", failures);
    return 1;
  }
  printf("abi_smoke: OK (wharf %s)\n", wharf_version());
  return 0;
}

/*
** c_abi_bench: W1-append and W8-slow-subscriber through the C ABI alone (wharf.h and
** libwharf.so), the reference point for the language bindings (Python, Node, Go): a binding's
** figure of the same workload in the same run, divided by this one, is what the binding costs.
**
**   c_abi_bench w1 [--producers 16] [--batch 10] [--seconds 3] [--dir DIR]
**   c_abi_bench w8 [--facts 200000] [--keys 10000] [--partitions 16] [--key-concurrency 64]
**                  [--wait-ms 5] [--workers N] [--dir DIR]
**
** Each prints one JSON line on stdout: {"workload": "W1-append", "facts_per_s": ...}. The shapes
** are bench/README.md's W1 and W8 (100-byte payloads, type OrderCreated, one 16-byte-key /
** 32-byte-value upsert into `orders` per transaction, durability sync). W8's subscriber is
** asynchronous: its handler returns WHARF_PENDING and hands the delivery to one timer thread that
** completes it with wharf_delivery_done --wait-ms after the handler was called (deadlines are in
** arrival order, so the timer's queue is a FIFO, not a heap). Exit status 1 on any error (the
** message on stderr), also when a key's facts were handed over out of order.
*/
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "wharf.h"

#define FACT_TYPE "OrderCreated"
#define PAYLOAD_BYTES 100
#define KEY_BYTES 16
#define W1_KEYS 64
#define LATENCY_SAMPLES_MAX 4000000

static void die(const char* what, wharf_status status) {
  fprintf(stderr, "c_abi_bench: %s: %s (%s)\n", what, wharf_errstr(status), wharf_last_error());
  exit(1);
}

static void check(const char* what, wharf_status status) {
  if (status != WHARF_OK) die(what, status);
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t next_random(uint64_t* state) { /* splitmix64 */
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static void fill_random(uint64_t* state, char* out, size_t bytes) {
  for (size_t i = 0; i < bytes; i += 8) {
    const uint64_t r = next_random(state);
    memcpy(out + i, &r, bytes - i < 8 ? bytes - i : 8);
  }
}

/* A fresh database directory: DIR/c-abi-bench-XXXXXX (removed at the end by the caller's rm). */
static char* scratch_dir(const char* root) {
  static char path[4096];
  snprintf(path, sizeof path, "%s/c-abi-bench-XXXXXX", root);
  if (mkdtemp(path) == NULL) {
    fprintf(stderr, "c_abi_bench: mkdtemp %s: %s\n", path, strerror(errno));
    exit(1);
  }
  return path;
}

static void remove_dir(const char* path) {
  char command[4200];
  snprintf(command, sizeof command, "rm -rf '%s'", path);
  if (system(command) != 0) fprintf(stderr, "c_abi_bench: could not remove %s\n", path);
}

static wharf_engine* open_engine(const char* path, uint32_t partitions) {
  char options[128];
  snprintf(options, sizeof options, "durability=sync;partitions=%" PRIu32, partitions);
  wharf_engine* engine = NULL;
  check("wharf_open", wharf_open(path, options, &engine));
  const char* types[] = {FACT_TYPE};
  check("wharf_declare_types", wharf_declare_types(engine, types, 1));
  return engine;
}

/* One W1-shaped transaction: `batch` facts whose keys come from key_of(), one state upsert. */
typedef void (*key_fn)(uint64_t* random_state, char key[KEY_BYTES + 1]);

static void w1_key(uint64_t* random_state, char key[KEY_BYTES + 1]) {
  snprintf(key, KEY_BYTES + 1, "customer-%07d", (int)(next_random(random_state) % W1_KEYS));
}

static wharf_status commit_one(wharf_engine* engine, int batch, uint64_t* random_state,
                               key_fn key_of, uint64_t* latency_ns) {
  wharf_txn* txn = NULL;
  wharf_status s = wharf_txn_begin(engine, &txn);
  if (s != WHARF_OK) return s;
  char payload[PAYLOAD_BYTES], key[KEY_BYTES + 1], state_value[32];
  for (int i = 0; i < batch; ++i) {
    key_of(random_state, key);
    fill_random(random_state, payload, sizeof payload);
    s = wharf_txn_emit(txn, FACT_TYPE, key, KEY_BYTES, payload, sizeof payload);
    if (s != WHARF_OK) {
      wharf_txn_abort(txn);
      return s;
    }
  }
  char state_key[KEY_BYTES + 1];
  snprintf(state_key, sizeof state_key, "order-%010" PRIu64,
           (uint64_t)(next_random(random_state) % 10000000000ull));
  fill_random(random_state, state_value, sizeof state_value);
  s = wharf_txn_put(txn, "orders", state_key, KEY_BYTES, state_value, sizeof state_value);
  if (s != WHARF_OK) {
    wharf_txn_abort(txn);
    return s;
  }
  const uint64_t start_ns = now_ns();
  s = wharf_txn_commit(txn, NULL);
  *latency_ns = now_ns() - start_ns;
  return s;
}

/* ---- W1-append ---------------------------------------------------------------------------- */

typedef struct w1_producer {
  pthread_t thread;
  wharf_engine* engine;
  int batch;
  int index;
  uint64_t end_ns;
  uint64_t commits;
  uint64_t* latencies_ns; /* this producer's share of the samples */
  size_t latencies_max;
  wharf_status error;
} w1_producer;

static void* w1_produce(void* arg) {
  w1_producer* p = arg;
  uint64_t random_state = 0x1234567ull * (uint64_t)(p->index + 1);
  while (now_ns() < p->end_ns) {
    uint64_t latency_ns = 0;
    const wharf_status s = commit_one(p->engine, p->batch, &random_state, w1_key, &latency_ns);
    if (s != WHARF_OK) {
      p->error = s;
      fprintf(stderr, "c_abi_bench: producer %d: commit: %s\n", p->index, wharf_last_error());
      break;
    }
    if (p->commits < p->latencies_max) p->latencies_ns[p->commits] = latency_ns;
    ++p->commits;
  }
  return NULL;
}

static int compare_u64(const void* a, const void* b) {
  const uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
  return x < y ? -1 : x > y;
}

static double percentile_us(const uint64_t* sorted, size_t count, double fraction) {
  if (count == 0) return 0;
  size_t index = (size_t)(fraction * (double)(count - 1) + 0.5);
  return (double)sorted[index] / 1e3;
}

static int run_w1(const char* root, int producers, int batch, double seconds) {
  char* path = scratch_dir(root);
  wharf_engine* engine = open_engine(path, 16);
  w1_producer* ps = calloc((size_t)producers, sizeof *ps);
  const size_t share = LATENCY_SAMPLES_MAX / (size_t)producers;
  uint64_t* samples = malloc(share * (size_t)producers * sizeof *samples);
  if (ps == NULL || samples == NULL) return 1;
  const uint64_t start_ns = now_ns();
  for (int i = 0; i < producers; ++i) {
    ps[i] = (w1_producer){.engine = engine,
                          .batch = batch,
                          .index = i,
                          .end_ns = start_ns + (uint64_t)(seconds * 1e9),
                          .latencies_ns = samples + share * (size_t)i,
                          .latencies_max = share};
    pthread_create(&ps[i].thread, NULL, w1_produce, &ps[i]);
  }
  uint64_t commits = 0;
  size_t sampled = 0;
  int failed = 0;
  for (int i = 0; i < producers; ++i) pthread_join(ps[i].thread, NULL);
  const double elapsed_s = (double)(now_ns() - start_ns) / 1e9;
  for (int i = 0; i < producers; ++i) {
    commits += ps[i].commits;
    failed |= ps[i].error != WHARF_OK;
    const size_t kept = ps[i].commits < share ? ps[i].commits : share;
    memmove(samples + sampled, ps[i].latencies_ns, kept * sizeof *samples);
    sampled += kept;
  }
  qsort(samples, sampled, sizeof *samples, compare_u64);
  check("wharf_close", wharf_close(engine));
  remove_dir(path);
  printf(
      "{\"workload\": \"W1-append\", \"api\": \"c_abi\", \"producers\": %d, \"batch\": %d, "
      "\"durability\": \"sync\", \"seconds\": %.3f, \"facts_per_s\": %.0f, "
      "\"commits_per_s\": %.0f, \"latency_us\": {\"p50\": %.0f, \"p99\": %.0f}}\n",
      producers, batch, elapsed_s, (double)(commits * (uint64_t)batch) / elapsed_s,
      (double)commits / elapsed_s, percentile_us(samples, sampled, 0.50),
      percentile_us(samples, sampled, 0.99));
  free(samples);
  free(ps);
  return failed;
}

/* ---- W8-slow-subscriber ------------------------------------------------------------------- */

static int w8_keys = 10000;

static void w8_key(uint64_t* random_state, char key[KEY_BYTES + 1]) {
  snprintf(key, KEY_BYTES + 1, "customer-%07d",
           (int)(next_random(random_state) % (uint64_t)w8_keys));
}

/* "customer-0001234" -> 1234; -1 for a key not of W8. */
static int key_index(const char* key, size_t len) {
  if (len != KEY_BYTES || memcmp(key, "customer-", 9) != 0) return -1;
  int index = 0;
  for (size_t i = 9; i < len; ++i) {
    if (key[i] < '0' || key[i] > '9') return -1;
    index = index * 10 + (key[i] - '0');
  }
  return index < w8_keys ? index : -1;
}

typedef struct pending {
  uint64_t due_ns;
  wharf_delivery delivery;
  uint64_t fact_id;
  int key;
} pending;

/* The timer: a FIFO ring (every delay is the same, so arrival order is deadline order) drained
** by one thread. Bounded: the runtime holds at most partitions x key_concurrency deliveries. */
typedef struct w8_state {
  pthread_mutex_t mutex;
  pthread_cond_t arrived, finished;
  pending* ring;
  size_t ring_capacity, head, count;
  int stop;
  uint64_t wait_ns;
  _Atomic uint64_t* last_started; /* per key: the newest fact id handed over */
  _Atomic uint64_t* last_done;    /* per key: the newest fact id done */
  _Atomic uint64_t done, order_violations, in_flight, most_in_flight, errors;
  uint64_t target, done_ns;
} w8_state;

static wharf_outcome w8_handler(void* ctx, const wharf_fact* fact, wharf_delivery delivery) {
  w8_state* st = ctx;
  size_t key_len = 0;
  const char* key = wharf_fact_key(fact, &key_len);
  const int k = key_index(key, key_len);
  if (k < 0) {
    atomic_fetch_add(&st->errors, 1);
    return WHARF_REJECTED;
  }
  const uint64_t id = wharf_fact_id(fact);
  if (id < atomic_load(&st->last_started[k])) atomic_fetch_add(&st->order_violations, 1);
  atomic_store(&st->last_started[k], id);
  const uint64_t now_in = atomic_fetch_add(&st->in_flight, 1) + 1;
  uint64_t most = atomic_load(&st->most_in_flight);
  while (now_in > most && !atomic_compare_exchange_weak(&st->most_in_flight, &most, now_in)) {
  }
  pending item = {now_ns() + st->wait_ns, delivery, id, k};
  pthread_mutex_lock(&st->mutex);
  if (st->count == st->ring_capacity) { /* grow: keeps the FIFO order */
    pending* bigger = malloc(2 * st->ring_capacity * sizeof *bigger);
    for (size_t i = 0; i < st->count; ++i) bigger[i] = st->ring[(st->head + i) % st->ring_capacity];
    free(st->ring);
    st->ring = bigger;
    st->head = 0;
    st->ring_capacity *= 2;
  }
  st->ring[(st->head + st->count) % st->ring_capacity] = item;
  if (st->count++ == 0) pthread_cond_signal(&st->arrived);
  pthread_mutex_unlock(&st->mutex);
  return WHARF_PENDING;
}

static void* w8_timer(void* arg) {
  w8_state* st = arg;
  pthread_mutex_lock(&st->mutex);
  while (!st->stop) {
    if (st->count == 0) {
      pthread_cond_wait(&st->arrived, &st->mutex);
      continue;
    }
    const pending item = st->ring[st->head];
    const uint64_t now = now_ns();
    if (item.due_ns > now) {
      pthread_mutex_unlock(&st->mutex);
      const uint64_t wait_ns = item.due_ns - now;
      const struct timespec ts = {(time_t)(wait_ns / 1000000000u), (long)(wait_ns % 1000000000u)};
      nanosleep(&ts, NULL);
      pthread_mutex_lock(&st->mutex);
      continue;
    }
    st->head = (st->head + 1) % st->ring_capacity;
    --st->count;
    pthread_mutex_unlock(&st->mutex);
    atomic_fetch_sub(&st->in_flight, 1);
    uint64_t last = atomic_load(&st->last_done[item.key]);
    const int fresh = item.fact_id > last;
    if (fresh) atomic_store(&st->last_done[item.key], item.fact_id);
    if (wharf_delivery_done(item.delivery, WHARF_HANDLED, NULL) != WHARF_OK) {
      fprintf(stderr, "c_abi_bench: wharf_delivery_done: %s\n", wharf_last_error());
      atomic_fetch_add(&st->errors, 1);
    }
    pthread_mutex_lock(&st->mutex);
    if (fresh && atomic_fetch_add(&st->done, 1) + 1 == st->target) {
      st->done_ns = now_ns();
      pthread_cond_broadcast(&st->finished);
    }
  }
  pthread_mutex_unlock(&st->mutex);
  return NULL;
}

typedef struct w8_loader {
  pthread_t thread;
  wharf_engine* engine;
  int index;
  uint64_t transactions;
  wharf_status error;
} w8_loader;

static void* w8_load(void* arg) {
  w8_loader* l = arg;
  uint64_t random_state = 0x9E3779B97F4A7C15ull * (uint64_t)(l->index + 1);
  for (uint64_t i = 0; i < l->transactions && l->error == WHARF_OK; ++i) {
    uint64_t latency_ns;
    l->error = commit_one(l->engine, 100, &random_state, w8_key, &latency_ns);
  }
  return NULL;
}

static int run_w8(const char* root, uint64_t facts, uint32_t partitions, int key_concurrency,
                  double wait_ms, int workers) {
  char* path = scratch_dir(root);
  wharf_engine* engine = open_engine(path, partitions);
  /* Pre-commit: 16 producers, transactions of 100 facts + one upsert. */
  enum { kLoaders = 16 };
  w8_loader loaders[kLoaders];
  const uint64_t transactions = (facts + 99) / 100;
  for (int i = 0; i < kLoaders; ++i) {
    loaders[i] =
        (w8_loader){.engine = engine,
                    .index = i,
                    .transactions = transactions / kLoaders + (i < (int)(transactions % kLoaders))};
    pthread_create(&loaders[i].thread, NULL, w8_load, &loaders[i]);
  }
  for (int i = 0; i < kLoaders; ++i) pthread_join(loaders[i].thread, NULL);
  for (int i = 0; i < kLoaders; ++i) check("pre-commit", loaders[i].error);
  const uint64_t committed = transactions * 100;

  w8_state st;
  memset(&st, 0, sizeof st);
  pthread_mutex_init(&st.mutex, NULL);
  pthread_cond_init(&st.arrived, NULL);
  pthread_cond_init(&st.finished, NULL);
  st.ring_capacity = 4096;
  st.ring = malloc(st.ring_capacity * sizeof *st.ring);
  st.wait_ns = (uint64_t)(wait_ms * 1e6);
  st.last_started = calloc((size_t)w8_keys, sizeof *st.last_started);
  st.last_done = calloc((size_t)w8_keys, sizeof *st.last_done);
  st.target = committed;
  pthread_t timer;
  pthread_create(&timer, NULL, w8_timer, &st);

  char options[128] = "";
  if (workers > 0) snprintf(options, sizeof options, "workers=%d", workers);
  wharf_runtime* rt = NULL;
  check("wharf_runtime_new", wharf_runtime_new(engine, options, &rt));
  char consumer_options[128];
  snprintf(consumer_options, sizeof consumer_options, "key_concurrency=%d", key_concurrency);
  const char* types[] = {FACT_TYPE};
  check("wharf_runtime_subscribe_async",
        wharf_runtime_subscribe_async(rt, "w8", types, 1, consumer_options, w8_handler, &st, NULL));
  const uint64_t start_ns = now_ns();
  check("wharf_runtime_start", wharf_runtime_start(rt));
  /* A stalled consumption fails the run rather than hanging it: 300 s at most. */
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 300;
  int timed_out = 0;
  pthread_mutex_lock(&st.mutex);
  while (atomic_load(&st.done) < committed && !timed_out)
    timed_out = pthread_cond_timedwait(&st.finished, &st.mutex, &deadline) == ETIMEDOUT;
  const uint64_t end_ns = timed_out ? now_ns() : st.done_ns;
  pthread_mutex_unlock(&st.mutex);
  if (timed_out) {
    fprintf(stderr, "c_abi_bench: w8: %" PRIu64 " of %" PRIu64 " facts done in 300 s\n",
            atomic_load(&st.done), committed);
    atomic_fetch_add(&st.errors, 1);
  }
  wharf_runtime_free(rt);
  pthread_mutex_lock(&st.mutex);
  st.stop = 1;
  pthread_cond_signal(&st.arrived);
  pthread_mutex_unlock(&st.mutex);
  pthread_join(timer, NULL);
  check("wharf_close", wharf_close(engine));
  remove_dir(path);
  const double seconds = (double)(end_ns - start_ns) / 1e9;
  const uint64_t violations = atomic_load(&st.order_violations);
  printf("{\"workload\": \"W8-slow-subscriber\", \"api\": \"c_abi\", \"facts\": %" PRIu64
         ", \"keys\": %d, \"partitions\": %" PRIu32
         ", \"key_concurrency\": %d, \"wait_ms\": %g, "
         "\"seconds\": %.3f, \"facts_per_s\": %.0f, \"most_in_flight\": %" PRIu64
         ", \"order_violations\": %" PRIu64 "}\n",
         committed, w8_keys, partitions, key_concurrency, wait_ms, seconds,
         (double)atomic_load(&st.done) / seconds, atomic_load(&st.most_in_flight), violations);
  free(st.ring);
  free((void*)st.last_started);
  free((void*)st.last_done);
  return violations != 0 || atomic_load(&st.errors) != 0;
}

/* ---- arguments ---------------------------------------------------------------------------- */

static double number(int argc, char** argv, int* i, const char* name) {
  if (*i + 1 >= argc) {
    fprintf(stderr, "c_abi_bench: %s needs a value\n", name);
    exit(2);
  }
  char* end = NULL;
  const double value = strtod(argv[++*i], &end);
  if (end == argv[*i] || *end != '\0' || value < 0) {
    fprintf(stderr, "c_abi_bench: %s: not a number >= 0: %s\n", name, argv[*i]);
    exit(2);
  }
  return value;
}

int main(int argc, char** argv) {
  const char* usage =
      "usage: c_abi_bench w1 [--producers 16] [--batch 10] [--seconds 3] [--dir DIR]\n"
      "       c_abi_bench w8 [--facts 200000] [--keys 10000] [--partitions 16]\n"
      "                      [--key-concurrency 64] [--wait-ms 5] [--workers N] [--dir DIR]\n";
  if (argc < 2 || (strcmp(argv[1], "w1") != 0 && strcmp(argv[1], "w8") != 0)) {
    fputs(usage, stderr);
    return 2;
  }
  const char* dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  double producers = 16, batch = 10, seconds = 3, facts = 200000, keys = 10000, partitions = 16,
         key_concurrency = 64, wait_ms = 5, workers = 0;
  for (int i = 2; i < argc; ++i) {
    const char* a = argv[i];
    if (strcmp(a, "--dir") == 0 && i + 1 < argc)
      dir = argv[++i];
    else if (strcmp(a, "--producers") == 0)
      producers = number(argc, argv, &i, a);
    else if (strcmp(a, "--batch") == 0)
      batch = number(argc, argv, &i, a);
    else if (strcmp(a, "--seconds") == 0)
      seconds = number(argc, argv, &i, a);
    else if (strcmp(a, "--facts") == 0)
      facts = number(argc, argv, &i, a);
    else if (strcmp(a, "--keys") == 0)
      keys = number(argc, argv, &i, a);
    else if (strcmp(a, "--partitions") == 0)
      partitions = number(argc, argv, &i, a);
    else if (strcmp(a, "--key-concurrency") == 0)
      key_concurrency = number(argc, argv, &i, a);
    else if (strcmp(a, "--wait-ms") == 0)
      wait_ms = number(argc, argv, &i, a);
    else if (strcmp(a, "--workers") == 0)
      workers = number(argc, argv, &i, a);
    else {
      fprintf(stderr, "c_abi_bench: unknown argument %s\n%s", a, usage);
      return 2;
    }
  }
  if (producers < 1 || batch < 1 || facts < 1 || keys < 1 || keys > 9999999 || partitions < 1 ||
      key_concurrency < 1) {
    fprintf(stderr,
            "c_abi_bench: --producers, --batch, --facts, --keys (<= 9999999), "
            "--partitions and --key-concurrency must be >= 1\n");
    return 2;
  }
  if (strcmp(argv[1], "w1") == 0) return run_w1(dir, (int)producers, (int)batch, seconds);
  w8_keys = (int)keys;
  return run_w8(dir, (uint64_t)facts, (uint32_t)partitions, (int)key_concurrency, wait_ms,
                (int)workers);
}

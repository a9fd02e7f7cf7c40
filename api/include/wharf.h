/*
** wharf.h: the C ABI of Wharf, an embedded transactional-outbox engine.
**
** This header is the specification of the C interface: only what it declares is API. It is C99 and
** usable from C++. Bindings for other languages (Python's wharf package, Go, Rust, Node...) are
** written against it.
**
** CONVENTIONS
**
**  1. Handles are typed opaque structs (wharf_engine, wharf_txn, wharf_runtime, wharf_fact), never
**     void*. Their contents are private; use the functions below.
**  2. Almost every function returns a wharf_status. On anything but WHARF_OK a readable message
**     naming the problem is kept for the calling thread and returned by wharf_last_error(). Output
**     parameters are written only on WHARF_OK.
**  3. Every function validates its arguments: a NULL handle, a NULL pointer with a non-zero length,
**     an empty or invalid name, a handle that was already closed/committed/freed, or a handle of
**     the wrong kind is answered with a status (WHARF_INVALID_ARGUMENT or WHARF_CLOSED), never with
**     a crash. Handles are checked against a table of live handles, so passing a stale handle is
**     reported rather than undefined: wharf remembers a handle closed, committed or freed (and
**     does not hand its address out again) until thousands more have been (about 8192: 512 in
**     each of 16 shards). (Pointers to caller memory cannot be checked: they must point to at
**     least the length given with them.)
**  4. Inputs are copied: the caller may reuse every buffer and string as soon as a call returns.
**     Byte strings are pointer + length (the pointer may be NULL when the length is 0) and may
**     hold any byte, NUL included: state keys, fact keys, payloads, header values. Names (tables,
**     fact types, consumers, header names), paths and option strings are NUL-terminated strings,
**     so they CANNOT CARRY A NUL BYTE: wharf reads them up to the first NUL. A binding for a
**     language whose strings may hold a NUL (Python, Go, Rust...) must refuse such a name rather
**     than pass it, or it would be silently shortened. Names must also be valid UTF-8 (1..255
**     bytes); anything else is WHARF_INVALID_ARGUMENT naming the argument.
**  5. Outputs are either OWNED (allocated by wharf, released with wharf_free) or BORROWED (owned by
**     wharf, with their lifetime stated in the function's documentation).
**  6. Options travel as one "key=value;key=value" string (NULL or "" for the defaults), so new
**     options never change the ABI. An unknown key or a bad value is WHARF_INVALID_ARGUMENT naming
**     it. The keys are the option names of the C++ API and of the `wharf` CLI.
**  7. Callbacks take the caller's `void* ctx` first. Their documentation says which thread runs
**     them and how long their arguments stay valid. A callback must not unwind (longjmp or a C++
**     exception) into wharf; an exception thrown by a C++ callback is caught and treated as a
**     failure. Calls that would deadlock from inside a callback (wharf_close, wharf_runtime_drain,
**     wharf_runtime_stop, a blocking wharf_txn_commit from a commit callback) are refused with
**     WHARF_INVALID_ARGUMENT; wharf_runtime_free there is deferred (see it).
**  8. Integers are fixed-width; booleans are uint8_t (0 or 1). Times are milliseconds since the
**     Unix epoch (int64_t, suffix _ms).
**  9. No C++ exception ever crosses this interface: an unexpected failure inside wharf is reported
**     as WHARF_INTERNAL.
**
** THREAD SAFETY
**
**   wharf_engine   thread-safe: any number of threads may begin transactions, read and commit
**                  concurrently (that is how group commit fills a sync). wharf_close may be called
**                  while other threads still use the engine: their calls then return WHARF_CLOSED.
**   wharf_txn      used by one thread at a time. Different transactions may be built and committed
**                  from different threads concurrently.
**   wharf_runtime  registration, start, drain, stop and free are serialized internally; they may be
**                  called from any thread except from inside a handler.
**   wharf_fact     a borrowed view, valid only during the callback that received it.
**   Errors         wharf_last_error() is per thread: two threads never see each other's message.
**
** FORK
**
**   A process forked after wharf_open (or wharf_runtime_new) inherits copies of the engine and
**   runtime handles, but none of their threads, and the parent still uses the database. The child
**   must leave them alone: in it, calls that read or write the database return WHARF_CLOSED
**   ("opened by process N"), and wharf_close / wharf_runtime_free return at once without any
**   effect on files (the parent's admin socket, clean-close record and store stay as they are)
**   and without running destroy callbacks; the objects are deliberately leaked until the child
**   ends. A child that needs a database opens its own (another path) or execs. A process forked
**   after its parent first opened an engine ends at exit() without running the exit handlers
**   registered before that open (RocksDB's, which join threads that live in the parent only);
**   its stdio buffers are flushed and its exit status kept.
**
** VERSIONING
**
**   WHARF_VERSION_NUMBER (compile time) has a run-time twin, wharf_version_number(). A program can
**   check that it runs against the library it was built with:
**       assert(wharf_version_number() == WHARF_VERSION_NUMBER);
**   The ABI only grows: changed behaviour gets a new name (..._v2); old names stay. The shared
**   library's SONAME carries the ABI version (libwharf.so.0).
*/
#ifndef WHARF_H_
#define WHARF_H_

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__) || defined(__clang__)
#define WHARF_EXPORT __attribute__((visibility("default")))
#else
#define WHARF_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
** VERSION
*/
#define WHARF_VERSION "0.1.0"
#define WHARF_VERSION_MAJOR 0
#define WHARF_VERSION_MINOR 1
#define WHARF_VERSION_PATCH 0
/* MAJOR * 1000000 + MINOR * 1000 + PATCH */
#define WHARF_VERSION_NUMBER \
  (WHARF_VERSION_MAJOR * 1000000 + WHARF_VERSION_MINOR * 1000 + WHARF_VERSION_PATCH)
/* True when this header is at least version major.minor.patch. */
#define WHARF_CHECK_VERSION(major, minor, patch) \
  (WHARF_VERSION_NUMBER >= ((major)*1000000 + (minor)*1000 + (patch)))

/* The library's version string ("0.1.0"). Static storage; thread-safe. */
WHARF_EXPORT const char* wharf_version(void);
/* The library's WHARF_VERSION_NUMBER. Thread-safe. */
WHARF_EXPORT int32_t wharf_version_number(void);

/* ---------------------------------------------------------------------------------------------
** HANDLES AND CODES
*/
typedef struct wharf_engine wharf_engine;
typedef struct wharf_txn wharf_txn;
typedef struct wharf_runtime wharf_runtime;
typedef struct wharf_fact wharf_fact;

/* Result codes. Values are never renumbered; new codes are only appended. */
typedef enum wharf_status {
  WHARF_OK = 0,
  WHARF_INVALID_ARGUMENT = 1, /* bad input from the caller (a bug in the caller, usually) */
  WHARF_NOT_FOUND = 2,        /* a key, consumer or cursor that does not exist */
  WHARF_IO_ERROR = 3,         /* the disk refused (EIO, ENOSPC, the database lock...) */
  WHARF_CORRUPTION = 4,       /* a checksum or format check failed on read */
  WHARF_BUSY = 5,             /* back-pressure: the commit queue is full (when_full=error) */
  WHARF_CLOSED = 6,           /* the engine or runtime was closed */
  WHARF_CONFLICT = 7,         /* a compare-and-set or lease fencing check refused a commit */
  WHARF_NOT_SUPPORTED = 8,    /* e.g. io=uring on a kernel without io_uring */
  WHARF_INTERNAL = 9          /* a bug in wharf; please report it with wharf_last_error() */
} wharf_status;

/* Why, where the status alone does not say enough to act on (C++ Status::SubCode). Programs
** branch on status and subcode, never on the message text. Values are never renumbered. */
typedef enum wharf_subcode {
  WHARF_SUBCODE_NONE = 0,
  WHARF_SUBCODE_LEASE_FENCED = 1,    /* CONFLICT: the consumer's lease moved to another holder */
  WHARF_SUBCODE_CURSOR_MOVED = 2,    /* CONFLICT: a cursor changed since it was read */
  WHARF_SUBCODE_DATABASE_LOCKED = 3, /* IO_ERROR: another engine holds the database */
  WHARF_SUBCODE_ALREADY_EXISTS = 4,  /* INVALID_ARGUMENT: the target exists (e.g. cursor copy) */
  WHARF_SUBCODE_TIMED_OUT = 5,       /* IO_ERROR: no answer within the caller's timeout */
  WHARF_SUBCODE_READ_CONFLICT = 6,   /* CONFLICT: a key or range the transaction read was written
                                     ** since its snapshot: run it again (wharf_transact does) */
  WHARF_SUBCODE_PRIMARY_FENCED = 7   /* CONFLICT: another primary extended the replication stream:
                                     ** this database commits nothing more */
} wharf_subcode;

/* What a handler did with a fact. */
typedef enum wharf_outcome {
  WHARF_HANDLED = 0,  /* done: the cursor passes the fact (together with the effects) */
  WHARF_REJECTED = 1, /* refused for good: settled as failed, dead letter, the cursor passes it */
  WHARF_FAILED = 2,   /* projections/reactions: as REJECTED; subscribers: keep the cursor, retry */
  WHARF_RETRY = 3,    /* transient: keep the cursor and retry the fact after a backoff */
  WHARF_PENDING = 4   /* asynchronous subscribers only: done later with wharf_delivery_done */
} wharf_outcome;

/* Severity of a trace event. */
typedef enum wharf_trace_level {
  WHARF_TRACE_INFO = 0,
  WHARF_TRACE_WARNING = 1,
  WHARF_TRACE_ERROR = 2
} wharf_trace_level;

/* The message of the last call on THIS thread that returned something other than WHARF_OK
** (successful calls leave it unchanged; "" when there was none). BORROWED: valid until the next
** failing wharf call on this thread. Thread-safe (per-thread storage). */
WHARF_EXPORT const char* wharf_last_error(void);

/* The subcode of the last call on THIS thread that returned something other than WHARF_OK
** (WHARF_SUBCODE_NONE when it had none). Same lifetime rules as wharf_last_error(). */
WHARF_EXPORT wharf_subcode wharf_last_subcode(void);

/* Static text for a status code ("invalid argument", ...; "unknown status" for other values).
** Thread-safe. */
WHARF_EXPORT const char* wharf_errstr(wharf_status status);

/* Frees memory that wharf returned as OWNED (e.g. wharf_get's *value). NULL is a no-op.
** Thread-safe. */
WHARF_EXPORT void wharf_free(void* p);

/* ---------------------------------------------------------------------------------------------
** ENGINE
*/

/* CONSTRUCTOR. Opens (or creates) the database in directory `path`.
**
** `options`: NULL or "key=value;..." with the engine options, among them
**   partitions=16           partitions of the outbox (1..4096), fixed when the database is created
**   ordering=partition      outbox ordering: partition | global | none, fixed at creation
**                           partitions and ordering left out (or partitions=0) take the stored
**                           values (16 and partition for a new database); given explicitly, they
**                           must agree with an existing database, else WHARF_INVALID_ARGUMENT
**                           naming both values
**   durability=sync         sync (ack after fdatasync) | buffered (ack after write; sync every
**                           buffered_sync_ms: a power loss may lose the last interval; consumers
**                           see facts once synced; ids are never reused, may skip after a loss)
**                           | replicated (ack after fdatasync and the replication stream's ack;
**                           needs replicate=nats://...: see REPLICATION below)
**   replicate, replicate_stream, replicate_*   replication through NATS JetStream (REPLICATION)
**   io=auto                 auto | uring | posix
**   queue_capacity=4096     transactions waiting for the committer, at most
**   when_full=block         block | error (commits return WHARF_BUSY when the queue is full)
**   group_facts_max, buffered_sync_ms, create_if_missing, tail_cache_facts, memtable_bytes,
**   block_cache_bytes, wal_prefill_bytes (0 = off), conflict_window_bytes (see wharf/options.h)
**
** On WHARF_OK, *out is a new engine, OWNED by the caller: release it with wharf_close. Only one
** engine may hold a database at a time (a second open fails with WHARF_IO_ERROR "lock"). A
** database written by a newer format is refused with WHARF_NOT_SUPPORTED. Thread-safe. */
WHARF_EXPORT wharf_status wharf_open(const char* path, const char* options, wharf_engine** out);

/* DESTRUCTOR. Stops every runtime still attached to the engine (finishing their batches and
** persisting their cursors), waits for commits already queued, closes the database and frees the
** handle; in a forked child it only frees the handle (see FORK above). NULL is a no-op that
** returns WHARF_OK. A closed handle must not be passed again (it is answered with WHARF_CLOSED
** while wharf still remembers it). Transactions and runtimes made from the engine stay valid
** handles: their calls return WHARF_CLOSED, and they must still be freed (wharf_txn_abort,
** wharf_runtime_free). Must not be called from a callback. Thread-safe. */
WHARF_EXPORT wharf_status wharf_close(wharf_engine* engine);

/* Declares the fact types producers may emit (persisted: declaring again is a no-op). Emitting an
** undeclared type is WHARF_INVALID_ARGUMENT; so is starting a consumer of one. `types` holds
** `n_types` NUL-terminated names (NULL when n_types is 0). Thread-safe. */
WHARF_EXPORT wharf_status wharf_declare_types(wharf_engine* engine, const char* const* types,
                                              size_t n_types);

/* *declared = 1 when `type` was declared, else 0. Thread-safe. */
WHARF_EXPORT wharf_status wharf_is_declared(wharf_engine* engine, const char* type,
                                            uint8_t* declared);

/* Declares `type` at payload version `version` (>= 1), or raises its declared version to it
** (persisted). Producers may emit any version from the one the type was first declared at up to
** `version` (wharf_txn_emit_v2's `v`); consumers receive every fact of it at `version`, lifted by
** the upcasters registered for the versions between (wharf_register_upcaster). Declaring the
** version it has is a no-op. WHARF_INVALID_ARGUMENT: a bad name, version 0, or a version below
** the declared one (it never goes back). Thread-safe. */
WHARF_EXPORT wharf_status wharf_declare_type(wharf_engine* engine, const char* type,
                                             uint32_t version);

/* *version = the declared version of `type`, 0 when it is not declared. Thread-safe. */
WHARF_EXPORT wharf_status wharf_declared_version(wharf_engine* engine, const char* type,
                                                 uint32_t* version);

/* Releases a registration's ctx (a handler's, an upcaster's): called exactly once, when wharf no
** longer needs it (a runtime's on wharf_runtime_free, an upcaster's on wharf_close), or before a
** failing registration returns. Any thread. */
typedef void (*wharf_destroy_fn)(void* ctx);

/* A payload being upcast, or a row being migrated: BORROWED by an upcaster (a migration) for the
** duration of its call. */
typedef struct wharf_upcast wharf_upcast;

/* An upcaster: lifts `payload` (payload_len bytes) of its type from version from_v to from_v + 1.
** It gives the new payload with wharf_upcast_result and returns WHARF_OK. Any other return, or a
** return without a result, refuses the payload: the fact is settled as failed for the consumer
** that was to receive it ("upcast-failed", a dead letter whose reason is the text given to
** wharf_upcast_fail, or names the status returned), and the consumer goes on with its next fact.
** It must be a pure function of the payload, safe to call from several threads at once (workers
** upcast in parallel). Called from wharf's worker threads, never from the committer. */
typedef wharf_status (*wharf_upcaster_fn)(void* ctx, const void* payload, size_t payload_len,
                                          wharf_upcast* out);

/* The upcast payload (COPIED). The last call counts. WHARF_INVALID_ARGUMENT: `out` is not live
** (its upcaster returned), or payload is NULL with a length. */
WHARF_EXPORT wharf_status wharf_upcast_result(wharf_upcast* out, const void* payload,
                                              size_t payload_len);
/* Why the upcaster refuses the payload (NUL-terminated, COPIED, cut at 4096 bytes); the upcaster
** then returns a status other than WHARF_OK. WHARF_INVALID_ARGUMENT: `out` is not live, or
** `reason` is NULL. */
WHARF_EXPORT wharf_status wharf_upcast_fail(wharf_upcast* out, const char* reason);

/* Registers the upcaster that lifts payloads of `type` from version `from_v` to from_v + 1 (not
** persisted: register on every open, before starting the runtimes whose consumers take the type).
** wharf_runtime_start refuses a consumer of a type whose chain, from its first declared version to
** its declared one, misses a step (naming it). Dead letters keep the stored payload: a retried one
** is lifted by the chain of the time of its retry. `destroy(ctx)` (may be NULL) runs when the
** engine no longer needs the upcaster (at wharf_close), and also when registering fails.
** WHARF_INVALID_ARGUMENT: an undeclared type, from_v 0 or not below the declared version, a NULL
** fn, or a step already registered. Thread-safe. */
WHARF_EXPORT wharf_status wharf_register_upcaster(wharf_engine* engine, const char* type,
                                                  uint32_t from_v, wharf_upcaster_fn fn, void* ctx,
                                                  wharf_destroy_fn destroy);

/* Declares state table `table` at row version `version` (>= 1), or raises it (persisted). A table
** is at version 1 until then. Rows are written at the declared version and record it; every read
** returns a row at the declared version, one written at an older version lifted one step at a time
** by the migrations registered for the versions between (wharf_register_migration). A transaction
** (wharf_txn_get, wharf_txn_scan, a handler's effects) that read a lifted row writes it back in its
** own commit; its reads are validated as always, so a stale lift never overwrites a newer write
** (the transaction is refused with WHARF_CONFLICT, or, when it wrote nothing itself, commits
** without the write-back). wharf_get and wharf_scan lift without writing; wharf_migrate_table
** writes the rest. The first declaration above version 1 raises the database's format version to
** 2 (older builds refuse to open it). WHARF_INVALID_ARGUMENT: a bad name, version 0, or a version
** below the declared one (it never goes back). Thread-safe. */
WHARF_EXPORT wharf_status wharf_declare_table(wharf_engine* engine, const char* table,
                                              uint32_t version);

/* *version = the declared version of `table` (1 for a table never declared above it).
** Thread-safe. */
WHARF_EXPORT wharf_status wharf_table_version(wharf_engine* engine, const char* table,
                                              uint32_t* version);

/* A migration: lifts `row` (row_len bytes) of its table from version from_v to from_v + 1. Like an
** upcaster, it gives the new row with wharf_upcast_result and returns WHARF_OK; any other return,
** or a return without a result, refuses the row: the read of it fails with WHARF_NOT_SUPPORTED
** naming the table, the key, the step and the text given to wharf_upcast_fail (nothing is
** written). A pure function of the row, safe to call from several threads at once; it runs on the
** thread that reads the row. */
typedef wharf_status (*wharf_migration_fn)(void* ctx, const void* row, size_t row_len,
                                           wharf_upcast* out);

/* Registers the migration that lifts rows of `table` from version `from_v` to from_v + 1 (not
** persisted: register on every open, before reading the table). A read of a row whose chain misses
** a step fails with WHARF_NOT_SUPPORTED naming it. `destroy(ctx)` (may be NULL) runs at
** wharf_close, and also when registering fails. WHARF_INVALID_ARGUMENT: a table not declared above
** version 1, from_v 0 or not below the declared version, a NULL fn, or a step already registered.
** Thread-safe. */
WHARF_EXPORT wharf_status wharf_register_migration(wharf_engine* engine, const char* table,
                                                   uint32_t from_v, wharf_migration_fn fn,
                                                   void* ctx, wharf_destroy_fn destroy);

/* wharf_migrate_table's progress and outcome (extensible: see "Extensible structs"). */
typedef struct wharf_migrate_report {
  size_t struct_size; /* in: sizeof(wharf_migrate_report); out: the size filled */
  uint32_t version;   /* the table's declared version: the one rows are migrated to */
  uint64_t rows;      /* rows visited */
  uint64_t migrated;  /* of them, rows found at an older version and migrated (dry run: would be) */
  uint64_t batches;   /* transactions committed (dry run: batches read) */
  uint8_t done;       /* 1: the whole table was visited */
} wharf_migrate_report;
#define WHARF_MIGRATE_REPORT_SIZE_V1 (offsetof(wharf_migrate_report, done) + sizeof(uint8_t))

/* Called after every batch but the last, on the calling thread, with the progress so far
** (BORROWED for the call). Return 0 to go on, anything else to stop there: wharf_migrate_table then
** returns WHARF_OK with done = 0 (a later call starts again from the table's first row, passing
** over the rows already migrated). It must not call wharf_migrate_table. */
typedef int (*wharf_migrate_progress_fn)(void* ctx, const wharf_migrate_report* so_far);

/* wharf_migrate_table's options (extensible, passed IN: see "Options structs"). */
typedef struct wharf_migrate_options {
  size_t struct_size;       /* sizeof(wharf_migrate_options) */
  size_t batch_rows;        /* rows per transaction, 1..100000 (0: 256) */
  uint64_t rows_per_second; /* rows migrated per second at most (0: as fast as commits go) */
  uint8_t dry_run;          /* 1: migrate in memory only and commit nothing (0 or 1) */
  wharf_migrate_progress_fn progress; /* may be NULL */
  void* progress_ctx;                 /* passed to progress */
} wharf_migrate_options;
#define WHARF_MIGRATE_OPTIONS_SIZE_V1 \
  (offsetof(wharf_migrate_options, progress_ctx) + sizeof(void*))

/* Migrates the rows of `table` still at an older version, online: walks the table in key order,
** options->batch_rows rows per transaction through the committer, each writing back the rows it
** lifted (a batch refused by a concurrent commit runs again), so a power cut leaves every row at
** one version or the other, readable either way, and a later call goes on with what is left.
** *report (may be NULL; struct_size set by the caller) holds the outcome, also on failure.
** WHARF_INVALID_ARGUMENT (bad name or options), WHARF_NOT_SUPPORTED (a row a migration refuses,
** or a missing step: named; the batches before it are committed), WHARF_CONFLICT (a batch still
** refused after 16 attempts), and the errors of wharf_txn_commit. Blocks; not from a callback.
** Thread-safe. */
WHARF_EXPORT wharf_status wharf_migrate_table(wharf_engine* engine, const char* table,
                                              const wharf_migrate_options* options,
                                              wharf_migrate_report* report);

/* Reads committed state of table `table`, durable state only (as Engine::Get): if what it read may
** belong to a commit whose sync is still in flight, it waits until everything written before the
** read is durable (at most the sync round in flight and the next; no wait when nothing is in
** flight; durability=buffered never waits). On WHARF_OK, *value is OWNED by the caller (release
** with wharf_free; never NULL, even for an empty value) and *value_len is its length.
** WHARF_NOT_FOUND when the key is absent; WHARF_INVALID_ARGUMENT when called in a commit callback
** while a sync is in flight (the wait could need that thread); WHARF_IO_ERROR when a failed WAL
** sync could not be recovered from. Thread-safe. */
WHARF_EXPORT wharf_status wharf_get(wharf_engine* engine, const char* table, const void* key,
                                    size_t key_len, void** value, size_t* value_len);

/* Called once per row by the scans, in key order, on the calling thread. `key` and `value` are
** BORROWED: valid only until the callback returns. Return 0 to go on, anything else to stop the
** scan there (the scan then returns WHARF_OK, with *more set when rows remain). It may read the
** transaction being scanned (wharf_txn_get, another scan), but not change it: wharf_txn_put,
** wharf_txn_delete, wharf_txn_emit(_v2), wharf_txn_commit(_async) and wharf_txn_abort of it are
** refused there (WHARF_INVALID_ARGUMENT; write once the scan returned). A C++ exception it throws
** stops the scan, which returns WHARF_INVALID_ARGUMENT naming it. */
typedef int (*wharf_row_fn)(void* ctx, const void* key, size_t key_len, const void* value,
                            size_t value_len);

/* Visits the rows of state table `table` whose keys lie in the range, in key order (keys compare
** as unsigned bytes), from one snapshot of durable state (as wharf_get: it waits for commits whose
** sync is in flight before the first row), calling `fn` for each: at most `limit` rows
** (1..100000). The range is every key that starts with `prefix` (prefix_len 0: any key), at or
** above `from` (from_len 0: from the table's first key) and below `to` (to_len 0: to its end).
** *rows (may be NULL) receives how many rows were visited; *more (may be NULL) is 1 when rows of
** the range remain after the last one visited: continue with `from` = that key followed by one
** 0x00 byte. Not part of any transaction: not validated. WHARF_INVALID_ARGUMENT: bad table name,
** `from` not below `to`, limit 0 or above 100000, NULL fn, a NULL pointer with a non-zero length.
** A prefix outside [from, to) is no error: nothing is visited. Thread-safe; memory does not grow
** with the table. */
WHARF_EXPORT wharf_status wharf_scan(wharf_engine* engine, const char* table, const void* prefix,
                                     size_t prefix_len, const void* from, size_t from_len,
                                     const void* to, size_t to_len, size_t limit, wharf_row_fn fn,
                                     void* ctx, size_t* rows, uint8_t* more);

/* Engine facts. Thread-safe.
**   durable_lsn: the highest fact id that is durable (consumers see facts up to it);
**   last_lsn:    the highest fact id assigned (may be ahead while a sync is in flight);
**   partitions:  the outbox's partition count;
**   partition_of: the partition a fact with this key lands in;
**   io_backend:  "uring" or "posix" (static storage). */
WHARF_EXPORT wharf_status wharf_durable_lsn(wharf_engine* engine, uint64_t* fact_id);
WHARF_EXPORT wharf_status wharf_last_lsn(wharf_engine* engine, uint64_t* fact_id);
WHARF_EXPORT wharf_status wharf_partitions(wharf_engine* engine, uint32_t* partitions);
WHARF_EXPORT wharf_status wharf_partition_of(wharf_engine* engine, const void* key, size_t key_len,
                                             uint32_t* partition);
WHARF_EXPORT wharf_status wharf_io_backend(wharf_engine* engine, const char** name);

/* Called once per fact by wharf_read_facts and wharf_dead_letters, on the calling thread. `fact`
** is BORROWED: valid only until the callback returns. */
typedef void (*wharf_fact_fn)(void* ctx, const wharf_fact* fact);

/* Reads up to `count_max` durable facts of `partition` with id >= `from_id`, in id order, and
** calls `fn` for each on the calling thread. *count (may be NULL) receives how many were read.
** A checksum mismatch returns WHARF_CORRUPTION naming the fact. Thread-safe. */
WHARF_EXPORT wharf_status wharf_read_facts(wharf_engine* engine, uint32_t partition,
                                           uint64_t from_id, size_t count_max, wharf_fact_fn fn,
                                           void* ctx, size_t* count);

/* ---------------------------------------------------------------------------------------------
** TRANSACTIONS
**
** A transaction holds state writes (in named tables, created on first write) and emitted facts
** that commit all together or not at all. A failed put/delete/emit leaves the transaction as it
** was (the failed operation is not part of it).
**
** Thread safety: a transaction is used by one thread at a time (put/delete/emit/get/commit are
** not synchronized against each other on the same handle); different transactions may be used
** from different threads concurrently. The effects transaction a handler receives is usable only
** on the handler's thread, until it returns.
*/

/* CONSTRUCTOR. On WHARF_OK, *out is a new transaction OWNED by the caller: it is released by
** wharf_txn_commit, wharf_txn_commit_async or wharf_txn_abort (exactly one of them).
** Thread-safe. */
WHARF_EXPORT wharf_status wharf_txn_begin(wharf_engine* engine, wharf_txn** out);

/* Writes `value` under `key` in state table `table`. Keys are 1..4096 bytes of any value (NUL
** included), values up to 16 MiB, table names 1..255 bytes; a transaction carries at most
** 64 MiB. */
WHARF_EXPORT wharf_status wharf_txn_put(wharf_txn* txn, const char* table, const void* key,
                                        size_t key_len, const void* value, size_t value_len);

/* Deletes `key` from state table `table` (deleting an absent key is not an error). */
WHARF_EXPORT wharf_status wharf_txn_delete(wharf_txn* txn, const char* table, const void* key,
                                           size_t key_len);

/* Emits a fact of a declared `type`, partitioned by `key` (may be empty: key_len 0). The payload
** must not be empty (up to 16 MiB). In a reaction's effects transaction the fact's source is the
** consumer and its depth the trigger's depth + 1; in a projection's, emitting is refused. */
WHARF_EXPORT wharf_status wharf_txn_emit(wharf_txn* txn, const char* type, const void* key,
                                         size_t key_len, const void* payload, size_t payload_len);

/* wharf_txn_emit with headers, a delivery time and a schema version.
**   headers: `n_headers` entries; header i is the NUL-terminated name header_names[i] with the
**            value header_values[i] of header_value_lens[i] bytes (at most 64 headers). The three
**            arrays may be NULL when n_headers is 0.
**   deliver_at_ms: 0 to deliver at once; > 0: hold the fact as a timer and release it into the
**            outbox when the wall clock reaches it; it is delivered under a new id then, and
**            carries the id the commit returned as wharf_fact_scheduled_id.
**   v:       the payload's version: 0 for the type's declared version (what wharf_txn_emit
**            emits), or an older one down to the version the type was first declared at
**            (wharf_declare_type). */
WHARF_EXPORT wharf_status wharf_txn_emit_v2(wharf_txn* txn, const char* type, const void* key,
                                            size_t key_len, const void* payload, size_t payload_len,
                                            const char* const* header_names,
                                            const void* const* header_values,
                                            const size_t* header_value_lens, size_t n_headers,
                                            int64_t deliver_at_ms, uint32_t v);

/* ISOLATION: transactions are serializable. A transaction reads from one snapshot of committed
** state, taken at its first read (wharf_txn_get or wharf_txn_scan), overlaid with its own writes,
** and records what it read. wharf_txn_commit refuses it with WHARF_CONFLICT, subcode
** WHARF_SUBCODE_READ_CONFLICT (the message names the table and key), when a key it read, or a key
** inside a range it scanned, was written by another commit after its snapshot; nothing of it is
** written then. Run it again from the start: wharf_transact does. Reads do not wait for
** durability; a commit that returns WHARF_OK proves everything the transaction read durable.
**
** Reads `key` as of the transaction's snapshot, overlaid with its own writes, and records the read
** (an absent key too: its later insert conflicts). On a handler's effects transaction (as
** Effects::Get in wharf/runtime.h) it reads state as the handler's batch sees it: committed state
** overlaid with the effects written so far in the batch, by earlier facts of the same batch and by
** this handler call (a fact that failed had its effects discarded: they are not seen), so a
** read-modify-write projection (a counter, a running total) is exact at any batch_facts; it waits
** only for the lane's earlier batches still committing. A batch whose reads another writer
** changed before it committed is refused and delivered again: its effects apply exactly once. */
WHARF_EXPORT wharf_status wharf_txn_get(wharf_txn* txn, const char* table, const void* key,
                                        size_t key_len, void** value, size_t* value_len);

/* wharf_scan within a transaction (or a handler's effects transaction): as of the transaction's
** snapshot, overlaid with its own writes. The range visited (up to the last row seen, or the whole
** range when it was exhausted) is recorded: a commit after the snapshot that inserts, changes or
** deletes a key in it refuses this transaction (no phantoms). Arguments and errors as wharf_scan;
** WHARF_INVALID_ARGUMENT also for a committed transaction. */
WHARF_EXPORT wharf_status wharf_txn_scan(wharf_txn* txn, const char* table, const void* prefix,
                                         size_t prefix_len, const void* from, size_t from_len,
                                         const void* to, size_t to_len, size_t limit,
                                         wharf_row_fn fn, void* ctx, size_t* rows, uint8_t* more);

/* Builds one attempt of wharf_transact in `txn`, which is BORROWED (do not commit, abort or keep
** it: wharf_txn_commit and wharf_txn_abort on it are refused with WHARF_INVALID_ARGUMENT, and once
** fn returned it is retired, so a kept pointer is answered as stale). Return WHARF_OK to have it
** committed; any other status aborts the transaction and ends wharf_transact with that status.
** Its message is "the transaction function returned WHARF_...", followed by the message of the
** last wharf call inside fn that failed with that same status, if any. A value that is not a
** wharf_status, or a C++ exception thrown by fn, aborts it too: WHARF_INVALID_ARGUMENT naming
** it. */
typedef wharf_status (*wharf_txn_fn)(void* ctx, wharf_txn* txn);

/* Runs `fn` in a new transaction and commits it; when the commit is refused with
** WHARF_SUBCODE_READ_CONFLICT it runs `fn` again in another new transaction (at once the first
** time, then after a random, growing sleep), up to attempts_max attempts, then returns that last
** WHARF_CONFLICT. `fn` runs on
** the calling thread and must be safe to run more than once. `options`: "attempts_max=16;
** backoff_min_ms=1;backoff_max_ms=100" (NULL or "" for these defaults). *last_fact_id (may be
** NULL) receives the id of the last fact the committed attempt emitted (0 when none). Errors of
** the commit are returned as wharf_txn_commit returns them. WHARF_INVALID_ARGUMENT: NULL fn, an
** unknown option or a bad value (attempts_max 0, backoff_min_ms above backoff_max_ms). Thread-safe;
** not from a handler or a commit callback (its commit blocks). */
WHARF_EXPORT wharf_status wharf_transact(wharf_engine* engine, wharf_txn_fn fn, void* ctx,
                                         const char* options, uint64_t* last_fact_id);

/* DESTRUCTOR. Commits and blocks until the transaction is durable: on WHARF_OK every write and
** fact survives a crash or power loss. *last_fact_id (may be NULL) receives the id of the last
** fact emitted (0 when none). Errors other than INVALID_ARGUMENT, BUSY and CLOSED leave the
** outcome unknown: after recovery the transaction is there entirely or not at all.
**
** The transaction is freed in every case (also on error): do not use it again. Committing it a
** second time is answered with WHARF_INVALID_ARGUMENT. An effects transaction given to a handler
** cannot be committed (WHARF_INVALID_ARGUMENT; the runtime commits it). Must not be called from a
** commit callback (use wharf_txn_commit_async there). */
WHARF_EXPORT wharf_status wharf_txn_commit(wharf_txn* txn, uint64_t* last_fact_id);

/* Called exactly once with the outcome of an async commit, on an ENGINE THREAD: it must be quick,
** must not block and must not call wharf_txn_commit (wharf_txn_commit_async is fine). `status` is
** the commit's result; wharf_last_error() called inside the callback returns its message.
** first_fact_id/last_fact_id: the ids of the first and last fact emitted (0 when none). */
typedef void (*wharf_commit_fn)(void* ctx, wharf_status status, uint64_t first_fact_id,
                                uint64_t last_fact_id);

/* DESTRUCTOR. Hands the transaction to the committer and returns at once; `fn` runs later with the
** outcome (see wharf_commit_fn). If this function returns an error, `fn` is never called. The
** transaction is freed in every case, as by wharf_txn_commit. */
WHARF_EXPORT wharf_status wharf_txn_commit_async(wharf_txn* txn, wharf_commit_fn fn, void* ctx);

/* DESTRUCTOR. Discards the transaction and frees it. NULL is a no-op. Aborting an effects
** transaction is refused (its handler decides by its return value); wharf_last_error() says so. */
WHARF_EXPORT void wharf_txn_abort(wharf_txn* txn);

/* ---------------------------------------------------------------------------------------------
** FACTS
**
** A fact is a BORROWED view, valid only during the callback that received it; every pointer an
** accessor returns is valid for as long. Called with NULL or a fact whose callback has returned,
** accessors return 0 (or NULL with *len = 0). `len` may be NULL where a length is returned.
*/
WHARF_EXPORT uint64_t wharf_fact_id(const wharf_fact* fact); /* LSN, strictly increasing */
/* The type, NUL-terminated (its length in *len). */
WHARF_EXPORT const char* wharf_fact_type(const wharf_fact* fact, size_t* len);
/* The partition key bytes (may be empty: *len = 0 and a non-NULL pointer). */
WHARF_EXPORT const void* wharf_fact_key(const wharf_fact* fact, size_t* len);
WHARF_EXPORT const void* wharf_fact_payload(const wharf_fact* fact, size_t* len);
WHARF_EXPORT uint32_t wharf_fact_partition(const wharf_fact* fact);
/* Cascade depth: 0 for application commits, the trigger's depth + 1 for reaction emits. */
WHARF_EXPORT uint32_t wharf_fact_depth(const wharf_fact* fact);
/* The producer or consumer that emitted it ("" for application commits), NUL-terminated. */
WHARF_EXPORT const char* wharf_fact_source(const wharf_fact* fact, size_t* len);
/* The payload's version as delivered: a consumer receives every fact at its type's declared
** version, upcast from the stored one (wharf_register_upcaster). */
WHARF_EXPORT uint32_t wharf_fact_version(const wharf_fact* fact);
/* The payload's version as stored (the one its producer emitted). */
WHARF_EXPORT uint32_t wharf_fact_stored_version(const wharf_fact* fact);
/* Wall-clock time (ms) its transaction committed: read once per transaction by the committer as it
** assigns the ids and writes the transaction to the log, just before the sync that makes it
** durable; not the time of the emit. A delayed fact keeps its scheduling transaction's. */
WHARF_EXPORT int64_t wharf_fact_commit_ms(const wharf_fact* fact);
/* For a delayed fact, when it was due; 0 otherwise. */
WHARF_EXPORT int64_t wharf_fact_deliver_at_ms(const wharf_fact* fact);
/* For a delayed fact: the id the commit returned for it (it waited as a timer under that id and
** was released into the outbox under a new one, wharf_fact_id); 0 for a fact that was not
** delayed. A producer correlates a delivered delayed fact with its commit through it. */
WHARF_EXPORT uint64_t wharf_fact_scheduled_id(const wharf_fact* fact);
WHARF_EXPORT size_t wharf_fact_header_count(const wharf_fact* fact);
/* Header `index` (< wharf_fact_header_count): its NUL-terminated name and its value bytes.
** WHARF_NOT_FOUND when index is out of range. */
WHARF_EXPORT wharf_status wharf_fact_header(const wharf_fact* fact, size_t index, const char** name,
                                            size_t* name_len, const void** value,
                                            size_t* value_len);

/* ---------------------------------------------------------------------------------------------
** RUNTIME
**
** A runtime delivers durable facts to named consumers, in order within each partition,
** on a pool of worker threads. Consumers are registered before wharf_runtime_start.
**
**   projection  the handler writes effects into the `effects` transaction it is given; effects and
**               the cursor advance commit together: exactly once.
**   reaction    like a projection, and may also emit facts with wharf_txn_emit on `effects`.
**   subscriber  side effects at the edge: at least once. The cursor advances only after the handler
**               returned WHARF_HANDLED; FAILED/RETRY keep the cursor and retry with backoff,
**               REJECTED gives up on the fact (dead letter). Idempotency (by fact id) is the
**               handler's.
**   tap         a live stream without a cursor: at most once; a tap that falls behind is severed.
**
** HANDLERS RUN ON WORKER THREADS, several at a time (one per partition lane): a handler shared by
** partitions must be thread-safe. The fact and the effects transaction are BORROWED, valid only
** until the handler returns. A handler must not call wharf_runtime_drain/stop/free or wharf_close
** (refused). Only a returned WHARF_HANDLED is success: any other value (WHARF_PENDING from a
** handler that is not asynchronous included) is WHARF_FAILED with a reason naming the value, and
** so is a C++ exception, with its what() as the reason.
*/
typedef wharf_outcome (*wharf_project_fn)(void* ctx, const wharf_fact* fact, wharf_txn* effects);
typedef wharf_outcome (*wharf_subscribe_fn)(void* ctx, const wharf_fact* fact);
/* A delivery to an asynchronous subscriber (wharf_runtime_subscribe_async): a number naming it
** until it is done. Never 0, never reused within the process; not a pointer, so a stale or made-up
** one is refused, not dereferenced. */
typedef uint64_t wharf_delivery;
/* An asynchronous subscriber's handler: returns WHARF_PENDING and completes `delivery` later with
** wharf_delivery_done (from any thread, possibly before it returned), or returns an outcome
** (HANDLED, REJECTED, FAILED, RETRY), which completes it at once. `fact` is BORROWED for the call
** only: copy what the work needs. */
typedef wharf_outcome (*wharf_subscribe_async_fn)(void* ctx, const wharf_fact* fact,
                                                  wharf_delivery delivery);
/* Inside a handler, `fact` being the handle it received: which delivery of the fact this is (1:
** the first; +1 for each redelivery to this consumer in this process, and counted across restarts
** for a fact the consumer keeps failing on). For a wharf_dead_letter_fn's fact: the letter's
** attempt (wharf_dead_letter_attempt). 0 for a handle that is not live (wharf_last_error says
** why). */
WHARF_EXPORT uint32_t wharf_fact_attempt(const wharf_fact* fact);
/* Taps: called on an engine or worker thread for each live fact. */
typedef void (*wharf_tap_fn)(void* ctx, const wharf_fact* fact);
/* Taps: called once when the tap is severed, on an engine thread. */
typedef void (*wharf_severed_fn)(void* ctx);
/* Trace events (name e.g. "handler-failed", "subscriber-failed", "consumer-starts-at-zero"; the
** consumer id or ""; the fact id or 0; the reason). Strings are BORROWED for the call. Called on
** any runtime or worker thread, possibly concurrently: it must be thread-safe and quick. */
typedef void (*wharf_trace_fn)(void* ctx, wharf_trace_level level, const char* name,
                               const char* consumer, uint64_t fact_id, const char* reason);
/* Inside a wharf_trace_fn call, on its thread: which delivery of `fact_id` the event is about (1:
** the first; a subscriber's attempts at a fact count across restarts). 0 for an event that is not
** about a delivery, and outside a trace callback. */
WHARF_EXPORT uint32_t wharf_trace_attempt(void);

/* Called by a project/react/subscribe handler, on the thread running it, before it returns
** WHARF_REJECTED, WHARF_FAILED or WHARF_RETRY: `reason` (NUL-terminated, COPIED; cut at 4096
** bytes) says why. It becomes the reason of the trace event and of the dead letter
*("handler-failed:
** <reason>", shown by `wharf dead list`). The last call of a handler call counts; without one the
** reason is the outcome's name ("failed"). `fact` is the handle the handler received: it names the
** call. WHARF_INVALID_ARGUMENT: `fact` is not live (its handler returned) or `reason` is NULL. */
WHARF_EXPORT wharf_status wharf_handler_reason(const wharf_fact* fact, const char* reason);

/* CONSTRUCTOR. Creates a runtime attached to `engine`.
** `options`: NULL or "key=value;...": instance (id for leases; default a random UUID), workers
** (threads, at most 1024; 0: an API-only instance that delivers nothing), assignment
** (consistent_hash | round_robin), max_depth, lease_ms (default 30000), renew_ms (default 10000;
** must be < lease_ms), cursor_persist_ms, backoff_initial_ms (default 10; must be <=
** backoff_max_ms), backoff_max_ms (default 5000), timer_tick_ms, lane_batches_in_flight (1..64,
** default 8: batches of one consumer's partition committing at once), config (a declarative
** runtime file: workers and assignment from its pools, and the relays it declares, registered
** by wharf_runtime_start or the first drain; an invalid file is WHARF_INVALID_ARGUMENT listing
** file:line:column errors). Checked as a whole: an inconsistent set is WHARF_INVALID_ARGUMENT
** naming the options and their values.
** On WHARF_OK, *out is OWNED by the caller: release it with wharf_runtime_free. Trace events go to
** stderr (warnings and errors). Thread-safe. */
WHARF_EXPORT wharf_status wharf_runtime_new(wharf_engine* engine, const char* options,
                                            wharf_runtime** out);
/* wharf_runtime_new with a trace callback (NULL: the stderr default). `trace_ctx` must stay valid
** until wharf_runtime_free returns. */
WHARF_EXPORT wharf_status wharf_runtime_new_v2(wharf_engine* engine, const char* options,
                                               wharf_trace_fn trace, void* trace_ctx,
                                               wharf_runtime** out);

/* Registers a consumer named `name` (also its cursor id) taking `n_types` fact types. Before
** start only; a name used twice is refused at start. `ctx` is passed to every call of `fn` and
** must stay valid until wharf_runtime_free returns. */
WHARF_EXPORT wharf_status wharf_runtime_project(wharf_runtime* rt, const char* name,
                                                const char* const* types, size_t n_types,
                                                wharf_project_fn fn, void* ctx);
WHARF_EXPORT wharf_status wharf_runtime_react(wharf_runtime* rt, const char* name,
                                              const char* const* types, size_t n_types,
                                              wharf_project_fn fn, void* ctx);
WHARF_EXPORT wharf_status wharf_runtime_subscribe(wharf_runtime* rt, const char* id,
                                                  const char* const* types, size_t n_types,
                                                  wharf_subscribe_fn fn, void* ctx);

/* Registration with consumer options and a ctx destructor (may be NULL).
** `options`: NULL or "key=value;...": consumer_id (cursor name; default: the name), batch_facts
** (facts per commit, >= 1; default projection 100, reaction 20, subscriber 10), max_depth
** (reactions), ordering (partition | global | none), max_attempts (deliveries of a fact before it
** becomes a dead letter "attempts-exhausted: ..."; 0: no limit), and for subscribers
** key_concurrency, key_window_facts, handler_timeout_ms (see wharf_runtime_subscribe_async), and
** payload_version: latest (default: facts arrive upcast to their type's declared version) or
** stored (as stored; no upcaster runs). */
WHARF_EXPORT wharf_status wharf_runtime_project_v2(wharf_runtime* rt, const char* name,
                                                   const char* const* types, size_t n_types,
                                                   const char* options, wharf_project_fn fn,
                                                   void* ctx, wharf_destroy_fn destroy);
WHARF_EXPORT wharf_status wharf_runtime_react_v2(wharf_runtime* rt, const char* name,
                                                 const char* const* types, size_t n_types,
                                                 const char* options, wharf_project_fn fn,
                                                 void* ctx, wharf_destroy_fn destroy);
WHARF_EXPORT wharf_status wharf_runtime_subscribe_v2(wharf_runtime* rt, const char* id,
                                                     const char* const* types, size_t n_types,
                                                     const char* options, wharf_subscribe_fn fn,
                                                     void* ctx, wharf_destroy_fn destroy);
/* A subscriber whose handler may complete its deliveries later (wharf_subscribe_async_fn). Facts
** of one key are handed over in id order and never overlap; with key_concurrency > 1, up to that
** many facts of different keys of one partition are in the handler at once, and a fact that keeps
** failing holds back only the later facts of its key.
** `options`: as wharf_runtime_subscribe_v2 (ordering partition or none), plus, for every
** subscriber: key_concurrency (1..4096, default 1), key_window_facts (facts a lane holds beyond
** its cursor, default max(1024, 16 x key_concurrency)), max_attempts (deliveries of a fact before
** it becomes a dead letter "attempts-exhausted: ..."; default 0: no limit), handler_timeout_ms
** (a delivery not done within it counts as failed and is delivered again; default 30000). */
WHARF_EXPORT wharf_status wharf_runtime_subscribe_async(wharf_runtime* rt, const char* name,
                                                        const char* const* types, size_t n_types,
                                                        const char* options,
                                                        wharf_subscribe_async_fn fn, void* ctx,
                                                        wharf_destroy_fn destroy);
/* Completes a delivery its handler answered WHARF_PENDING for, from any thread, once. `outcome`:
** HANDLED (the cursor may pass the fact), REJECTED (dead letter "handler-rejected: <reason>";
** the key moves on), FAILED or RETRY (delivered again after a backoff, up to max_attempts).
** `reason`: NULL or a NUL-terminated text (COPIED, cut at 4096 bytes) saying why.
**   WHARF_INVALID_ARGUMENT  `delivery` is not pending: done already, timed out (handler_timeout_ms;
**                           it is delivered again), abandoned (the consumer moved to another
**                           instance), or never issued; or `outcome` is not one of the four
**   WHARF_CLOSED            its runtime stopped first: the fact is delivered again when the
**                           consumer runs next
** A refused call changes nothing, and never affects another delivery. */
WHARF_EXPORT wharf_status wharf_delivery_done(wharf_delivery delivery, wharf_outcome outcome,
                                              const char* reason);
/* A tap. `options` as above plus tap_inbox_facts (facts waiting, at most; default 1024).
** `on_severed` may be NULL. */
WHARF_EXPORT wharf_status wharf_runtime_tap(wharf_runtime* rt, const char* name,
                                            const char* const* types, size_t n_types,
                                            const char* options, wharf_tap_fn fn,
                                            wharf_severed_fn on_severed, void* ctx,
                                            wharf_destroy_fn destroy);

/* A relay: a durable consumer that publishes the facts of `types` to a broker, pipelined,
** in order per partition, advancing its cursor only over what the broker acknowledged (or already
** had); a fact the broker refuses for good becomes a dead letter "broker-rejected: <its text>";
** broker failures are retried with the runtime's backoff. `options` (required): "key=value;...":
**   kind=redis_streams | nats_jetstream (required); url; timeout_ms; in_flight; user; password;
**   redis_streams: stream (template, default "wharf:{partition}"), maxlen (XADD MAXLEN ~ N);
**   nats_jetstream: subject (default "wharf.{type}.{partition}"), token, id_prefix, create_stream;
**   the consumer options consumer_id, batch_facts (default 256), ordering; and relay_payload:
**   latest (default: the payload upcast to its type's declared version) or stored (the bytes as
**   stored). Every message carries the fact's v (as published), stored_v, source and depth: Redis
**   fields "v", "stored_v", "source", "depth"; NATS headers Wharf-V, Wharf-Stored-V,
**   Wharf-Source (absent when empty), Wharf-Depth.
** Templates take {type}, {partition} and {incarnation} (the database's incarnation that emitted
** the fact, 16 lowercase hex digits); without ordering=global they must contain {partition}.
** Unknown key or bad value: WHARF_INVALID_ARGUMENT naming it. See wharf/relay.h. */
WHARF_EXPORT wharf_status wharf_runtime_relay(wharf_runtime* rt, const char* name,
                                              const char* const* types, size_t n_types,
                                              const char* options);

/* Checks identities (a duplicate consumer id or an undeclared type is refused, naming it), loads
** cursors, starts the workers and the timer loop. Fails without side effects. */
WHARF_EXPORT wharf_status wharf_runtime_start(wharf_runtime* rt);
/* Delivers everything pending (releasing due timers first) to every durable consumer and returns
** when all are caught up, whether or not the runtime was started. Handlers run on worker threads
** or on the calling thread. Ignores leases: for tests and tools. */
WHARF_EXPORT wharf_status wharf_runtime_drain(wharf_runtime* rt);
/* Finishes the batches in flight, persists cursors, releases leases, stops the threads.
** Idempotent. */
WHARF_EXPORT wharf_status wharf_runtime_stop(wharf_runtime* rt);
/* Releases timers due now into the outbox; *released (may be NULL) receives how many. */
WHARF_EXPORT wharf_status wharf_runtime_release_timers(wharf_runtime* rt, size_t* released);
/* The runtime's instance id, NUL-terminated; BORROWED until wharf_runtime_free. */
WHARF_EXPORT wharf_status wharf_runtime_instance(wharf_runtime* rt, const char** instance);
/* DESTRUCTOR. Stops the runtime (as wharf_runtime_stop), calls the registrations' destroy
** callbacks and frees the handle. NULL is a no-op. Works after wharf_close of its engine.
** From inside a callback (a handler of this runtime, also one running on the thread of its
** drain, or any other wharf callback), where stopping would wait for that very callback, the
** free is deferred: the handle is freed at once (later calls answer WHARF_CLOSED), no handler of
** the runtime is called any more (a fact it would have delivered keeps its place, without a dead
** letter: delivered when the consumer runs next), a trace event "runtime-free-deferred"
** (warning) says so, and a thread of wharf's own stops the runtime and runs the destroy callbacks
** once the callbacks in progress returned (and a drain in progress ended): the destroy callbacks
** mark the end of the free, which a program should wait for before it exits. */
WHARF_EXPORT void wharf_runtime_free(wharf_runtime* rt);

/* ---------------------------------------------------------------------------------------------
** ADMINISTRATION: cursors, dead letters, leases, trimming, retention losses and a stat snapshot
**
** The C++ API of wharf/admin.h, function for function (`wharf stat`, `wharf trim`... are built on
** the same calls). Changes go through the committer (atomic and durable on WHARF_OK). Do not
** change the cursors of a consumer that a running runtime delivers. All functions are
** thread-safe; list callbacks run on the calling thread, after the engine's read is complete,
** with BORROWED arguments valid until they return.
**
** Extensible structs. The report structs below (wharf_trim_report, wharf_stat_snapshot and the
** rows handed to wharf_stat's callbacks) begin with `size_t struct_size`, so fields can be
** appended in later versions without a new function name:
**   - a struct the CALLER passes (wharf_trim_report, wharf_stat_snapshot): set struct_size to
**     sizeof(the struct) before the call. wharf fills the fields that lie wholly within it, leaves
**     any byte beyond what it knows untouched, and on WHARF_OK sets struct_size to the size it
**     filled (the smaller of the two), so a program built with a newer header run against an
**     older library sees which fields are there. A struct_size below the first version's size
**     (WHARF_*_SIZE_V1) is WHARF_INVALID_ARGUMENT naming it.
**   - a row wharf passes to a CALLBACK (const wharf_stat_partition*...): wharf sets struct_size
**     to the size it filled; read a field only when it lies within struct_size.
** Rows come through callbacks rather than arrays because an array of a struct that grows would
** break the stride of a program built with an older header; callbacks keep every row separate
** and let a caller that does not want a kind of row pass NULL for it.
*/

/* *fact_id: the consumer's position in `partition`: the id of the last fact it has passed, 0 if
** none. */
WHARF_EXPORT wharf_status wharf_cursor_get(wharf_engine* engine, const char* consumer,
                                           uint32_t partition, uint64_t* fact_id);
/* Copies every partition's cursor of `from_consumer` to `to_consumer` (e.g. after a rename).
** WHARF_NOT_FOUND when `from_consumer` has none; WHARF_INVALID_ARGUMENT when `to_consumer` already
** has cursors (see wharf_cursor_copy_v2). */
WHARF_EXPORT wharf_status wharf_cursor_copy(wharf_engine* engine, const char* from_consumer,
                                            const char* to_consumer);
/* As wharf_cursor_copy; force = 1 overwrites the cursors `to_consumer` already has. */
WHARF_EXPORT wharf_status wharf_cursor_copy_v2(wharf_engine* engine, const char* from_consumer,
                                               const char* to_consumer, uint8_t force);
/* Sets every partition's cursor of `consumer` to the last fact with id <= fact_id (0: the start,
** so everything is delivered again). */
WHARF_EXPORT wharf_status wharf_cursor_set(wharf_engine* engine, const char* consumer,
                                           uint64_t fact_id);
/* Deletes every cursor of `consumer`. WHARF_NOT_FOUND when it has none. */
WHARF_EXPORT wharf_status wharf_cursor_delete(wharf_engine* engine, const char* consumer);

/* One cursor: consumer id, partition, last fact passed, lease epoch of its last writer. */
typedef void (*wharf_cursor_fn)(void* ctx, const char* consumer, uint32_t partition,
                                uint64_t fact_id, uint64_t epoch);
/* Calls `fn` for every cursor, ordered by consumer then partition. */
WHARF_EXPORT wharf_status wharf_cursor_list(wharf_engine* engine, wharf_cursor_fn fn, void* ctx);

/* One dead letter: the consumer, the reason it failed ("NAME: TEXT", TEXT being the handler's
** own), the fact. */
typedef void (*wharf_dead_letter_fn)(void* ctx, const char* consumer, const char* reason,
                                     const wharf_fact* fact);
/* The attempt of the dead letter whose `fact` a wharf_dead_letter_fn call received: which
** delivery settled it (1: the first). 0 for a letter written before attempts were recorded, a
** fact settled without a delivery, or any other fact handle (a handle that is not live: 0 and
** wharf_last_error says why). */
WHARF_EXPORT uint32_t wharf_dead_letter_attempt(const wharf_fact* fact);
/* Calls `fn` for every dead letter of `consumer` (NULL or "": of every consumer), ordered by
** consumer then fact id. */
WHARF_EXPORT wharf_status wharf_dead_letters(wharf_engine* engine, const char* consumer,
                                             wharf_dead_letter_fn fn, void* ctx);

/* Deletes dead letters of `consumer` for good, in one transaction: those of the `n_fact_ids` ids
** in `fact_ids` (n_fact_ids = 0: every one; `fact_ids` may then be NULL), each checked to be
** unchanged since it was read. *purged (when `purged` is not NULL): how many were deleted.
**   WHARF_INVALID_ARGUMENT  a bad consumer id, `fact_ids` NULL with n_fact_ids > 0, too many ids
**   WHARF_NOT_FOUND         the consumer has no dead letters, or an id is none of them (nothing
**                           changes)
**   WHARF_CONFLICT          a letter changed meanwhile (nothing changes) */
WHARF_EXPORT wharf_status wharf_dead_purge(wharf_engine* engine, const char* consumer,
                                           const uint64_t* fact_ids, size_t n_fact_ids,
                                           uint64_t* purged);

/* Releases the lease of `consumer` (deletes its lease record if unchanged since read), so any
** instance may take the consumer at once; a former holder still running is fenced once another
** takes it. Meant for a holder that is gone (what `wharf lease release` does).
**   WHARF_NOT_FOUND  the consumer holds no lease
**   WHARF_CONFLICT   the lease was renewed or taken meanwhile (nothing changes) */
WHARF_EXPORT wharf_status wharf_lease_release(wharf_engine* engine, const char* consumer);

/* One consumer's lease as stored: the holding instance (owner; "" when released), the lease epoch
** (grows with every acquisition), its expiry (ms since the epoch) and the engine open that
** granted it (a lease of an earlier open is void). */
typedef void (*wharf_lease_fn)(void* ctx, const char* consumer, const char* owner, uint64_t epoch,
                               int64_t expires_at_ms, uint64_t open_epoch);
/* Calls `fn` for every consumer's lease record, ordered by consumer (instance heartbeats and the
** runtime's fences are not listed). WHARF_CORRUPTION names a record that does not decode. */
WHARF_EXPORT wharf_status wharf_lease_list(wharf_engine* engine, wharf_lease_fn fn, void* ctx);

/* One re-delivered dead letter: its (original) fact id and the id of the fact re-emitted. */
typedef void (*wharf_retried_fn)(void* ctx, uint64_t dead_fact_id, uint64_t new_fact_id);
/* Re-delivers dead letters of `consumer` to that consumer only (`wharf dead retry`): each becomes a
** new fact with the original's type, key, payload and headers plus the headers "wharf-retry-for"
** (= consumer) and "wharf-retry-of" (= the original id in decimal), and its dead letter is
** deleted in the same transaction (one transaction per batch of letters). Ids as in
** wharf_dead_purge (n_fact_ids = 0: every letter; `fact_ids` may then be NULL). `fn` (may be NULL)
** is called for every letter re-emitted, in id order, on the calling thread, also when the call
** fails with WHARF_CONFLICT: the batches committed before the conflict stay committed and are
** reported. *retried (when not NULL) receives how many were re-emitted (on WHARF_OK).
**   WHARF_INVALID_ARGUMENT  a bad consumer id, `fact_ids` NULL with n_fact_ids > 0, too many ids,
**                           a type no longer declared, too many headers to add the retry headers
**   WHARF_NOT_FOUND         the consumer has no dead letters, or an id is none of them (nothing
**                           changes)
**   WHARF_CONFLICT          a letter changed meanwhile (earlier batches stay committed) */
WHARF_EXPORT wharf_status wharf_dead_retry(wharf_engine* engine, const char* consumer,
                                           const uint64_t* fact_ids, size_t n_fact_ids,
                                           wharf_retried_fn fn, void* ctx, uint64_t* retried);

/* What retention removed before `consumer` had passed it (only under retention_max_bytes or
** retention_max_age_ms): facts lost over the database's life, when the last loss happened (ms since
** the epoch), and the id range of the last loss (over every partition). */
typedef void (*wharf_retention_loss_fn)(void* ctx, const char* consumer, uint64_t fact_count,
                                        uint64_t last_ms, uint64_t last_from_id,
                                        uint64_t last_to_id);
/* Calls `fn` for every consumer that has lost facts to retention, by consumer id. */
WHARF_EXPORT wharf_status wharf_retention_losses(wharf_engine* engine, wharf_retention_loss_fn fn,
                                                 void* ctx);

/* Totals of a trim (extensible: see "Extensible structs" above). */
typedef struct wharf_trim_report {
  size_t struct_size;      /* in: sizeof(wharf_trim_report); out: the size filled */
  uint64_t consumer_count; /* consumers with cursors; 0: nothing is known passed, nothing trimmed */
  uint64_t fact_count;     /* facts removed (or, dry_run, that would be) */
  uint64_t bytes;          /* their keys and values as stored */
} wharf_trim_report;
#define WHARF_TRIM_REPORT_SIZE_V1 (offsetof(wharf_trim_report, bytes) + sizeof(uint64_t))
/* One partition of a trim: facts with id <= trim_point were passed by every consumer; fact_count
** of them and `bytes` were removed (dry_run: would be). */
typedef void (*wharf_trim_partition_fn)(void* ctx, uint32_t partition, uint64_t trim_point,
                                        uint64_t fact_count, uint64_t bytes);
/* Removes the facts every consumer with a cursor has passed (`wharf trim`; the rules and
** requirements are those of TrimPassed in wharf/admin.h). dry_run = 1 changes nothing and reports
** what would be removed. `report` (may be NULL) receives the totals; `fn` (may be NULL) is called
** once per partition, in order, after the trim.
**   WHARF_INVALID_ARGUMENT  dry_run neither 0 nor 1, a report whose struct_size is too small
**   WHARF_CONFLICT          a cursor moved back meanwhile, again and again */
WHARF_EXPORT wharf_status wharf_trim(wharf_engine* engine, uint8_t dry_run,
                                     wharf_trim_report* report, wharf_trim_partition_fn fn,
                                     void* ctx);

/* The stat snapshot (wharf/admin.h ReadStat; what `wharf stat` shows): LSNs and totals here, rows
** through wharf_stat's callbacks. Counts cover durable facts (id <= durable_lsn) above the
** retention floor. Extensible: see "Extensible structs" above. */
typedef struct wharf_stat_snapshot {
  size_t struct_size;       /* in: sizeof(wharf_stat_snapshot); out: the size filled */
  uint64_t durable_lsn;     /* highest fact id a completed WAL sync covers */
  uint64_t last_lsn;        /* highest fact id assigned */
  uint64_t fact_count;      /* facts in the outbox, over every partition */
  uint64_t fact_bytes;      /* their keys and values as stored */
  uint64_t partition_count; /* rows passed to on_partition */
  uint64_t consumer_count;  /* rows passed to on_consumer */
  uint64_t dead_letter_count;
  uint64_t timer_count;      /* timers pending */
  int64_t next_timer_due_ms; /* 0 when none */
  /* Later fields (filled when struct_size covers them): the incarnation new facts are emitted in
  ** (0: never restored; see BACKUP below) and the database's most recent backup attempt, as the
  ** database records it. The two strings are BORROWED: valid until the next wharf_stat call on
  ** this thread ("" when there is none). */
  uint64_t incarnation;
  uint8_t last_backup_exists;        /* 0: never backed up (the other last_backup_* are 0/"") */
  uint8_t last_backup_ok;            /* 0: it failed (last_backup_error says why) */
  int64_t last_backup_finished_ms;   /* wall clock when it ended */
  int64_t last_backup_duration_ms;   /* how long it took */
  uint32_t last_backup_id;           /* when ok: its id in its target */
  uint64_t last_backup_last_fact_id; /* when ok: its point */
  const char* last_backup_target;    /* the backup directory */
  const char* last_backup_error;     /* when it failed */
} wharf_stat_snapshot;
#define WHARF_STAT_SNAPSHOT_SIZE_V1 \
  (offsetof(wharf_stat_snapshot, next_timer_due_ms) + sizeof(int64_t))

/* One partition of the outbox. */
typedef struct wharf_stat_partition {
  size_t struct_size; /* set by wharf */
  uint32_t partition;
  uint64_t fact_count;
  uint64_t bytes;    /* keys and values as stored */
  uint64_t first_id; /* 0 when the partition holds no fact */
  uint64_t last_id;
} wharf_stat_partition;

/* One consumer: every consumer with a cursor, a registration or a retention loss. */
typedef struct wharf_stat_consumer {
  size_t struct_size;       /* set by wharf */
  const char* consumer;     /* BORROWED: valid until the callback returns */
  uint8_t registered;       /* 1: a runtime registered its types (lag counts those only) */
  const char* const* types; /* BORROWED: the types it takes (type_count of them) */
  size_t type_count;
  uint64_t cursor_count;      /* partitions where it has a cursor */
  uint64_t fact_id_min;       /* lowest and highest position over the partitions (a partition */
  uint64_t fact_id_max;       /*   without a cursor counts as 0) */
  uint64_t lag_facts;         /* facts after its cursors that it takes */
  uint64_t facts_behind;      /* all facts after its cursors */
  int64_t oldest_commit_ms;   /* commit time of the oldest fact it takes and has not passed; 0 */
  uint64_t lost_fact_count;   /* facts retention removed before it had passed them */
  uint64_t lost_last_ms;      /* when the last loss happened; 0 when none */
  uint64_t lost_last_from_id; /* the id range of the last loss */
  uint64_t lost_last_to_id;
  /* Later fields (read them only when struct_size covers them): a fact it keeps failing, as its
  ** runtime stored it (the partition where it has been retrying longest; all 0 when none). */
  uint8_t retrying;
  uint32_t retrying_partition;
  uint64_t retrying_fact_id;
  uint32_t retrying_attempt; /* failed deliveries so far (over restarts) */
  int64_t retrying_since_ms; /* wall clock of its first failure */
  const char* last_error;    /* BORROWED: its last failure's text ("NAME: TEXT"); "" when none */
  int64_t last_error_ms;     /* wall clock of that failure */
} wharf_stat_consumer;

/* One consumer in one partition (every partition of every consumer, after its consumer row). */
typedef struct wharf_stat_lane {
  size_t struct_size;   /* set by wharf */
  const char* consumer; /* BORROWED: valid until the callback returns */
  uint32_t partition;
  uint8_t has_cursor;       /* 0: no cursor here (it is at the start) */
  uint64_t fact_id;         /* the last fact it passed here */
  uint64_t epoch;           /* lease epoch of the cursor's last writer */
  uint64_t lag_facts;       /* facts after the cursor that it takes */
  uint64_t facts_behind;    /* all facts after the cursor */
  int64_t oldest_commit_ms; /* of the oldest fact it takes after the cursor; 0 when none */
} wharf_stat_lane;

typedef void (*wharf_stat_partition_fn)(void* ctx, const wharf_stat_partition* row);
typedef void (*wharf_stat_consumer_fn)(void* ctx, const wharf_stat_consumer* row);
typedef void (*wharf_stat_lane_fn)(void* ctx, const wharf_stat_lane* row);
/* Takes a stat snapshot (one scan of the outbox, plus one of the facts after each consumer's
** cursors) and reports it: the totals into *snapshot (may be NULL), then on the calling thread one
** on_partition call per partition in order, then per consumer (by id) one on_consumer call
** followed by one on_lane call per partition. Any callback may be NULL.
**   WHARF_INVALID_ARGUMENT  a snapshot whose struct_size is too small
**   WHARF_CORRUPTION        a record that does not verify (named) */
WHARF_EXPORT wharf_status wharf_stat(wharf_engine* engine, wharf_stat_snapshot* snapshot,
                                     wharf_stat_partition_fn on_partition,
                                     wharf_stat_consumer_fn on_consumer, wharf_stat_lane_fn on_lane,
                                     void* ctx);

/* ---------------------------------------------------------------------------------------------
** BACKUP, RESTORE, VERIFY
**
** The C++ API of wharf/backup.h. A backup directory (the "target") holds any number of backups of
** one database, numbered from 1; backups are taken online (producers and consumers keep running),
** copy only the table files the target does not hold yet, and list every file with its size and
** CRC32C. A restored database starts a new incarnation (a random 64-bit number, never 0) at the
** first fact id after its backup's point, so relays never mistake its new facts for facts the
** original database published under the same ids.
**
** Paths (target, destination, path) are NUL-terminated, non-empty (convention 4). Every function
** here may be called from any thread; wharf_backup, wharf_restore and the verifications not from
** inside a wharf callback (a handler, a commit callback, a progress callback: refused with
** WHARF_INVALID_ARGUMENT, as they could wait for that very thread). Two backups into one target
** at once are refused (WHARF_IO_ERROR "in use"). Errors: WHARF_INVALID_ARGUMENT names the bad
** argument; WHARF_IO_ERROR names the file and what failed; WHARF_CORRUPTION names the damaged
** file or record; WHARF_NOT_SUPPORTED for a backup of a newer format version.
**
** Options structs. wharf_backup_options and wharf_restore_options are extensible structs the
** caller passes IN (see "Extensible structs" above): set struct_size to sizeof(the struct), zero
** the struct first (a field left 0 means its default), then set what you need. wharf reads the
** fields that lie within struct_size; a struct_size below the first version's size is
** WHARF_INVALID_ARGUMENT naming it, and bytes beyond the fields this library knows must be 0 (a
** program built with a newer header that sets an option this library does not know is refused
** with WHARF_NOT_SUPPORTED rather than having it silently ignored). NULL options: the defaults.
*/

/* Called during the copy (at most about every 4 MiB, and once at the end) with the bytes copied
** so far and an upper bound of the bytes to copy (files the target already holds are skipped, so
** a copy may end below it). Runs on the copying thread, which may not be the calling thread; it
** must return quickly and must not call into wharf. Return WHARF_OK to go on. Any other status
** means the callback failed: wharf calls it no more, and the backup or restore returns that status
** ("the progress callback returned WHARF_..."), never WHARF_OK, even when the copy itself
** completed (a backup may then exist in the target all the same: wharf_list_backups shows it; a
** restore's destination must not be used). A value that is not a wharf_status is taken as
** WHARF_INVALID_ARGUMENT naming it. */
typedef wharf_status (*wharf_progress_fn)(void* ctx, uint64_t copied_bytes, uint64_t total_bytes);

typedef struct wharf_backup_options {
  size_t struct_size; /* sizeof(wharf_backup_options) */
  /* After the new backup: keep only the newest `keep` backups in the target, removing the files
  ** only older ones used (0: remove none). */
  uint32_t keep;
  /* Bytes per second the copy may write at most (0: as fast as the disks go). */
  uint64_t rate_limit_bytes_per_s;
  wharf_progress_fn progress; /* may be NULL */
  void* progress_ctx;         /* passed to progress */
} wharf_backup_options;
#define WHARF_BACKUP_OPTIONS_SIZE_V1 (offsetof(wharf_backup_options, progress_ctx) + sizeof(void*))

typedef struct wharf_restore_options {
  size_t struct_size; /* sizeof(wharf_restore_options) */
  uint32_t backup_id; /* 0: the newest backup */
  /* 1: replace what the destination holds (its files are removed first); 0: a destination that
  ** exists and is not empty is refused. */
  uint8_t force;
  uint64_t rate_limit_bytes_per_s; /* 0: as fast as the disks go */
  wharf_progress_fn progress;      /* may be NULL */
  void* progress_ctx;
} wharf_restore_options;
#define WHARF_RESTORE_OPTIONS_SIZE_V1 \
  (offsetof(wharf_restore_options, progress_ctx) + sizeof(void*))

/* One backup in a target (extensible, as the report structs above: the caller sets struct_size
** for one it passes; a row handed to wharf_backup_fn has struct_size set by wharf). */
typedef struct wharf_backup_info {
  size_t struct_size;
  uint32_t id;         /* 1, 2, ... in the order they were taken */
  int64_t created_ms;  /* wall clock when its point was taken */
  int64_t duration_ms; /* how long the backup took (point, copy and list) */
  /* Its point: every commit with fact ids up to last_fact_id, nothing after; durable_lsn is the
  ** engine's durable LSN at the point (equal to last_fact_id: the point waits for durability). */
  uint64_t last_fact_id;
  uint64_t durable_lsn;
  uint64_t size_bytes;   /* its files (shared ones included) */
  uint64_t copied_bytes; /* what this backup copied; the rest an earlier one held already */
  uint32_t files;
  uint64_t format_version;
  uint32_t partitions;
  uint64_t incarnation; /* of the database at the point (0: never restored) */
} wharf_backup_info;
#define WHARF_BACKUP_INFO_SIZE_V1 (offsetof(wharf_backup_info, incarnation) + sizeof(uint64_t))

/* Backs up the database `engine` holds into directory `target` (created if missing, with its
** parent) while the engine keeps committing and delivering (the committer pauses for about one
** fdatasync while the backup's point is taken). `options` may be NULL (the defaults). On
** WHARF_OK, *info (may be NULL; struct_size set by the caller) describes the new backup. The
** attempt, success or failure, is recorded in the database (wharf_stat's last_backup_*).
**   WHARF_INVALID_ARGUMENT  NULL engine or target, an empty target, the database directory
**                           itself or a target inside it, a target holding something other than
**                           backups, an options or info struct_size too small
**   WHARF_IO_ERROR          a file could not be read or written (a full disk among them), named;
**                           another backup into the target is in progress ("in use")
**   (progress)              the status a failing progress callback returned
** Blocks for the whole copy. Thread-safe. */
WHARF_EXPORT wharf_status wharf_backup(wharf_engine* engine, const char* target,
                                       const wharf_backup_options* options,
                                       wharf_backup_info* info);

/* Called once per backup by wharf_list_backups, oldest first, on the calling thread. `info` is
** BORROWED: valid until the callback returns; read a field only when it lies within
** info->struct_size. */
typedef void (*wharf_backup_fn)(void* ctx, const wharf_backup_info* info);
/* Lists the backups in `target` through `fn` (required). Needs no engine; reads only.
**   WHARF_NOT_FOUND  `target` holds no backup directory */
WHARF_EXPORT wharf_status wharf_list_backups(const char* target, wharf_backup_fn fn, void* ctx);

/* Restores backup options->backup_id (0: the newest) of `target` into the directory
** `destination`: copies its files, checking each one's size and checksum against the backup's
** list, then opens the database once to start its new incarnation at the backup's last_fact_id +
** 1. The restored database opens with wharf_open like any other; consumers resume from the
** backed-up cursors. `destination` must not be the directory of an open database. `options` may
** be NULL. On WHARF_OK, *backup (may be NULL; struct_size set by the caller) describes the backup
** restored and *incarnation (may be NULL) receives the restored database's new incarnation
** (never 0).
**   WHARF_NOT_FOUND         no such backup (or no backup at all) in `target`
**   WHARF_INVALID_ARGUMENT  NULL or empty paths; a non-empty destination without force; a
**                           destination inside `target`; force neither 0 nor 1
**   WHARF_CORRUPTION        a file whose checksum or size does not match, named (nothing is left
**                           in `destination` then)
**   WHARF_NOT_SUPPORTED     a backup of a newer format version
** Blocks for the whole copy. Thread-safe. */
WHARF_EXPORT wharf_status wharf_restore(const char* target, const char* destination,
                                        const wharf_restore_options* options,
                                        wharf_backup_info* backup, uint64_t* incarnation);

/* What a verification read and found: an immutable object OWNED by the caller, released with
** wharf_verify_report_free. Its accessors may be called from any thread. */
typedef struct wharf_verify_report wharf_verify_report;

/* Reads every record of every column family of the database in directory `path` and checks
** every checksum (RocksDB's block checksums and every Wharf record's own) and every record's
** format. Works on a stopped database and while an engine holds it (it reads through a secondary
** instance up to what the engine had written when it began); writes nothing.
** *report receives a new report on WHARF_OK and on WHARF_CORRUPTION (the report lists the
** damage found; the message names the first); on any other status it is left unchanged.
**   WHARF_CORRUPTION               something is damaged (see the report)
**   WHARF_IO_ERROR, WHARF_NOT_FOUND the database cannot be opened at all
**   WHARF_INVALID_ARGUMENT         NULL or empty path, NULL report
** Thread-safe. */
WHARF_EXPORT wharf_status wharf_verify_database(const char* path, wharf_verify_report** report);

/* Checks every file of backup `backup_id` (0: the newest) in `target` against the backup's list
** (size and CRC32C), then reads it as wharf_verify_database does. *report as there. Thread-safe. */
WHARF_EXPORT wharf_status wharf_verify_backup(const char* target, uint32_t backup_id,
                                              wharf_verify_report** report);

/* DESTRUCTOR. NULL is a no-op; a report must not be freed twice (wharf answers a freed one it
** still remembers, see convention 3, with a message in wharf_last_error). */
WHARF_EXPORT void wharf_verify_report_free(wharf_verify_report* report);

/* Accessors. Called with NULL or a report that is not live, the counts return 0 (and
** wharf_last_error says why). Strings are BORROWED: valid until the report is freed. */
/* Files checked (a backup's files against its list too) and their bytes. */
WHARF_EXPORT uint64_t wharf_verify_report_files(const wharf_verify_report* report);
WHARF_EXPORT uint64_t wharf_verify_report_file_bytes(const wharf_verify_report* report);
/* wharf_verify_backup: the backup verified (0 for wharf_verify_database). */
WHARF_EXPORT uint32_t wharf_verify_report_backup_id(const wharf_verify_report* report);
/* The column families read, in the order outbox, cursors, leases, timers, dead, state, meta. */
WHARF_EXPORT size_t wharf_verify_report_family_count(const wharf_verify_report* report);
/* Family `index` (< wharf_verify_report_family_count): its NUL-terminated name, its records and
** their bytes (keys and values as stored). Each output may be NULL. WHARF_NOT_FOUND when index is
** out of range. */
WHARF_EXPORT wharf_status wharf_verify_report_family(const wharf_verify_report* report,
                                                     size_t index, const char** name,
                                                     uint64_t* records, uint64_t* bytes);
/* Every damaged place found (the list may hold fewer: the first 20, in reading order). */
WHARF_EXPORT uint64_t wharf_verify_report_damage_count(const wharf_verify_report* report);
/* How many damaged places the list holds (<= wharf_verify_report_damage_count). */
WHARF_EXPORT size_t wharf_verify_report_damage_listed(const wharf_verify_report* report);
/* Damaged place `index` (< wharf_verify_report_damage_listed): where ("table file 000123.sst",
** "outbox record of fact 42 (partition 3)") and what does not verify, NUL-terminated. Each output
** may be NULL. WHARF_NOT_FOUND when index is out of range. */
WHARF_EXPORT wharf_status wharf_verify_report_damage(const wharf_verify_report* report,
                                                     size_t index, const char** place,
                                                     const char** problem);

/* *incarnation: the incarnation new facts of `engine` are emitted in (0 for a database never
** restored, else the random number its restore started). Thread-safe. */
WHARF_EXPORT wharf_status wharf_engine_incarnation(wharf_engine* engine, uint64_t* incarnation);

/* ---------------------------------------------------------------------------------------------
** REPLICATION
**
** The C++ API of wharf/replication.h. A primary replicates through engine options of wharf_open:
** replicate=nats://host:port[,nats://...] (the members of a NATS JetStream cluster),
** replicate_stream (default "wharf"), durability=replicated (a commit is acknowledged once its
** fdatasync AND the stream's acknowledgement of its group are in: it survives the loss of the
** machine), replicate_replicas (of the streams the engine creates; 3 by default),
** replicate_timeout_ms, replicate_user / replicate_password / replicate_token, replicate_tls* and
** replicate_snapshot_* (see wharf/options.h). A primary whose stream another copy took over is
** FENCED: its next commit, and any later wharf_open of it with `replicate`, fails with
** WHARF_CONFLICT, subcode WHARF_SUBCODE_PRIMARY_FENCED; it commits nothing more.
**
** The functions below take the stream's options in the same "key=value;..." string: replicate is
** required; replicate_stream, the credentials, TLS and replicate_timeout_ms are read, the other
** engine options are checked and ignored. Paths are NUL-terminated and non-empty (convention 4).
** They may be called from any thread, not from inside a wharf callback (refused with
** WHARF_INVALID_ARGUMENT: they wait for the network). Errors: WHARF_INVALID_ARGUMENT (bad options,
** names the key; a non-empty destination without force), WHARF_NOT_FOUND (no such stream, or no
** snapshot in it), WHARF_CORRUPTION (a damaged snapshot file, named), WHARF_IO_ERROR (NATS,
** files; names the server or file).
*/

/* What wharf_restore_from_stream did. Extensible (see "Extensible structs" above): the caller sets
** struct_size. */
typedef struct wharf_stream_restore_report {
  size_t struct_size;
  char snapshot_id[32];    /* the snapshot restored: 16 hex digits, NUL-terminated */
  uint64_t snapshot_group; /* the last group it held */
  uint64_t groups_applied; /* after it */
  uint64_t last_group;     /* the copy's last group: the stream's when the restore began */
  uint64_t last_fact_id;   /* the copy's last fact id */
  uint64_t snapshot_bytes;
  int64_t duration_ms;
} wharf_stream_restore_report;
#define WHARF_STREAM_RESTORE_REPORT_SIZE_V1 \
  (offsetof(wharf_stream_restore_report, duration_ms) + sizeof(int64_t))

/* Restores the database replicated to the stream `options` names (replicate=...;
** replicate_stream=...) into the directory `destination`: the newest snapshot in the stream, then
** every group after it, applied in order, so every commit the primary acknowledged under
** durability=replicated is there and none is partial. The copy opens with wharf_open: without
** `replicate` it is a database like any other, cut off from the stream; with `replicate` set to
** the same stream it takes the stream over (the old primary is fenced, see above). force = 1
** replaces what `destination` holds; 0 refuses a destination that is not empty. On WHARF_OK,
** *report (may be NULL; struct_size set by the caller) describes the restore.
**   WHARF_INVALID_ARGUMENT  NULL or empty destination, options without replicate, an unknown
**                           option or bad value (named), force neither 0 nor 1, a non-empty
**                           destination without force, a report struct_size too small
**   WHARF_NOT_FOUND         no such stream, or no snapshot in it
**   WHARF_CORRUPTION        a damaged snapshot file (named)
**   WHARF_IO_ERROR          NATS unreachable within replicate_timeout_ms (names the servers), files
** Blocks for the whole download. Thread-safe. */
WHARF_EXPORT wharf_status wharf_restore_from_stream(const char* options, const char* destination,
                                                    uint8_t force,
                                                    wharf_stream_restore_report* report);

/* A warm standby: a copy in a directory, following the stream (applying every group the primary
** ships, as it comes) on a thread of its own. OWNED by the caller: released with
** wharf_standby_free. Its functions may be called from any thread, concurrently. */
typedef struct wharf_standby wharf_standby;

/* Where a standby is (wharf_standby_state). Extensible (see "Extensible structs" above): the caller
 * sets struct_size. */
typedef struct wharf_standby_info {
  size_t struct_size;
  uint64_t applied_group;  /* the copy's last group */
  uint64_t stream_group;   /* the stream's last group, as last learned */
  uint64_t last_fact_id;   /* of the last group applied */
  int64_t last_applied_ms; /* wall clock of the last group applied (0: none yet) */
  /* The last error (the standby retries by itself), "" when none. BORROWED: valid until the next
  ** wharf_standby_state call on this thread. */
  const char* error;
} wharf_standby_info;
#define WHARF_STANDBY_INFO_SIZE_V1 (offsetof(wharf_standby_info, error) + sizeof(const char*))

/* CONSTRUCTOR. Starts a standby of the stream `options` names in the directory `path`: an empty
** or missing directory is first restored (as wharf_restore_from_stream), a copy already there is
** opened; then it follows. On WHARF_OK, *out is a new standby, OWNED by the caller. To promote
** the copy: wharf_standby_stop (or wharf_standby_free), then wharf_open(path, options with
** `replicate` set to the stream), which applies the groups it has not yet and takes the stream
** over.
**   WHARF_INVALID_ARGUMENT  NULL or empty path, NULL out, bad options (named), `path` holding a
**                           database that is not a copy of the stream (a primary)
**   others                  as wharf_restore_from_stream
** Thread-safe. */
WHARF_EXPORT wharf_status wharf_standby_start(const char* options, const char* path,
                                              wharf_standby** out);

/* *state (struct_size set by the caller) receives where the standby is; after wharf_standby_stop,
** where it stopped.
**   WHARF_INVALID_ARGUMENT  NULL or freed standby, NULL state, a struct_size too small
** Thread-safe. */
WHARF_EXPORT wharf_status wharf_standby_state(wharf_standby* standby, wharf_standby_info* state);

/* Stops following and closes the copy (it stays on disk, up to the last group applied).
** Idempotent: a second stop returns WHARF_OK. The handle stays valid (wharf_standby_state answers)
** until wharf_standby_free.
**   WHARF_INVALID_ARGUMENT  NULL or freed standby, called from inside a wharf callback
**   (others)                closing the copy failed (its status, naming the file)
** Blocks until the following thread has finished its current group. Thread-safe. */
WHARF_EXPORT wharf_status wharf_standby_stop(wharf_standby* standby);

/* DESTRUCTOR. Stops the standby if it still runs (a failure of that stop is only kept in
** wharf_last_error) and frees the handle. NULL is a no-op; a standby must not be freed twice (a
** freed one wharf still remembers is answered with a message in wharf_last_error). */
WHARF_EXPORT void wharf_standby_free(wharf_standby* standby);

/* ---------------------------------------------------------------------------------------------
** METRICS
**
** What the engine and the runtimes attached to it have done since the engine opened (counters
** restart at 0 at each open), as Prometheus names them: the same samples as the engine's
** metrics_listen and metrics_textfile (see wharf/metrics.h for what each means). A sample is a
** name, its labels and a value, so new metrics never change the ABI.
*/

/* Called once per sample, on the calling thread, in the order of the Prometheus text (family by
** family; a histogram's _bucket samples, then _sum and _count). `name` is the sample's name
** (`wharf_facts_committed_total`, `wharf_commit_seconds_bucket`...); `labels` is its label set in
** Prometheus' text form, values escaped (`{consumer="audit",partition="3"}`), or "" when it has
** none. Both are BORROWED: valid until the callback returns. */
typedef void (*wharf_metric_fn)(void* ctx, const char* name, const char* labels, double value);

/* Takes one metrics snapshot and calls `fn` for every sample of it. The snapshot is taken before
** the first call: the callback may call wharf functions (not wharf_close).
**   WHARF_INVALID_ARGUMENT  a NULL engine or fn
**   WHARF_CLOSED            the engine is closed
** Thread-safe. */
WHARF_EXPORT wharf_status wharf_metrics(wharf_engine* engine, wharf_metric_fn fn, void* ctx);

/* One metrics snapshot as Prometheus text (exposition format 0.0.4, what metrics_listen serves).
** On WHARF_OK, *text is OWNED by the caller, NUL-terminated: release it with wharf_free.
**   WHARF_INVALID_ARGUMENT  a NULL engine or text
**   WHARF_CLOSED            the engine is closed
** Thread-safe. */
WHARF_EXPORT wharf_status wharf_metrics_text(wharf_engine* engine, char** text);

/* ---------------------------------------------------------------------------------------------
** INBOXES: an asynchronous subscriber's deliveries taken in batches by the caller's event loop
**
** For a binding that runs handlers on its own event loop (Python's asyncio, Node's libuv): the
** runtime's workers queue each delivery in the inbox instead of calling a handler (no language
** runtime is entered on wharf's threads), and a file descriptor becomes readable; the loop takes
** everything queued with one call (wharf_inbox_take) and completes many deliveries with one call
** (wharf_deliveries_done), so it wakes once per batch rather than once per fact.
**
** Thread safety: the workers push from any thread; wharf_inbox_fd, wharf_inbox_take and
** wharf_inbox_free are called by one thread at a time (the loop's). wharf_deliveries_done is
** thread-safe, as wharf_delivery_done.
*/
typedef struct wharf_inbox wharf_inbox;

/* One delivery taken from an inbox: the fact as a handler would see it through the wharf_fact_*
** accessors (same meanings), and the delivery to complete. Every pointer is BORROWED: valid until
** the next wharf_inbox_take or wharf_inbox_free of the inbox. `type` and `source` are
** NUL-terminated; header i is header_names[i] (NUL-terminated) with the value header_values[i] of
** header_value_lens[i] bytes (the arrays are NULL when header_count is 0). */
typedef struct wharf_inbox_fact {
  wharf_delivery delivery;
  uint64_t id;
  const char* type;
  size_t type_len;
  const void* key;
  size_t key_len;
  const void* payload;
  size_t payload_len;
  const char* source;
  size_t source_len;
  uint32_t partition;
  uint32_t depth;
  uint32_t version;
  uint32_t stored_version;
  uint32_t attempt;
  int64_t commit_ms;
  int64_t deliver_at_ms;
  uint64_t scheduled_id;
  size_t header_count;
  const char* const* header_names;
  const void* const* header_values;
  const size_t* header_value_lens;
} wharf_inbox_fact;

/* CONSTRUCTOR. Registers an asynchronous subscriber (as wharf_runtime_subscribe_async, same
** `options`: key_concurrency, max_attempts, handler_timeout_ms...) whose deliveries are queued in
** a new inbox, *out, OWNED by the caller: release it with wharf_inbox_free (before or after
** wharf_runtime_free; it stays valid until then). Errors as wharf_runtime_subscribe_async, and
** WHARF_IO_ERROR when no eventfd can be made. Not from a callback. */
WHARF_EXPORT wharf_status wharf_runtime_subscribe_inbox(wharf_runtime* rt, const char* name,
                                                        const char* const* types, size_t n_types,
                                                        const char* options, wharf_inbox** out);
/* The inbox's eventfd (non-blocking, close-on-exec; BORROWED: closed by wharf_inbox_free):
** readable exactly while deliveries are queued. Poll it (epoll, loop.add_reader) and do not read
** it: wharf_inbox_take resets it. WHARF_INVALID_ARGUMENT: not a live inbox, or fd NULL. */
WHARF_EXPORT wharf_status wharf_inbox_fd(wharf_inbox* inbox, int* fd);
/* Takes up to `max` queued deliveries (0: all), oldest first: *facts (BORROWED until the next
** take or the free) holds *count of them (0 when none is queued). Each must be completed once
** with wharf_deliveries_done or wharf_delivery_done (not done within handler_timeout_ms: failed
** and delivered again). Facts of one key arrive in id order. Never blocks.
** WHARF_INVALID_ARGUMENT: not a live inbox, or facts or count NULL. */
WHARF_EXPORT wharf_status wharf_inbox_take(wharf_inbox* inbox, size_t max,
                                           const wharf_inbox_fact** facts, size_t* count);
/* DESTRUCTOR. Releases the caller's inbox: the deliveries still queued are completed as
** WHARF_RETRY (delivered again), and a delivery the runtime hands over later is answered
** WHARF_RETRY at once (with the reason "the inbox was freed"). NULL is a no-op. */
WHARF_EXPORT void wharf_inbox_free(wharf_inbox* inbox);

/* One completion for wharf_deliveries_done: as the arguments of wharf_delivery_done. */
typedef struct wharf_delivery_result {
  wharf_delivery delivery;
  int32_t outcome;    /* a wharf_outcome: HANDLED, REJECTED, FAILED or RETRY */
  const char* reason; /* NULL or NUL-terminated, COPIED */
} wharf_delivery_result;

/* Completes `count` deliveries, in order, as wharf_delivery_done would one by one, from any thread.
** A completion wharf_delivery_done would refuse (not pending: timed out, its runtime stopped, done
** already; an invalid outcome) is skipped and counted in *refused (may be NULL); it never affects
** the others. WHARF_INVALID_ARGUMENT: results NULL with count > 0. Thread-safe. */
WHARF_EXPORT wharf_status wharf_deliveries_done(const wharf_delivery_result* results, size_t count,
                                                size_t* refused);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* WHARF_H_ */

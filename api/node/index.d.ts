// TypeScript declarations of the wharf package (lib/index.js, index.mjs).
/// <reference types="node" />
import { EventEmitter } from 'node:events';

/** Keys, payloads, values: any bytes (a string is taken as UTF-8). */
export type Bytes = Buffer | Uint8Array | string;
/** Options: an object (camelCase or snake_case keys) or wharf's "key=value;..." string. */
export type Options = string | Record<string, string | number | boolean | undefined>;

export interface Fact {
  /** The fact's id (LSN): a delivery identity, the idempotency key of side effects. */
  id: number;
  type: string;
  key: Buffer;
  /** At its type's declared version (upcast from the stored one). */
  payload: Buffer;
  headers: Record<string, Buffer>;
  /** The reaction that emitted it ("" for application commits). */
  source: string;
  v: number;
  storedV: number;
  /** 0 for application commits, the trigger's depth + 1 for a reaction's emits. */
  depth: number;
  partition: number;
  commitMs: number;
  deliverAtMs: number;
  scheduledId: number;
  /** Which delivery of the fact to this consumer this is (1: the first). */
  attempt: number;
}

export interface EmitOptions {
  key?: Bytes;
  headers?: Record<string, Bytes>;
  /** The payload's version (0: the type's declared version). */
  v?: number;
  /** Hold the fact until then (ms since the epoch); 0: at once. */
  deliverAtMs?: number;
}

export interface ScanOptions {
  prefix?: Bytes;
  from?: Bytes;
  to?: Bytes;
  /** 1..100000, default 1000. */
  limit?: number;
}

export interface ScanResult {
  rows: Array<{ key: Buffer; value: Buffer }>;
  /** Rows remain: continue with from = the last key followed by a 0x00 byte. */
  more: boolean;
}

export interface Commit {
  firstId: number;
  lastId: number;
  /** The facts' ids in emit order (tx.emit returns the index). */
  ids: number[];
}

export class Transaction {
  put(table: string, key: Bytes, value: Bytes): void;
  delete(table: string, key: Bytes): void;
  emit(type: string, payload: Bytes, options?: EmitOptions): number;
  get(table: string, key: Bytes): Buffer | undefined;
  scan(table: string, options?: ScanOptions): ScanResult;
  commit(): Promise<Commit>;
  abort(): void;
}

export interface CursorRow { consumer: string; partition: number; factId: number; epoch: number }
export interface DeadLetter { consumer: string; reason: string; fact: Fact }
export interface LeaseRow {
  consumer: string; owner: string; epoch: number; expiresAtMs: number; openEpoch: number;
}
export interface ConsumerStat {
  consumer: string; registered: boolean; types: string[]; lagFacts: number; factsBehind: number;
  factIdMin: number; factIdMax: number; oldestCommitMs: number; retrying: boolean;
  retryingFactId: number; retryingAttempt: number; lastError: string;
}
export interface Stat {
  durableLsn: number; lastLsn: number; factCount: number; factBytes: number;
  deadLetterCount: number; timerCount: number; nextTimerDueMs: number; consumers: ConsumerStat[];
}
export interface MetricSample { name: string; labels: string; value: number }

export class Engine {
  readonly path: string;
  readonly closed: boolean;
  readonly durableLsn: number;
  readonly lastLsn: number;
  readonly partitions: number;
  begin(): Transaction;
  /** Runs fn in a transaction and commits it: resolves once durable. ReadConflicts run fn again. */
  transaction<T>(fn: (tx: Transaction) => T | Promise<T>, options?: { attempts?: number }):
    Promise<Commit & { result: T }>;
  get(table: string, key: Bytes): Promise<Buffer | undefined>;
  scan(table: string, options?: ScanOptions): Promise<ScanResult>;
  declareTypes(...types: Array<string | string[]>): Promise<void>;
  declareType(type: string, version: number): Promise<void>;
  partitionOf(key: Bytes): number;
  cursor(consumer: string, partition: number): Promise<number>;
  cursors(): Promise<CursorRow[]>;
  setCursor(consumer: string, factId: number): Promise<void>;
  copyCursor(from: string, to: string, options?: { force?: boolean }): Promise<void>;
  deleteCursor(consumer: string): Promise<void>;
  deadLetters(consumer?: string): Promise<DeadLetter[]>;
  purgeDeadLetters(consumer: string, factIds?: number[]): Promise<number>;
  retryDeadLetters(consumer: string, factIds?: number[]):
    Promise<Array<{ deadFactId: number; newFactId: number }>>;
  leases(): Promise<LeaseRow[]>;
  releaseLease(consumer: string): Promise<void>;
  trim(options?: { dryRun?: boolean }): Promise<{ consumerCount: number; factCount: number; bytes: number }>;
  stat(): Promise<Stat>;
  metrics(): Promise<MetricSample[]>;
  metricsText(): Promise<string>;
  close(): Promise<void>;
}

export function open(path: string, options?: Options): Promise<Engine>;

export const Outcome: { readonly HANDLED: 0; readonly REJECTED: 1; readonly FAILED: 2; readonly RETRY: 3 };
export type OutcomeValue = 0 | 1 | 2 | 3;
/** undefined/true: handled; false: failed; or an Outcome. */
export type HandlerResult = void | boolean | OutcomeValue;

export class Effects {
  put(table: string, key: Bytes, value: Bytes): void;
  delete(table: string, key: Bytes): void;
  get(table: string, key: Bytes): Buffer | undefined;
  /** Reactions only. */
  emit(type: string, payload: Bytes, options?: EmitOptions): void;
}

export interface ConsumerOptions {
  consumerId?: string;
  batchFacts?: number;
  maxAttempts?: number;
  ordering?: 'partition' | 'global' | 'none';
  payloadVersion?: 'latest' | 'stored';
  maxDepth?: number;
  [option: string]: string | number | boolean | undefined;
}
export interface SubscribeOptions extends ConsumerOptions {
  /** Facts of different keys of one partition in the handler at once (1..4096, default 1). */
  keyConcurrency?: number;
  keyWindowFacts?: number;
  handlerTimeoutMs?: number;
}

export interface TraceEvent {
  level: 'info' | 'warning' | 'error';
  name: string;
  consumer: string;
  factId: number;
  reason: string;
  attempt: number;
}

export interface StartOptions {
  leaseMs?: number;
  renewMs?: number;
  /** false: an API-only instance that delivers nothing; a number: worker threads. */
  workers?: false | number;
  /** Stop on SIGINT/SIGTERM (default true). */
  handleSignals?: boolean;
}

export class Runtime extends EventEmitter {
  readonly engine: Engine;
  readonly instance: string | undefined;
  project(id: string, types: string | string[],
    fn: (fact: Fact, effects: Effects) => HandlerResult | Promise<HandlerResult>,
    options?: ConsumerOptions): this;
  react(id: string, types: string | string[],
    fn: (fact: Fact, effects: Effects) => HandlerResult | Promise<HandlerResult>,
    options?: ConsumerOptions): this;
  subscribe(id: string, types: string | string[],
    fn: (fact: Fact) => HandlerResult | Promise<HandlerResult>, options?: SubscribeOptions): this;
  tap(id: string, types: string | string[], fn: (fact: Fact) => unknown,
    options?: ConsumerOptions): this;
  start(options?: StartOptions): Promise<this>;
  drain(): Promise<void>;
  stop(): Promise<void>;
  on(event: 'trace', listener: (event: TraceEvent) => void): this;
  on(event: 'handlerError', listener: (event: { id: string; fact: Fact; error: unknown }) => void): this;
  on(event: string | symbol, listener: (...args: any[]) => void): this;
}

export function createRuntime(options: {
  engine: Engine;
  instance?: string;
  leaseMs?: number;
  renewMs?: number;
  workers?: number;
  [option: string]: unknown;
}): Runtime;

export function version(): string;

export class WharfError extends Error {
  /** 'WHARF_INVALID_ARGUMENT', 'WHARF_CONFLICT'... */
  readonly code: string;
  readonly status: number;
  /** 'NONE', 'READ_CONFLICT', 'LEASE_FENCED'... */
  readonly subcode: string;
}
export class InvalidArgument extends WharfError {}
export class NotFound extends WharfError {}
export class IOError extends WharfError {}
export class Corruption extends WharfError {}
export class Busy extends WharfError {}
export class Closed extends WharfError {}
export class Conflict extends WharfError {}
export class ReadConflict extends Conflict {}
export class NotSupported extends WharfError {}
export class InternalError extends WharfError {}

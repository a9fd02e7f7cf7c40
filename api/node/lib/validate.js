'use strict';
// Argument checks: bad input is refused with InvalidArgument naming the argument, before the C ABI
// sees it (a NUL byte would silently cut a C string short; a float or a huge number would be
// rounded).
const { InvalidArgument } = require('./errors');

const NAME_BYTES_MAX = 255;

function describe(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? `an object (${value.constructor?.name ?? 'Object'})`
    : `${typeof value} ${String(value).slice(0, 40)}`;
}

// A table, type, consumer or header name: a non-empty string of 1..255 UTF-8 bytes without NUL.
function name(value, what) {
  if (typeof value !== 'string') {
    throw new InvalidArgument(`${what} must be a string, got ${describe(value)}`);
  }
  if (value.length === 0) throw new InvalidArgument(`${what} must not be empty`);
  if (value.includes('\0')) {
    throw new InvalidArgument(`${what} must not contain a NUL character (C strings end there)`);
  }
  if (Buffer.byteLength(value) > NAME_BYTES_MAX) {
    throw new InvalidArgument(`${what} is longer than ${NAME_BYTES_MAX} UTF-8 bytes`);
  }
  return value;
}

// One type or several: a non-empty array of names.
function names(value, what) {
  const list = typeof value === 'string' ? [value] : value;
  if (!Array.isArray(list) || list.length === 0) {
    throw new InvalidArgument(`${what} must be a type name or a non-empty array of them`);
  }
  return list.map((item, index) => name(item, `${what}[${index}]`));
}

// Bytes: a Buffer, a Uint8Array or a string (UTF-8). Any byte, NUL included.
function bytes(value, what) {
  if (typeof value === 'string' || value instanceof Uint8Array) return value;
  throw new InvalidArgument(`${what} must be a Buffer, a Uint8Array or a string, got ` +
    describe(value));
}

// An integer Number in [min, max] (at most 2^53 - 1: larger ones are not exact as Numbers).
function integer(value, what, min, max) {
  if (typeof value === 'bigint' && value <= BigInt(Number.MAX_SAFE_INTEGER) &&
      value >= BigInt(Number.MIN_SAFE_INTEGER)) {
    value = Number(value);
  }
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    throw new InvalidArgument(`${what} must be an integer, got ${describe(value)}`);
  }
  if (value < min || value > max) {
    throw new InvalidArgument(`${what} must be in [${min}, ${max}], got ${value}`);
  }
  return value;
}

const U32_MAX = 0xffffffff;

function func(value, what) {
  if (typeof value !== 'function') {
    throw new InvalidArgument(`${what} must be a function, got ${describe(value)}`);
  }
  return value;
}

function object(value, what) {
  if (value === undefined) return {};
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new InvalidArgument(`${what} must be an object, got ${describe(value)}`);
  }
  return value;
}

// camelCase JavaScript option names to wharf's snake_case keys.
function snake(key) {
  return key.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);
}

// Options as wharf's "key=value;..." string: a string is passed as it is (checked for NUL); an
// object's keys are camelCase or snake_case, its values strings, numbers or booleans.
function optionString(value, what) {
  if (value === undefined || value === null) return '';
  if (typeof value === 'string') {
    if (value.includes('\0')) throw new InvalidArgument(`${what} must not contain a NUL character`);
    return value;
  }
  object(value, what);
  const parts = [];
  for (const [key, option] of Object.entries(value)) {
    if (option === undefined) continue;
    let text;
    if (typeof option === 'boolean') text = option ? 'true' : 'false';
    else if (typeof option === 'number') {
      if (!Number.isFinite(option)) {
        throw new InvalidArgument(`${what}.${key} must be a finite number, got ${option}`);
      }
      text = String(option);
    } else if (typeof option === 'string') text = option;
    else throw new InvalidArgument(`${what}.${key} must be a string, number or boolean`);
    if (/[;=\0]/.test(text) || text.trim() !== text) {
      throw new InvalidArgument(`${what}.${key} must not contain ';', '=', NUL or surrounding ` +
        'whitespace');
    }
    parts.push(`${snake(key)}=${text}`);
  }
  return parts.join(';');
}

module.exports = { name, names, bytes, integer, func, object, optionString, U32_MAX, describe };

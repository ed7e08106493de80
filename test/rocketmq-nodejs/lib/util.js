'use strict';
// Helpers shared by the tests: the clients' log file, waiting for an outcome, unique names and
// the list of scenarios skipped because the server side lacks a piece.

const fs = require('node:fs');
const path = require('node:path');
const util = require('node:util');
const { LOG_DIR, sleep } = require('./cluster');

// A logger for the RocketMQ clients (their ILogger: info, warn, error, debug): one file per test
// file under logs/, instead of the client's default ~/logs/rocketmq/rocketmq_client_nodejs.log.
// BOLIDE_CLIENT_DEBUG=1 keeps the debug lines too.
class FileLogger {
  constructor(name) {
    fs.mkdirSync(LOG_DIR, { recursive: true });
    this.file = path.join(LOG_DIR, `client-${name}.log`);
    this.fd = fs.openSync(this.file, 'a');
    this.debugOn = !!process.env.BOLIDE_CLIENT_DEBUG;
  }

  #write(level, args) {
    if (this.fd === null) return;
    const text = util.format(...args.map(a => (a instanceof Error ? a.stack ?? String(a) : a)));
    fs.writeSync(this.fd, `${new Date().toISOString()} ${level} ${text}\n`);
  }

  info(...args) { this.#write('INFO', args); }
  warn(...args) { this.#write('WARN', args); }
  error(...args) { this.#write('ERROR', args); }
  debug(...args) { if (this.debugOn) this.#write('DEBUG', args); }
  // The clients close their logger on shutdown; the file stays open for the next client.
  close() {}
}

// Polls fn (sync or async) until it returns a truthy value and returns it; throws with what
// describes the last state when the deadline passes. A bound on waiting, not an assertion on time.
async function waitFor(what, fn, { timeoutMs = 60_000, intervalMs = 200 } = {}) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
      last = v;
    } catch (err) {
      last = err;
    }
    if (Date.now() >= deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last: ${last instanceof Error ? last.stack : util.inspect(last)}`);
    }
    await sleep(intervalMs);
  }
}

let seq = 0;
// A topic or group name unique to this run.
function uniq(prefix) {
  seq += 1;
  return `${prefix}-${process.pid}-${Date.now().toString(36)}-${seq}`;
}

// Scenarios that fail because Bolide's server side lacks a piece: test name → the missing piece.
// A listed test is skipped with that reason (it shows in the runner's output), unless
// BOLIDE_RUN_GAPS=1 runs them anyway. Remove an entry once the piece lands.
const GAPS = new Map(Object.entries(require('./gaps.json')));

function gap(name) {
  if (process.env.BOLIDE_RUN_GAPS === '1') return false;
  const reason = GAPS.get(name);
  return reason ? `server lacks: ${reason}` : false;
}

module.exports = { FileLogger, waitFor, uniq, gap, sleep };

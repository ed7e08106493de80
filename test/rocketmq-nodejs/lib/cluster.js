'use strict';
// A real Bolide cluster for the tests: one NameServer and one broker (broker-a, a master) started
// from prebuilt binaries on ports the kernel picks on 127.0.0.1, with their data in a temporary
// directory. Topics and groups are made with the bolide CLI, as an operator would.
//
// The binaries come from the environment variable BOLIDE_BIN, else ../../bin (the repository's
// bin/ seen from this package). The RocketMQ 5 clients' access point is the NameServer's address
// (it answers QueryRoute and QueryAssignment); BOLIDE_V5_ACCESS=broker points them at the broker's
// port instead. stop() sends SIGTERM to the broker, then to the NameServer (SIGKILL after 20 s),
// copies their logs to logs/ and removes the data unless BOLIDE_KEEP is set.
//
// With the option acl ({ file, accessKey, secretKey }) both daemons run with access control on
// (--acl --acl-file file), the broker signs its calls to the NameServer with the keys (an admin
// user of the file), and so does the CLI (BOLIDE_ACCESS_KEY, BOLIDE_SECRET_KEY).

const { spawn, execFile } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 20_000;
const LOG_DIR = path.join(__dirname, '..', 'logs');

// Short delays and a quick transaction check-back, so that the tests take seconds.
const DELAY_LEVELS = '1s 3s 1s 1s 1s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s';
const TRANSACTION_TIMEOUT = '1s';

function binDir() {
  const dir = process.env.BOLIDE_BIN || path.join(__dirname, '..', '..', '..', 'bin');
  return path.resolve(dir);
}

function sleep(ms) {
  return new Promise(resolve => setTimeout(resolve, ms));
}

// Every daemon any cluster of this process started, killed when the process exits however it
// exits, so that a failed or interrupted run leaves nothing behind.
const live = new Set();
process.on('exit', () => {
  for (const p of live) {
    try { p.kill('SIGKILL'); } catch { /* already gone */ }
  }
});

// CLI capabilities, probed once per process from the help texts (the CLI grows during the work
// on RocketMQ 5 support: topic types and subscription-group settings come with it).
let capabilities;

class BolideCluster {
  constructor(label, { acl } = {}) {
    this.label = label;
    this.acl = acl || null;
    this.bin = binDir();
    this.work = fs.mkdtempSync(path.join(os.tmpdir(), 'bolide-node-'));
    this.nameserver = null;
    this.broker = null;
    this.namesrvAddr = '';
    this.brokerAddr = '';
  }

  // Starts a NameServer and a broker and resolves once the broker serves routes.
  static async start(label = 'cluster', options = {}) {
    const c = new BolideCluster(label, options);
    for (const b of [ 'bolide', 'bolide-nameserver', 'bolide-broker' ]) {
      const f = path.join(c.bin, b);
      try {
        fs.accessSync(f, fs.constants.X_OK);
      } catch {
        throw new Error(`${f} is missing: build the binaries first (go build -o DIR ./cmd/...) and set BOLIDE_BIN=DIR`);
      }
    }
    try {
      await c.#startDaemons();
    } catch (err) {
      c.dumpLogs();
      await c.stop();
      throw err;
    }
    return c;
  }

  // The endpoints string the RocketMQ 5 clients take.
  get accessPoint() {
    return process.env.BOLIDE_V5_ACCESS === 'broker' ? this.brokerAddr : this.namesrvAddr;
  }

  async #startDaemons() {
    const level = process.env.BOLIDE_LOG_LEVEL || 'info';
    const aclArgs = this.acl ? [ '--acl', '--acl-file', this.acl.file ] : [];
    const keyArgs = this.acl ? [ '--access-key', this.acl.accessKey, '--secret-key', this.acl.secretKey ] : [];
    const nsAddrFile = path.join(this.work, 'namesrv.addr');
    this.nameserver = this.#spawn('namesrv.log', 'bolide-nameserver', [
      '--listen', '127.0.0.1:0',
      '--addr-file', nsAddrFile,
      '--gossip', 'off',
      '--admin-listen', '127.0.0.1:0',
      '--log-level', level,
      ...aclArgs,
    ]);
    this.namesrvAddr = await this.#waitForFile(nsAddrFile, this.nameserver, 'NameServer');

    const addrFile = path.join(this.work, 'broker-a.addr');
    this.broker = this.#spawn('broker-a.log', 'bolide-broker', [
      '--namesrv', this.namesrvAddr,
      '--listen', '127.0.0.1:0',
      '--addr-file', addrFile,
      '--store-dir', path.join(this.work, 'broker-a'),
      '--broker-name', 'broker-a',
      '--broker-id', '0',
      '--cluster', 'DefaultCluster',
      '--segment-size', String(16 << 20),
      '--gossip', 'off',
      '--ha-listen', '127.0.0.1:0',
      '--admin-listen', '127.0.0.1:0',
      '--register-interval', '5s',
      '--delay-levels', DELAY_LEVELS,
      '--transaction-timeout', TRANSACTION_TIMEOUT,
      '--transaction-check-interval', '1s',
      '--log-level', level,
      ...aclArgs,
      ...keyArgs,
    ]);
    this.brokerAddr = await this.#waitForFile(addrFile, this.broker, 'broker-a');

    // Ready once the NameServer lists the broker and routes a topic created on it (creating one
    // returns only then).
    const deadline = Date.now() + START_TIMEOUT_MS;
    let last = '';
    while (Date.now() < deadline) {
      const list = await this.cli([ 'cluster', 'list', '-o', 'json' ]);
      if (list.code === 0 && list.output.includes('"role":"MASTER"')) {
        const r = await this.cli([ 'topic', 'create', 'bolide-node-ready', '--queues', '1' ]);
        if (r.code === 0) return;
        last = r.output;
      } else {
        last = list.output;
      }
      this.#checkAlive(this.broker, 'broker-a');
      await sleep(200);
    }
    throw new Error(`the broker did not become ready within ${START_TIMEOUT_MS} ms: ${last}`);
  }

  #spawn(logName, binary, args) {
    const out = fs.openSync(path.join(this.work, logName), 'a');
    const p = spawn(path.join(this.bin, binary), args, { stdio: [ 'ignore', out, out ] });
    fs.closeSync(out);
    p.exitStatus = null;
    p.on('exit', (code, signal) => {
      p.exitStatus = signal || code;
      live.delete(p);
    });
    live.add(p);
    return p;
  }

  #checkAlive(p, name) {
    if (p.exitStatus !== null) {
      throw new Error(`the ${name} exited (${p.exitStatus}) before serving`);
    }
  }

  async #waitForFile(file, p, name) {
    const deadline = Date.now() + START_TIMEOUT_MS;
    while (Date.now() < deadline) {
      if (fs.existsSync(file)) {
        const s = fs.readFileSync(file, 'utf8').trim();
        if (s) return s;
      }
      this.#checkAlive(p, name);
      await sleep(50);
    }
    throw new Error(`the ${name} did not write ${file} within ${START_TIMEOUT_MS} ms`);
  }

  // Runs `bolide -n <namesrv> args...`; resolves {code, output} (stdout+stderr; code -1 on timeout).
  cli(args, timeoutMs = 30_000) {
    return new Promise(resolve => {
      const env = { ...process.env };
      if (this.acl) {
        env.BOLIDE_ACCESS_KEY = this.acl.accessKey;
        env.BOLIDE_SECRET_KEY = this.acl.secretKey;
      }
      execFile(path.join(this.bin, 'bolide'), [ '-n', this.namesrvAddr, ...args ],
        { timeout: timeoutMs, killSignal: 'SIGKILL', env }, (err, stdout, stderr) => {
          let code = 0;
          if (err) code = typeof err.code === 'number' ? err.code : -1;
          resolve({ code, output: `${stdout}${stderr}` });
        });
    });
  }

  // Like cli, but throws when the command fails.
  async mustCli(args) {
    const r = await this.cli(args);
    if (r.code !== 0) {
      throw new Error(`bolide ${args.join(' ')} failed (${r.code}): ${r.output}`);
    }
    return r.output;
  }

  async capabilities() {
    if (!capabilities) {
      const topic = await this.cli([ 'topic', 'create', '--help' ]);
      const group = await this.cli([ 'group', '--help' ]);
      capabilities = {
        topicType: /--type\b/.test(topic.output),
        groupCreate: /^\s+create\s/m.test(group.output),
      };
    }
    return capabilities;
  }

  // Creates a topic with `queues` queues and message type `type` (NORMAL, FIFO, DELAY,
  // TRANSACTION; none: MIXED) and returns once it is routed. Without topic types in the CLI the
  // topic is created without one (MIXED: it accepts every type).
  async createTopic(topic, { queues = 4, type } = {}) {
    const args = [ 'topic', 'create', topic, '--queues', String(queues) ];
    if (type && (await this.capabilities()).topicType) {
      args.push('--type', type);
    }
    await this.mustCli(args);
  }

  // Creates a subscription group with RocketMQ 5's settings; returns false (and creates nothing)
  // when the CLI cannot create groups yet. A group nobody created has the default settings
  // (not FIFO, 17 delivery attempts).
  async createGroup(group, { fifo = false, maxDeliveryAttempts, retryBackoff } = {}) {
    if (!(await this.capabilities()).groupCreate) return false;
    const args = [ 'group', 'create', group ];
    if (fifo) args.push('--fifo');
    if (maxDeliveryAttempts) args.push('--max-delivery-attempts', String(maxDeliveryAttempts));
    if (retryBackoff) args.push('--retry-backoff', retryBackoff);
    await this.mustCli(args);
    return true;
  }

  // The group's total lag on a topic (`bolide group lag GROUP --topic TOPIC -o json`: the queues'
  // max offsets minus the group's committed offsets); null when the CLI reports no lag for it.
  async groupLag(group, topic) {
    const r = await this.cli([ 'group', 'lag', group, '--topic', topic, '-o', 'json' ]);
    if (r.code !== 0) return null;
    for (const line of r.output.split('\n')) {
      if (!line.startsWith('{')) continue;
      try {
        const o = JSON.parse(line);
        if (typeof o.totalLag === 'number' && Array.isArray(o.queues) && o.queues.length > 0) return o.totalLag;
      } catch { /* not the object */ }
    }
    return null;
  }

  // A message of a topic by its id (the unique id, UNIQ_KEY) from the key index
  // (`bolide msg query --topic TOPIC --key ID -o json`): topic, queueId, queueOffset, tags, keys,
  // shardingKey, properties, body, ...; null when not found.
  async getMessage(topic, id) {
    const r = await this.cli([ 'msg', 'query', '--topic', topic, '--key', id, '-o', 'json' ]);
    if (r.code !== 0) return null;
    return parseJSONLines(r.output).find(m => m.msgId === id) ?? null;
  }

  // Consumes `count` messages of a topic with Bolide's own consumer (`bolide consume`) as group,
  // and returns them as msg get does; fewer when nothing new comes for idleMs.
  async consume(topic, group, count, idleMs = 30_000) {
    const r = await this.cli([ 'consume', '--topic', topic, '--group', group, '--count', String(count),
      '--timeout', `${idleMs}ms`, '-o', 'json' ], idleMs * 2 + 30_000);
    if (r.code !== 0) throw new Error(`bolide consume ${topic} failed (${r.code}): ${r.output}`);
    return parseJSONLines(r.output);
  }

  // Prints the last lines of each daemon's log on stderr.
  dumpLogs() {
    for (const name of [ 'namesrv.log', 'broker-a.log' ]) {
      const f = path.join(this.work, name);
      if (!fs.existsSync(f)) continue;
      const lines = fs.readFileSync(f, 'utf8').split('\n');
      process.stderr.write(`---- ${f} (last 40 lines)\n${lines.slice(-41).join('\n')}\n`);
    }
  }

  async stop() {
    for (const p of [ this.broker, this.nameserver ]) {
      if (p) await stopProcess(p);
    }
    try {
      fs.mkdirSync(LOG_DIR, { recursive: true });
      for (const name of [ 'namesrv.log', 'broker-a.log' ]) {
        const f = path.join(this.work, name);
        if (fs.existsSync(f)) fs.copyFileSync(f, path.join(LOG_DIR, `${this.label}-${name}`));
      }
    } catch (err) {
      process.stderr.write(`bolide: copying the logs: ${err}\n`);
    }
    if (process.env.BOLIDE_KEEP) {
      process.stderr.write(`bolide: data and logs kept in ${this.work}\n`);
      return;
    }
    fs.rmSync(this.work, { recursive: true, force: true });
  }
}

function parseJSONLines(text) {
  const out = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith('{')) continue;
    try { out.push(JSON.parse(line)); } catch { /* a log line */ }
  }
  return out;
}

async function stopProcess(p) {
  if (p.exitStatus !== null) return;
  const exited = new Promise(resolve => p.once('exit', resolve));
  p.kill('SIGTERM');
  let timer;
  const timeout = new Promise(resolve => { timer = setTimeout(resolve, STOP_TIMEOUT_MS, 'timeout'); });
  const r = await Promise.race([ exited, timeout ]);
  clearTimeout(timer);
  if (r === 'timeout' && p.exitStatus === null) {
    p.kill('SIGKILL');
    await exited;
  }
}

module.exports = { BolideCluster, LOG_DIR, sleep };

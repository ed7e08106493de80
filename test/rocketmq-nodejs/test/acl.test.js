'use strict';
// RocketMQ 5's Node.js client with credentials (sessionCredentials: it signs the true UTC date,
// upper-case hex) against a NameServer and a broker that both have access control on: the right
// keys produce and consume; a wrong secret is refused UNAUTHORIZED (40100), a user without the
// permission FORBIDDEN (40300), and nothing of theirs is stored.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');
const { BolideCluster } = require('../lib/cluster');
const { FileLogger, waitFor, uniq } = require('../lib/util');

const logger = new FileLogger('acl');
const ADMIN = { accessKey: 'nodeadmin', secretKey: 'nodeadmin-secret' };
const PRODUCER = { accessKey: 'nodeproducer', accessSecret: 'nodeproducer-secret' };
const CONSUMER = { accessKey: 'nodeconsumer', accessSecret: 'nodeconsumer-secret' };
const NOBODY = { accessKey: 'nodenobody', accessSecret: 'nodenobody-secret' };

let cluster;
let dir;
const clients = [];

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bolide-node-acl-'));
  const file = path.join(dir, 'plain_acl.yml');
  fs.writeFileSync(file, [
    'accounts:',
    `  - accessKey: ${ADMIN.accessKey}`,
    `    secretKey: ${ADMIN.secretKey}`,
    '    admin: true',
    `  - accessKey: ${PRODUCER.accessKey}`,
    `    secretKey: ${PRODUCER.accessSecret}`,
    '    defaultTopicPerm: DENY',
    '    defaultGroupPerm: DENY',
    '    topicPerms: [node-acl-*=PUB]',
    `  - accessKey: ${CONSUMER.accessKey}`,
    `    secretKey: ${CONSUMER.accessSecret}`,
    '    defaultTopicPerm: DENY',
    '    defaultGroupPerm: DENY',
    '    topicPerms: [node-acl-*=SUB]',
    '    groupPerms: [node-aclg-*=SUB]',
    `  - accessKey: ${NOBODY.accessKey}`,
    `    secretKey: ${NOBODY.accessSecret}`,
    '    defaultTopicPerm: DENY',
    '    defaultGroupPerm: DENY',
    '',
  ].join('\n'));
  cluster = await BolideCluster.start('acl', { acl: { file, ...ADMIN } });
});

after(async () => {
  for (const c of clients.reverse()) {
    try { await c.shutdown(); } catch (err) { logger.warn('shutdown: %s', err); }
  }
  if (cluster) await cluster.stop();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

// The response code of a client error: the client wraps a failed startup's cause (twice).
function codeOf(err) {
  for (let e = err; e; e = e.cause) {
    if (typeof e.code === 'number') return e.code;
  }
  return undefined;
}

function producer(sessionCredentials, topics = []) {
  const p = new Producer({ endpoints: cluster.accessPoint, namespace: '', topics, logger, sessionCredentials });
  clients.push(p);
  return p;
}

test('credentials: the right keys produce and consume; a wrong secret and missing permissions are refused, nothing stored',
  { timeout: 180_000 }, async () => {
    const topic = uniq('node-acl');
    const group = uniq('node-aclg');
    await cluster.createTopic(topic, { type: 'NORMAL' });

    const good = producer(PRODUCER, [ topic ]);
    await good.startup();
    const ids = [];
    for (let i = 0; i < 3; i++) {
      ids.push((await good.send({ topic, tag: 'acl', body: Buffer.from(`allowed ${i}`) })).messageId);
    }

    // A wrong secret: the access point refuses the route (40100), the producer does not start.
    const wrong = producer({ accessKey: PRODUCER.accessKey, accessSecret: 'not-the-secret' }, [ topic ]);
    await assert.rejects(wrong.startup(), err => codeOf(err) === 40100 && /signature check failed/.test(String(err.cause?.cause ?? err)),
      'a wrong secret is refused UNAUTHORIZED');
    // A user without any permission on the topic: FORBIDDEN at the access point.
    const nobody = producer(NOBODY, [ topic ]);
    await assert.rejects(nobody.startup(), err => codeOf(err) === 40300, 'no permission is refused FORBIDDEN');
    // A user who may subscribe but not publish: the route is served, the send refused.
    const reader = producer(CONSUMER);
    await reader.startup();
    await assert.rejects(reader.send({ topic, body: Buffer.from('forged') }), err => codeOf(err) === 40300,
      'a send without PUB is refused FORBIDDEN');

    const consumer = new SimpleConsumer({
      endpoints: cluster.accessPoint, namespace: '', consumerGroup: group, logger,
      subscriptions: new Map([ [ topic, '*' ] ]), awaitDuration: 5000, sessionCredentials: CONSUMER,
    });
    clients.push(consumer);
    await consumer.startup();
    const got = new Map();
    await waitFor('the producer\'s messages', async () => {
      for (const view of await consumer.receive(16, 30_000)) {
        got.set(view.messageId, view.body.toString());
        await consumer.ack(view);
      }
      return got.size >= ids.length;
    }, { timeoutMs: 60_000, intervalMs: 0 });
    assert.deepEqual([ ...got.keys() ].sort(), [ ...ids ].sort(), 'exactly the allowed messages were stored');
    assert.deepEqual(await consumer.receive(16, 30_000), [], 'nothing else was stored');

    // The consumer's keys on another group: refused.
    const other = new SimpleConsumer({
      endpoints: cluster.accessPoint, namespace: '', consumerGroup: uniq('other'), logger,
      subscriptions: new Map([ [ topic, '*' ] ]), awaitDuration: 5000, sessionCredentials: CONSUMER,
    });
    clients.push(other);
    await assert.rejects(other.startup(), err => codeOf(err) === 40300, 'another group is refused FORBIDDEN');
  });

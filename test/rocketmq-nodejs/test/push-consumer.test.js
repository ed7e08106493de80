'use strict';
// RocketMQ 5's Node.js PushConsumer against Bolide: every message consumed and acknowledged, and
// a failed consumption redelivered with a growing delivery attempt (the client nacks it with
// ChangeInvisibleDuration, the server hands it out again). Needs QueryAssignment at the access
// point and ReceiveMessage with auto-renew on the broker.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { Producer, PushConsumer, ConsumeResult } = require('rocketmq-client-nodejs');
const { BolideCluster } = require('../lib/cluster');
const { FileLogger, waitFor, uniq, gap } = require('../lib/util');

const logger = new FileLogger('push-consumer');
let cluster;
let producer;
const clients = [];

before(async () => {
  cluster = await BolideCluster.start('push-consumer');
});

after(async () => {
  for (const c of clients.reverse()) {
    try { await c.shutdown(); } catch (err) { logger.warn('shutdown: %s', err); }
  }
  if (cluster) await cluster.stop();
});

async function send(topic, messages) {
  if (!producer) {
    producer = new Producer({ endpoints: cluster.accessPoint, namespace: '', logger });
    clients.push(producer);
    await producer.startup();
  }
  const ids = [];
  for (const m of messages) {
    ids.push((await producer.send({ topic, ...m })).messageId);
  }
  return ids;
}

async function startPushConsumer(group, topic, consume) {
  const c = new PushConsumer({
    endpoints: cluster.accessPoint, namespace: '', consumerGroup: group, logger,
    subscriptions: new Map([ [ topic, '*' ] ]),
    messageListener: { consume },
  });
  clients.push(c);
  await c.startup();
  return c;
}

async function stopClient(c) {
  clients.splice(clients.indexOf(c), 1);
  await c.shutdown();
}

async function lagIsZero(group, topic) {
  await waitFor(`group ${group} to have no lag on ${topic}`, async () => (await cluster.groupLag(group, topic)) === 0,
    { timeoutMs: 30_000, intervalMs: 500 });
}

test('push consumer: every message consumed and acknowledged', { skip: gap('push success'), timeout: 180_000 }, async () => {
  const topic = uniq('node-push');
  const group = uniq('node-push-g');
  await cluster.createTopic(topic, { type: 'NORMAL' });
  const got = new Map();
  const consumer = await startPushConsumer(group, topic, mv => {
    got.set(mv.messageId, { body: mv.body.toString(), tag: mv.tag, attempt: mv.deliveryAttempt });
    return ConsumeResult.SUCCESS;
  });
  const ids = await send(topic, Array.from({ length: 20 }, (_, i) => ({ tag: 'push', body: Buffer.from(`push ${i}`) })));

  await waitFor('every message consumed', () => ids.every(id => got.has(id)), { timeoutMs: 90_000 });
  ids.forEach((id, i) => {
    assert.equal(got.get(id).body, `push ${i}`);
    assert.equal(got.get(id).tag, 'push');
    assert.equal(got.get(id).attempt, 1);
  });
  await lagIsZero(group, topic);
  await stopClient(consumer);
});

test('push consumer: a failure is redelivered with the next delivery attempt', { skip: gap('push redelivery'), timeout: 180_000 }, async () => {
  const topic = uniq('node-retry');
  const group = uniq('node-retry-g');
  await cluster.createTopic(topic, { type: 'NORMAL' });
  const attempts = new Map();
  const consumer = await startPushConsumer(group, topic, mv => {
    const seen = attempts.get(mv.messageId) ?? [];
    seen.push(mv.deliveryAttempt);
    attempts.set(mv.messageId, seen);
    // Fail the first two deliveries, succeed on the third.
    return mv.deliveryAttempt >= 3 ? ConsumeResult.SUCCESS : ConsumeResult.FAILURE;
  });
  const ids = await send(topic, Array.from({ length: 3 }, (_, i) => ({ tag: 'retry', body: Buffer.from(`retry ${i}`) })));

  // The group's default backoff is 1 s, then 5 s.
  await waitFor('three deliveries of every message', () => ids.every(id => (attempts.get(id) ?? []).includes(3)),
    { timeoutMs: 120_000, intervalMs: 500 });
  for (const id of ids) {
    assert.deepEqual(attempts.get(id), [ 1, 2, 3 ], `message ${id}: delivery attempts`);
  }
  await lagIsZero(group, topic);
  await stopClient(consumer);
});

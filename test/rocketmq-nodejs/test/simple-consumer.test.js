'use strict';
// RocketMQ 5's Node.js SimpleConsumer against Bolide: receive and ack, a tag filter, a change of
// invisible duration, invisibility running out, and a FIFO group. Messages come from the Node.js
// producer; acknowledgements are checked on the server (the group's lag), since the client
// cannot tell a lost ack from a good one.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');
const { BolideCluster } = require('../lib/cluster');
const { FileLogger, waitFor, uniq, gap } = require('../lib/util');

const logger = new FileLogger('simple-consumer');
let cluster;
let producer;
const clients = [];

// Long polling: the consumer's await duration, which the server clamps to [5 s, 20 s].
const AWAIT_MS = 5000;

before(async () => {
  cluster = await BolideCluster.start('simple-consumer');
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

async function startConsumer(group, topic, filter = '*') {
  const c = new SimpleConsumer({
    endpoints: cluster.accessPoint, namespace: '', consumerGroup: group, logger,
    subscriptions: new Map([ [ topic, filter ] ]), awaitDuration: AWAIT_MS,
  });
  clients.push(c);
  await c.startup();
  return c;
}

// Receives until want(views) says enough or the bound passes; returns every view received.
async function receiveUntil(consumer, want, { invisibleMs = 30_000, max = 16, timeoutMs = 60_000 } = {}) {
  const got = [];
  await waitFor('the messages', async () => {
    got.push(...await consumer.receive(max, invisibleMs));
    return want(got);
  }, { timeoutMs, intervalMs: 0 });
  return got;
}

async function lagIsZero(group, topic) {
  await waitFor(`group ${group} to have no lag on ${topic}`, async () => (await cluster.groupLag(group, topic)) === 0,
    { timeoutMs: 30_000, intervalMs: 500 });
}

test('simple consumer: receive and ack', { skip: gap('simple receive ack'), timeout: 120_000 }, async () => {
  const topic = uniq('node-simple');
  const group = uniq('node-simple-g');
  await cluster.createTopic(topic, { type: 'NORMAL' });
  const consumer = await startConsumer(group, topic);
  const ids = await send(topic, Array.from({ length: 10 }, (_, i) => ({
    tag: 'TagA', keys: [ `key-${i}` ], properties: new Map([ [ 'i', String(i) ] ]), body: Buffer.from(`simple ${i}`),
  })));

  const views = await receiveUntil(consumer, got => new Set(got.map(v => v.messageId)).size >= ids.length);
  assert.deepEqual([ ...new Set(views.map(v => v.messageId)) ].sort(), [ ...ids ].sort());
  for (const v of views) {
    const i = Number(v.properties.get('i'));
    assert.equal(v.topic, topic);
    assert.equal(v.tag, 'TagA');
    assert.deepEqual(v.keys, [ `key-${i}` ]);
    assert.equal(v.body.toString(), `simple ${i}`);
    assert.equal(v.deliveryAttempt, 1, 'first delivery');
    assert.ok(!v.corrupted, 'the body digest matches');
    assert.ok(v.receiptHandle, 'a receipt handle');
    await consumer.ack(v);
  }
  await lagIsZero(group, topic);
});

test('simple consumer: a tag filter', { skip: gap('simple tag filter'), timeout: 120_000 }, async () => {
  const topic = uniq('node-tag');
  const group = uniq('node-tag-g');
  await cluster.createTopic(topic, { type: 'NORMAL' });
  const consumer = await startConsumer(group, topic, 'TagA || TagC');
  const messages = [ 'TagA', 'TagB', 'TagC', 'TagB', 'TagA' ].map((tag, i) => ({ tag, body: Buffer.from(`${tag} ${i}`) }));
  const ids = await send(topic, messages);
  const wanted = ids.filter((_, i) => messages[i].tag !== 'TagB');

  // A last TagA message after the others: once it is in, everything before it has been seen.
  const [ last ] = await send(topic, [ { tag: 'TagA', body: Buffer.from('last') } ]);
  const views = await receiveUntil(consumer, got => got.some(v => v.messageId === last));
  for (const v of views) await consumer.ack(v);
  assert.deepEqual([ ...new Set(views.map(v => v.messageId)) ].sort(), [ ...wanted, last ].sort());
  assert.ok(views.every(v => v.tag !== 'TagB'), 'no TagB message');
});

test('simple consumer: change invisible duration', { skip: gap('simple change invisible'), timeout: 120_000 }, async () => {
  const topic = uniq('node-invis');
  const group = uniq('node-invis-g');
  await cluster.createTopic(topic, { type: 'NORMAL' });
  const consumer = await startConsumer(group, topic);
  const [ id ] = await send(topic, [ { tag: 'x', body: Buffer.from('change me') } ]);

  const [ first ] = await receiveUntil(consumer, got => got.length > 0, { invisibleMs: 60_000, max: 1 });
  assert.equal(first.messageId, id);
  assert.equal(first.deliveryAttempt, 1);
  const oldHandle = first.receiptHandle;

  // From 60 s to 1 s: the message comes back soon, as the next delivery attempt.
  await consumer.changeInvisibleDuration(first, 1000);
  assert.ok(first.receiptHandle, 'a new receipt handle');
  assert.notEqual(first.receiptHandle, oldHandle, 'the receipt handle changed');

  const views = await receiveUntil(consumer, got => got.some(v => v.messageId === id), { max: 1 });
  const again = views.find(v => v.messageId === id);
  assert.equal(again.deliveryAttempt, 2, 'redelivered as attempt 2');
  assert.equal(again.body.toString(), 'change me');
  await consumer.ack(again);
  await lagIsZero(group, topic);
});

test('simple consumer: invisibility runs out, the message comes back', { skip: gap('simple invisibility expiry'), timeout: 120_000 }, async () => {
  const topic = uniq('node-expire');
  const group = uniq('node-expire-g');
  await cluster.createTopic(topic, { type: 'NORMAL' });
  const consumer = await startConsumer(group, topic);
  const [ id ] = await send(topic, [ { tag: 'x', body: Buffer.from('not acked') } ]);

  // 10 s is the shortest invisible duration a simple consumer may ask for.
  const [ first ] = await receiveUntil(consumer, got => got.length > 0, { invisibleMs: 10_000, max: 1 });
  assert.equal(first.messageId, id);
  const receivedAt = Date.now();

  const views = await receiveUntil(consumer, got => got.some(v => v.messageId === id), { invisibleMs: 10_000, max: 1 });
  const again = views.find(v => v.messageId === id);
  assert.ok(Date.now() - receivedAt >= 5_000, 'not redelivered while invisible (10 s)');
  assert.equal(again.deliveryAttempt, 2);
  await consumer.ack(again);

  // The first handle is stale now: acking with it is refused.
  await assert.rejects(consumer.ack(first), err => err.code === 40013, 'INVALID_RECEIPT_HANDLE (40013)');
  await lagIsZero(group, topic);
});

test('simple consumer: dead letter after the maximum delivery attempts', { skip: gap('simple dead letter'), timeout: 180_000 }, async t => {
  const topic = uniq('node-dlq');
  const group = uniq('node-dlq-g');
  await cluster.createTopic(topic, { type: 'NORMAL' });
  if (!await cluster.createGroup(group, { maxDeliveryAttempts: 2 })) {
    t.skip('server lacks: bolide group create --max-delivery-attempts (SDK-POP)');
    return;
  }
  const consumer = await startConsumer(group, topic);
  const [ id ] = await send(topic, [ { tag: 'dlq', keys: [ 'dead' ], body: Buffer.from('dead letter') } ]);

  // Two deliveries, each given back at once (invisible for 1 s).
  const attempts = [];
  await waitFor('two deliveries', async () => {
    for (const v of await consumer.receive(1, 30_000)) {
      attempts.push(v.deliveryAttempt);
      await consumer.changeInvisibleDuration(v, 1000);
    }
    return attempts.length >= 2;
  }, { timeoutMs: 60_000, intervalMs: 0 });
  assert.deepEqual(attempts, [ 1, 2 ]);

  // The next delivery would be the third: the message goes to %DLQ%<group> instead.
  const dlq = await waitFor(`message ${id} in %DLQ%${group}`, async () => {
    for (const v of await consumer.receive(1, 30_000)) {
      attempts.push(v.deliveryAttempt);
      await consumer.ack(v);
    }
    return cluster.getMessage(`%DLQ%${group}`, id);
  }, { timeoutMs: 90_000, intervalMs: 0 });
  assert.deepEqual(attempts, [ 1, 2 ], 'no third delivery');
  assert.equal(dlq.body, 'dead letter');
});

test('simple consumer: FIFO group, each message group in order', { skip: gap('simple FIFO'), timeout: 180_000 }, async t => {
  const topic = uniq('node-sfifo');
  const group = uniq('node-sfifo-g');
  await cluster.createTopic(topic, { type: 'FIFO', queues: 2 });
  if (!await cluster.createGroup(group, { fifo: true })) {
    t.skip('server lacks: bolide group create --fifo (SDK-POP)');
    return;
  }
  const consumer = await startConsumer(group, topic);
  const groups = [ 'g1', 'g2', 'g3' ];
  const messages = [];
  for (let i = 0; i < 6; i++) {
    for (const g of groups) messages.push({ messageGroup: g, tag: 'f', body: Buffer.from(`${g} ${i}`) });
  }
  const ids = await send(topic, messages);

  const seen = new Map(groups.map(g => [ g, [] ]));
  const all = new Set();
  await waitFor('every FIFO message', async () => {
    const views = await consumer.receive(4, 30_000);
    for (const v of views) {
      seen.get(v.messageGroup).push(Number(v.body.toString().split(' ')[1]));
      all.add(v.messageId);
      await consumer.ack(v);
    }
    return all.size >= ids.length;
  }, { timeoutMs: 120_000, intervalMs: 0 });

  for (const g of groups) {
    assert.deepEqual(seen.get(g), [ 0, 1, 2, 3, 4, 5 ], `group ${g} in send order, each once`);
  }
  await lagIsZero(group, topic);
});

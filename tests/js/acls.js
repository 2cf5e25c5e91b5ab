// kafkajs against a broker enforcing ACLs: argv[2] is the bootstrap address, argv[3] a
// JSON object {user, password, topic} for SASL/SCRAM-SHA-512 over plaintext. Tries to
// produce to `topic` and to start a transaction on `${topic}-tx`, and prints one JSON
// line: {produce, transaction}, each the kafkajs error type it got (null: it worked).
const { Kafka, logLevel } = require('kafkajs');

async function errorType(f) {
  try {
    await f();
    return null;
  } catch (e) {
    // kafkajs wraps the broker's error after its retries; the cause names the code.
    let err = e;
    while (err && !err.type && err.originalError) err = err.originalError;
    while (err && !err.type && err.cause) err = err.cause;
    return (err && err.type) || String(e.message);
  }
}

async function main() {
  const broker = process.argv[2];
  const opts = JSON.parse(process.argv[3]);
  const kafka = new Kafka({
    clientId: 'kaas-js-acls', brokers: [broker], logLevel: logLevel.NOTHING,
    sasl: { mechanism: 'scram-sha-512', username: opts.user, password: opts.password },
    retry: { retries: 0 },
  });
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  const produce = await errorType(() => producer.send({ topic: opts.topic, messages: [{ value: 'x' }] }));
  await producer.disconnect();
  const tx = kafka.producer({
    transactionalId: `${opts.topic}-tx`, idempotent: true, maxInFlightRequests: 1, retry: { retries: 1 },
  });
  const transaction = await errorType(async () => {
    await tx.connect();
    const t = await tx.transaction();
    await t.abort();
  });
  await tx.disconnect().catch(() => {});
  console.log(JSON.stringify({ produce, transaction }));
}

main().catch((e) => { console.error(e); process.exit(1); });

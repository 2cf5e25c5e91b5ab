// kafkajs over TLS and/or SASL: argv[2] is the bootstrap address, argv[3] a JSON object
// {ssl: {ca, cert?, key?} | null, sasl: {mechanism, username, password} | null, topic,
// expectFailure?}. Commits one transaction and aborts one, reads them back in a group
// (read_committed), and prints one JSON line: {readCommitted: [...]}; or, with
// expectFailure, {error: name, message} for the first connection's failure.
const fs = require('fs');
const { Kafka, logLevel } = require('kafkajs');

async function main() {
  const broker = process.argv[2];
  const opts = JSON.parse(process.argv[3]);
  const ssl = opts.ssl
    ? {
        ca: [fs.readFileSync(opts.ssl.ca, 'utf-8')],
        ...(opts.ssl.cert ? { cert: fs.readFileSync(opts.ssl.cert, 'utf-8'), key: fs.readFileSync(opts.ssl.key, 'utf-8') } : {}),
      }
    : false;
  const kafka = new Kafka({
    clientId: 'kaas-js-secure', brokers: [broker], logLevel: logLevel.NOTHING, ssl, sasl: opts.sasl || undefined,
    retry: { retries: opts.expectFailure ? 0 : 5 },
  });
  if (opts.expectFailure) {
    const admin = kafka.admin();
    try {
      await admin.connect();
      await admin.listTopics();
      console.log(JSON.stringify({ error: null }));
    } catch (e) {
      console.log(JSON.stringify({ error: e.name, message: String(e.message), type: e.type || null }));
    } finally {
      await admin.disconnect().catch(() => {});
    }
    return;
  }
  const topic = opts.topic;
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 2 }] });
  await admin.disconnect();
  const producer = kafka.producer({ transactionalId: `${topic}-tx`, idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const keep = await producer.transaction();
  await keep.send({ topic, messages: [...Array(10).keys()].map((i) => ({ value: `keep-${i}`, partition: i % 2 })) });
  await keep.commit();
  const drop = await producer.transaction();
  await drop.send({ topic, messages: [...Array(10).keys()].map((i) => ({ value: `drop-${i}`, partition: i % 2 })) });
  await drop.abort();
  await producer.disconnect();

  const consumer = kafka.consumer({ groupId: `${topic}-g`, readUncommitted: false });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const seen = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timeout, saw ${seen.length}`)), 60000);
    consumer.run({
      eachMessage: async ({ message }) => {
        seen.push(message.value.toString());
        if (seen.length === 10) { clearTimeout(timer); resolve(); }
      },
    }).catch(reject);
  });
  // Anything aborted would arrive right behind the committed records.
  await new Promise((r) => setTimeout(r, 1500));
  await consumer.disconnect();
  console.log(JSON.stringify({ readCommitted: seen.sort() }));
}

main().catch((e) => { console.error(e); process.exit(1); });

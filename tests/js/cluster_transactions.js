// A kafkajs transactional producer over a cluster of brokers: `count` transactions,
// each one record to every partition of `topic`, committed, then one aborted. Prints
// one JSON line: {committed, aborted, ms} (ms: the committed transactions' time).
const { Kafka, logLevel } = require('kafkajs');

async function main() {
  const [brokers, topic, partitions, count] = [process.argv[2], process.argv[3], Number(process.argv[4]), Number(process.argv[5])];
  const kafka = new Kafka({ clientId: 'kaas-js-cluster-tx', brokers: brokers.split(','), logLevel: logLevel.WARN });
  const producer = kafka.producer({ transactionalId: `${topic}-js-tx`, idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const started = Date.now();
  for (let t = 0; t < count; t += 1) {
    const tx = await producer.transaction();
    await tx.send({ topic, messages: [...Array(partitions).keys()].map((p) => ({ value: `js-${t}-${p}`, partition: p })) });
    await tx.commit();
  }
  const ms = Date.now() - started;
  const drop = await producer.transaction();
  await drop.send({ topic, messages: [...Array(partitions).keys()].map((p) => ({ value: `js-drop-${p}`, partition: p })) });
  await drop.abort();
  await producer.disconnect();
  console.log(JSON.stringify({ committed: count, aborted: 1, ms }));
}

main().catch((e) => { console.error(e); process.exit(1); });

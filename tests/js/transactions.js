// A kafkajs transactional producer commits one transaction and aborts another; a
// read_committed consumer (kafkajs' default) reports what it sees as one JSON line.
const { Kafka, logLevel } = require('kafkajs');

async function main() {
  const broker = process.argv[2];
  const kafka = new Kafka({ clientId: 'kaas-js-tx', brokers: [broker], logLevel: logLevel.WARN });
  const producer = kafka.producer({ transactionalId: 'js-tx', idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const keep = await producer.transaction();
  await keep.send({ topic: 'jstx', messages: [...Array(10).keys()].map((i) => ({ value: `keep-${i}`, partition: i % 2 })) });
  await keep.commit();
  const drop = await producer.transaction();
  await drop.send({ topic: 'jstx', messages: [...Array(10).keys()].map((i) => ({ value: `drop-${i}`, partition: i % 2 })) });
  await drop.abort();
  await producer.disconnect();

  const consumer = kafka.consumer({ groupId: 'js-rc', readUncommitted: false });
  await consumer.connect();
  await consumer.subscribe({ topic: 'jstx', fromBeginning: true });
  const seen = [];
  consumer.run({ eachMessage: async ({ message }) => { seen.push(message.value.toString()); } });
  await new Promise((r) => setTimeout(r, 6000));
  await consumer.disconnect();
  console.log(JSON.stringify({ readCommitted: seen }));
}

main().catch((e) => { console.error(e); process.exit(1); });

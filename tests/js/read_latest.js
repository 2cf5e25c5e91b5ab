// Reads a topic from the beginning in a fresh group with kafkajs until nothing new
// arrives for 3 s, and prints one JSON line: the latest value of every key and how
// many records were read (for compacted topics, whose offsets have gaps).
const { Kafka, logLevel } = require('kafkajs');

async function main() {
  const [broker, topic] = process.argv.slice(2);
  const kafka = new Kafka({ clientId: 'kaas-js-reader', brokers: [broker], logLevel: logLevel.WARN });
  const consumer = kafka.consumer({ groupId: `reader-${Date.now()}` });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const latest = {};
  let count = 0;
  let last = Date.now();
  await consumer.run({
    eachMessage: async ({ message }) => {
      latest[message.key.toString()] = message.value === null ? null : message.value.toString();
      count += 1;
      last = Date.now();
    },
  });
  const started = Date.now();
  while (Date.now() - last < 3000 || (count === 0 && Date.now() - started < 30000)) {
    await new Promise((r) => setTimeout(r, 200));
  }
  await consumer.disconnect();
  console.log(JSON.stringify({ latest, count }));
}

main().catch((e) => { console.error(e); process.exit(1); });

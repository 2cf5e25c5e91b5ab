// Produces 300 keyed messages with headers over 3 partitions with kafkajs, consumes them
// back in a group, and prints one JSON line with what it saw.
const { Kafka, logLevel } = require('kafkajs');

async function main() {
  const broker = process.argv[2];
  const kafka = new Kafka({ clientId: 'kaas-js', brokers: [broker], logLevel: logLevel.WARN });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic: 'js', numPartitions: 3 }] });
  await admin.disconnect();

  const producer = kafka.producer();
  await producer.connect();
  const messages = [];
  for (let i = 0; i < 300; i++) {
    messages.push({ key: `k${i}`, value: `v${i}`, partition: i % 3, headers: { seq: `${i}` } });
  }
  await producer.send({ topic: 'js', acks: -1, messages });
  await producer.disconnect();

  const consumer = kafka.consumer({ groupId: 'jsg' });
  await consumer.connect();
  await consumer.subscribe({ topic: 'js', fromBeginning: true });
  const seen = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timeout, saw ${seen.length}`)), 60000);
    consumer.run({
      eachMessage: async ({ partition, message }) => {
        seen.push({ partition, offset: Number(message.offset), key: message.key.toString(), value: message.value.toString(), seq: message.headers.seq.toString() });
        if (seen.length === 300) { clearTimeout(timer); resolve(); }
      },
    }).catch(reject);
  });
  await consumer.disconnect();

  let inOrder = true;
  let headersIntact = true;
  for (let p = 0; p < 3; p++) {
    const mine = seen.filter((m) => m.partition === p);
    mine.forEach((m, i) => {
      if (m.offset !== i) inOrder = false;
      const n = Number(m.value.slice(1));
      if (m.key !== `k${n}` || m.seq !== `${n}` || n % 3 !== p) headersIntact = false;
    });
  }
  console.log(JSON.stringify({ produced: 300, consumed: seen.length, inOrder, headersIntact }));
}

main().catch((e) => { console.error(e); process.exit(1); });

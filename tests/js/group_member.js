// One kafkajs consumer-group member: joins `group`, consumes `topic` from the start,
// prints every value it receives on its own line ("SEEN <value>") and exits cleanly on
// SIGTERM. Run by tests/integration/test_cluster_groups.py next to members of other
// clients, while brokers die under it.
const { Kafka, logLevel, PartitionAssigners } = require('kafkajs');

// kafkajs' round-robin assigner under the protocol name Java clients and kafka-python
// use ("roundrobin"), so members of those clients and this one agree on a protocol; the
// subscription and assignment bytes are the standard consumer protocol in all of them.
const roundRobin = (config) => ({ ...PartitionAssigners.roundRobin(config), name: 'roundrobin' });

async function main() {
  const [brokers, topic, group] = process.argv.slice(2);
  const kafka = new Kafka({
    clientId: 'kaas-js-member',
    brokers: brokers.split(','),
    logLevel: logLevel.NOTHING,
    retry: { retries: 100, initialRetryTime: 200, maxRetryTime: 2000 },
  });
  const consumer = kafka.consumer({
    groupId: group,
    sessionTimeout: 10000,
    heartbeatInterval: 1000,
    rebalanceTimeout: 20000,
    partitionAssigners: [roundRobin],
  });
  let stopping = false;
  process.on('SIGTERM', async () => {
    stopping = true;
    try { await consumer.disconnect(); } finally { process.exit(0); }
  });
  consumer.on(consumer.events.GROUP_JOIN, (e) => {
    console.log(`JOINED ${JSON.stringify(e.payload.memberAssignment)}`);
  });
  // A crash of the consumer (a broker it needed died past kafkajs' retries) restarts it.
  consumer.on(consumer.events.CRASH, (e) => console.log(`CRASH ${e.payload.error && e.payload.error.message}`));
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await consumer.run({
    eachMessage: async ({ message }) => {
      if (!stopping) console.log(`SEEN ${message.value.toString()}`);
    },
  });
}

main().catch((e) => { console.error(e); process.exit(1); });

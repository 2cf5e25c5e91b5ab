// A kafkajs consume-transform-produce job: reads `in` (read_committed, group
// `group`), writes `out-<value>` to the same partition of `out` and commits the
// consumed offsets in the same transaction (`tid`), batch by batch, until killed.
// A batch whose transaction fails is given up: a new producer replaces the old one
// (its connect fences it and ends the transaction it left open, committed or not),
// and the partition goes back to the offset the group then has committed — kafkajs
// itself would fetch on from the offsets it resolved in memory. A consumer that
// crashes for good ends the process, so the caller sees it.
const { Kafka, logLevel } = require('kafkajs');

async function main() {
  const [brokers, group, tid, input, output] = process.argv.slice(2, 7);
  const kafka = new Kafka({ clientId: 'kaas-js-ctp', brokers: brokers.split(','), logLevel: logLevel.WARN });
  const newProducer = async () => {
    const p = kafka.producer({ transactionalId: tid, idempotent: true, maxInFlightRequests: 1 });
    await p.connect();
    return p;
  };
  const admin = kafka.admin();
  await admin.connect();
  let producer = await newProducer();
  const consumer = kafka.consumer({ groupId: group, readUncommitted: false });
  consumer.on(consumer.events.CRASH, ({ payload }) => {
    if (!payload.restart) {
      console.error(`the consumer crashed for good: ${payload.error && payload.error.message}`);
      process.exit(2);
    }
  });
  await consumer.connect();
  await consumer.subscribe({ topic: input, fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachBatchAutoResolve: false,
    eachBatch: async ({ batch, resolveOffset }) => {
      if (batch.messages.length === 0) return;
      const last = batch.messages[batch.messages.length - 1].offset;
      try {
        const tx = await producer.transaction();
        await tx.send({
          topic: output,
          messages: batch.messages.map((m) => ({ value: `out-${m.value}`, partition: batch.partition })),
        });
        await tx.sendOffsets({
          consumerGroupId: group,
          topics: [{ topic: input, partitions: [{ partition: batch.partition, offset: (BigInt(last) + 1n).toString() }] }],
        });
        await tx.commit();
      } catch (e) {
        console.error(`transaction failed: ${e.message}`);
        await producer.disconnect().catch(() => {});
        producer = await newProducer();
        const [{ partitions }] = await admin.fetchOffsets({ groupId: group, topics: [input] });
        const committed = partitions.find((p) => p.partition === batch.partition);
        const offset = committed && Number(committed.offset) >= 0 ? committed.offset : '0';
        consumer.seek({ topic: input, partition: batch.partition, offset });
        return;
      }
      batch.messages.forEach((m) => resolveOffset(m.offset));
    },
  });
}

main().catch((e) => { console.error(e); process.exit(1); });

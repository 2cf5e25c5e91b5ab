// A kafkajs consume-transform-produce job: reads `in` (read_committed, group
// `group`), writes `out-<value>` to the same partition of `out` and commits the
// consumed offsets in the same transaction (`tid`), batch by batch, until killed.
// A batch whose transaction fails is aborted and thrown back to kafkajs' consumer,
// which fetches again from the group's committed offsets; a producer the failure
// left unusable is replaced by a new one (its connect fences the old one).
const { Kafka, logLevel } = require('kafkajs');

async function main() {
  const [brokers, group, tid, input, output] = process.argv.slice(2, 7);
  const kafka = new Kafka({ clientId: 'kaas-js-ctp', brokers: brokers.split(','), logLevel: logLevel.WARN });
  const newProducer = async () => {
    const p = kafka.producer({ transactionalId: tid, idempotent: true, maxInFlightRequests: 1 });
    await p.connect();
    return p;
  };
  let producer = await newProducer();
  const consumer = kafka.consumer({ groupId: group, readUncommitted: false });
  await consumer.connect();
  await consumer.subscribe({ topic: input, fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachBatchAutoResolve: false,
    eachBatch: async ({ batch, resolveOffset }) => {
      if (batch.messages.length === 0) return;
      const last = batch.messages[batch.messages.length - 1].offset;
      const tx = await producer.transaction();
      try {
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
        try {
          await tx.abort();
        } catch (a) {
          console.error(`abort failed (${a.message}): a new producer`);
          await producer.disconnect().catch(() => {});
          producer = await newProducer();
        }
        throw e;
      }
      batch.messages.forEach((m) => resolveOffset(m.offset));
    },
  });
}

main().catch((e) => { console.error(e); process.exit(1); });

// {brokers, topic, partition, start: "earliest"|"latest"|{offset}|{timestamp}, expect, thenProduce?, pollMs?}
//   -> {records: [...], resolvedOffset} (expect 0: only resolve the start, -1 when by-time finds none)
// No consumer group: kafkajs's consumer only works through groups, so this reads the way its consumer's
// fetch loop does underneath: ListOffsets through the admin client, Fetch (v11) through the cluster's
// leader broker, and kafkajs's own Batch, which drops records before the fetch offset.
'use strict'
const Batch = require('kafkajs/src/consumer/batch')
const { kafka, toMessage, fromMessage, main } = require('./common')

function privateCreateCluster(client) {
  const sym = Object.getOwnPropertySymbols(client).find(s => s.description === 'private:Kafka:createCluster')
  return client[sym]({ isolationLevel: 1 })    // read_committed, kafkajs's default
}

main(async args => {
  const client = kafka(args)
  const admin = client.admin()
  await admin.connect()
  const cluster = privateCreateCluster(client)
  await cluster.connect()
  try {
    let offset
    const start = args.start
    if (start === 'earliest' || start === 'latest') {
      const parts = await admin.fetchTopicOffsets(args.topic)
      const p = parts.find(x => x.partition === args.partition)
      offset = Number(start === 'earliest' ? p.low : p.high)
    } else if (start.timestamp !== undefined) {
      // the cluster's ListOffsets, not admin.fetchTopicOffsetsByTimestamp (which turns "none" into the end)
      await cluster.addTargetTopic(args.topic)
      await cluster.refreshMetadata()
      const [answer] = await cluster.fetchTopicsOffset([{ topic: args.topic, fromTimestamp: start.timestamp,
                                                          partitions: [{ partition: args.partition }] }])
      offset = Number(answer.partitions.find(x => x.partition === args.partition).offset)
    } else {
      offset = start.offset
    }
    const resolvedOffset = offset
    if (args.expect === 0) return { records: [], resolvedOffset }
    if (args.thenProduce) {
      const producer = client.producer({ allowAutoTopicCreation: false })
      await producer.connect()
      await producer.send({ topic: args.topic, acks: -1, messages: args.thenProduce.map(toMessage) })
      await producer.disconnect()
    }
    await cluster.addTargetTopic(args.topic)
    await cluster.refreshMetadata()
    const records = []
    const deadline = Date.now() + (args.pollMs || 30000)
    for (;;) {
      const leaders = cluster.findLeaderForPartitions(args.topic, [args.partition])
      const broker = await cluster.findBroker({ nodeId: Object.keys(leaders)[0] })
      const response = await broker.fetch({
        replicaId: -1, isolationLevel: 1, maxWaitTime: 300, minBytes: 1, maxBytes: 10485760,
        topics: [{ topic: args.topic, partitions: [{ partition: args.partition, fetchOffset: String(offset),
                                                      maxBytes: 1048576 }] }],
      })
      const data = response.responses[0].partitions[0]
      if (data.errorCode !== 0) throw new Error(`fetch error ${data.errorCode} at ${offset}`)
      const batch = new Batch(args.topic, String(offset), data)
      for (const m of batch.messages) records.push(fromMessage(m, args.partition))
      if (!batch.isEmptyIncludingFiltered()) offset = Number(batch.lastOffset()) + 1
      const hw = Number(data.highWatermark)
      if (records.length >= args.expect && offset >= hw) return { records, resolvedOffset }
      if (Date.now() > deadline) throw new Error(`read ${records.length} of ${args.expect}; offset ${offset} hw ${hw}`)
    }
  } finally {
    await cluster.disconnect()
    await admin.disconnect()
  }
})

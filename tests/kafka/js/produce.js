// {brokers, topic, records, compression: "none"|"gzip", idempotent} -> {offsets: [...]} (one per record, in order)
// One send() per partition: kafkajs makes one record batch per partition of a send (KAFKA-FACTS §10).
'use strict'
const { CompressionTypes } = require('kafkajs')
const { kafka, toMessage, main } = require('./common')

main(async args => {
  const producer = kafka(args).producer({ idempotent: !!args.idempotent, allowAutoTopicCreation: false,
                                          maxInFlightRequests: args.idempotent ? 1 : undefined })
  await producer.connect()
  try {
    const compression = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP }[args.compression || 'none']
    if (compression === undefined) throw new Error(`kafkajs has no built-in ${args.compression}`)
    const offsets = new Array(args.records.length)
    const byPartition = new Map()
    args.records.forEach((r, i) => {
      if (!byPartition.has(r.partition)) byPartition.set(r.partition, [])
      byPartition.get(r.partition).push(i)
    })
    for (const [partition, indexes] of byPartition) {
      const [meta] = await producer.send({ topic: args.topic, compression, acks: -1,
                                           messages: indexes.map(i => toMessage(args.records[i])) })
      if (meta.errorCode !== 0 || meta.partition !== partition) throw new Error(JSON.stringify(meta))
      indexes.forEach((i, n) => { offsets[i] = Number(meta.baseOffset) + n })
    }
    return { offsets }
  } finally {
    await producer.disconnect()
  }
})
